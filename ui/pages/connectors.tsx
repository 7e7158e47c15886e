import { useState } from 'preact/hooks';
import type { Connector, ConnectorStatus } from '../../src/connectors/connector-service.js';
import type { ConnectorType } from '../../src/connectors/types.js';
import { DeleteButton, Field } from '../components/list.js';
import { ErrorText, formatTs, useAction, useLoad, usePoll } from '../components/ui.js';
import { api } from '../lib/api.js';

/**
 * Connectors (issue 17; docs/connectors.md): Modbus and serial-line connectors, each with its
 * running status polled live (lines, devices, counters, last errors), created, edited and
 * deleted over the same REST API (`/api/connector`). The configuration is the JSON the docs show
 * (the IoT Gateway's `modbus.json` for MODBUS); the server checks it and names a bad field.
 */

const STATUS_POLL_MS = 2000;

function StatusView(props: { id: string }) {
  const { data: status, error } = usePoll<ConnectorStatus>(
    `/api/connector/${props.id}/status`,
    STATUS_POLL_MS,
  );
  if (!status) return <ErrorText error={error} />;
  return (
    <div class="stack">
      <ErrorText error={error || status.error || undefined} />
      <table aria-label="Lines">
        <thead>
          <tr>
            <th>Line</th>
            <th>State</th>
            <th>Reopens</th>
            <th>Overruns</th>
            <th>Last error</th>
          </tr>
        </thead>
        <tbody>
          {status.lines.map((l) => (
            <tr key={l.line} data-line={l.line}>
              <td>{l.line}</td>
              <td data-field="state">{l.open ? 'open' : 'closed'}</td>
              <td>{l.reopens}</td>
              <td>{l.overruns}</td>
              <td>{l.lastError ?? '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <table aria-label="Devices">
        <thead>
          <tr>
            <th>Device</th>
            <th>State</th>
            <th>Last read</th>
            <th>Polls</th>
            <th>Timeouts</th>
            <th>CRC errors</th>
            <th>Last error</th>
          </tr>
        </thead>
        <tbody>
          {status.devices.map((d) => (
            <tr key={d.name} data-device={d.name}>
              <td>{d.name}</td>
              <td data-field="state">{d.active ? 'active' : 'inactive'}</td>
              <td>{formatTs(d.lastReadTime) || '—'}</td>
              <td data-field="polls">{d.counters.polls}</td>
              <td data-field="timeouts">{d.counters.timeouts}</td>
              <td>{d.counters.crcErrors}</td>
              <td data-field="lastError">{d.lastError ?? '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Create (no `connector`) or edit one. The configuration is edited as JSON text. */
function ConnectorForm(props: {
  connector?: Connector;
  onSaved: () => void;
  onCancel: () => void;
}) {
  const c = props.connector;
  const act = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    let configuration: unknown;
    try {
      configuration = JSON.parse(String(form.get('configuration') ?? ''));
    } catch (err) {
      act.setError(`configuration: not valid JSON (${(err as Error).message})`);
      return;
    }
    const body = {
      ...(c ? { id: c.id } : {}),
      name: String(form.get('name') ?? ''),
      type: String(form.get('type')) as ConnectorType,
      enabled: form.get('enabled') === 'on',
      configuration,
    };
    void act.run(() => api('/api/connector', { body })).then((ok) => ok && props.onSaved());
  };
  return (
    <form class="card stack" aria-label={c ? `Edit ${c.name}` : 'New connector'} onSubmit={submit}>
      <h2>{c ? `Edit ${c.name}` : 'New connector'}</h2>
      <Field label="Name" name="name" defaultValue={c?.name ?? ''} required />
      <label>
        Type
        <select name="type" defaultValue={c?.type ?? 'MODBUS'}>
          <option value="MODBUS">
            MODBUS (Modbus TCP, RTU, UDP: the IoT Gateway's modbus.json)
          </option>
          <option value="SERIAL">SERIAL (text lines on a serial port)</option>
        </select>
      </label>
      <label class="check">
        <input type="checkbox" name="enabled" defaultChecked={c?.enabled ?? true} /> Enabled
      </label>
      <label>
        Configuration (JSON)
        <textarea
          name="configuration"
          rows={16}
          spellcheck={false}
          defaultValue={JSON.stringify(c?.configuration ?? { master: { slaves: [] } }, null, 2)}
        />
      </label>
      <ErrorText error={act.error} />
      <div class="buttons">
        <button type="button" onClick={props.onCancel} disabled={act.busy}>
          Cancel
        </button>
        <button type="submit" class="primary" disabled={act.busy}>
          Save
        </button>
      </div>
    </form>
  );
}

function ConnectorCard(props: { connector: Connector; onEdit: () => void; onDeleted: () => void }) {
  const c = props.connector;
  const act = useAction();
  return (
    <section class="card stack" aria-label={`Connector ${c.name}`}>
      <h2>
        {c.name} <small>{c.type}</small> <small>{c.enabled ? 'enabled' : 'disabled'}</small>
      </h2>
      {c.enabled && <StatusView id={c.id} />}
      <ErrorText error={act.error} />
      <div class="buttons">
        <button type="button" onClick={props.onEdit}>
          Edit
        </button>
        <DeleteButton
          act={act}
          what={`connector ${c.name}`}
          path={`/api/connector/${c.id}`}
          then={props.onDeleted}
        />
      </div>
    </section>
  );
}

export function ConnectorsPage() {
  const list = useLoad(() => api<Connector[]>('/api/connectors'), []);
  // `null`: the new-connector form; an id: that connector's form.
  const [editing, setEditing] = useState<string | null | undefined>(undefined);
  const done = () => {
    setEditing(undefined);
    list.reload();
  };
  const edited = editing ? list.data?.find((c) => c.id === editing) : undefined;
  return (
    <section class="stack">
      <h1>Connectors</h1>
      <ErrorText error={list.error} />
      {editing === undefined ? (
        <div class="buttons">
          <button type="button" class="primary" onClick={() => setEditing(null)}>
            Add connector
          </button>
        </div>
      ) : (
        <ConnectorForm
          key={editing ?? 'new'}
          connector={edited}
          onSaved={done}
          onCancel={() => setEditing(undefined)}
        />
      )}
      {list.data?.length === 0 && <p>No connectors yet.</p>}
      {list.data?.map((c) => (
        <ConnectorCard
          key={`${c.id}:${c.updatedTime}`}
          connector={c}
          onEdit={() => setEditing(c.id)}
          onDeleted={done}
        />
      ))}
    </section>
  );
}
