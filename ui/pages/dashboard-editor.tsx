import { useState } from 'preact/hooks';
import { Dialog, FormButtons } from '../components/ui.js';
import type { Entity } from '../components/widgets.js';
import {
  type DashboardConfig,
  type EntityAlias,
  KIND_LABELS,
  type LayoutWidget,
  newWidget,
  type Places,
  type Widget,
  type WidgetKind,
  widgetKind,
} from '../lib/dashboard-model.js';

/**
 * The dashboard editor's code, a chunk of its own loaded when *Edit* is first pressed (viewers
 * never download it): the widget dialog and the arranging tools of each widget. A widget moves by
 * dragging its grip (pointer events: mouse, pen or touch) and resizes by its corner, a grid cell
 * at a time; the buttons do the same from the keyboard. Positions are the layout's `row`, `col`,
 * `sizeX` and `sizeY`, as ThingsBoard's JSON keeps them. Widgets never overlap: the ones a move
 * or resize covers go down (`settle`).
 */

/** Whether two places share a grid cell. */
const overlaps = (a: LayoutWidget, b: LayoutWidget): boolean =>
  a.col < b.col + b.sizeX &&
  b.col < a.col + a.sizeX &&
  a.row < b.row + b.sizeY &&
  b.row < a.row + a.sizeY;

/**
 * The layout with widget `wid` at `place` (clamped to the 24 columns) and no two widgets on one
 * cell: taken in order of their rows, every other widget that covers a cell already taken goes
 * down until it is clear (below the moved one, and so on down the page). Nothing moves up to fill
 * a gap (ThingsBoard's grid does not compact either).
 */
export function settle(widgets: Places, wid: string, place: LayoutWidget): Places {
  const sizeX = Math.max(1, Math.min(24, place.sizeX));
  const moved = {
    ...place,
    sizeX,
    sizeY: Math.max(1, place.sizeY),
    col: Math.max(0, Math.min(24 - sizeX, place.col)),
    row: Math.max(0, place.row),
  };
  const taken = [moved];
  const next: Places = { [wid]: moved };
  const rest = Object.entries(widgets)
    .filter(([id]) => id !== wid)
    .sort(([, a], [, b]) => a.row - b.row || a.col - b.col);
  for (const [id, l] of rest) {
    const p = { ...l };
    for (let hit = taken.find((t) => overlaps(t, p)); hit; hit = taken.find((t) => overlaps(t, p)))
      p.row = hit.row + hit.sizeY;
    taken.push(p);
    next[id] = p;
  }
  // The JSON keeps its order of widgets.
  return Object.fromEntries(Object.keys({ ...widgets, ...next }).map((id) => [id, next[id]]));
}

/**
 * Moves (`grip`) or resizes (`corner`) widget `wid` by whole grid cells while the pointer drags;
 * each step settles the layout as it was when the drag began, so a widget pushed aside comes back
 * when the dragged one moves on.
 */
function startDrag(
  e: PointerEvent,
  what: 'grip' | 'corner',
  wid: string,
  before: Places,
  onLayout: (l: Places) => void,
): void {
  const from = before[wid];
  const handle = e.currentTarget as HTMLElement;
  const grid = handle.closest('.grid');
  const article = handle.closest('.widget');
  if (!grid || !article || !from || e.button !== 0) return;
  e.preventDefault();
  handle.setPointerCapture(e.pointerId);
  const css = getComputedStyle(grid);
  const gap = Number.parseFloat(css.columnGap) || 0;
  const colStep = (grid.clientWidth + gap) / 24;
  const rowStep =
    (Number.parseFloat(css.gridAutoRows) || 50) + (Number.parseFloat(css.rowGap) || 0);
  const x0 = e.clientX;
  const y0 = e.clientY;
  let last = '0,0';
  article.classList.add('dragging');
  const move = (ev: PointerEvent) => {
    const dc = Math.round((ev.clientX - x0) / colStep);
    const dr = Math.round((ev.clientY - y0) / rowStep);
    if (`${dc},${dr}` === last) return;
    last = `${dc},${dr}`;
    onLayout(
      settle(
        before,
        wid,
        what === 'grip'
          ? { ...from, col: from.col + dc, row: from.row + dr }
          : { ...from, sizeX: from.sizeX + dc, sizeY: from.sizeY + dr },
      ),
    );
  };
  const end = () => {
    article.classList.remove('dragging');
    handle.removeEventListener('pointermove', move);
    handle.removeEventListener('pointerup', end);
    handle.removeEventListener('pointercancel', end);
  };
  handle.addEventListener('pointermove', move);
  handle.addEventListener('pointerup', end);
  handle.addEventListener('pointercancel', end);
}

const STEPS: Array<[string, string, (l: LayoutWidget) => LayoutWidget]> = [
  ['Move left', '←', (x) => ({ ...x, col: x.col - 1 })],
  ['Move right', '→', (x) => ({ ...x, col: x.col + 1 })],
  ['Move up', '↑', (x) => ({ ...x, row: x.row - 1 })],
  ['Move down', '↓', (x) => ({ ...x, row: x.row + 1 })],
  ['Wider', '⇔+', (x) => ({ ...x, sizeX: x.sizeX + 1 })],
  ['Narrower', '⇔−', (x) => ({ ...x, sizeX: x.sizeX - 1 })],
  ['Taller', '⇕+', (x) => ({ ...x, sizeY: x.sizeY + 1 })],
  ['Shorter', '⇕−', (x) => ({ ...x, sizeY: x.sizeY - 1 })],
];

/** A widget's tools in edit mode: the drag grip and resize corner, and the keyboard's buttons. */
export function WidgetTools(props: {
  title: string;
  /** This widget's id in `layout`. */
  id: string;
  /** The places of every widget of its layout. */
  layout: Places;
  onConfigure: () => void;
  /** The layout's new places (settled: on the grid, no overlaps). */
  onLayout: (l: Places) => void;
  onRemove: () => void;
}) {
  const l = props.layout[props.id];
  return (
    <>
      <span
        class="drag-grip"
        aria-hidden="true"
        title="Drag to move"
        onPointerDown={(e) => startDrag(e, 'grip', props.id, props.layout, props.onLayout)}
      >
        ⠿
      </span>
      <span
        class="drag-corner"
        aria-hidden="true"
        title="Drag to resize"
        onPointerDown={(e) => startDrag(e, 'corner', props.id, props.layout, props.onLayout)}
      />
      <div class="widget-tools" role="toolbar" aria-label={`Arrange ${props.title}`}>
        <button type="button" onClick={props.onConfigure}>
          Configure
        </button>
        {STEPS.map(([label, text, step]) => (
          <button
            key={label}
            type="button"
            aria-label={label}
            onClick={() => props.onLayout(settle(props.layout, props.id, step(l)))}
          >
            {text}
          </button>
        ))}
        <button type="button" onClick={props.onRemove}>
          Remove
        </button>
      </div>
    </>
  );
}

/** Add or configure a widget: kind, title, entity alias (an existing one or a new one), keys. */
export function WidgetDialog(props: {
  widget?: Widget;
  cfg: DashboardConfig;
  devices: Entity[];
  onClose: () => void;
  onSave: (w: Widget, aliases: Record<string, EntityAlias>) => void;
}) {
  const w = props.widget;
  const aliases = props.cfg.entityAliases ?? {};
  const ds = w?.config.datasources?.[0];
  const [kind, setKind] = useState<WidgetKind>((w && widgetKind(w)) ?? 'line');
  const [aliasChoice, setAliasChoice] = useState<string>(
    ds?.entityAliasId ??
      w?.config.targetDevice?.entityAliasId ??
      Object.keys(aliases)[0] ??
      'new-device',
  );
  const types = [...new Set(props.devices.map((d) => d.type))];
  const submit = (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const title = String(f.get('title'));
    const keys = String(f.get('keys') ?? '')
      .split(',')
      .map((k) => k.trim())
      .filter(Boolean);
    const keyType = String(f.get('keyType') ?? 'timeseries');
    const nextAliases = { ...aliases };
    let aliasId = aliasChoice;
    if (aliasChoice === 'new-device' || aliasChoice === 'new-type') {
      aliasId = crypto.randomUUID?.() ?? `a${Date.now()}`;
      const device = props.devices.find((d) => d.id === f.get('device'));
      const type = String(f.get('deviceType') ?? '');
      nextAliases[aliasId] =
        aliasChoice === 'new-device'
          ? {
              id: aliasId,
              alias: device?.name ?? 'Device',
              filter: {
                type: 'singleEntity',
                resolveMultiple: false,
                singleEntity: { entityType: 'DEVICE', id: device?.id ?? '' },
              },
            }
          : {
              id: aliasId,
              alias: `${type} devices`,
              filter: {
                type: 'deviceType',
                resolveMultiple: true,
                deviceTypes: [type],
                deviceNameFilter: '',
              },
            };
    }
    const base = newWidget(kind, title, aliasId, []);
    const dataKeys = keys.map((k) => ({ name: k, type: keyType, label: k }));
    const next: Widget = w
      ? {
          ...w,
          typeFullFqn: widgetKind(w) === kind ? w.typeFullFqn : base.typeFullFqn,
          bundleAlias: widgetKind(w) === kind ? w.bundleAlias : undefined,
          typeAlias: widgetKind(w) === kind ? w.typeAlias : undefined,
          config: {
            ...w.config,
            title,
            datasources: [
              { ...(ds ?? { type: 'entity' }), type: 'entity', entityAliasId: aliasId, dataKeys },
            ],
            ...(kind === 'switch' || kind === 'button'
              ? { targetDevice: { type: 'entity', entityAliasId: aliasId } }
              : {}),
          },
        }
      : {
          ...base,
          config: {
            ...base.config,
            datasources: [{ type: 'entity', entityAliasId: aliasId, dataKeys }],
          },
        };
    if (kind === 'switch' || kind === 'button') {
      next.config.settings = {
        ...next.config.settings,
        ...(kind === 'switch' && f.get('attributeKey')
          ? {
              onUpdateState: {
                action: 'SET_ATTRIBUTE',
                setAttribute: { scope: 'SHARED_SCOPE', key: String(f.get('attributeKey')) },
              },
            }
          : {}),
        ...(f.get('method')
          ? kind === 'switch'
            ? { setValueMethod: String(f.get('method')) }
            : { methodName: String(f.get('method')) }
          : {}),
      };
    }
    if (kind === 'markdown')
      next.config.settings = {
        ...next.config.settings,
        markdownTextPattern: String(f.get('markdown') ?? ''),
      };
    props.onSave(next, nextAliases);
  };
  const s = w?.config.settings ?? {};
  return (
    <Dialog title={w ? 'Configure widget' : 'Add widget'} onClose={props.onClose}>
      <form class="stack" onSubmit={submit}>
        <label>
          Widget type
          <select value={kind} onChange={(e) => setKind(e.currentTarget.value as WidgetKind)}>
            {(Object.keys(KIND_LABELS) as WidgetKind[]).map((k) => (
              <option key={k} value={k}>
                {KIND_LABELS[k]}
              </option>
            ))}
          </select>
        </label>
        <label>
          Title
          <input name="title" defaultValue={w?.config.title ?? ''} required />
        </label>
        <label>
          Entity alias
          <select value={aliasChoice} onChange={(e) => setAliasChoice(e.currentTarget.value)}>
            {Object.values(aliases).map((a) => (
              <option key={a.id} value={a.id}>
                {a.alias}
              </option>
            ))}
            <option value="new-device">New alias: one device…</option>
            <option value="new-type">New alias: devices of a profile…</option>
          </select>
        </label>
        {aliasChoice === 'new-device' && (
          <label>
            Device
            <select name="device">
              {props.devices.map((d) => (
                <option key={d.id} value={d.id}>
                  {d.name}
                </option>
              ))}
            </select>
          </label>
        )}
        {aliasChoice === 'new-type' && (
          <label>
            Device profile
            <select name="deviceType">
              {types.map((t) => (
                <option key={t}>{t}</option>
              ))}
            </select>
          </label>
        )}
        {kind !== 'alarms' && kind !== 'button' && kind !== 'switch' && (
          <>
            <label>
              Data keys (comma separated)
              <input
                name="keys"
                defaultValue={(ds?.dataKeys ?? []).map((k) => k.name).join(', ')}
              />
            </label>
            <label>
              Key type
              <select name="keyType">
                <option value="timeseries">Time series</option>
                <option value="attribute" selected={ds?.dataKeys?.[0]?.type === 'attribute'}>
                  Attribute
                </option>
              </select>
            </label>
          </>
        )}
        {(kind === 'switch' || kind === 'button') && (
          <label>
            RPC method
            <input name="method" defaultValue={String(s.setValueMethod ?? s.methodName ?? '')} />
          </label>
        )}
        {kind === 'switch' && (
          <label>
            Or set this shared attribute
            <input
              name="attributeKey"
              defaultValue={String(
                (s.onUpdateState as { setAttribute?: { key?: string } } | undefined)?.setAttribute
                  ?.key ?? '',
              )}
            />
          </label>
        )}
        {kind === 'markdown' && (
          <label>
            Markdown (${'{key}'} shows the key's value)
            <textarea name="markdown" rows={4} defaultValue={String(s.markdownTextPattern ?? '')} />
          </label>
        )}
        <FormButtons onCancel={props.onClose} label={w ? 'Apply' : 'Add'} />
      </form>
    </Dialog>
  );
}
