import { useEffect, useState } from 'preact/hooks';
import {
  Dialog,
  ErrorText,
  FormButtons,
  formatTs,
  Paging,
  useAction,
  useLoad,
} from '../components/ui.js';
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

export function AlarmTable(props: { source: string; filters?: boolean }) {
  const { user } = useApp();
  const [page, setPage] = useState(0);
  const [status, setStatus] = useState<string[]>([]);
  const [severity, setSeverity] = useState<string[]>([]);
  const [search, setSearch] = useState('');
  const [commenting, setCommenting] = useState<Alarm | null>(null);
  const act = useAction();
  const v2 = props.source.includes('/v2/')
    ? props.source
    : props.source.replace('/api/alarm/', '/api/v2/alarm/');
  const list = useLoad(
    () =>
      api<PageData<Alarm>>(
        `${v2}${qs({
          pageSize: 20,
          page,
          statusList: status.join(',') || undefined,
          severityList: severity.join(',') || undefined,
          textSearch: search || undefined,
          sortProperty: 'createdTime',
          sortOrder: 'DESC',
        })}`,
      ),
    [v2, page, status.join(), severity.join(), search],
  );
  // Alarms change on the gateway: refresh while the table is shown.
  useEffect(() => {
    const t = setInterval(list.reload, REFRESH_MS);
    return () => clearInterval(t);
  }, [list.reload]);
  const action = (a: Alarm, what: 'ack' | 'clear' | 'assign') =>
    void act
      .run(() =>
        api(`/api/alarm/${a.id.id}/${what === 'assign' ? `assign/${user.id.id}` : what}`, {
          method: 'POST',
        }),
      )
      .then(list.reload);
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
          <label class="search">
            Search
            <input
              type="search"
              value={search}
              onInput={(e) => {
                setSearch(e.currentTarget.value);
                setPage(0);
              }}
            />
          </label>
        </div>
      )}
      <ErrorText error={list.error || act.error} />
      <div class="scroll">
        <table aria-label="Alarms">
          <thead>
            <tr>
              <th class="wide">Created</th>
              <th>Originator</th>
              <th>Type</th>
              <th>Severity</th>
              <th>Status</th>
              <th class="wide">Assignee</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {list.data?.data.map((a) => (
              <tr key={a.id.id} data-alarm-type={a.type}>
                <td class="wide">{formatTs(a.createdTime)}</td>
                <td>
                  <Link href={`/devices/${a.originator.id}`}>
                    {a.originatorName ?? a.originator.id}
                  </Link>
                </td>
                <td>{a.type}</td>
                <td>
                  <span class={`sev ${a.severity.toLowerCase()}`}>{a.severity}</span>
                </td>
                <td class="status">{a.status}</td>
                <td class="wide">{a.assignee?.email ?? ''}</td>
                <td class="actions">
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
                  <button type="button" onClick={() => action(a, 'assign')}>
                    Assign to me
                  </button>
                  <button type="button" onClick={() => setCommenting(a)}>
                    Comments
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {list.data && list.data.data.length === 0 && <p>No alarms.</p>}
      <Paging page={page} hasNext={list.data?.hasNext ?? false} onPage={setPage} />
      {commenting && <Comments alarm={commenting} onClose={() => setCommenting(null)} />}
    </div>
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
