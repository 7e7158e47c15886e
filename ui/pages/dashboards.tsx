import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import {
  BarButton,
  DeleteButton,
  Field,
  FormDialog,
  ListPage,
  usePagedList,
} from '../components/list.js';
import { ErrorText, JsonImportDialog, useAction, useLoad } from '../components/ui.js';
import { type Entity, useVisibleDevices, WidgetBody } from '../components/widgets.js';
import { api, qs } from '../lib/api.js';
import { isTenantAdmin, useApp } from '../lib/app-context.js';
import {
  actionRefusal,
  type Dashboard,
  type DashboardConfig,
  decodeState,
  encodeState,
  type Places,
  rootState,
  type StateObject,
  safeUrl,
  stateEntityName,
  stateObject,
  type Timewindow,
  type Widget,
  type WidgetAction,
  widgetActions,
  widgetKind,
  widgetMap,
} from '../lib/dashboard-model.js';
import { Link, navigate, useLocation } from '../lib/router.js';

/**
 * Dashboards in ThingsBoard's JSON (platform.md §5): list, create, import an export, view the
 * root state on a 24-column grid with live widgets, edit (add, move, resize, configure, bind data
 * keys, save). Customer users see the dashboards shared with them, read-only.
 */

interface DashboardInfo {
  id: { id: string };
  title: string;
}

export function DashboardsPage() {
  const { user } = useApp();
  const admin = isTenantAdmin(user);
  const [importing, setImporting] = useState(false);
  const [creating, setCreating] = useState(false);
  const path = admin ? '/api/tenant/dashboards' : `/api/customer/${user.customerId?.id}/dashboards`;
  const list = usePagedList<DashboardInfo>(
    (page) => `${path}${qs({ pageSize: 20, page, sortProperty: 'title', sortOrder: 'ASC' })}`,
    [path],
  );
  const act = useAction();
  return (
    <ListPage
      title="Dashboards"
      actions={
        admin && (
          <>
            <BarButton label="Import dashboard" onClick={() => setImporting(true)} />
            <BarButton primary label="Add dashboard" onClick={() => setCreating(true)} />
          </>
        )
      }
      error={act.error}
      label="Dashboards"
      list={list}
      rowKey={(d) => d.id.id}
      empty="No dashboards."
      columns={[
        { title: 'Title', cell: (d) => <Link href={`/dashboards/${d.id.id}`}>{d.title}</Link> },
        admin && {
          title: 'Actions',
          cell: (d) => (
            <DeleteButton
              act={act}
              what={`dashboard ${d.title}`}
              path={`/api/dashboard/${d.id.id}`}
              then={list.reload}
            />
          ),
        },
      ]}
    >
      {importing && <ImportDialog onClose={() => setImporting(false)} />}
      {creating && (
        <FormDialog
          title="Add dashboard"
          label="Create"
          onClose={() => setCreating(false)}
          onSubmit={async (f) => {
            const title = String(f.get('title'));
            const d = await api<Dashboard>('/api/dashboard', { body: emptyDashboard(title) });
            navigate(`/dashboards/${d.id?.id}`);
          }}
        >
          <Field label="Title" name="title" required />
        </FormDialog>
      )}
    </ListPage>
  );
}

function emptyDashboard(title: string): Dashboard {
  return {
    title,
    configuration: {
      description: '',
      widgets: {},
      states: {
        default: {
          name: title,
          root: true,
          layouts: { main: { widgets: {}, gridSettings: { columns: 24, margin: 10 } } },
        },
      },
      entityAliases: {},
      timewindow: {
        selectedTab: 0,
        realtime: { realtimeType: 0, timewindowMs: 60_000, interval: 1000 },
      } as Timewindow,
      settings: {},
    },
  };
}

/** Imports a ThingsBoard dashboard export (a file or pasted JSON) as a new dashboard. */
function ImportDialog(props: { onClose: () => void }) {
  const onImport = async (parsed: unknown) => {
    const d = parsed as Dashboard | null;
    if (!d || typeof d.title !== 'string' || !d.configuration) {
      throw new Error('Not a ThingsBoard dashboard export (no title or configuration)');
    }
    const { id: _id, createdTime: _c, tenantId: _t, assignedCustomers: _a, ...rest } = d;
    const saved = await api<Dashboard>('/api/dashboard', { body: rest });
    navigate(`/dashboards/${saved.id?.id}`);
  };
  return (
    <JsonImportDialog
      title="Import dashboard"
      fileLabel="Dashboard export file (JSON)"
      onImport={onImport}
      onClose={props.onClose}
    />
  );
}

const TIMEWINDOWS: Array<[string, string, Timewindow]> = [
  ['rt1m', 'Realtime: last minute', { selectedTab: 0, realtime: { timewindowMs: 60_000 } }],
  ['rt5m', 'Realtime: last 5 minutes', { selectedTab: 0, realtime: { timewindowMs: 300_000 } }],
  ['rt1h', 'Realtime: last hour', { selectedTab: 0, realtime: { timewindowMs: 3_600_000 } }],
  [
    'h1h',
    'History: last hour (average)',
    { selectedTab: 1, history: { timewindowMs: 3_600_000 }, aggregation: { type: 'AVG' } },
  ],
  [
    'h24h',
    'History: last day (average)',
    { selectedTab: 1, history: { timewindowMs: 86_400_000 }, aggregation: { type: 'AVG' } },
  ],
];

function timewindowId(tw: Timewindow | undefined): string {
  if (!tw) return 'rt1m';
  const ms = tw.selectedTab === 1 ? tw.history?.timewindowMs : tw.realtime?.timewindowMs;
  return (
    TIMEWINDOWS.find(
      ([, , t]) =>
        t.selectedTab === (tw.selectedTab ?? 0) &&
        (t.selectedTab === 1 ? t.history?.timewindowMs : t.realtime?.timewindowMs) === ms,
    )?.[0] ?? 'custom'
  );
}

type Editor = typeof import('./dashboard-editor.js');

/** The editor's code (dialog, arranging by buttons and by drag), loaded when Edit is first used. */
function useEditor(editing: boolean): Editor | undefined {
  const [editor, setEditor] = useState<Editor | undefined>(undefined);
  useEffect(() => {
    if (editing && !editor) void import('./dashboard-editor.js').then((m) => setEditor(m));
  }, [editing]);
  return editor;
}

/** Renders `children` with the editor once it is loaded. */
function Suspended(props: { editor: Editor | undefined; children: (e: Editor) => JSX.Element }) {
  return props.editor ? props.children(props.editor) : <p aria-busy="true">Loading the editor…</p>;
}

export function DashboardPage(props: { params: Record<string, string> }) {
  // Keyed by id: an openDashboard action opens another dashboard with nothing of this one's draft.
  return <DashboardView key={props.params.id} id={props.params.id} />;
}

function DashboardView(props: { id: string }) {
  const id = props.id;
  const { user } = useApp();
  const { query } = useLocation();
  const admin = isTenantAdmin(user);
  const loaded = useLoad(() => api<Dashboard>(`/api/dashboard/${id}`), [id]);
  const { devices, error: devError } = useVisibleDevices();
  const [draft, setDraft] = useState<Dashboard | null>(null);
  const [editing, setEditing] = useState(false);
  const [configuring, setConfiguring] = useState<Widget | 'new' | null>(null);
  const editor = useEditor(editing);
  /** ThingsBoard's state stack, in the URL (`?state=`): a link or a reload opens the same state. */
  const stack = decodeState(query.get('state'));
  const save = useAction();
  const dash = draft ?? loaded.data;
  if (!dash || !devices) return <ErrorText error={loaded.error || devError || undefined} />;
  const cfg: DashboardConfig = dash.configuration ?? {};
  const widgets = widgetMap(cfg);
  const root = rootState(cfg);
  const top = stack.at(-1);
  const stateId = top && cfg.states?.[top.id] ? top.id : root;
  const state = cfg.states?.[stateId];
  const layout = state?.layouts?.main?.widgets ?? {};
  const right = state?.layouts?.right?.widgets ?? {};
  const stateParams = top?.params;
  /** Goes to a state stack: a new history entry (the browser's Back walks states) or in place. */
  const goTo = (next: StateObject[], replace = false) => {
    const only =
      next.length === 1 && next[0].id === root && Object.keys(next[0].params ?? {}).length === 0;
    navigate(
      `/dashboards/${id}${next.length === 0 || only ? '' : `?state=${encodeURIComponent(encodeState(next))}`}`,
      replace,
    );
  };
  const onAction = (a: WidgetAction, entity?: Entity) => {
    if (actionRefusal(a)) return;
    const target = a.targetDashboardStateId ?? '';
    if (a.type === 'openURL') {
      const url = safeUrl(a.url) as string;
      if (a.openNewBrowserTab) window.open(url, '_blank', 'noopener');
      else location.assign(url);
    } else if (a.type === 'openDashboard') {
      const q = target
        ? `?state=${encodeURIComponent(encodeState([stateObject(target, a, entity)]))}`
        : '';
      const href = `/dashboards/${a.targetDashboardId}${q}`;
      if (a.openNewBrowserTab) window.open(href, '_blank', 'noopener');
      else navigate(href);
    } else if (!cfg.states?.[target]) {
      return;
    } else if (target === root && !entity) {
      goTo([]);
    } else {
      const base = stack.length > 0 ? stack : [{ id: root, params: {} }];
      const entry = stateObject(target, a, entity, stateParams);
      goTo(
        a.type === 'updateDashboardState' ? [...base.slice(0, -1), entry] : [...base, entry],
        a.type === 'updateDashboardState',
      );
    }
  };
  const update = (next: DashboardConfig) => setDraft({ ...dash, configuration: next });
  /** The states with the current state's `name` layout's places changed by `change`. */
  const setLayout = (name: 'main' | 'right', change: (lw: Places) => Places) => {
    const states = { ...(cfg.states ?? {}) };
    const st = states[stateId] ?? {
      name: dash.title,
      root: true,
      layouts: { main: { widgets: {} } },
    };
    const one = st.layouts?.[name] ?? { widgets: {} };
    const lw = change({ ...(one.widgets ?? {}) });
    states[stateId] = { ...st, layouts: { ...st.layouts, [name]: { ...one, widgets: lw } } };
    return states;
  };
  const placed = Object.entries(layout).filter(([wid]) => widgets[wid]);
  const placedRight = Object.entries(right).filter(([wid]) => widgets[wid]);
  const doSave = () =>
    void save.run(async () => {
      const saved = await api<Dashboard>('/api/dashboard', {
        body: { ...dash, configuration: cfg },
      });
      setDraft(saved);
      setEditing(false);
    });
  return (
    <section class="stack">
      <p class="crumbs">
        <Link href="/dashboards">Dashboards</Link> /
      </p>
      <div class="bar">
        <h1>{dash.title}</h1>
        <label>
          Time window
          <select
            value={timewindowId(cfg.timewindow)}
            onChange={(e) => {
              const tw = TIMEWINDOWS.find(([k]) => k === e.currentTarget.value)?.[2];
              if (tw) update({ ...cfg, timewindow: { ...cfg.timewindow, ...tw } });
            }}
          >
            {TIMEWINDOWS.map(([k, label]) => (
              <option key={k} value={k}>
                {label}
              </option>
            ))}
            {timewindowId(cfg.timewindow) === 'custom' && (
              <option value="custom">Dashboard's own</option>
            )}
          </select>
        </label>
        {admin && !editing && (
          <button type="button" onClick={() => setEditing(true)}>
            Edit
          </button>
        )}
        {editing && (
          <>
            <button type="button" onClick={() => setConfiguring('new')}>
              Add widget
            </button>
            <button
              type="button"
              onClick={() => {
                setDraft(null);
                setEditing(false);
                loaded.reload();
              }}
            >
              Cancel
            </button>
            <button type="button" class="primary" onClick={doSave} disabled={save.busy}>
              Save dashboard
            </button>
          </>
        )}
      </div>
      {!admin && <p class="muted">Read-only</p>}
      {stateId !== root && (
        <nav class="row" aria-label="Dashboard states">
          <button type="button" onClick={() => goTo(stack.slice(0, -1))}>
            Back
          </button>
          <span>
            {(stack[0]?.id === root ? stack : [{ id: root }, ...stack])
              .map((e: StateObject) =>
                (cfg.states?.[e.id]?.name ?? e.id).replace(
                  '${entityName}',
                  stateEntityName(e.params),
                ),
              )
              .join(' › ')}
          </span>
        </nav>
      )}
      <ErrorText error={save.error} />
      <div class={placedRight.length > 0 ? 'layouts with-right' : 'layouts'}>
        {(
          [
            ['main', placed],
            ['right', placedRight],
          ] as const
        )
          .filter(([, list]) => list.length > 0)
          .map(([layoutName, list]) => (
            <div key={`${stateId}-${layoutName}`} class="grid" data-layout={layoutName}>
              {list.map(([wid, l]) => {
                const w = widgets[wid];
                const kind = widgetKind(w);
                const title = w.config.title ?? '';
                return (
                  <article
                    key={wid}
                    class="widget card"
                    aria-label={title || 'Widget'}
                    data-kind={kind ?? 'unsupported'}
                    style={{
                      '--c': l.col + 1,
                      '--w': l.sizeX,
                      '--r': l.row + 1,
                      '--h': l.sizeY,
                      order: l.mobileOrder ?? l.row * 100 + l.col,
                    }}
                  >
                    {w.config.showTitle !== false && title && <h2>{title}</h2>}
                    {widgetActions(w, 'headerButton').map((act) => (
                      <button
                        key={act.id ?? act.name}
                        type="button"
                        class="widget-action"
                        disabled={actionRefusal(act) !== ''}
                        title={actionRefusal(act) || undefined}
                        onClick={() => onAction(act)}
                      >
                        {act.name ?? act.type}
                      </button>
                    ))}
                    {editing && (
                      <Suspended editor={editor}>
                        {(ed) => (
                          <ed.WidgetTools
                            title={title}
                            id={wid}
                            layout={layoutName === 'main' ? layout : right}
                            onConfigure={() => setConfiguring(w)}
                            onLayout={(lw) =>
                              update({ ...cfg, states: setLayout(layoutName, () => lw) })
                            }
                            onRemove={() => {
                              const next = { ...widgets };
                              delete next[wid];
                              const states = setLayout(layoutName, (lw) => {
                                delete lw[wid];
                                return lw;
                              });
                              update({ ...cfg, widgets: next, states });
                            }}
                          />
                        )}
                      </Suspended>
                    )}
                    <div class="widget-body">
                      <WidgetBody
                        widget={w}
                        kind={kind}
                        dashboard={cfg}
                        devices={devices}
                        stateParams={stateParams}
                        onAction={onAction}
                      />
                    </div>
                  </article>
                );
              })}
            </div>
          ))}
      </div>
      {placed.length === 0 && <p>No widgets yet.</p>}
      {configuring && editor && (
        <editor.WidgetDialog
          widget={configuring === 'new' ? undefined : configuring}
          cfg={cfg}
          devices={devices}
          onClose={() => setConfiguring(null)}
          onSave={(w, aliases) => {
            const isNew = configuring === 'new';
            const bottom = Object.values(layout).reduce((m, l) => Math.max(m, l.row + l.sizeY), 0);
            const next: DashboardConfig = {
              ...cfg,
              entityAliases: aliases,
              widgets: { ...widgets, [w.id]: w },
            };
            next.states = isNew
              ? setLayout('main', (lw) => ({
                  ...lw,
                  [w.id]: { sizeX: w.sizeX ?? 8, sizeY: w.sizeY ?? 5, row: bottom, col: 0 },
                }))
              : cfg.states;
            update(next);
            setConfiguring(null);
          }}
        />
      )}
    </section>
  );
}
