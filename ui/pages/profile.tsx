import { useState } from 'preact/hooks';
import { ErrorText, formatTs, parseValue, useAction, useLoad } from '../components/ui.js';
import { api, qs } from '../lib/api.js';
import { useApp } from '../lib/app-context.js';

/**
 * The signed-in user's profile: who they are and their own server attributes (docs/users.md
 * "User attributes"), which dashboard filters read as `CURRENT_USER` dynamic values, so a user
 * sets their own thresholds here.
 */

interface Attribute {
  key: string;
  value: unknown;
  lastUpdateTs: number;
}

const valueText = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

export function UserProfilePage() {
  const { user } = useApp();
  const base = `/api/plugins/telemetry/USER/${user.id.id}`;
  const attrs = useLoad(() => api<Attribute[]>(`${base}/values/attributes/SERVER_SCOPE`), [base]);
  const [key, setKey] = useState('');
  const [value, setValue] = useState('');
  const act = useAction();
  const save = (e: Event) => {
    e.preventDefault();
    const k = key.trim();
    void act
      .run(() => api(`${base}/attributes/SERVER_SCOPE`, { body: { [k]: parseValue(value) } }))
      .then((ok) => {
        if (!ok) return;
        setKey('');
        setValue('');
        attrs.reload();
      });
  };
  const remove = (k: string) =>
    void act
      .run(() => api(`${base}/SERVER_SCOPE${qs({ keys: k })}`, { method: 'DELETE' }))
      .then((ok) => ok && attrs.reload());
  const name = [user.firstName, user.lastName].filter(Boolean).join(' ');
  const facts: Array<[string, string]> = [
    ['Email', user.email],
    ...(name ? ([['Name', name]] as Array<[string, string]>) : []),
    ['Role', user.authority === 'TENANT_ADMIN' ? 'Tenant administrator' : 'Customer user'],
  ];
  return (
    <section class="stack">
      <h1>Profile</h1>
      <dl class="kv">
        {facts.map(([k, v]) => (
          <div key={k}>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </div>
        ))}
      </dl>
      <section aria-labelledby="h-my-attributes" class="stack">
        <h2 id="h-my-attributes">My attributes</h2>
        <p>
          Dashboard filters with a <em>current user</em> value read these, so each user can keep
          their own thresholds.
        </p>
        <table class="fixed" aria-label="My attributes">
          <thead>
            <tr>
              <th>Key</th>
              <th>Value</th>
              <th class="wide">Last update</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {(attrs.data ?? []).map((a) => (
              <tr key={a.key} data-key={a.key}>
                <td>{a.key}</td>
                <td class="value">{valueText(a.value)}</td>
                <td class="wide">{formatTs(a.lastUpdateTs)}</td>
                <td>
                  <button
                    type="button"
                    aria-label={`Edit ${a.key}`}
                    onClick={() => {
                      setKey(a.key);
                      setValue(valueText(a.value));
                    }}
                  >
                    Edit
                  </button>{' '}
                  <button
                    type="button"
                    aria-label={`Delete ${a.key}`}
                    onClick={() => remove(a.key)}
                  >
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {attrs.data?.length === 0 && <p>No attributes yet.</p>}
        <form class="row" onSubmit={save} aria-label="Set my attribute">
          <label>
            Key
            <input name="key" required value={key} onInput={(e) => setKey(e.currentTarget.value)} />
          </label>
          <label>
            Value (JSON or text)
            <input
              name="value"
              required
              value={value}
              onInput={(e) => setValue(e.currentTarget.value)}
            />
          </label>
          <button type="submit" class="primary" disabled={act.busy}>
            Save attribute
          </button>
        </form>
        <ErrorText error={act.error || attrs.error} />
      </section>
    </section>
  );
}
