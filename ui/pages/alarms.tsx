import { useEffect, useState } from 'preact/hooks';
import { type PagedList, PagedTable, SearchBox } from '../components/list.js';
import { Dialog, ErrorText, FormButtons, formatTs, useAction, useLoad } from '../components/ui.js';
import { api, type Id, type PageData, qs } from '../lib/api.js';
import { useApp } from '../lib/app-context.js';
import { Link } from '../lib/router.js';

/** Alarms: filters, acknowledge, clear, assign, comment; the table is reused on the device page. */

interface Alarm {
  id: Id;
  createdTime: number;
  type: string;
  severity: string;
  status: string;
  acknowledged: boolean;
  cleared: boolean;
  originator: Id;
  originatorName: string | null;
  assignee: { email: string } | null;
  details: unknown;
}

const STATUSES = ['ACTIVE', 'CLEARED', 'ACK', 'UNACK'] as const;
const SEVERITIES = ['CRITICAL', 'MAJOR', 'MINOR', 'WARNING', 'INDETERMINATE'] as const;
const REFRESH_MS = 2000;

export function AlarmsPage() {
  return (
    <section>
      <h1>Alarms</h1>
      <AlarmTable source="/api/v2/alarms" filters />
    </section>
  );
}

/**
 * The table's page: from REST (`source`, read again every 2 s), or for the devices of a dashboard
 * alias (`entityIds`) from an `ALARM_DATA` subscription that the gateway sends on every change.
 */
function useAlarmPage(
  props: { source: string; entityIds?: string[] },
  filter: { status: string[]; severity: string[]; search: string },
): PagedList<Alarm> {
  const { live } = useApp();
  const [page, setPage] = useState(0);
  const [pushed, setPushed] = useState<PageData<Alarm> | undefined>(undefined);
  const ids = props.entityIds;
  const v2 = props.source.includes('/v2/')
    ? props.source
    : props.source.replace('/api/alarm/', '/api/v2/alarm/');
  const link = {
    pageSize: 20,
    page,
    statusList: filter.status.join(',') || undefined,
    severityList: filter.severity.join(',') || undefined,
    textSearch: filter.search || undefined,
  };
  const key = JSON.stringify([v2, ids, link]);
  const rest = useLoad(
    () =>
      ids
        ? Promise.resolve(undefined)
        : api<PageData<Alarm>>(
            `${v2}${qs({ ...link, sortProperty: 'createdTime', sortOrder: 'DESC' })}`,
          ),
    [key],
  );
  useEffect(() => {
    if (!ids) {
      const t = setInterval(rest.reload, REFRESH_MS);
      return () => clearInterval(t);
    }
    const entityFilter = { type: 'entityList', entityType: 'DEVICE', entityList: ids };
    const pageLink = {
      ...link,
      statusList: filter.status,
      severityList: filter.severity,
      sortOrder: { key: { type: 'ALARM_FIELD', key: 'createdTime' }, direction: 'DESC' },
    };
    return live.subscribeAlarms({ entityFilter, pageLink }, (p) =>
      setPushed(p as unknown as PageData<Alarm>),
    );
  }, [key]);
  return { data: ids ? pushed : rest.data, error: rest.error, reload: rest.reload, page, setPage };
}

export function AlarmTable(props: { source: string; entityIds?: string[]; filters?: boolean }) {
  const { user } = useApp();
  const [status, setStatus] = useState<string[]>([]);
  const [severity, setSeverity] = useState<string[]>([]);
  const [search, setSearch] = useState('');
  const [commenting, setCommenting] = useState<Alarm | null>(null);
  const [assigning, setAssigning] = useState<Alarm | null>(null);
  const act = useAction();
  const list = useAlarmPage(props, { status, severity, search });
  const setPage = list.setPage;
  const action = (a: Alarm, what: 'ack' | 'clear') =>
    void act.run(() => api(`/api/alarm/${a.id.id}/${what}`, { method: 'POST' })).then(list.reload);
  const toggle = (arr: string[], set: (v: string[]) => void, v: string, on: boolean) => {
    set(on ? [...arr, v] : arr.filter((x) => x !== v));
    setPage(0);
  };
  return (
    <div class="stack">
      {props.filters && (
        <div class="row filters">
          <fieldset class="row">
            <legend>Status</legend>
            {STATUSES.map((s) => (
              <label key={s} class="check">
                <input
                  type="checkbox"
                  checked={status.includes(s)}
                  onChange={(e) => toggle(status, setStatus, s, e.currentTarget.checked)}
                />
                {s}
              </label>
            ))}
          </fieldset>
          <fieldset class="row">
            <legend>Severity</legend>
            {SEVERITIES.map((s) => (
              <label key={s} class="check">
                <input
                  type="checkbox"
                  checked={severity.includes(s)}
                  onChange={(e) => toggle(severity, setSeverity, s, e.currentTarget.checked)}
                />
                {s}
              </label>
            ))}
          </fieldset>
          <SearchBox
            value={search}
            onSearch={(v) => {
              setSearch(v);
              setPage(0);
            }}
          />
        </div>
      )}
      <ErrorText error={list.error || act.error} />
      <PagedTable
        label="Alarms"
        list={list}
        rowKey={(a) => a.id.id}
        rowProps={(a) => ({ 'data-alarm-type': a.type })}
        empty="No alarms."
        columns={[
          { title: 'Created', wide: true, cell: (a) => formatTs(a.createdTime) },
          {
            title: 'Originator',
            cell: (a) => (
              <Link href={`/devices/${a.originator.id}`}>
                {a.originatorName ?? a.originator.id}
              </Link>
            ),
          },
          { title: 'Type', cell: (a) => a.type },
          {
            title: 'Severity',
            cell: (a) => <span class={`sev ${a.severity.toLowerCase()}`}>{a.severity}</span>,
          },
          { title: 'Status', class: 'status', cell: (a) => a.status },
          { title: 'Assignee', wide: true, cell: (a) => a.assignee?.email ?? '' },
          {
            title: 'Actions',
            class: 'actions',
            cell: (a) => (
              <>
                {!a.acknowledged && (
                  <button type="button" onClick={() => action(a, 'ack')}>
                    Acknowledge
                  </button>
                )}
                {!a.cleared && (
                  <button type="button" onClick={() => action(a, 'clear')}>
                    Clear
                  </button>
                )}
                <button type="button" onClick={() => setAssigning(a)}>
                  Assign
                </button>
                <button type="button" onClick={() => setCommenting(a)}>
                  Comments
                </button>
              </>
            ),
          },
        ]}
      />
      {commenting && <Comments alarm={commenting} onClose={() => setCommenting(null)} />}
      {assigning && (
        <AssignDialog
          alarm={assigning}
          me={user.id.id}
          onClose={() => setAssigning(null)}
          onDone={() => {
            setAssigning(null);
            list.reload();
          }}
        />
      )}
    </div>
  );
}

interface UserEmailInfo {
  id: Id;
  email: string;
  firstName: string | null;
  lastName: string | null;
}

/**
 * The assignee picker: the users who can see the alarm's device and whom the caller may read
 * (`GET /api/users/assign/{alarmId}`; a customer user sees its own customer's users).
 */
function AssignDialog(props: {
  alarm: Alarm;
  me: string;
  onClose: () => void;
  onDone: () => void;
}) {
  const [search, setSearch] = useState('');
  const path = `/api/alarm/${props.alarm.id.id}/assign`;
  const users = useLoad(
    () =>
      api<PageData<UserEmailInfo>>(
        `/api/users/assign/${props.alarm.id.id}${qs({
          pageSize: 50,
          page: 0,
          textSearch: search || undefined,
          sortProperty: 'email',
          sortOrder: 'ASC',
        })}`,
      ),
    [props.alarm.id.id, search],
  );
  const act = useAction();
  const name = (u: UserEmailInfo) => {
    const full = [u.firstName, u.lastName].filter(Boolean).join(' ');
    return `${u.email}${full ? ` (${full})` : ''}${u.id.id === props.me ? ' (me)' : ''}`;
  };
  const submit = (e: Event) => {
    e.preventDefault();
    const userId = String(new FormData(e.currentTarget as HTMLFormElement).get('assignee') ?? '');
    if (!userId) return;
    void act
      .run(() => api(`${path}/${userId}`, { method: 'POST' }))
      .then((ok) => ok && props.onDone());
  };
  return (
    <Dialog title={`Assign alarm: ${props.alarm.type}`} onClose={props.onClose}>
      <form class="stack" aria-label="Assign alarm" onSubmit={submit}>
        <p>Assigned to: {props.alarm.assignee?.email ?? 'nobody'}</p>
        <SearchBox value={search} onSearch={setSearch} />
        <label>
          Assignee
          <select name="assignee" required>
            {users.data?.data.map((u) => (
              <option key={u.id.id} value={u.id.id}>
                {name(u)}
              </option>
            ))}
          </select>
        </label>
        {users.data && users.data.totalElements > users.data.data.length && (
          <p class="muted">{users.data.totalElements} users: search to narrow the list.</p>
        )}
        <ErrorText error={act.error || users.error} />
        {props.alarm.assignee && (
          <button
            type="button"
            disabled={act.busy}
            onClick={() =>
              void act.run(() => api(path, { method: 'DELETE' })).then((ok) => ok && props.onDone())
            }
          >
            Unassign
          </button>
        )}
        <FormButtons onCancel={props.onClose} busy={act.busy} label="Assign" />
      </form>
    </Dialog>
  );
}

interface AlarmComment {
  id: Id;
  createdTime: number;
  comment: { text: string };
  email?: string;
}

function Comments(props: { alarm: Alarm; onClose: () => void }) {
  const path = `/api/alarm/${props.alarm.id.id}/comment`;
  const list = useLoad(
    () => api<PageData<AlarmComment>>(`${path}${qs({ pageSize: 50, page: 0 })}`),
    [path],
  );
  const add = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const text = String(new FormData(form).get('text'));
    void add
      .run(() => api(path, { body: { comment: { text } } }))
      .then((ok) => {
        if (!ok) return;
        form.reset();
        list.reload();
      });
  };
  return (
    <Dialog title={`Comments: ${props.alarm.type}`} onClose={props.onClose}>
      <ul class="log">
        {list.data?.data.map((c) => (
          <li key={c.id.id}>
            <span class="muted">{formatTs(c.createdTime)}</span> {c.comment.text}
          </li>
        ))}
      </ul>
      <form class="stack" onSubmit={submit}>
        <label>
          Comment
          <textarea name="text" required rows={2} />
        </label>
        <ErrorText error={add.error || list.error} />
        <FormButtons
          onCancel={props.onClose}
          cancelLabel="Close"
          busy={add.busy}
          label="Add comment"
        />
      </form>
    </Dialog>
  );
}
