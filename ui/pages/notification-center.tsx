import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import {
  BarButton,
  type Column,
  DeleteButton,
  Field,
  FormDialog,
  ListPage,
  type PagedList,
  Select,
  usePagedList,
} from '../components/list.js';
import { formatTs, Tabs, useAction, useLoad } from '../components/ui.js';
import { api, type Id, type PageData, qs } from '../lib/api.js';

/**
 * The notification center's setup (docs/notifications.md): targets (who), templates (what),
 * rules (when), and the outbox's delivery log. Tabs in one page; each tab is a list page with a
 * dialog to add or edit an entry.
 */

interface Target {
  id: Id;
  name: string;
  configuration: {
    type: 'PLATFORM_USERS' | 'EMAIL_ADDRESSES' | 'PHONE_NUMBERS' | 'WEBHOOK';
    usersFilter?: { type: string };
    emails?: string[];
    phoneNumbers?: string[];
    url?: string;
    method?: string;
  };
}

type Method = 'WEB' | 'EMAIL' | 'SMS' | 'WEBHOOK';
const METHODS: Method[] = ['WEB', 'EMAIL', 'SMS', 'WEBHOOK'];

interface Template {
  id: Id;
  name: string;
  notificationType: 'ALARM' | 'DEVICE_ACTIVITY' | 'GENERAL';
  configuration: {
    deliveryMethodsTemplates: Partial<
      Record<Method, { enabled: boolean; subject?: string | null; body: string }>
    >;
  };
}

interface Rule {
  id: Id;
  name: string;
  enabled: boolean;
  templateId: Id;
  triggerType: 'ALARM' | 'ALARM_ASSIGNMENT' | 'ALARM_COMMENT' | 'DEVICE_ACTIVITY';
  triggerConfig: {
    notifyOn?: string[];
    alarmTypes?: string[] | null;
    alarmSeverities?: string[] | null;
    clearRule?: { alarmStatuses?: string[] } | null;
  };
  recipientsConfig: { escalationTable?: Record<string, string[]>; targets?: string[] };
}

interface Delivery {
  id: string;
  method: Method;
  recipient: string;
  subject: string | null;
  status: string;
  attempts: number;
  lastError: string | null;
  createdTime: number;
}

const TABS = ['targets', 'templates', 'rules', 'deliveries'] as const;
type Tab = (typeof TABS)[number];

const byName = (page: number) => qs({ pageSize: 20, page, sortProperty: 'name', sortOrder: 'ASC' });

export function NotificationCenterPage() {
  const [tab, setTab] = useState<Tab>('targets');
  return (
    <div class="stack">
      <Tabs
        label="Notification setup"
        tabs={TABS}
        tab={tab}
        onTab={setTab}
        names={{
          targets: 'Targets',
          templates: 'Templates',
          rules: 'Rules',
          deliveries: 'Delivery log',
        }}
      />
      <div role="tabpanel" aria-label={tab} class="panel">
        {tab === 'targets' && <Targets />}
        {tab === 'templates' && <Templates />}
        {tab === 'rules' && <Rules />}
        {tab === 'deliveries' && <Deliveries />}
      </div>
    </div>
  );
}

/**
 * A tab of named entities at `/api/notification/{kind}`: the table with edit and delete, and the
 * dialog (`Edit`) for a new or an existing one.
 */
function CrudTab<T extends { id: Id; name: string }>(props: {
  kind: 'target' | 'template' | 'rule';
  title: string;
  columns: Array<Column<T>>;
  Edit: (p: { item?: T; onClose: () => void; onSaved: () => void }) => preact.JSX.Element;
}) {
  const list = usePagedList<T>((page) => `/api/notification/${props.kind}s${byName(page)}`);
  const [editing, setEditing] = useState<T | 'new' | null>(null);
  const act = useAction();
  const Edit = props.Edit;
  return (
    <ListPage
      title={props.title}
      actions={<BarButton primary label={`Add ${props.kind}`} onClick={() => setEditing('new')} />}
      error={act.error}
      label={props.title}
      list={list as PagedList<T>}
      rowKey={(r) => r.id.id}
      empty={`No ${props.kind}s.`}
      columns={[
        { title: 'Name', cell: (r) => r.name },
        ...props.columns,
        {
          title: 'Actions',
          class: 'actions',
          cell: (r) => (
            <>
              <button type="button" onClick={() => setEditing(r)}>
                Edit
              </button>
              <DeleteButton
                act={act}
                what={`${props.kind} ${r.name}`}
                path={`/api/notification/${props.kind}/${r.id.id}`}
                then={list.reload}
              />
            </>
          ),
        },
      ]}
    >
      {editing && (
        <Edit
          item={editing === 'new' ? undefined : editing}
          onClose={() => setEditing(null)}
          onSaved={() => {
            setEditing(null);
            list.reload();
          }}
        />
      )}
    </ListPage>
  );
}

/**
 * The dialog of one named entity: its name, the kind's `children` fields, and Save, which posts
 * the entity (`toBody` gives the fields beyond id and name) to `/api/notification/{kind}`.
 */
function EntityDialog(props: {
  kind: 'target' | 'template' | 'rule';
  item?: { id: Id; name: string };
  onClose: () => void;
  onSaved: () => void;
  toBody: (f: FormData) => Record<string, unknown>;
  children: ComponentChildren;
}) {
  const save = async (f: FormData) => {
    const body = { ...props.toBody(f), id: props.item?.id, name: String(f.get('name')) };
    await api(`/api/notification/${props.kind}`, { body });
    props.onSaved();
  };
  return (
    <FormDialog
      title={`${props.item ? 'Edit' : 'Add'} ${props.kind}`}
      label="Save"
      onClose={props.onClose}
      onSubmit={save}
    >
      <Field label="Name" name="name" required defaultValue={props.item?.name} />
      {props.children}
    </FormDialog>
  );
}

/** Lines of a textarea, trimmed, without empty ones. */
const lines = (v: FormDataEntryValue | null) =>
  String(v ?? '')
    .split(/[\n,]/)
    .map((s) => s.trim())
    .filter(Boolean);

const TARGET_TYPES = [
  ['PLATFORM_USERS', 'Users of the gateway'],
  ['EMAIL_ADDRESSES', 'Email addresses'],
  ['PHONE_NUMBERS', 'Phone numbers (SMS)'],
  ['WEBHOOK', 'Webhook'],
] as const;

const USERS_FILTERS = [
  ['TENANT_ADMINISTRATORS', 'Tenant administrators'],
  ['ALL_USERS', 'All users'],
  ['ORIGINATOR_ENTITY_OWNER_USERS', "Users of the device's owner"],
] as const;

function targetSummary(t: Target): string {
  const c = t.configuration;
  if (c.type === 'PLATFORM_USERS') return `Users: ${c.usersFilter?.type ?? ''}`;
  if (c.type === 'EMAIL_ADDRESSES') return `Email: ${c.emails?.join(', ')}`;
  if (c.type === 'PHONE_NUMBERS') return `SMS: ${c.phoneNumbers?.join(', ')}`;
  return `Webhook: ${c.method ?? 'POST'} ${c.url}`;
}

function Targets() {
  return (
    <CrudTab<Target>
      kind="target"
      title="Notification targets"
      columns={[{ title: 'Recipients', cell: targetSummary }]}
      Edit={TargetDialog}
    />
  );
}

function TargetDialog(props: { item?: Target; onClose: () => void; onSaved: () => void }) {
  const c = props.item?.configuration;
  const [type, setType] = useState<Target['configuration']['type']>(c?.type ?? 'PLATFORM_USERS');
  const toBody = (f: FormData) => {
    const configuration =
      type === 'PLATFORM_USERS'
        ? { type, usersFilter: { type: String(f.get('usersFilter')) } }
        : type === 'EMAIL_ADDRESSES'
          ? { type, emails: lines(f.get('emails')) }
          : type === 'PHONE_NUMBERS'
            ? { type, phoneNumbers: lines(f.get('phones')) }
            : { type, url: String(f.get('url')), method: String(f.get('method')) };
    return { configuration };
  };
  return (
    <EntityDialog kind="target" {...props} toBody={toBody}>
      <Select
        label="Type"
        name="type"
        options={TARGET_TYPES}
        value={type}
        onChange={(v) => setType(v as typeof type)}
      />
      {type === 'PLATFORM_USERS' && (
        <Select
          label="Users"
          name="usersFilter"
          options={USERS_FILTERS}
          initial={c?.usersFilter?.type}
        />
      )}
      {type === 'EMAIL_ADDRESSES' && (
        <label>
          Email addresses (one a line)
          <textarea name="emails" rows={3} required defaultValue={c?.emails?.join('\n')} />
        </label>
      )}
      {type === 'PHONE_NUMBERS' && (
        <label>
          Phone numbers (one a line)
          <textarea name="phones" rows={3} required defaultValue={c?.phoneNumbers?.join('\n')} />
        </label>
      )}
      {type === 'WEBHOOK' && (
        <>
          <Field label="URL" name="url" type="url" required defaultValue={c?.url} />
          <Select
            label="Method"
            name="method"
            options={[
              ['POST', 'POST'],
              ['PUT', 'PUT'],
            ]}
            initial={c?.method}
          />
        </>
      )}
    </EntityDialog>
  );
}

function Templates() {
  return (
    <CrudTab<Template>
      kind="template"
      title="Notification templates"
      columns={[
        { title: 'Type', cell: (t) => t.notificationType },
        {
          title: 'Methods',
          cell: (t) =>
            Object.entries(t.configuration.deliveryMethodsTemplates)
              .filter(([, m]) => m?.enabled)
              .map(([k]) => k)
              .join(', '),
        },
      ]}
      Edit={TemplateDialog}
    />
  );
}

function TemplateDialog(props: { item?: Template; onClose: () => void; onSaved: () => void }) {
  const t = props.item?.configuration.deliveryMethodsTemplates ?? {};
  const toBody = (f: FormData) => {
    const deliveryMethodsTemplates: Template['configuration']['deliveryMethodsTemplates'] = {};
    for (const m of METHODS) {
      if (f.get(`${m}.enabled`) !== 'on') continue;
      deliveryMethodsTemplates[m] = {
        enabled: true,
        subject: m === 'SMS' ? undefined : String(f.get(`${m}.subject`) ?? '') || null,
        body: String(f.get(`${m}.body`) ?? ''),
      };
    }
    return {
      notificationType: String(f.get('notificationType')),
      configuration: { deliveryMethodsTemplates },
    };
  };
  return (
    <EntityDialog kind="template" {...props} toBody={toBody}>
      <Select
        label="Notification type"
        name="notificationType"
        options={['ALARM', 'DEVICE_ACTIVITY', 'GENERAL'].map((n) => [n, n] as const)}
        initial={props.item?.notificationType}
      />
      <p class="muted">
        Placeholders: ${'{alarmType}'}, ${'{alarmSeverity}'}, ${'{alarmOriginatorName}'}, $
        {'{deviceName}'}, a key of the alarm's details …
      </p>
      {METHODS.map((m) => (
        <fieldset key={m} class="stack">
          <legend>{m}</legend>
          <label class="check">
            <input
              type="checkbox"
              name={`${m}.enabled`}
              defaultChecked={props.item ? t[m]?.enabled === true : m === 'WEB'}
            />
            Send by {m}
          </label>
          {m !== 'SMS' && (
            <Field
              label={`${m} subject`}
              name={`${m}.subject`}
              defaultValue={t[m]?.subject ?? ''}
            />
          )}
          <label>
            {m} body
            <textarea name={`${m}.body`} rows={2} defaultValue={t[m]?.body ?? ''} />
          </label>
        </fieldset>
      ))}
    </EntityDialog>
  );
}

function Rules() {
  return (
    <CrudTab<Rule>
      kind="rule"
      title="Notification rules"
      columns={[
        {
          title: 'Trigger',
          cell: (r) =>
            `${r.triggerType}: ${r.triggerConfig.notifyOn?.join(', ') ?? 'every comment'}`,
        },
        { title: 'Enabled', cell: (r) => (r.enabled ? 'Yes' : 'No') },
      ]}
      Edit={RuleDialog}
    />
  );
}

const TRIGGERS = [
  ['ALARM', 'Alarm'],
  ['ALARM_ASSIGNMENT', 'Alarm assignment'],
  ['ALARM_COMMENT', 'Alarm comment'],
  ['DEVICE_ACTIVITY', 'Device activity'],
] as const;

/** notifyOn choices by trigger (a trigger the page does not know keeps its stored JSON). */
const NOTIFY_ON: Partial<Record<string, readonly string[]>> = {
  ALARM: ['CREATED', 'SEVERITY_CHANGED', 'ACKNOWLEDGED', 'CLEARED'],
  ALARM_ASSIGNMENT: ['ASSIGNED', 'UNASSIGNED'],
  ALARM_COMMENT: [],
  DEVICE_ACTIVITY: ['ACTIVE', 'INACTIVE'],
};

function RuleDialog(props: { item?: Rule; onClose: () => void; onSaved: () => void }) {
  const r = props.item;
  const [trigger, setTrigger] = useState<Rule['triggerType']>(r?.triggerType ?? 'ALARM');
  const options = useLoad(
    () =>
      Promise.all([
        api<PageData<Template>>(`/api/notification/templates${qs({ pageSize: 1000, page: 0 })}`),
        api<PageData<Target>>(`/api/notification/targets${qs({ pageSize: 1000, page: 0 })}`),
      ]),
    [],
  );
  const [templates, targets] = options.data ?? [undefined, undefined];
  const chosen = new Set(r?.recipientsConfig.escalationTable?.['0'] ?? r?.recipientsConfig.targets);
  // The first level after 0: its delay (seconds) and targets; later levels are kept as stored.
  const table = r?.triggerType === 'ALARM' ? (r.recipientsConfig.escalationTable ?? {}) : {};
  const laterDelay = Object.keys(table)
    .map(Number)
    .filter((d) => d > 0)
    .sort((a, b) => a - b)[0];
  const later = new Set(laterDelay === undefined ? [] : table[String(laterDelay)]);
  const toBody = (f: FormData) => {
    // Fields the dialog does not show (later escalation levels, severity filters) are kept.
    const same = r?.triggerType === trigger;
    const ids = f.getAll('target').map(String);
    const alarmTypes = lines(f.get('alarmTypes'));
    const alarmRule = trigger !== 'DEVICE_ACTIVITY';
    const severities = f.getAll('severity').map(String);
    const clearOn = f.getAll('clearOn').map(String);
    const escalation: Record<string, string[]> = { ...(same ? table : {}) };
    if (laterDelay !== undefined) delete escalation[String(laterDelay)];
    const delay = Number(f.get('laterDelay') || 0);
    const laterIds = f.getAll('laterTarget').map(String);
    if (delay > 0 && laterIds.length) escalation[String(delay)] = laterIds;
    return {
      ...r,
      enabled: f.get('enabled') === 'on',
      templateId: { entityType: 'NOTIFICATION_TEMPLATE', id: String(f.get('template')) },
      triggerType: trigger,
      triggerConfig: {
        ...(same ? r.triggerConfig : {}),
        triggerType: trigger,
        ...((NOTIFY_ON[trigger] ?? []).length > 0
          ? { notifyOn: f.getAll('notifyOn').map(String) }
          : {}),
        ...(alarmRule ? { alarmTypes: alarmTypes.length ? alarmTypes : null } : {}),
        ...(trigger === 'ALARM'
          ? {
              // undefined (left out of the JSON) rather than null: no filter, no clear rule.
              alarmSeverities: severities.length ? severities : undefined,
              clearRule: clearOn.length ? { alarmStatuses: clearOn } : undefined,
            }
          : {}),
      },
      recipientsConfig:
        trigger === 'ALARM'
          ? {
              triggerType: trigger,
              escalationTable: { ...escalation, '0': ids },
            }
          : { triggerType: trigger, targets: ids },
    };
  };
  return (
    <EntityDialog kind="rule" {...props} toBody={toBody}>
      <label class="check">
        <input type="checkbox" name="enabled" defaultChecked={r?.enabled ?? true} />
        Enabled
      </label>
      <Select
        label="Trigger"
        options={TRIGGERS}
        value={trigger}
        onChange={(v) => setTrigger(v as Rule['triggerType'])}
      />
      {(NOTIFY_ON[trigger] ?? []).length > 0 && (
        <fieldset class="row">
          <legend>Notify on</legend>
          {(NOTIFY_ON[trigger] ?? []).map((n) => (
            <label key={n} class="check">
              <input
                type="checkbox"
                name="notifyOn"
                value={n}
                defaultChecked={
                  r?.triggerType === trigger
                    ? (r.triggerConfig.notifyOn ?? []).includes(n)
                    : n === (NOTIFY_ON[trigger] ?? [])[0]
                }
              />
              {n}
            </label>
          ))}
        </fieldset>
      )}
      {trigger !== 'DEVICE_ACTIVITY' && (
        <label>
          Alarm types (one a line; empty: every type)
          <textarea
            name="alarmTypes"
            rows={2}
            defaultValue={r?.triggerConfig.alarmTypes?.join('\n')}
          />
        </label>
      )}
      {trigger === 'ALARM' && (
        <>
          <CheckGroup
            legend="Severities (none checked: every severity)"
            name="severity"
            values={SEVERITIES}
            checked={r?.triggerConfig.alarmSeverities ?? []}
          />
          <CheckGroup
            legend="Stop escalating once the alarm is"
            name="clearOn"
            values={CLEAR_STATUSES}
            checked={r?.triggerConfig.clearRule?.alarmStatuses ?? []}
          />
        </>
      )}
      <Select
        label="Template"
        name="template"
        required
        options={templates?.data.map((t) => [t.id.id, t.name] as const) ?? []}
        initial={r?.templateId.id}
      />
      <fieldset class="stack">
        <legend>Send to</legend>
        {targets?.data.map((t) => (
          <label key={t.id.id} class="check">
            <input
              type="checkbox"
              name="target"
              value={t.id.id}
              defaultChecked={chosen.has(t.id.id)}
            />
            {t.name}
          </label>
        ))}
      </fieldset>
      {trigger === 'ALARM' && (
        <fieldset class="stack">
          <legend>Escalation</legend>
          <Field
            label="After (seconds; empty: no escalation)"
            name="laterDelay"
            type="number"
            min={1}
            defaultValue={laterDelay === undefined ? undefined : String(laterDelay)}
          />
          <CheckGroup
            legend="Also send to"
            name="laterTarget"
            values={targets?.data.map((t) => [t.id.id, t.name] as const) ?? []}
            checked={[...later]}
          />
        </fieldset>
      )}
    </EntityDialog>
  );
}

const SEVERITIES = ['CRITICAL', 'MAJOR', 'MINOR', 'WARNING', 'INDETERMINATE'] as const;
const CLEAR_STATUSES = ['ACK', 'CLEARED'] as const;

/** Check boxes of one form field: `values` are strings or `[value, text]` pairs. */
function CheckGroup(props: {
  legend: string;
  name: string;
  values: ReadonlyArray<string | readonly [string, string]>;
  checked: readonly string[];
}) {
  return (
    <fieldset class="row">
      <legend>{props.legend}</legend>
      {props.values.map((v) => {
        const [value, text] = typeof v === 'string' ? [v, v] : v;
        return (
          <label key={value} class="check">
            <input
              type="checkbox"
              name={props.name}
              value={value}
              defaultChecked={props.checked.includes(value)}
            />
            {text}
          </label>
        );
      })}
    </fieldset>
  );
}

const STATUSES = ['', 'PENDING', 'SENT', 'FAILED', 'CANCELLED'];

function Deliveries() {
  const [status, setStatus] = useState('');
  const list = usePagedList<Delivery>(
    (page) =>
      `/api/notification/deliveries${qs({ pageSize: 20, page, status: status || undefined })}`,
    [status],
  );
  return (
    <ListPage
      title="Delivery log"
      actions={
        <>
          <label>
            Status
            <select
              value={status}
              onChange={(e) => {
                setStatus(e.currentTarget.value);
                list.setPage(0);
              }}
            >
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {s || 'Any'}
                </option>
              ))}
            </select>
          </label>
          <BarButton label="Refresh" onClick={list.reload} />
        </>
      }
      label="Deliveries"
      list={list}
      rowKey={(d) => d.id}
      empty="No deliveries."
      columns={[
        { title: 'Created', wide: true, cell: (d) => formatTs(d.createdTime) },
        { title: 'Method', cell: (d) => d.method },
        { title: 'Recipient', cell: (d) => d.recipient },
        { title: 'Subject', wide: true, cell: (d) => d.subject },
        { title: 'Status', cell: (d) => d.status },
        { title: 'Attempts', cell: (d) => d.attempts },
        { title: 'Last error', wide: true, cell: (d) => d.lastError },
      ]}
    />
  );
}
