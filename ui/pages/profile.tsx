import { useEffect, useState } from 'preact/hooks';
import { ErrorText, formatTs, parseValue, useAction } from '../components/ui.js';
import { api, qs } from '../lib/api.js';
import { useApp } from '../lib/app-context.js';
import type { TsData } from '../lib/live.js';

/**
 * The signed-in user's profile: who they are and their own server attributes (docs/users.md
 * "User attributes"), which dashboard filters read as `CURRENT_USER` dynamic values, so a user
 * sets their own thresholds here.
 */

/** key -> [lastUpdateTs, value as text], as the attribute subscription sends them. */
type Rows = ReadonlyMap<string, readonly [number, string]>;

export function UserProfilePage() {
  const { user, live } = useApp();
  const base = `/api/plugins/telemetry/USER/${user.id.id}`;
  // The user's own server attributes, live (docs/websocket.md): the first update has them all,
  // later ones what a save or delete (on this page or elsewhere) changed, a deleted key as ts 0.
  const [rows, setRows] = useState<Rows>(new Map());
  useEffect(() => {
    setRows(new Map());
    return live.subscribe(
      { type: 'ATTRIBUTES', entityType: 'USER', entityId: user.id.id, scope: 'SERVER_SCOPE' },
      (data: TsData) =>
        setRows((prev) => {
          const next = new Map(prev);
          for (const [k, points] of Object.entries(data)) {
            const last = points[points.length - 1];
            if (!last || (last[0] === 0 && last[1] === '')) next.delete(k);
            else next.set(k, last);
          }
          return next;
        }),
    );
  }, [user.id.id]);
  const attrs = [...rows.entries()].sort((a, b) => a[0].localeCompare(b[0]));
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
      });
  };
  // Removed at once too: while the socket is down, polling does not see deletions.
  const remove = (k: string) =>
    void act
      .run(() => api(`${base}/SERVER_SCOPE${qs({ keys: k })}`, { method: 'DELETE' }))
      .then(
        (ok) =>
          ok &&
          setRows((prev) => {
            const next = new Map(prev);
            next.delete(k);
            return next;
          }),
      );
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
            {attrs.map(([k, [ts, v]]) => (
              <tr key={k} data-key={k}>
                <td>{k}</td>
                <td class="value">{v}</td>
                <td class="wide">{formatTs(ts)}</td>
                <td>
                  <button
                    type="button"
                    aria-label={`Edit ${k}`}
                    onClick={() => {
                      setKey(k);
                      setValue(v);
                    }}
                  >
                    Edit
                  </button>{' '}
                  <button type="button" aria-label={`Delete ${k}`} onClick={() => remove(k)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {attrs.length === 0 && <p>No attributes yet.</p>}
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
        <ErrorText error={act.error} />
      </section>
    </section>
  );
}
