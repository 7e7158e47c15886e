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
import {
  IdSelect,
  lines,
  type Rule,
  RuleFields,
  TRIGGERS,
  useRuleDraft,
} from './notification-rule.js';

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
    usersFilter?: { type: string; customerId?: string; usersIds?: string[] };
    emails?: string[];
    phoneNumbers?: string[];
    url?: string;
    method?: string;
  };
}

/** A template's type: a rule trigger's, or GENERAL (ad-hoc requests). */
const NOTIFICATION_TYPES = [...TRIGGERS.map(([t]) => t), 'GENERAL'] as const;

type Method = 'WEB' | 'EMAIL' | 'SMS' | 'WEBHOOK';
const METHODS: Method[] = ['WEB', 'EMAIL', 'SMS', 'WEBHOOK'];

interface Template {
  id: Id;
  name: string;
  notificationType: string;
  configuration: {
    deliveryMethodsTemplates: Partial<
      Record<Method, { enabled: boolean; subject?: string | null; body: string }>
    >;
  };
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

const byName = (page: number, pageSize = 20) =>
  qs({ pageSize, page, sortProperty: 'name', sortOrder: 'ASC' });

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
  ['CUSTOMER_USERS', 'Users of a customer'],
  ['USER_LIST', 'Chosen users'],
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
  const [users, setUsers] = useState(c?.usersFilter?.type ?? 'TENANT_ADMINISTRATORS');
  const [userIds, setUserIds] = useState(c?.usersFilter?.usersIds ?? []);
  const choices = useLoad(
    () =>
      users === 'CUSTOMER_USERS'
        ? api<PageData<{ id: Id; title: string }>>(
            `/api/customers${qs({ pageSize: 1000, page: 0, sortProperty: 'title', sortOrder: 'ASC' })}`,
          ).then((p) => p.data.map((x) => [x.id.id, x.title] as const))
        : users === 'USER_LIST'
          ? api<PageData<{ id: Id; email: string }>>(
              `/api/users${qs({ pageSize: 1000, page: 0, sortProperty: 'email', sortOrder: 'ASC' })}`,
            ).then((p) => p.data.map((x) => [x.id.id, x.email] as const))
          : Promise.resolve([]),
    [users],
  );
  const toBody = (f: FormData) => {
    // Fields the dialog does not show (headers, description, ...) are kept while the type is.
    const kept = c?.type === type ? c : {};
    const filter = c?.usersFilter?.type === users ? c.usersFilter : {};
    const fields =
      type === 'PLATFORM_USERS'
        ? {
            usersFilter: {
              ...filter,
              type: users,
              ...(users === 'CUSTOMER_USERS' && { customerId: String(f.get('customerId')) }),
              ...(users === 'USER_LIST' && { usersIds: userIds }),
            },
          }
        : type === 'EMAIL_ADDRESSES'
          ? { emails: lines(f.get('emails')) }
          : type === 'PHONE_NUMBERS'
            ? { phoneNumbers: lines(f.get('phones')) }
            : { url: String(f.get('url')), method: String(f.get('method')) };
    return { configuration: { ...kept, type, ...fields } };
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
        <>
          <Select label="Users" options={USERS_FILTERS} value={users} onChange={setUsers} />
          {users === 'CUSTOMER_USERS' && choices.data && (
            <Select
              label="Customer"
              name="customerId"
              required
              options={choices.data}
              initial={c?.usersFilter?.customerId}
            />
          )}
          {users === 'USER_LIST' && (
            <IdSelect
              label="Chosen users"
              options={choices.data}
              value={userIds}
              onChange={setUserIds}
            />
          )}
        </>
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

const ALARM_PLACEHOLDERS = [
  'alarmType',
  'alarmSeverity',
  'alarmStatus',
  'alarmId',
  'alarmOriginatorName',
  'alarmOriginatorEntityType',
  'alarmOriginatorId',
];

/** The placeholders a template of each type can use (besides the recipient's). */
const PLACEHOLDERS: Partial<Record<string, string[]>> = {
  ALARM: [...ALARM_PLACEHOLDERS, 'action'],
  ALARM_ASSIGNMENT: [
    ...ALARM_PLACEHOLDERS,
    'action',
    'assigneeEmail',
    'assigneeFirstName',
    'assigneeLastName',
    'assigneeId',
  ],
  ALARM_COMMENT: [
    ...ALARM_PLACEHOLDERS,
    'action',
    'comment',
    'userEmail',
    'userFirstName',
    'userLastName',
  ],
  DEVICE_ACTIVITY: ['deviceName', 'deviceType', 'deviceId', 'eventType'],
  ENTITY_ACTION: ['entityType', 'entityId', 'entityName', 'actionType', 'deviceType'],
  EDGE_CONNECTION: ['eventType', 'url', 'error'],
};

function TemplateDialog(props: { item?: Template; onClose: () => void; onSaved: () => void }) {
  const t = props.item?.configuration.deliveryMethodsTemplates ?? {};
  const [type, setType] = useState(props.item?.notificationType ?? 'ALARM');
  const toBody = (f: FormData) => {
    const deliveryMethodsTemplates: Template['configuration']['deliveryMethodsTemplates'] = {};
    for (const m of METHODS) {
      const enabled = f.get(`${m}.enabled`) === 'on';
      // A method left off stays as stored (or absent); other keys of a method (method,
      // additionalConfig) are kept.
      if (!enabled) {
        if (t[m]) deliveryMethodsTemplates[m] = { ...t[m], enabled: false };
        continue;
      }
      const subject = String(f.get(`${m}.subject`) ?? '');
      deliveryMethodsTemplates[m] = {
        ...t[m],
        enabled: true,
        subject:
          m === 'SMS' ? t[m]?.subject : subject || (t[m]?.subject == null ? t[m]?.subject : null),
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
        options={NOTIFICATION_TYPES.map((n) => [n, n] as const)}
        value={type}
        onChange={setType}
      />
      <p class="muted">
        Placeholders (docs/notifications.md):{' '}
        {[
          ...(PLACEHOLDERS[type] ?? []),
          'recipientEmail',
          'recipientFirstName',
          'recipientLastName',
        ]
          .map((p) => `\${${p}}`)
          .join(', ')}
        {ALARM_PLACEHOLDERS.some((p) => PLACEHOLDERS[type]?.includes(p)) &&
          ", a key of the alarm's details"}
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
        { title: 'Trigger', cell: ruleSummary },
        { title: 'Enabled', cell: (r) => (r.enabled ? 'Yes' : 'No') },
      ]}
      Edit={RuleDialog}
    />
  );
}

/** The trigger and what it notifies on, for the rules table. */
function ruleSummary(r: Rule): string {
  const c = r.triggerConfig;
  const on =
    c.notifyOn?.join(', ') ??
    (r.triggerType === 'ENTITY_ACTION'
      ? (['created', 'updated', 'deleted'] as const).filter((k) => c[k] === true).join(', ')
      : 'every comment');
  return `${r.triggerType}: ${on}`;
}

function RuleDialog(props: { item?: Rule; onClose: () => void; onSaved: () => void }) {
  const draft = useRuleDraft(props.item);
  const options = useLoad(
    () =>
      Promise.all([
        api<PageData<Template>>(`/api/notification/templates${byName(0, 1000)}`),
        api<PageData<Target>>(`/api/notification/targets${byName(0, 1000)}`),
      ]),
    [],
  );
  return (
    <EntityDialog kind="rule" {...props} toBody={draft.body}>
      <RuleFields
        draft={draft}
        templates={options.data?.[0].data}
        targets={options.data?.[1].data}
      />
    </EntityDialog>
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
