import { useState } from 'preact/hooks';
import { ErrorText, formatTs, Paging, useAction, useLoad } from '../components/ui.js';
import { api, type Id, type PageData, qs } from '../lib/api.js';

/** The user's notification inbox (ThingsBoard's paths): unread first filter, mark read. */

interface Notification {
  id: Id;
  type: string;
  subject: string | null;
  text: string;
  status: 'SENT' | 'READ';
  createdTime: number;
}

export function NotificationsPage() {
  const [page, setPage] = useState(0);
  const [unreadOnly, setUnreadOnly] = useState(false);
  const list = useLoad(
    () =>
      api<PageData<Notification>>(
        `/api/notifications${qs({ pageSize: 20, page, unreadOnly, sortProperty: 'createdTime', sortOrder: 'DESC' })}`,
      ),
    [page, unreadOnly],
  );
  const act = useAction();
  const read = (path: string) => void act.run(() => api(path, { method: 'PUT' })).then(list.reload);
  return (
    <section class="stack">
      <div class="bar">
        <h1>Notifications</h1>
        <label class="check">
          <input
            type="checkbox"
            checked={unreadOnly}
            onChange={(e) => setUnreadOnly(e.currentTarget.checked)}
          />
          Unread only
        </label>
        <button type="button" onClick={() => read('/api/notifications/read')}>
          Mark all read
        </button>
      </div>
      <ErrorText error={list.error || act.error} />
      <ul class="inbox">
        {list.data?.data.map((n) => (
          <li key={n.id.id} class={n.status === 'READ' ? 'read' : 'unread'}>
            <div>
              <strong>{n.subject ?? n.type}</strong>{' '}
              <span class="muted">{formatTs(n.createdTime)}</span>
            </div>
            <p>{n.text}</p>
            {n.status !== 'READ' && (
              <button type="button" onClick={() => read(`/api/notification/${n.id.id}/read`)}>
                Mark read
              </button>
            )}
          </li>
        ))}
      </ul>
      {list.data?.data.length === 0 && <p>No notifications.</p>}
      <Paging page={page} hasNext={list.data?.hasNext ?? false} onPage={setPage} />
    </section>
  );
}
