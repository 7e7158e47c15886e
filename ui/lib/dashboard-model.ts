/**
 * ThingsBoard's dashboard JSON (platform.md §5), the parts the page reads and writes, and the map
 * from widget types (`typeFullFqn`, or `bundleAlias` + `typeAlias` in older exports) to ours.
 */

export interface DataKey {
  name: string;
  type: 'timeseries' | 'attribute' | 'entityField' | string;
  label?: string;
  color?: string;
  units?: string;
  decimals?: number;
  settings?: Record<string, unknown>;
}

export interface Datasource {
  type: string;
  name?: string;
  entityAliasId?: string;
  /** A dashboard filter (`configuration.filters`) narrowing the alias's entities. */
  filterId?: string | null;
  dataKeys?: DataKey[];
}

export interface Timewindow {
  selectedTab?: number;
  realtime?: { timewindowMs?: number; interval?: number };
  history?: { timewindowMs?: number; fixedTimewindow?: { startTimeMs: number; endTimeMs: number } };
  aggregation?: { type?: string; limit?: number };
}

export interface Widget {
  id: string;
  typeFullFqn?: string;
  bundleAlias?: string;
  typeAlias?: string;
  type?: string;
  sizeX?: number;
  sizeY?: number;
  row?: number;
  col?: number;
  config: {
    title?: string;
    showTitle?: boolean;
    useDashboardTimewindow?: boolean;
    timewindow?: Timewindow;
    datasources?: Datasource[];
    targetDevice?: { type?: string; deviceId?: string; entityAliasId?: string } | null;
    targetDeviceAliasIds?: string[];
    settings?: Record<string, unknown>;
    units?: string;
    decimals?: number;
    /** ThingsBoard's widget actions by source (`headerButton`, `rowClick`, ...). */
    actions?: Record<string, WidgetAction[]>;
    [k: string]: unknown;
  };
}

/**
 * A widget action (platform.md §5). The page runs `openDashboardState` (push a state),
 * `updateDashboardState` (replace the current one), `openDashboard` (another dashboard, with its
 * state) and `openURL`; `custom` and `customPretty` run the dashboard author's JavaScript and are
 * refused (an imported file must not run code in the technician's session).
 */
export interface WidgetAction {
  id?: string;
  name?: string;
  type: string;
  targetDashboardStateId?: string | null;
  targetDashboardId?: string | null;
  url?: string;
  openNewBrowserTab?: boolean;
  setEntityId?: boolean;
  openRightLayout?: boolean;
  /** The state parameter the clicked entity goes in (a `stateEntity` alias names it). */
  stateEntityParamName?: string | null;
}

/** Why an action of this widget cannot run here, or '' when it can. */
export function actionRefusal(a: WidgetAction): string {
  switch (a.type) {
    case 'openDashboardState':
    case 'updateDashboardState':
      return a.targetDashboardStateId ? '' : 'no target state';
    case 'openDashboard':
      return a.targetDashboardId ? '' : 'no target dashboard';
    case 'openURL':
      return safeUrl(a.url) ? '' : 'not an http(s) or page address';
    case 'custom':
    case 'customPretty':
      return 'custom JavaScript actions are not run on this gateway';
    default:
      return `action type ${a.type} is not supported`;
  }
}

/** The widget's actions of `source` (`headerButton`, `rowClick`, `actionCellButton`, ...). */
export function widgetActions(w: Widget, source: string): WidgetAction[] {
  return w.config.actions?.[source] ?? [];
}

/** An `openURL` address the page follows: http(s), or a path of this page; else undefined. */
export function safeUrl(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    const u = new URL(url, location.origin);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A state's parameters (ThingsBoard's StateParams): the selected entity (`entityId`, `entityName`),
 * and named parameters, each an object of the same shape, set by actions with a
 * `stateEntityParamName` (`targetEntityParamName` names the last one set).
 */
export interface StateParams {
  entityId?: { entityType: string; id: string };
  entityName?: string;
  targetEntityParamName?: string;
  [k: string]: unknown;
}

/** One entry of ThingsBoard's state stack (the dashboard's `state=` URL parameter). */
export interface StateObject {
  id: string;
  params?: StateParams;
}

/** The stack as ThingsBoard writes it in `?state=`: base64 of the UTF-8 JSON. */
export function encodeState(stack: StateObject[]): string {
  const bytes = new TextEncoder().encode(JSON.stringify(stack));
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** Reads a `state=` value (also the URL-safe `.`/`_`/`-` variant); [] when it is not a stack. */
export function decodeState(raw: string | null): StateObject[] {
  if (!raw) return [];
  try {
    const bin = atob(raw.replaceAll('.', '+').replaceAll('_', '/').replaceAll('-', '='));
    const parsed: unknown = JSON.parse(
      new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))),
    );
    const list = Array.isArray(parsed) ? parsed : [parsed];
    return list.filter(
      (x): x is StateObject => typeof x === 'object' && x !== null && typeof x.id === 'string',
    );
  } catch {
    return [];
  }
}

/**
 * The state object an action opens (ThingsBoard's updateEntityParams): `base` (for state actions
 * the current state's parameters, kept) with the clicked entity, in the parameter the action's
 * `stateEntityParamName` names, else as the state's own entity.
 */
export function stateObject(
  targetId: string,
  a: WidgetAction,
  entity?: { id: string; name: string },
  base: StateParams = {},
): StateObject {
  const params: StateParams = structuredClone(base);
  if (a.setEntityId !== false && entity) {
    const name = a.stateEntityParamName;
    let target = params;
    if (name) {
      const named = params[name];
      if (named && typeof named === 'object') target = named as StateParams;
      else {
        target = {};
        params[name] = target;
        params.targetEntityParamName = name;
      }
    }
    target.entityId = { entityType: 'DEVICE', id: entity.id };
    target.entityName = entity.name;
  }
  return { id: targetId, params };
}

/**
 * The device a `stateEntity` alias resolves to (ThingsBoard's getStateEntityInfo): the entity of
 * the state parameter its `stateEntityParamName` names, else of the state itself; else the alias's
 * `defaultStateEntity`.
 */
export function stateEntityOf(f: AliasFilter, params: StateParams | undefined): string | undefined {
  const p = f.stateEntityParamName ? (params?.[f.stateEntityParamName] as StateParams) : params;
  return p?.entityId?.id ?? f.defaultStateEntity?.id ?? undefined;
}

/** The state's `${entityName}`: of the named parameter an action set last, else its own. */
export function stateEntityName(params: StateParams | undefined): string {
  const named = params?.targetEntityParamName;
  return ((named ? params?.[named] : params) as StateParams | undefined)?.entityName ?? '';
}

export interface LayoutWidget {
  sizeX: number;
  sizeY: number;
  row: number;
  col: number;
  mobileOrder?: number;
}

/** A layout's widgets by id with their places. */
export type Places = Record<string, LayoutWidget>;

export interface AliasFilter {
  type: string;
  resolveMultiple?: boolean;
  singleEntity?: { entityType: string; id: string };
  entityType?: string;
  entityList?: string[];
  entityNameFilter?: string;
  deviceTypes?: string[];
  deviceType?: string;
  deviceNameFilter?: string;
  /** `stateEntity`: the state parameter holding the entity, and the entity when none is set. */
  stateEntityParamName?: string | null;
  defaultStateEntity?: { entityType: string; id: string } | null;
}

export interface EntityAlias {
  id: string;
  alias: string;
  filter: AliasFilter;
}

/**
 * A dashboard filter (ThingsBoard's `Filter`): key filters in the editor's form
 * (`KeyFilterInfo`: a key, a value type and predicates each wrapped with `userInfo`).
 */
export interface DashboardFilter {
  id: string;
  filter?: string;
  editable?: boolean;
  keyFilters?: Array<{
    key: { type: string; key: string };
    valueType: string;
    value?: unknown;
    predicates?: Array<{ keyFilterPredicate?: Record<string, unknown> } & Record<string, unknown>>;
  }>;
}

/**
 * The filter's key filters as an entity query takes them (ThingsBoard's KeyFilterInfo to KeyFilter):
 * one per predicate; a COMPLEX predicate's parts unwrapped likewise; a value the user set
 * (`userValue`) replaces the default. Dynamic values go to the gateway, which resolves them.
 */
export function keyFiltersOf(f: DashboardFilter): unknown[] {
  const predicate = (p: Record<string, unknown>): Record<string, unknown> => {
    const inner = (p.keyFilterPredicate as Record<string, unknown> | undefined) ?? p;
    const { userInfo: _u, ...rest } = inner;
    if (rest.type === 'COMPLEX') {
      const parts = (rest.predicates as Array<Record<string, unknown>> | undefined) ?? [];
      return { ...rest, predicates: parts.map(predicate) };
    }
    const v = rest.value as { userValue?: unknown; defaultValue?: unknown } | undefined;
    return v && v.userValue !== undefined && v.userValue !== null
      ? { ...rest, value: { ...v, defaultValue: v.userValue } }
      : rest;
  };
  return (f.keyFilters ?? []).flatMap((k) =>
    (k.predicates ?? []).map((p) => ({
      key: k.key,
      valueType: k.valueType,
      predicate: predicate(p),
    })),
  );
}

export interface DashboardConfig {
  description?: string;
  widgets?: Record<string, Widget> | Widget[];
  states?: Record<
    string,
    {
      name?: string;
      root?: boolean;
      layouts?: Record<
        string,
        { widgets?: Record<string, LayoutWidget>; gridSettings?: Record<string, unknown> }
      >;
    }
  >;
  entityAliases?: Record<string, EntityAlias>;
  filters?: Record<string, DashboardFilter>;
  timewindow?: Timewindow;
  settings?: Record<string, unknown>;
  [k: string]: unknown;
}

export interface Dashboard {
  id?: { id: string; entityType?: string };
  title: string;
  configuration?: DashboardConfig | null;
  assignedCustomers?: unknown[] | null;
  [k: string]: unknown;
}

export type WidgetKind =
  | 'line'
  | 'bar'
  | 'card'
  | 'gauge'
  | 'entities'
  | 'alarms'
  | 'switch'
  | 'button'
  | 'markdown';

export const KIND_LABELS: Record<WidgetKind, string> = {
  line: 'Time-series line chart',
  bar: 'Time-series bar chart',
  card: 'Latest value cards',
  gauge: 'Gauge',
  entities: 'Entities table',
  alarms: 'Alarms table',
  switch: 'Switch (RPC or shared attribute)',
  button: 'Button (RPC)',
  markdown: 'Markdown/HTML card',
};

/** The fully qualified type we write for each kind (ThingsBoard's system bundle names). */
export const KIND_FQN: Record<WidgetKind, string> = {
  line: 'system.time_series_chart',
  bar: 'system.bar_chart_with_labels',
  card: 'system.cards.value_card',
  gauge: 'system.analogue_gauges.radial_gauge_canvas_gauges',
  entities: 'system.cards.entities_table',
  alarms: 'system.alarm_widgets.alarms_table',
  switch: 'system.control_widgets.switch_control',
  button: 'system.control_widgets.command_button',
  markdown: 'system.cards.markdown_card',
};

const WIDGET_TYPE: Record<WidgetKind, string> = {
  line: 'timeseries',
  bar: 'timeseries',
  card: 'latest',
  gauge: 'latest',
  entities: 'latest',
  alarms: 'alarm',
  switch: 'rpc',
  button: 'rpc',
  markdown: 'latest',
};

/** Type names (after `system.`) of ThingsBoard widgets we render, old and new. */
const MAP: Array<[RegExp, WidgetKind]> = [
  [
    /^charts\.(basic_timeseries|timeseries|state_chart|line_chart)$|^time_series_chart$|^charts\.timeseries_line/,
    'line',
  ],
  [
    /^charts\.timeseries_bars_flot$|^bar_chart_with_labels$|^charts\.bars$|^time_series_bars/,
    'bar',
  ],
  [
    /^cards\.(value_card|simple_card|aggregated_value_card|label_widget|attributes_card)$|^(value_card|label_value_card)$|^cards\.timeseries_table$/,
    'card',
  ],
  [/^(analogue_gauges|digital_gauges)\.|^gauges?\.|_gauge$|^battery_level$/, 'gauge'],
  [/^cards\.entities_table$|^entities_table$/, 'entities'],
  [/^alarm_widgets\.alarms_table$|^alarms_table$/, 'alarms'],
  [
    /^control_widgets\.(switch_control|slide_toggle_control|round_switch|single_switch|toggle_button)$|switch/,
    'switch',
  ],
  [
    /^control_widgets\.(rpcbutton|command_button|update_server_boolean_attribute)$|button$/,
    'button',
  ],
  [/^cards\.(markdown_card|html_card|html_value_card)$|^markdown_card$/, 'markdown'],
];

/** The widget's type name as ThingsBoard writes it. */
export function widgetTypeName(w: Widget): string {
  if (w.typeFullFqn) return w.typeFullFqn;
  if (w.bundleAlias && w.typeAlias) return `${w.bundleAlias}.${w.typeAlias}`;
  return w.type ?? 'unknown';
}

/** Our kind for a ThingsBoard widget, or undefined (shown as a placeholder naming the type). */
export function widgetKind(w: Widget): WidgetKind | undefined {
  const name = widgetTypeName(w).replace(/^system\./, '');
  for (const [re, kind] of MAP) if (re.test(name)) return kind;
  return undefined;
}

/** The widgets as a map (old exports have an array). */
export function widgetMap(cfg: DashboardConfig): Record<string, Widget> {
  const w = cfg.widgets ?? {};
  return Array.isArray(w) ? Object.fromEntries(w.map((x) => [x.id, x])) : w;
}

/** The root state's id (`root: true`, else `default`, else the first). */
export function rootState(cfg: DashboardConfig): string {
  const states = cfg.states ?? {};
  return (
    Object.keys(states).find((k) => states[k].root) ??
    (states.default ? 'default' : (Object.keys(states)[0] ?? 'default'))
  );
}

/** A new widget of `kind`, and its place in the layout. */
export function newWidget(
  kind: WidgetKind,
  title: string,
  aliasId: string | undefined,
  keys: string[],
): Widget {
  const id = crypto.randomUUID?.() ?? `w${Date.now()}`;
  const keyType = 'timeseries';
  return {
    id,
    typeFullFqn: KIND_FQN[kind],
    type: WIDGET_TYPE[kind],
    sizeX: 8,
    sizeY: 5,
    row: 0,
    col: 0,
    config: {
      title,
      showTitle: true,
      useDashboardTimewindow: true,
      datasources: aliasId
        ? [
            {
              type: 'entity',
              entityAliasId: aliasId,
              dataKeys: keys.map((k) => ({ name: k, type: keyType, label: k })),
            },
          ]
        : [],
      ...(kind === 'switch' || kind === 'button'
        ? { targetDevice: aliasId ? { type: 'entity', entityAliasId: aliasId } : null }
        : {}),
      settings: {},
    },
  };
}

/** The dashboard's time window (UI default: realtime, last minute). */
export function effectiveTimewindow(dashboard: DashboardConfig, w: Widget): Timewindow {
  const tw = w.config.useDashboardTimewindow === false ? w.config.timewindow : dashboard.timewindow;
  return tw ?? { selectedTab: 0, realtime: { timewindowMs: 60_000 } };
}
