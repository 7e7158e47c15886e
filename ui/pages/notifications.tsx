import { useEffect, useState } from 'preact/hooks';
import { ErrorText, formatTs, Paging, useAction, useLoad } from '../components/ui.js';
import { api, type Id, type PageData, qs } from '../lib/api.js';
import { useApp } from '../lib/app-context.js';

/**
 * The user's notification inbox (ThingsBoard's paths): unread first filter, mark read, delete;
 * read again whenever the unread count changes (pushed over the socket), so a new notification
 * shows without a reload.
 */

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
  const { live } = useApp();
  const reload = list.reload;
  useEffect(() => live.subscribeUnreadCount(reload), [live, reload]);
  const call = (path: string, method: 'PUT' | 'DELETE') =>
    void act.run(() => api(path, { method })).then(list.reload);
  const read = (path: string) => call(path, 'PUT');
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
            <div class="row">
              {n.status !== 'READ' && (
                <button type="button" onClick={() => read(`/api/notification/${n.id.id}/read`)}>
                  Mark read
                </button>
              )}
              <button
                type="button"
                aria-label={`Delete ${n.subject ?? n.type}`}
                onClick={() => call(`/api/notification/${n.id.id}`, 'DELETE')}
              >
                Delete
              </button>
            </div>
          </li>
        ))}
      </ul>
      {list.data?.data.length === 0 && <p>No notifications.</p>}
      <Paging page={page} hasNext={list.data?.hasNext ?? false} onPage={setPage} />
    </section>
  );
}
