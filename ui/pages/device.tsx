import { useEffect, useMemo, useState } from 'preact/hooks';
import { mergeInto, TimeChart, toSeries } from '../components/chart.js';
import { PagedTable, usePagedList } from '../components/list.js';
import {
  CopyButton,
  ErrorText,
  formatTs,
  parseValue,
  Tabs,
  useAction,
  useLoad,
} from '../components/ui.js';
import { api, errorText, qs } from '../lib/api.js';
import { isTenantAdmin, useApp } from '../lib/app-context.js';
import type { AttributeScope, TsData } from '../lib/live.js';
import { Link } from '../lib/router.js';
import { AlarmTable } from './alarms.js';
import { accessToken, type Device, DeviceDialog } from './devices.js';

/** Device details: latest telemetry (live), chart, attributes, RPC console, credentials, alarms. */

const TABS = [
  'Latest telemetry',
  'Chart',
  'Attributes',
  'RPC',
  'Credentials',
  'Alarms',
  'Audit',
] as const;
type Tab = (typeof TABS)[number];

/** Live ts -> value store of one subscription; re-renders on every update. */
function useLive(
  deviceId: string,
  cmd:
    | { type: 'TIMESERIES'; keys?: string[]; timeWindow?: number }
    | { type: 'ATTRIBUTES'; scope: AttributeScope },
  enabled = true,
) {
  const { live } = useApp();
  const [store] = useState(() => new Map<string, Map<number, string>>());
  const [version, setVersion] = useState(0);
  const keyOf = JSON.stringify(cmd);
  useEffect(() => {
    store.clear();
    setVersion((v) => v + 1);
    if (!enabled) return;
    const tw = cmd.type === 'TIMESERIES' ? (cmd.timeWindow ?? 0) : 0;
    return live.subscribe({ ...cmd, entityId: deviceId }, (data: TsData) => {
      if (tw > 0) mergeInto(store, data, Date.now() - tw);
      else {
        // Latest values: one point per key, the newest.
        for (const [k, points] of Object.entries(data)) {
          const newest = points.reduce((a, b) => (b[0] >= a[0] ? b : a));
          const prev = store.get(k);
          const prevTs = prev ? [...prev.keys()][0] : -1;
          if (newest[0] >= prevTs) store.set(k, new Map([newest]));
        }
      }
      setVersion((v) => v + 1);
    });
  }, [deviceId, keyOf, enabled]);
  return { store, version };
}

function latestRows(store: Map<string, Map<number, string>>): Array<[string, number, string]> {
  return [...store.entries()]
    .map(([k, m]): [string, number, string] => {
      const [ts, v] = [...m.entries()][0] ?? [0, ''];
      return [k, ts, v];
    })
    .sort((a, b) => a[0].localeCompare(b[0]));
}

export function DevicePage(props: { params: Record<string, string> }) {
  const id = props.params.id;
  const { user } = useApp();
  const admin = isTenantAdmin(user);
  const [tab, setTab] = useState<Tab>('Latest telemetry');
  const [editing, setEditing] = useState(false);
  const device = useLoad(() => api<Device>(`/api/device/${id}`), [id]);
  const server = useLive(id, { type: 'ATTRIBUTES', scope: 'SERVER_SCOPE' });
  const active = server.store.get('active');
  const activeValue = active ? [...active.values()][0] : undefined;
  const lastActivity = server.store.get('lastActivityTime');
  const lastActivityTs = lastActivity ? Number([...lastActivity.values()][0]) : 0;
  const d = device.data;
  const tabs = TABS.filter((t) => admin || (t !== 'Credentials' && t !== 'Audit'));
  return (
    <section>
      <p class="crumbs">
        <Link href="/devices">Devices</Link> /
      </p>
      <div class="bar">
        <h1>{d?.name ?? 'Device'}</h1>
        <span class={`badge ${activeValue === 'true' ? 'ok' : ''}`}>
          {activeValue === 'true' ? 'Active' : activeValue === 'false' ? 'Inactive' : '—'}
        </span>
        {lastActivityTs > 0 && <span class="muted">last activity {formatTs(lastActivityTs)}</span>}
        {admin && d && (
          <button type="button" onClick={() => setEditing(true)}>
            Edit
          </button>
        )}
      </div>
      {d && (
        <p class="muted">
          Profile {d.type}
          {d.label ? ` · ${d.label}` : ''}
        </p>
      )}
      <ErrorText error={device.error} />
      <Tabs label="Device tabs" tabs={tabs} tab={tab} onTab={setTab} />
      <div role="tabpanel" aria-label={tab} class="panel">
        {tab === 'Latest telemetry' && <LatestTab id={id} />}
        {tab === 'Chart' && <ChartTab id={id} />}
        {tab === 'Attributes' && <AttributesTab id={id} canEdit={admin} />}
        {tab === 'RPC' && <RpcTab id={id} />}
        {tab === 'Credentials' && <CredentialsTab id={id} />}
        {tab === 'Alarms' && <AlarmTable source={`/api/alarm/DEVICE/${id}`} />}
        {tab === 'Audit' && <AuditTab id={id} />}
      </div>
      {editing && d && (
        <DeviceDialog
          device={d}
          onClose={() => setEditing(false)}
          onSaved={() => {
            setEditing(false);
            device.reload();
          }}
        />
      )}
    </section>
  );
}

function LatestTab(props: { id: string }) {
  const { store } = useLive(props.id, { type: 'TIMESERIES' });
  const rows = latestRows(store);
  return (
    <table class="fixed" aria-label="Latest telemetry">
      <thead>
        <tr>
          <th>Key</th>
          <th>Value</th>
          <th class="wide">Last update</th>
        </tr>
      </thead>
      <tbody>
        {rows.map(([k, ts, v]) => (
          <tr key={k} data-key={k}>
            <td>{k}</td>
            <td class="value">{v}</td>
            <td class="wide">{formatTs(ts)}</td>
          </tr>
        ))}
        {rows.length === 0 && (
          <tr>
            <td colSpan={3}>No telemetry yet.</td>
          </tr>
        )}
      </tbody>
    </table>
  );
}

const WINDOWS: Array<[number, string]> = [
  [60_000, '1 minute'],
  [5 * 60_000, '5 minutes'],
  [15 * 60_000, '15 minutes'],
  [60 * 60_000, '1 hour'],
];
const AGGS = ['NONE', 'AVG', 'MIN', 'MAX', 'SUM', 'COUNT'] as const;

function localInput(ts: number): string {
  const d = new Date(ts - new Date(ts).getTimezoneOffset() * 60_000);
  return d.toISOString().slice(0, 16);
}

function ChartTab(props: { id: string }) {
  const keys = useLoad(
    () => api<string[]>(`/api/plugins/telemetry/DEVICE/${props.id}/keys/timeseries`),
    [props.id],
  );
  const [chosen, setChosen] = useState<string[] | null>(null);
  const [mode, setMode] = useState<'realtime' | 'history'>('realtime');
  const [windowMs, setWindowMs] = useState(60_000);
  const selected = chosen ?? keys.data ?? [];
  return (
    <div class="stack">
      <fieldset class="row">
        <legend>Keys</legend>
        {(keys.data ?? []).map((k) => (
          <label key={k} class="check">
            <input
              type="checkbox"
              checked={selected.includes(k)}
              onChange={(e) =>
                setChosen(
                  e.currentTarget.checked ? [...selected, k] : selected.filter((x) => x !== k),
                )
              }
            />
            {k}
          </label>
        ))}
        {keys.data?.length === 0 && <span>No telemetry keys yet.</span>}
      </fieldset>
      <div class="row">
        <label>
          Time window
          <select
            value={mode === 'realtime' ? String(windowMs) : 'history'}
            onChange={(e) => {
              const v = e.currentTarget.value;
              if (v === 'history') setMode('history');
              else {
                setMode('realtime');
                setWindowMs(Number(v));
              }
            }}
          >
            {WINDOWS.map(([ms, label]) => (
              <option key={ms} value={String(ms)}>
                Realtime: last {label}
              </option>
            ))}
            <option value="history">History…</option>
          </select>
        </label>
        <button type="button" onClick={keys.reload}>
          Refresh keys
        </button>
      </div>
      {mode === 'realtime' ? (
        <RealtimeChart id={props.id} keys={selected} windowMs={windowMs} />
      ) : (
        <HistoryChart id={props.id} keys={selected} />
      )}
    </div>
  );
}

function RealtimeChart(props: { id: string; keys: string[]; windowMs: number }) {
  const { store, version } = useLive(
    props.id,
    {
      type: 'TIMESERIES',
      keys: props.keys,
      timeWindow: props.windowMs,
    },
    props.keys.length > 0,
  );
  const series = useMemo(() => toSeries(store, props.keys), [version, props.keys.join()]);
  return <TimeChart series={series} windowMs={props.windowMs} />;
}

function HistoryChart(props: { id: string; keys: string[] }) {
  const now = Date.now();
  const [start, setStart] = useState(localInput(now - 24 * 3600_000));
  const [end, setEnd] = useState(localInput(now));
  const [agg, setAgg] = useState<(typeof AGGS)[number]>('AVG');
  const [intervalMin, setIntervalMin] = useState(5);
  const [series, setSeries] = useState<ReturnType<typeof toSeries>>([]);
  const load = useAction();
  const run = (e?: Event) => {
    e?.preventDefault();
    if (props.keys.length === 0) return;
    void load.run(async () => {
      const startTs = new Date(start).getTime();
      const endTs = new Date(end).getTime();
      const res = await api<Record<string, Array<{ ts: number; value: unknown }>>>(
        `/api/plugins/telemetry/DEVICE/${props.id}/values/timeseries${qs({
          keys: props.keys.join(','),
          startTs,
          endTs,
          agg,
          interval: agg === 'NONE' ? undefined : intervalMin * 60_000,
          limit: 100000,
          orderBy: 'ASC',
        })}`,
      );
      const store = new Map<string, Map<number, string>>();
      mergeInto(
        store,
        Object.fromEntries(
          Object.entries(res).map(([k, pts]) => [
            k,
            pts.map((p): [number, string] => [p.ts, String(p.value)]),
          ]),
        ),
      );
      setSeries(toSeries(store, props.keys));
    });
  };
  useEffect(() => run(), [props.keys.join()]);
  return (
    <div class="stack">
      <form class="row" onSubmit={run}>
        <label>
          From
          <input
            type="datetime-local"
            value={start}
            onInput={(e) => setStart(e.currentTarget.value)}
          />
        </label>
        <label>
          To
          <input type="datetime-local" value={end} onInput={(e) => setEnd(e.currentTarget.value)} />
        </label>
        <label>
          Aggregation
          <select value={agg} onChange={(e) => setAgg(e.currentTarget.value as typeof agg)}>
            {AGGS.map((a) => (
              <option key={a}>{a}</option>
            ))}
          </select>
        </label>
        <label>
          Interval (minutes)
          <input
            type="number"
            min={1}
            value={intervalMin}
            disabled={agg === 'NONE'}
            onInput={(e) => setIntervalMin(Number(e.currentTarget.value) || 1)}
          />
        </label>
        <button type="submit" class="primary" disabled={load.busy}>
          Show
        </button>
      </form>
      <ErrorText error={load.error} />
      <TimeChart series={series} bars={agg !== 'NONE' && agg !== 'AVG'} />
    </div>
  );
}

const SCOPES: Array<[AttributeScope, string]> = [
  ['CLIENT_SCOPE', 'Client attributes'],
  ['SHARED_SCOPE', 'Shared attributes'],
  ['SERVER_SCOPE', 'Server attributes'],
];

function AttributesTab(props: { id: string; canEdit: boolean }) {
  return (
    <div class="stack">
      {SCOPES.map(([scope, title]) => (
        <AttributeScopeTable
          key={scope}
          id={props.id}
          scope={scope}
          title={title}
          editable={props.canEdit && scope !== 'CLIENT_SCOPE'}
        />
      ))}
    </div>
  );
}

function AttributeScopeTable(props: {
  id: string;
  scope: AttributeScope;
  title: string;
  editable: boolean;
}) {
  const { store } = useLive(props.id, { type: 'ATTRIBUTES', scope: props.scope });
  const rows = latestRows(store);
  const save = useAction();
  const base = `/api/plugins/telemetry/DEVICE/${props.id}`;
  const submit = (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const f = new FormData(form);
    const key = String(f.get('key')).trim();
    const value = parseValue(String(f.get('value')));
    void save
      .run(() => api(`${base}/attributes/${props.scope}`, { body: { [key]: value } }))
      .then((ok) => ok && form.reset());
  };
  const remove = (key: string) =>
    void save.run(async () => {
      await api(`${base}/${props.scope}${qs({ keys: key })}`, { method: 'DELETE' });
      store.delete(key);
    });
  const slug = props.scope.toLowerCase();
  return (
    <section aria-labelledby={`h-${slug}`}>
      <h2 id={`h-${slug}`}>{props.title}</h2>
      <table class="fixed" aria-label={props.title}>
        <thead>
          <tr>
            <th>Key</th>
            <th>Value</th>
            <th class="wide">Last update</th>
            {props.editable && <th>Actions</th>}
          </tr>
        </thead>
        <tbody>
          {rows.map(([k, ts, v]) => (
            <tr key={k} data-key={k}>
              <td>{k}</td>
              <td class="value">{v}</td>
              <td class="wide">{formatTs(ts)}</td>
              {props.editable && (
                <td>
                  <button type="button" onClick={() => remove(k)} aria-label={`Delete ${k}`}>
                    Delete
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {props.editable && (
        <form class="row" onSubmit={submit} aria-label={`Set ${props.title.toLowerCase()}`}>
          <label>
            Key
            <input name="key" required />
          </label>
          <label>
            Value (JSON or text)
            <input name="value" required />
          </label>
          <button type="submit" class="primary" disabled={save.busy}>
            Save attribute
          </button>
        </form>
      )}
      <ErrorText error={save.error} />
    </section>
  );
}

interface RpcEntry {
  at: number;
  method: string;
  result: string;
  ok: boolean;
}

function RpcTab(props: { id: string }) {
  const [log, setLog] = useState<RpcEntry[]>([]);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const method = String(f.get('method'));
    const twoWay = f.get('twoway') === 'on';
    const timeout = Number(f.get('timeout')) || 10_000;
    let params: unknown;
    try {
      params = JSON.parse(String(f.get('params') || '{}'));
    } catch {
      setLog((l) => [
        { at: Date.now(), method, result: 'Params are not valid JSON', ok: false },
        ...l,
      ]);
      return;
    }
    setBusy(true);
    try {
      const reply = await api(`/api/rpc/${twoWay ? 'twoway' : 'oneway'}/${props.id}`, {
        body: { method, params, timeout },
      });
      const result = twoWay ? JSON.stringify(reply) : 'Sent';
      setLog((l) => [{ at: Date.now(), method, result, ok: true }, ...l]);
    } catch (err) {
      const text = errorText(err);
      setLog((l) => [
        {
          at: Date.now(),
          method,
          result: text === 'Timed out' ? 'Timed out: no reply' : text,
          ok: false,
        },
        ...l,
      ]);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="stack">
      <form class="stack" onSubmit={submit} aria-label="RPC console">
        <div class="row">
          <label>
            Method
            <input name="method" required />
          </label>
          <label>
            Timeout (ms)
            <input name="timeout" type="number" min={100} defaultValue="10000" />
          </label>
          <label class="check">
            <input name="twoway" type="checkbox" defaultChecked />
            Two-way (wait for the reply)
          </label>
        </div>
        <label>
          Params (JSON)
          <textarea name="params" rows={3} defaultValue="{}" />
        </label>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Waiting…' : 'Send RPC'}
        </button>
      </form>
      <ol class="log" aria-label="RPC results" aria-live="polite">
        {log.map((r) => (
          <li key={r.at} class={r.ok ? 'ok' : 'error'}>
            <span class="muted">{new Date(r.at).toLocaleTimeString()}</span> <b>{r.method}</b>:{' '}
            <code class="rpc-result">{r.result}</code>
          </li>
        ))}
      </ol>
    </div>
  );
}

interface Credentials {
  id: { id: string };
  deviceId: { id: string; entityType: string };
  credentialsType: 'ACCESS_TOKEN' | 'MQTT_BASIC' | 'X509_CERTIFICATE';
  credentialsId: string;
  credentialsValue: string | null;
}

/** A certificate's stored base64 body as PEM again (64 characters a line), for reading. */
function pemOf(body: string): string {
  const lines = body.match(/.{1,64}/g) ?? [];
  return ['-----BEGIN CERTIFICATE-----', ...lines, '-----END CERTIFICATE-----'].join('\n');
}

function CredentialsTab(props: { id: string }) {
  const creds = useLoad(() => api<Credentials>(`/api/device/${props.id}/credentials`), [props.id]);
  const [type, setType] = useState<Credentials['credentialsType'] | null>(null);
  const save = useAction();
  const c = creds.data;
  const kind = type ?? c?.credentialsType ?? 'ACCESS_TOKEN';
  const basic =
    c?.credentialsType === 'MQTT_BASIC' && c.credentialsValue
      ? (JSON.parse(c.credentialsValue) as Record<string, string>)
      : {};
  const certificate =
    c?.credentialsType === 'X509_CERTIFICATE' && c.credentialsValue
      ? pemOf(c.credentialsValue)
      : '';
  const submit = (e: Event) => {
    e.preventDefault();
    if (!c) return;
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const body =
      kind === 'ACCESS_TOKEN'
        ? {
            ...c,
            credentialsType: kind,
            credentialsId: String(f.get('token')),
            credentialsValue: null,
          }
        : {
            ...c,
            credentialsType: kind,
            credentialsId: null,
            credentialsValue:
              kind === 'X509_CERTIFICATE'
                ? String(f.get('certificate') ?? '')
                : JSON.stringify({
                    clientId: String(f.get('clientId') ?? '') || null,
                    userName: String(f.get('userName') ?? '') || null,
                    password: String(f.get('password') ?? '') || null,
                  }),
          };
    void save
      .run(() => api('/api/device/credentials', { body }))
      .then((ok) => ok && creds.reload());
  };
  return (
    <form class="stack narrow-form" onSubmit={submit} aria-label="Device credentials">
      <label>
        Credentials type
        <select value={kind} onChange={(e) => setType(e.currentTarget.value as typeof kind)}>
          <option value="ACCESS_TOKEN">Access token</option>
          <option value="MQTT_BASIC">MQTT basic</option>
          <option value="X509_CERTIFICATE">X.509 certificate (MQTT over TLS)</option>
        </select>
      </label>
      {kind === 'X509_CERTIFICATE' ? (
        <label>
          Certificate (PEM)
          <textarea
            name="certificate"
            required
            rows={8}
            spellcheck={false}
            placeholder="-----BEGIN CERTIFICATE-----"
            defaultValue={certificate}
          />
        </label>
      ) : kind === 'ACCESS_TOKEN' ? (
        <>
          <label>
            Access token
            <input
              name="token"
              required
              defaultValue={c?.credentialsType === 'ACCESS_TOKEN' ? c.credentialsId : ''}
            />
          </label>
          <CopyButton label="Copy token" text={() => accessToken(props.id)} />
        </>
      ) : (
        <>
          <label>
            Client ID
            <input name="clientId" defaultValue={basic.clientId ?? ''} />
          </label>
          <label>
            User name
            <input name="userName" defaultValue={basic.userName ?? ''} />
          </label>
          <label>
            Password
            <input
              name="password"
              type="text"
              autocomplete="off"
              defaultValue={basic.password ?? ''}
            />
          </label>
        </>
      )}
      <ErrorText error={save.error || creds.error} />
      <button type="submit" class="primary" disabled={save.busy || !c}>
        Save credentials
      </button>
    </form>
  );
}

interface AuditEntry {
  id: { id: string };
  createdTime: number;
  userName: string | null;
  actionType: string;
  actionStatus: string;
}

/** The device's entries of the audit log, newest first, 20 a page (`/api/audit/logs/entity`). */
function AuditTab(props: { id: string }) {
  const log = usePagedList<AuditEntry>(
    (page) => `/api/audit/logs/entity/DEVICE/${props.id}${qs({ pageSize: 20, page })}`,
    [props.id],
  );
  return (
    <>
      <ErrorText error={log.error} />
      <PagedTable
        list={log}
        label="Audit log"
        columns={[
          { title: 'Time', cell: (e) => formatTs(e.createdTime) },
          { title: 'User', cell: (e) => e.userName },
          { title: 'Action', cell: (e) => e.actionType },
          { title: 'Status', cell: (e) => e.actionStatus },
        ]}
        rowKey={(e) => e.id.id}
        empty="No audit entries for this device."
      />
    </>
  );
}
