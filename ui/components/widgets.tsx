import { type ComponentChildren, h } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, errorText, type PageData, qs } from '../lib/api.js';
import { useApp } from '../lib/app-context.js';
import {
  actionRefusal,
  type DashboardConfig,
  type DataKey,
  type Datasource,
  type EntityAlias,
  effectiveTimewindow,
  keyFiltersOf,
  type StateParams,
  stateEntityOf,
  type Widget,
  type WidgetAction,
  type WidgetKind,
  widgetActions,
  widgetTypeName,
} from '../lib/dashboard-model.js';
import type { AttributeScope, EntityQuery, TsData } from '../lib/live.js';
import { Link } from '../lib/router.js';
import { AlarmTable } from '../pages/alarms.js';
import { type ChartSeries, mergeInto, numericPoints, TimeChart } from './chart.js';

/** The dashboard widgets the page renders, fed by the live client. */

export interface Entity {
  id: string;
  name: string;
  type: string;
}

interface DeviceRow {
  id: { id: string };
  name: string;
  type: string;
}

/** The devices the user can see (tenant or customer), read once per dashboard. */
export function useVisibleDevices(): { devices: Entity[] | undefined; error: string } {
  const { user } = useApp();
  const [devices, setDevices] = useState<Entity[] | undefined>(undefined);
  const [error, setError] = useState('');
  useEffect(() => {
    const cid = user.customerId?.id;
    const path =
      user.authority === 'CUSTOMER_USER' && cid
        ? `/api/customer/${cid}/devices`
        : '/api/tenant/devices';
    api<PageData<DeviceRow>>(
      `${path}${qs({ pageSize: 1000, page: 0, sortProperty: 'name', sortOrder: 'ASC' })}`,
    )
      .then((p) => setDevices(p.data.map((d) => ({ id: d.id.id, name: d.name, type: d.type }))))
      .catch((err: unknown) => setError(errorText(err)));
  }, [user]);
  return { devices, error };
}

/** The devices an alias names (platform.md §5 filter types); other filter types resolve to none. */
export function resolveAlias(
  alias: EntityAlias | undefined,
  devices: Entity[],
  stateParams?: StateParams,
  /** A dashboard filter's match: only these ids (before `resolveMultiple: false` takes one). */
  keep?: Set<string>,
): Entity[] {
  if (!alias) return [];
  const f = alias.filter;
  let found: Entity[] = [];
  switch (f.type) {
    case 'stateEntity':
      // The entity the dashboard state was opened with (a row of an entities table).
      found = devices.filter((d) => d.id === stateEntityOf(f, stateParams));
      break;
    case 'singleEntity':
      found = devices.filter((d) => d.id === f.singleEntity?.id);
      break;
    case 'entityList':
      found = devices.filter((d) => f.entityList?.includes(d.id));
      break;
    case 'entityName': {
      const prefix = (f.entityNameFilter ?? '').toLowerCase();
      found = devices.filter((d) => d.name.toLowerCase().startsWith(prefix));
      break;
    }
    case 'entityType':
      found = f.entityType === 'DEVICE' ? devices : [];
      break;
    case 'deviceType': {
      const types = f.deviceTypes ?? (f.deviceType ? [f.deviceType] : []);
      const prefix = (f.deviceNameFilter ?? '').toLowerCase();
      found = devices.filter(
        (d) => types.includes(d.type) && d.name.toLowerCase().startsWith(prefix),
      );
      break;
    }
  }
  if (keep) found = found.filter((d) => keep.has(d.id));
  return f.resolveMultiple === false ? found.slice(0, 1) : found;
}

type Latest = Map<string, Map<string, [number, string]>>;

/** Latest values of `keys` of every entity (time series, and attributes of any scope). */
function useLatest(entities: Entity[], keys: DataKey[]): Latest {
  const { live } = useApp();
  const [latest] = useState<Latest>(() => new Map());
  const [, setVersion] = useState(0);
  const ids = entities.map((e) => e.id).join();
  const names = keys.map((k) => `${k.type}:${k.name}`).join();
  useEffect(() => {
    latest.clear();
    const ts = keys.filter((k) => k.type === 'timeseries').map((k) => k.name);
    const attrs = keys.filter((k) => k.type === 'attribute').map((k) => k.name);
    const offs: Array<() => void> = [];
    for (const e of entities) {
      const put = (data: TsData) => {
        let m = latest.get(e.id);
        if (!m) {
          m = new Map();
          latest.set(e.id, m);
        }
        for (const [k, points] of Object.entries(data)) {
          for (const p of points) if (p[0] >= (m.get(k)?.[0] ?? -1)) m.set(k, p);
        }
        setVersion((v) => v + 1);
      };
      if (ts.length > 0)
        offs.push(live.subscribe({ type: 'TIMESERIES', entityId: e.id, keys: ts }, put));
      if (attrs.length > 0) {
        for (const scope of ['CLIENT_SCOPE', 'SHARED_SCOPE', 'SERVER_SCOPE'] as AttributeScope[]) {
          offs.push(
            live.subscribe({ type: 'ATTRIBUTES', entityId: e.id, scope, keys: attrs }, put),
          );
        }
      }
    }
    return () => {
      for (const off of offs) off();
    };
  }, [ids, names]);
  return latest;
}

function format(value: string | undefined, key: DataKey, w: Widget): string {
  if (value === undefined) return '–';
  const decimals = key.decimals ?? w.config.decimals;
  const n = Number(value);
  const text =
    decimals !== undefined && value !== '' && Number.isFinite(n) ? n.toFixed(decimals) : value;
  const units = key.units ?? w.config.units;
  return units ? `${text} ${units}` : text;
}

export interface WidgetProps {
  widget: Widget;
  kind: WidgetKind | undefined;
  dashboard: DashboardConfig;
  devices: Entity[];
  /** The current state's parameters (aliases of type `stateEntity`). */
  stateParams?: StateParams;
  /** Runs a widget action (dashboard-model.ts `WidgetAction`) with an entity. */
  onAction?: (a: WidgetAction, entity?: Entity) => void;
}

/** One widget's body by its kind; an unsupported type shows a placeholder naming it. */
export function WidgetBody(props: WidgetProps) {
  const w = props.widget;
  const aliases = props.dashboard.entityAliases ?? {};
  // An alarms table names its entities in `alarmSource` (ThingsBoard's alarm widgets).
  const alarmSource =
    props.kind === 'alarms' ? (w.config.alarmSource as Datasource | undefined) : undefined;
  const datasources = alarmSource ? [alarmSource] : (w.config.datasources ?? []);
  const queries = datasources.map((ds) => filterQuery(ds, props.dashboard, props.stateParams));
  const matches = useFilterMatches(queries);
  const sources = datasources.map((ds, i) => ({
    entities:
      ds.type === 'entity' || ds.entityAliasId
        ? resolveAlias(
            aliases[ds.entityAliasId ?? ''],
            props.devices,
            props.stateParams,
            queries[i] ? (matches[i] ?? new Set()) : undefined,
          )
        : [],
    keys: ds.dataKeys ?? [],
  }));
  const entities = sources.flatMap((s) => s.entities);
  const keys = sources.flatMap((s) => s.keys);
  switch (props.kind) {
    case undefined:
      return (
        <p class="placeholder">
          Widget type <code>{widgetTypeName(w)}</code> is not supported here.
        </p>
      );
    case 'line':
    case 'bar':
      return <ChartWidget {...props} entities={entities} keys={keys} bars={props.kind === 'bar'} />;
    case 'card':
    case 'gauge':
      return (
        <CardsWidget {...props} entities={entities} keys={keys} gauge={props.kind === 'gauge'} />
      );
    case 'entities':
      return <EntitiesWidget {...props} entities={entities} keys={keys} />;
    case 'markdown':
      return <MarkdownWidget {...props} entities={entities} keys={keys} />;
    case 'alarms':
      // Only the alias's devices' alarms: one device's list, or ALARM_DATA for several.
      return entities.length === 1 ? (
        <AlarmTable source={`/api/alarm/DEVICE/${entities[0].id}`} />
      ) : (
        <AlarmTable source="/api/v2/alarms" entityIds={entities.map((e) => e.id)} />
      );
    case 'switch':
    case 'button':
      return <ControlWidget {...props} />;
  }
}

/**
 * The entity query of a datasource with a dashboard filter (`filterId`): its alias's filter (a
 * `stateEntity` alias as the state's device) with the filter's key filters; undefined without.
 */
function filterQuery(
  ds: Datasource,
  dashboard: DashboardConfig,
  stateParams: StateParams | undefined,
): EntityQuery | undefined {
  const f = ds.filterId ? dashboard.filters?.[ds.filterId] : undefined;
  const alias = dashboard.entityAliases?.[ds.entityAliasId ?? ''];
  if (!f || !alias) return undefined;
  const entityFilter =
    alias.filter.type === 'stateEntity'
      ? {
          type: 'singleEntity',
          singleEntity: {
            entityType: 'DEVICE',
            id: stateEntityOf(alias.filter, stateParams) ?? '',
          },
        }
      : alias.filter;
  return { entityFilter, keyFilters: keyFiltersOf(f) };
}

/**
 * The ids each query matches, evaluated by the gateway (ENTITY_DATA with `keyFilters`) and sent
 * again whenever a value changes the match; undefined until the first answer.
 */
function useFilterMatches(queries: Array<EntityQuery | undefined>): Array<Set<string> | undefined> {
  const { live } = useApp();
  const [matches, setMatches] = useState<Array<Set<string> | undefined>>([]);
  const key = JSON.stringify(queries);
  useEffect(() => {
    setMatches([]);
    const offs = queries.map((q, i) =>
      q
        ? live.subscribeEntities(q, (ids) =>
            setMatches((m) => {
              const next = [...m];
              next[i] = new Set(ids);
              return next;
            }),
          )
        : undefined,
    );
    return () => {
      for (const off of offs) off?.();
    };
  }, [key]);
  return matches;
}

type DataProps = WidgetProps & { entities: Entity[]; keys: DataKey[] };

function ChartWidget(props: DataProps & { bars: boolean }) {
  const { live } = useApp();
  const tw = effectiveTimewindow(props.dashboard, props.widget);
  const history = tw.selectedTab === 1;
  const windowMs = (history ? tw.history?.timewindowMs : tw.realtime?.timewindowMs) ?? 60_000;
  const [stores] = useState(() => new Map<string, Map<string, Map<number, string>>>());
  const [version, setVersion] = useState(0);
  const [error, setError] = useState('');
  const tsKeys = props.keys.filter((k) => k.type === 'timeseries');
  const ids = props.entities.map((e) => e.id).join();
  const names = tsKeys.map((k) => k.name).join();
  useEffect(() => {
    stores.clear();
    setVersion((v) => v + 1);
    const keys = tsKeys.map((k) => k.name);
    if (keys.length === 0) return;
    const store = (id: string) => {
      let s = stores.get(id);
      if (!s) {
        s = new Map();
        stores.set(id, s);
      }
      return s;
    };
    if (history) {
      const fixed = tw.history?.fixedTimewindow;
      const endTs = fixed?.endTimeMs ?? Date.now();
      const startTs = fixed?.startTimeMs ?? endTs - windowMs;
      const agg = tw.aggregation?.type ?? 'NONE';
      const interval = Math.max(1000, Math.ceil((endTs - startTs) / 500));
      for (const e of props.entities) {
        api<Record<string, Array<{ ts: number; value: unknown }>>>(
          `/api/plugins/telemetry/DEVICE/${e.id}/values/timeseries${qs({
            keys: keys.join(','),
            startTs,
            endTs,
            agg,
            interval: agg === 'NONE' ? undefined : interval,
            limit: 50_000,
            orderBy: 'ASC',
          })}`,
        )
          .then((res) => {
            mergeInto(
              store(e.id),
              Object.fromEntries(
                Object.entries(res).map(([k, pts]) => [
                  k,
                  pts.map((p): [number, string] => [p.ts, String(p.value)]),
                ]),
              ),
            );
            setVersion((v) => v + 1);
          })
          .catch((err: unknown) => setError(errorText(err)));
      }
      return;
    }
    const offs = props.entities.map((e) =>
      live.subscribe({ type: 'TIMESERIES', entityId: e.id, keys, timeWindow: windowMs }, (data) => {
        mergeInto(store(e.id), data, Date.now() - windowMs);
        setVersion((v) => v + 1);
      }),
    );
    return () => {
      for (const off of offs) off();
    };
  }, [ids, names, windowMs, history]);
  const series = useMemo((): ChartSeries[] => {
    const out: ChartSeries[] = [];
    for (const e of props.entities) {
      for (const k of tsKeys) {
        const m = stores.get(e.id)?.get(k.name) ?? new Map<number, string>();
        out.push({
          label: props.entities.length > 1 ? `${e.name} ${k.label ?? k.name}` : (k.label ?? k.name),
          color: props.entities.length > 1 ? undefined : k.color,
          points: numericPoints([...m.entries()].sort((a, b) => a[0] - b[0])),
        });
      }
    }
    return out;
  }, [version, ids, names]);
  return (
    <>
      {error && <p class="error">{error}</p>}
      <TimeChart
        series={series}
        windowMs={history ? undefined : windowMs}
        bars={props.bars}
        height={200}
      />
    </>
  );
}

function CardsWidget(props: DataProps & { gauge: boolean }) {
  const latest = useLatest(props.entities, props.keys);
  const settings = props.widget.config.settings ?? {};
  const min = Number(settings.minValue ?? 0);
  const max = Number(settings.maxValue ?? 100);
  // ThingsBoard's "On card click": the first cardClick action, here with the card's own entity.
  const click = widgetActions(props.widget, 'cardClick')[0];
  return (
    <div class="cards">
      {props.entities.flatMap((e) =>
        props.keys.map((k) => {
          const value = latest.get(e.id)?.get(k.name)?.[1];
          const n = Number(value);
          const share =
            Number.isFinite(n) && max > min ? Math.min(1, Math.max(0, (n - min) / (max - min))) : 0;
          const body = (
            <>
              <span class="muted">
                {props.entities.length > 1 ? `${e.name} · ` : ''}
                {k.label ?? k.name}
              </span>
              <strong class="value">{format(value, k, props.widget)}</strong>
              {props.gauge && (
                <meter
                  min={min}
                  max={max}
                  value={Number.isFinite(n) ? n : min}
                  aria-label={`${k.label ?? k.name} gauge`}
                >
                  {Math.round(share * 100)}%
                </meter>
              )}
            </>
          );
          const refusal = click ? actionRefusal(click) : '';
          return click ? (
            <button
              type="button"
              class="value-card"
              key={`${e.id}:${k.name}`}
              data-key={k.name}
              disabled={refusal !== '' || !props.onAction}
              title={refusal || undefined}
              onClick={() => props.onAction?.(click, e)}
            >
              {body}
            </button>
          ) : (
            <div class="value-card" key={`${e.id}:${k.name}`} data-key={k.name}>
              {body}
            </div>
          );
        }),
      )}
      {props.entities.length === 0 && <p class="muted">No entity for this widget's alias.</p>}
    </div>
  );
}

function EntitiesWidget(props: DataProps) {
  const dataKeys = props.keys.filter((k) => k.type !== 'entityField');
  const latest = useLatest(props.entities, dataKeys);
  const rowAction = widgetActions(props.widget, 'rowClick').find((a) => !actionRefusal(a));
  const cellActions = widgetActions(props.widget, 'actionCellButton');
  const onAction = props.onAction;
  return (
    <div class="scroll">
      <table aria-label={props.widget.config.title ?? 'Entities'}>
        <thead>
          <tr>
            <th>Name</th>
            {dataKeys.map((k) => (
              <th key={k.name}>{k.label ?? k.name}</th>
            ))}
            {cellActions.length > 0 && <th>Actions</th>}
          </tr>
        </thead>
        <tbody>
          {props.entities.map((e) => (
            <tr key={e.id}>
              <td>
                {rowAction && onAction ? (
                  <button type="button" class="link" onClick={() => onAction(rowAction, e)}>
                    {e.name}
                  </button>
                ) : (
                  <Link href={`/devices/${e.id}`}>{e.name}</Link>
                )}
              </td>
              {dataKeys.map((k) => (
                <td key={k.name} class="value">
                  {format(latest.get(e.id)?.get(k.name)?.[1], k, props.widget)}
                </td>
              ))}
              {cellActions.length > 0 && (
                <td>
                  {cellActions.map((a) => (
                    <button
                      key={a.id ?? a.name}
                      type="button"
                      disabled={actionRefusal(a) !== '' || !onAction}
                      title={actionRefusal(a) || undefined}
                      aria-label={`${a.name ?? a.type} ${e.name}`}
                      onClick={() => onAction?.(a, e)}
                    >
                      {a.name ?? a.type}
                    </button>
                  ))}
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Elements an HTML card keeps (without their attributes); others show only their content. */
const HTML_KEEP = new Set(
  'p div span b strong i em u small h1 h2 h3 h4 h5 h6 ul ol li br hr table thead tbody tr th td code pre blockquote'.split(
    ' ',
  ),
);
/** Elements left out with their content. */
const HTML_DROP = new Set('script style template iframe object embed noscript svg math'.split(' '));

const escapeHtml = (v: string): string => v.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * Markdown/HTML card: `${label}`/`${key}`/`${key:decimals}`/`${entityName}` replaced (values
 * escaped); `#` headings, `**bold**`; HTML parsed inert (DOMParser: nothing runs or loads) and
 * rendered as a subset of elements with no attributes but their `id`, so markup from an imported
 * file never runs. An element whose id names an `elementClick` action runs it (ThingsBoard: the
 * innermost such element clicked), also from the keyboard.
 */
function MarkdownWidget(props: DataProps) {
  const latest = useLatest(props.entities.slice(0, 1), props.keys);
  const settings = props.widget.config.settings ?? {};
  const pattern = String(settings.markdownTextPattern ?? settings.cardHtml ?? '');
  const values = latest.get(props.entities[0]?.id ?? '');
  const html = pattern
    .replace(/\$\{([^}:]+)(?::(\d+))?\}/g, (_, name: string, dec?: string) => {
      const key = props.keys.find((k) => k.label === name || k.name === name);
      if (name === 'entityName') return escapeHtml(props.entities[0]?.name ?? '');
      const v = key ? values?.get(key.name)?.[1] : undefined;
      if (v === undefined) return '–';
      return escapeHtml(
        dec !== undefined && Number.isFinite(Number(v)) ? Number(v).toFixed(Number(dec)) : v,
      );
    })
    .split('\n')
    .map((line) => {
      const t = line.trim().replace(/\*\*(.+?)\*\*/g, '<b>$1</b>');
      const m = /^#{1,6}\s+(.*)$/.exec(t);
      return m ? `<h3>${m[1]}</h3>` : t && !t.startsWith('<') ? `<p>${t}</p>` : t;
    })
    .join('\n');
  const actions = widgetActions(props.widget, 'elementClick');
  const entity = props.entities[0];
  const render = (node: Node): ComponentChildren[] =>
    Array.from(node.childNodes, (n, i) => {
      if (n.nodeType === Node.TEXT_NODE) return n.textContent;
      if (!(n instanceof Element)) return null;
      const tag = n.tagName.toLowerCase();
      if (HTML_DROP.has(tag)) return null;
      const children = render(n);
      const id = n.id || undefined;
      const action = id ? actions.find((a) => a.name === id) : undefined;
      if (!action && !HTML_KEEP.has(tag)) return children;
      const refusal = action ? actionRefusal(action) : '';
      const run = (e: Event) => {
        e.stopPropagation();
        if (action && !refusal) props.onAction?.(action, entity);
      };
      return h(
        HTML_KEEP.has(tag) ? tag : 'span',
        action
          ? {
              key: i,
              'data-element-id': id,
              class: 'element-action',
              role: 'button',
              tabIndex: 0,
              'aria-disabled': refusal ? 'true' : undefined,
              title: refusal || undefined,
              onClick: run,
              onKeyDown: (e: KeyboardEvent) => {
                if (e.key !== 'Enter' && e.key !== ' ') return;
                e.preventDefault();
                run(e);
              },
            }
          : { key: i, 'data-element-id': id },
        children,
      );
    });
  const doc = useMemo(() => new DOMParser().parseFromString(html, 'text/html'), [html]);
  return <div class="markdown">{render(doc.body)}</div>;
}

/** A switch or a button: an RPC to the target device, or (switch) a shared attribute. */
function ControlWidget(props: WidgetProps) {
  const w = props.widget;
  const s = (w.config.settings ?? {}) as Record<string, unknown> & {
    onUpdateState?: {
      action?: string;
      executeRpc?: { method?: string };
      setAttribute?: { key?: string; scope?: string };
    };
    onClickState?: { executeRpc?: { method?: string } };
  };
  const aliases = props.dashboard.entityAliases ?? {};
  const target = w.config.targetDevice;
  const targetId =
    target?.deviceId ??
    resolveAlias(
      aliases[target?.entityAliasId ?? w.config.targetDeviceAliasIds?.[0] ?? ''],
      props.devices,
      props.stateParams,
    )[0]?.id;
  const [on, setOn] = useState(false);
  const [status, setStatus] = useState('');
  const title = w.config.title ?? (props.kind === 'switch' ? 'Switch' : 'Button');
  if (!targetId) return <p class="muted">No target device.</p>;
  const send = async (value: boolean | undefined) => {
    // The switch shows the new position at once (no jump back while the RPC is under way).
    const before = on;
    if (value !== undefined) setOn(value);
    setStatus('Sending…');
    try {
      const attrKey =
        s.onUpdateState?.action === 'SET_ATTRIBUTE' ? s.onUpdateState.setAttribute?.key : undefined;
      if (props.kind === 'switch' && (attrKey || s.attributeKey)) {
        const key = String(attrKey ?? s.attributeKey);
        await api(`/api/plugins/telemetry/DEVICE/${targetId}/attributes/SHARED_SCOPE`, {
          body: { [key]: value },
        });
      } else {
        const method = String(
          props.kind === 'switch'
            ? (s.setValueMethod ?? s.onUpdateState?.executeRpc?.method ?? 'setValue')
            : (s.methodName ?? s.onClickState?.executeRpc?.method ?? 'command'),
        );
        let params: unknown = value;
        if (props.kind === 'button') {
          try {
            params = JSON.parse(String(s.methodParams ?? '{}'));
          } catch {
            params = s.methodParams;
          }
        }
        await api(`/api/rpc/${s.oneWay === true ? 'oneway' : 'twoway'}/${targetId}`, {
          body: { method, params, timeout: Number(s.requestTimeout ?? 5000) },
        });
      }
      setStatus('Done');
    } catch (err) {
      if (value !== undefined) setOn(before);
      setStatus(errorText(err));
    }
  };
  return (
    <div class="control">
      {props.kind === 'switch' ? (
        <label class="check">
          <input
            type="checkbox"
            role="switch"
            aria-checked={on}
            checked={on}
            onChange={(e) => void send(e.currentTarget.checked)}
          />
          {title}
        </label>
      ) : (
        <button type="button" class="primary" onClick={() => void send(undefined)}>
          {String(w.config.settings?.title ?? title)}
        </button>
      )}
      <output aria-live="polite">{status}</output>
    </div>
  );
}
