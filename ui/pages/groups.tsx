import { useState } from 'preact/hooks';
import { ErrorText, useAction, useLoad } from '../components/ui.js';
import { api, type Id, type PageData, qs } from '../lib/api.js';

/**
 * Entity groups of devices and dashboards (platform.md §6.3): create, add and remove members,
 * share with all users of a customer (read-only or for writing), delete.
 */

interface Group {
  id: Id;
  name: string;
  type: 'DEVICE' | 'DASHBOARD';
  groupAll: boolean;
}

interface Named {
  id: Id;
  name?: string;
  title?: string;
}

const TYPES = [
  ['DEVICE', 'Device groups'],
  ['DASHBOARD', 'Dashboard groups'],
] as const;

export function GroupsPage() {
  const [type, setType] = useState<Group['type']>('DEVICE');
  const groups = useLoad(() => api<Group[]>(`/api/entityGroups/${type}`), [type]);
  const [open, setOpen] = useState<Group | null>(null);
  const act = useAction();
  const create = (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const name = String(new FormData(form).get('name'));
    void act
      .run(() => api('/api/entityGroup', { body: { name, type } }))
      .then((ok) => {
        if (!ok) return;
        form.reset();
        groups.reload();
      });
  };
  return (
    <section class="stack">
      <div class="bar">
        <h1>Groups</h1>
        <label>
          Group type
          <select
            value={type}
            onChange={(e) => {
              setType(e.currentTarget.value as Group['type']);
              setOpen(null);
            }}
          >
            {TYPES.map(([v, l]) => (
              <option key={v} value={v}>
                {l}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ErrorText error={groups.error || act.error} />
      <ul class="log">
        {groups.data?.map((g) => (
          <li key={g.id.id}>
            <button type="button" onClick={() => setOpen(g)} aria-pressed={open?.id.id === g.id.id}>
              {g.name}
            </button>
            {!g.groupAll && (
              <button
                type="button"
                onClick={() =>
                  confirm(`Delete group ${g.name}?`) &&
                  void act
                    .run(() => api(`/api/entityGroup/${g.id.id}`, { method: 'DELETE' }))
                    .then(groups.reload)
                }
              >
                Delete
              </button>
            )}
          </li>
        ))}
      </ul>
      <form class="row" onSubmit={create} aria-label="Add group">
        <label>
          Group name
          <input name="name" required />
        </label>
        <button type="submit" class="primary" disabled={act.busy}>
          Add group
        </button>
      </form>
      {open && <GroupDetails key={open.id.id} group={open} />}
    </section>
  );
}

function GroupDetails(props: { group: Group }) {
  const g = props.group;
  const kind = g.type === 'DEVICE' ? 'device' : 'dashboard';
  const members = useLoad(
    () =>
      api<PageData<{ id: Id | string }>>(
        `/api/entityGroup/${g.id.id}/entities${qs({ pageSize: 1000, page: 0 })}`,
      ),
    [g.id.id],
  );
  const candidates = useLoad(
    () =>
      api<PageData<Named>>(`/api/tenant/${kind}s${qs({ pageSize: 1000, page: 0 })}`).then(
        (p) => p.data,
      ),
    [kind],
  );
  const customers = useLoad(
    () => api<PageData<Named>>(`/api/customers${qs({ pageSize: 1000, page: 0 })}`),
    [],
  );
  const act = useAction();
  const [shared, setShared] = useState('');
  const idOf = (m: { id: Id | string }) => (typeof m.id === 'string' ? m.id : m.id.id);
  const memberIds = new Set((members.data?.data ?? []).map(idOf));
  const label = (n: Named) => n.name ?? n.title ?? n.id.id;
  const change = (path: 'addEntities' | 'deleteEntities', id: string) =>
    void act
      .run(() => api(`/api/entityGroup/${g.id.id}/${path}`, { body: [id] }))
      .then(members.reload);
  const share = (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const customer = String(f.get('customer'));
    const readElseWrite = f.get('access') !== 'write';
    void act
      .run(() =>
        api(`/api/entityGroup/${g.id.id}/share`, {
          body: {
            ownerId: { entityType: 'CUSTOMER', id: customer },
            allUserGroup: true,
            readElseWrite,
          },
        }),
      )
      .then((ok) => ok && setShared(`Shared ${readElseWrite ? 'read-only' : 'for writing'}`));
  };
  return (
    <section class="card stack" aria-labelledby="h-group">
      <h2 id="h-group">{g.name}</h2>
      <ErrorText error={members.error || candidates.error || act.error} />
      <table aria-label="Group members">
        <thead>
          <tr>
            <th>{kind === 'device' ? 'Device' : 'Dashboard'}</th>
            <th>In group</th>
          </tr>
        </thead>
        <tbody>
          {candidates.data?.map((n) => {
            const inside = memberIds.has(n.id.id);
            return (
              <tr key={n.id.id}>
                <td>{label(n)}</td>
                <td>
                  {g.groupAll ? (
                    inside ? (
                      'Yes'
                    ) : (
                      ''
                    )
                  ) : (
                    <label class="check">
                      <input
                        type="checkbox"
                        checked={inside}
                        onChange={() => change(inside ? 'deleteEntities' : 'addEntities', n.id.id)}
                      />
                      In {g.name}
                    </label>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {!g.groupAll && (
        <form class="row" onSubmit={share} aria-label="Share group">
          <label>
            Share with customer
            <select name="customer">
              {customers.data?.data.map((c) => (
                <option key={c.id.id} value={c.id.id}>
                  {label(c)}
                </option>
              ))}
            </select>
          </label>
          <label>
            Access
            <select name="access">
              <option value="read">Read-only</option>
              <option value="write">Read and write</option>
            </select>
          </label>
          <button type="submit" disabled={act.busy || !customers.data?.data.length}>
            Share
          </button>
          <output aria-live="polite">{shared}</output>
        </form>
      )}
    </section>
  );
}
