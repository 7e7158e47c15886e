import { useState } from 'preact/hooks';
import type { UpstreamStatus } from '../../src/upstream/upstream-service.js';
import { Field } from '../components/list.js';
import { ErrorText, formatTs, useAction, useLoad, usePoll } from '../components/ui.js';
import { api } from '../lib/api.js';

/**
 * Upstream sync to a cloud ThingsBoard (docs/upstream.md): the link's status, polled live, and
 * its settings, saved over REST and applied at once (the gateway reconnects). The token and
 * password are never shown: only whether they are set.
 */

interface Settings {
  url: string;
  token: boolean;
  clientId: string;
  username: string;
  password: boolean;
  mqttVersion: '3.1.1' | '5';
  caFile: string;
  certFile: string;
  keyFile: string;
  maxBacklog: number;
  maxPayloadBytes: number;
  maxMessagesPerSec: number;
  maxInFlight: number;
  saved: boolean;
}

const STATUS_POLL_MS = 2000;
const TEXT = ['url', 'clientId', 'username', 'caFile', 'certFile', 'keyFile'] as const;
const NUMBERS = [
  ['maxBacklog', 'Most messages waiting'],
  ['maxPayloadBytes', 'Largest publish (bytes)'],
  ['maxMessagesPerSec', "Most publishes per second (0 = the cloud's limits)"],
  ['maxInFlight', 'Publishes in flight'],
] as const;
const SECRETS = ['token', 'password'] as const;

function StatusCard(props: { status: UpstreamStatus }) {
  const s = props.status;
  const link = !s.enabled ? 'off' : s.connected ? 'connected' : 'disconnected';
  const rows: Array<[string, string]> = [
    ['Link', link],
    ['Cloud', s.url || '—'],
    ['Backlog', `${s.backlog} messages`],
    ['Oldest waiting', formatTs(s.oldestBacklogTs) || '—'],
    ['Sent', String(s.sentTotal)],
    ['Dropped', String(s.droppedTotal)],
    ['Refused', String(s.rejectedTotal)],
    ['Last connected', formatTs(s.lastConnectedTs) || '—'],
    ['Last error', s.lastError ?? '—'],
  ];
  return (
    <section class="card stack" aria-label="Upstream status">
      <h2>Status</h2>
      <dl class="kv">
        {rows.map(([k, v]) => (
          <div key={k}>
            <dt>{k}</dt>
            <dd data-field={k}>{v}</dd>
          </div>
        ))}
      </dl>
    </section>
  );
}

/** The form; `done` (what the last save did) is kept by the page: a save reloads the form. */
function SettingsForm(props: {
  settings: Settings;
  done: string;
  onSaved: (done: string) => void;
}) {
  const s = props.settings;
  const act = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const body: Record<string, unknown> = { mqttVersion: form.get('mqttVersion') };
    for (const k of TEXT) body[k] = String(form.get(k) ?? '');
    for (const [k] of NUMBERS) body[k] = Number(form.get(k));
    // A secret left empty keeps the one set; "Clear" sends "".
    for (const k of SECRETS) {
      const v = String(form.get(k) ?? '');
      if (v !== '') body[k] = v;
      if (form.get(`clear-${k}`) === 'on') body[k] = '';
    }
    void act
      .run(() => api('/api/upstream/settings', { body }))
      .then((ok) => ok && props.onSaved('Saved; the gateway reconnects with these settings.'));
  };
  const reset = () =>
    void act
      .run(() => api('/api/upstream/settings', { method: 'DELETE' }))
      .then((ok) => ok && props.onSaved('The configuration file and environment apply again.'));
  const secret = (k: (typeof SECRETS)[number], label: string) => (
    <div class="stack">
      <Field
        label={`${label} (${s[k] ? 'set; empty keeps it' : 'not set'})`}
        name={k}
        type="password"
        autocomplete="off"
      />
      {s[k] && (
        <label class="check">
          <input type="checkbox" name={`clear-${k}`} /> Clear the {label.toLowerCase()}
        </label>
      )}
    </div>
  );
  return (
    <form class="card stack" aria-label="Upstream settings" onSubmit={submit}>
      <h2>Settings</h2>
      <Field
        label="Cloud URL (mqtt://host:1883 or mqtts://host:8883; empty = off)"
        name="url"
        defaultValue={s.url}
      />
      {secret('token', 'Access token')}
      <label>
        MQTT version
        <select name="mqttVersion" defaultValue={s.mqttVersion}>
          <option value="3.1.1">3.1.1</option>
          <option value="5">5</option>
        </select>
      </label>
      <details>
        <summary>MQTT basic credentials, TLS and limits</summary>
        <div class="stack">
          <Field label="Client id" name="clientId" defaultValue={s.clientId} />
          <Field label="User name" name="username" defaultValue={s.username} />
          {secret('password', 'Password')}
          <Field label="CA file (PEM)" name="caFile" defaultValue={s.caFile} />
          <Field label="Client certificate file (PEM)" name="certFile" defaultValue={s.certFile} />
          <Field label="Client key file (PEM)" name="keyFile" defaultValue={s.keyFile} />
          {NUMBERS.map(([k, label]) => (
            <Field key={k} label={label} name={k} type="number" defaultValue={String(s[k])} />
          ))}
        </div>
      </details>
      <ErrorText error={act.error} />
      <output aria-live="polite">{act.error ? '' : props.done}</output>
      <div class="buttons">
        {s.saved && (
          <button type="button" onClick={reset} disabled={act.busy}>
            Use the configuration file
          </button>
        )}
        <button type="submit" class="primary" disabled={act.busy}>
          Save and reconnect
        </button>
      </div>
    </form>
  );
}

export function UpstreamPage() {
  const { data: status, error } = usePoll<UpstreamStatus>('/api/upstream/status', STATUS_POLL_MS);
  const settings = useLoad(() => api<Settings>('/api/upstream/settings'), []);
  const [done, setDone] = useState('');
  return (
    <section class="stack">
      <h1>Upstream</h1>
      <ErrorText error={error || settings.error} />
      {status && <StatusCard status={status} />}
      {settings.data && (
        <SettingsForm
          key={JSON.stringify(settings.data)}
          settings={settings.data}
          done={done}
          onSaved={(text) => {
            setDone(text);
            settings.reload();
          }}
        />
      )}
    </section>
  );
}
