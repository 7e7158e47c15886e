import { useState } from 'preact/hooks';
import {
  BarButton,
  DeleteButton,
  EntityTable,
  Field,
  FormDialog,
  Select,
} from '../components/list.js';
import { Check, ErrorText, formatTs, Tabs, useAction, useLoad } from '../components/ui.js';
import { ApiError, api, type Id, type PageData, qs } from '../lib/api.js';
import { browserZone, fromZoned, NextRuns, timeZones, toZoned } from './scheduler-preview.js';
import { SettingsForm } from './settings-form.js';
import { RetentionSettingsForm } from './settings-retention.js';

/**
 * Settings of the tenant administrator (docs/notifications.md "System settings", docs/rules.md
 * "Scheduled jobs"): the SMTP server and the SMS provider, each with a test message, retention
 * (docs/telemetry.md "Retention settings") and the scheduler events.
 */

const TABS = ['mail', 'sms', 'retention', 'scheduler'] as const;
type Tab = (typeof TABS)[number];

export function SettingsPage() {
  const [tab, setTab] = useState<Tab>('mail');
  return (
    <section class="stack">
      <h1>Settings</h1>
      <Tabs
        label="Settings"
        tabs={TABS}
        tab={tab}
        onTab={setTab}
        names={{
          mail: 'Mail (SMTP)',
          sms: 'SMS',
          retention: 'Retention',
          scheduler: 'Scheduler events',
        }}
      />
      <div role="tabpanel" aria-label={tab} class="panel">
        {tab === 'mail' && <MailSettings />}
        {tab === 'sms' && <SmsSettings />}
        {tab === 'retention' && <RetentionSettingsForm />}
        {tab === 'scheduler' && <SchedulerEvents />}
      </div>
    </section>
  );
}

type Json = Record<string, unknown>;

/** The stored settings of `key`; an empty object while none are stored (404). */
function useSettings(key: 'mail' | 'sms') {
  return useLoad(
    () =>
      api<{ jsonValue: Json }>(`/api/admin/settings/${key}`)
        .then((s) => s.jsonValue)
        .catch((err: unknown) => {
          if (err instanceof ApiError && err.status === 404) return {} as Json;
          throw err;
        }),
    [key],
  );
}

function MailSettings() {
  const s = useSettings('mail');
  if (!s.data) return <ErrorText error={s.error} />;
  const v = s.data;
  const text = (k: string) => (v[k] === undefined || v[k] === null ? undefined : String(v[k]));
  return (
    <SettingsForm
      title="Mail"
      settingsKey="mail"
      testLabel="Send test mail"
      toJson={(f) => ({
        mailFrom: String(f.get('mailFrom')),
        smtpProtocol: String(f.get('smtpProtocol')),
        smtpHost: String(f.get('smtpHost')),
        smtpPort: Number(f.get('smtpPort')),
        timeout: Number(f.get('timeout')),
        enableTls: f.get('enableTls') === 'on',
        username: String(f.get('username') ?? '') || null,
        password: String(f.get('password') ?? '') || null,
      })}
      test={(jsonValue) =>
        api('/api/admin/settings/testMail', { body: { key: 'mail', jsonValue } })
      }
    >
      <Field
        label="Mail from"
        name="mailFrom"
        type="email"
        required
        defaultValue={text('mailFrom')}
      />
      <Select
        label="Protocol"
        name="smtpProtocol"
        options={SMTP_PROTOCOLS}
        initial={text('smtpProtocol')}
      />
      <Field label="SMTP host" name="smtpHost" required defaultValue={text('smtpHost')} />
      <Field
        label="SMTP port"
        name="smtpPort"
        type="number"
        min={1}
        max={65535}
        required
        defaultValue={text('smtpPort') ?? '25'}
      />
      <Field
        label="Timeout (ms)"
        name="timeout"
        type="number"
        min={100}
        defaultValue={text('timeout') ?? '10000'}
      />
      <label class="check">
        <input type="checkbox" name="enableTls" defaultChecked={v.enableTls === true} />
        STARTTLS required
      </label>
      <Field label="Username" name="username" autocomplete="off" defaultValue={text('username')} />
      <Field
        label="Password (empty: keep the stored one)"
        name="password"
        type="password"
        autocomplete="new-password"
      />
    </SettingsForm>
  );
}

const SMTP_PROTOCOLS = [
  ['smtp', 'SMTP'],
  ['smtps', 'SMTPS (TLS from the start)'],
] as const;
const HTTP_METHODS = [
  ['POST', 'POST'],
  ['PUT', 'PUT'],
  ['GET', 'GET'],
] as const;
const TIME_UNITS = [
  ['SECONDS', 'seconds'],
  ['MINUTES', 'minutes'],
  ['HOURS', 'hours'],
] as const;

const SMS_TYPES = [
  ['TWILIO', 'Twilio'],
  ['HTTP', 'HTTP request'],
  ['GSM_MODEM', 'GSM modem (serial port)'],
] as const;

function SmsSettings() {
  const s = useSettings('sms');
  const [type, setType] = useState<string | undefined>(undefined);
  if (!s.data) return <ErrorText error={s.error} />;
  const v = s.data;
  const kind = type ?? (typeof v.type === 'string' ? v.type : 'HTTP');
  const text = (k: string) =>
    v.type === kind && v[k] !== undefined && v[k] !== null ? String(v[k]) : undefined;
  const toJson = (f: FormData): Json => {
    const get = (k: string) => String(f.get(k) ?? '');
    if (kind === 'TWILIO')
      return {
        type: kind,
        accountSid: get('accountSid'),
        accountToken: get('accountToken'),
        numberFrom: get('numberFrom'),
      };
    if (kind === 'HTTP')
      return {
        type: kind,
        url: get('url'),
        method: get('method'),
        bodyTemplate: get('bodyTemplate'),
      };
    return {
      type: kind,
      port: get('port'),
      baudRate: Number(get('baudRate')),
      pin: get('pin') || null,
    };
  };
  return (
    <SettingsForm
      title="SMS"
      settingsKey="sms"
      testLabel="Send test SMS"
      toJson={toJson}
      test={(providerConfiguration, f) =>
        api('/api/admin/settings/testSms', {
          body: {
            providerConfiguration,
            numberTo: String(f.get('numberTo')),
            message: 'Test SMS from edge-gateway',
          },
        })
      }
    >
      <Select label="Provider" name="type" options={SMS_TYPES} value={kind} onChange={setType} />
      {kind === 'TWILIO' && (
        <>
          <Field label="Account SID" name="accountSid" required defaultValue={text('accountSid')} />
          <Field
            label="Account token"
            name="accountToken"
            type="password"
            required
            defaultValue={text('accountToken')}
          />
          <Field label="Number from" name="numberFrom" required defaultValue={text('numberFrom')} />
        </>
      )}
      {kind === 'HTTP' && (
        <>
          <Field label="URL" name="url" type="url" required defaultValue={text('url')} />
          <Select label="Method" name="method" options={HTTP_METHODS} initial={text('method')} />
          <label>
            Body template (${'{phoneNumber}'}, ${'{message}'})
            <textarea
              name="bodyTemplate"
              rows={2}
              defaultValue={text('bodyTemplate') ?? '{"to":"${phoneNumber}","text":"${message}"}'}
            />
          </label>
        </>
      )}
      {kind === 'GSM_MODEM' && (
        <>
          <Field
            label="Serial port"
            name="port"
            required
            defaultValue={text('port') ?? '/dev/ttyUSB2'}
          />
          <Field
            label="Baud rate"
            name="baudRate"
            type="number"
            defaultValue={text('baudRate') ?? '115200'}
          />
          <Field label="SIM PIN" name="pin" inputMode="numeric" defaultValue={text('pin')} />
        </>
      )}
      <Field label="Test SMS to (phone number)" name="numberTo" type="tel" />
    </SettingsForm>
  );
}

interface SchedulerEvent {
  id: Id;
  name: string;
  type: string;
  enabled?: boolean;
  createdTime?: number;
  version?: number;
  /** Ours, from the scheduler host: when the armed event runs next. */
  nextRun?: number | null;
  schedule: {
    timezone?: string;
    startTime?: number;
    cron?: string;
    repeat?: {
      type: string;
      repeatOn?: number[];
      repeatInterval?: number | null;
      timeUnit?: string | null;
      endsOn?: number | null;
    } | null;
  };
  configuration: {
    originatorId: { entityType: string; id: string };
    msgType: string;
    msgBody?: unknown;
    metadata?: Record<string, string>;
  };
}

function scheduleText(e: SchedulerEvent): string {
  const s = e.schedule;
  if (s.cron) return `cron ${s.cron}`;
  const at = formatTs(s.startTime);
  return s.repeat ? `${s.repeat.type.toLowerCase()} from ${at}` : `once at ${at}`;
}

/** The next run of each armed event, from the scheduler host (`GET /api/scheduler/jobs`). */
interface Jobs {
  jobs: Array<{ key: string; nextRun: number | null }>;
}

function SchedulerEvents() {
  const list = useLoad(
    () =>
      Promise.all([
        api<SchedulerEvent[]>('/api/schedulerEvents'),
        api<Jobs>('/api/scheduler/jobs'),
      ]).then(([events, jobs]) => {
        const next = new Map(jobs.jobs.map((j) => [j.key, j.nextRun]));
        return events.map((e) => ({ ...e, nextRun: next.get(e.id.id) ?? null }));
      }),
    [],
  );
  const [editing, setEditing] = useState<SchedulerEvent | 'new' | null>(null);
  const act = useAction();
  const setEnabled = (e: SchedulerEvent, enabled: boolean) =>
    void act
      .run(() => api('/api/schedulerEvent', { body: { ...e, nextRun: undefined, enabled } }))
      .then(list.reload);
  return (
    <div class="stack">
      <div class="bar">
        <h2>Scheduler events</h2>
        <BarButton primary label="Add scheduler event" onClick={() => setEditing('new')} />
      </div>
      <ErrorText error={list.error || act.error} />
      <EntityTable
        label="Scheduler events"
        rows={list.data}
        rowKey={(e) => e.id.id}
        empty="No scheduler events."
        columns={[
          { title: 'Name', cell: (e) => e.name },
          { title: 'Action', cell: (e) => e.configuration.msgType },
          { title: 'Schedule', cell: scheduleText },
          {
            title: 'Next run',
            cell: (e) => (e.nextRun ? formatTs(e.nextRun) : e.enabled === false ? '' : 'none'),
          },
          {
            title: 'Enabled',
            cell: (e) => (
              <input
                type="checkbox"
                checked={e.enabled !== false}
                aria-label={`Enabled: ${e.name}`}
                onChange={(ev) => setEnabled(e, ev.currentTarget.checked)}
              />
            ),
          },
          {
            title: 'Actions',
            class: 'actions',
            cell: (e) => (
              <>
                <button type="button" onClick={() => setEditing(e)}>
                  Edit
                </button>
                <DeleteButton
                  act={act}
                  what={`scheduler event ${e.name}`}
                  path={`/api/schedulerEvent/${e.id.id}`}
                  then={list.reload}
                />
              </>
            ),
          },
        ]}
      />
      {editing && (
        <SchedulerDialog
          event={editing === 'new' ? undefined : editing}
          onClose={() => setEditing(null)}
          onSaved={() => {
            setEditing(null);
            list.reload();
          }}
        />
      )}
    </div>
  );
}

const ACTIONS = [
  ['SHARED_SCOPE', 'Set shared attributes'],
  ['SERVER_SCOPE', 'Set server attributes'],
  ['RPC', 'Send a one-way RPC'],
] as const;

const REPEATS = [
  ['', 'Once'],
  ['DAILY', 'Daily'],
  ['WEEKLY', 'Weekly'],
  ['MONTHLY', 'Monthly'],
  ['YEARLY', 'Yearly'],
  ['TIMER', 'Every N seconds, minutes or hours'],
] as const;

/**
 * The schedule of the form's fields: a cron expression, or a start time (wall time in the chosen
 * time zone) with its repeat; `byCron` and `repeat` are the dialog's choices.
 */
function scheduleOf(f: FormData, byCron: boolean, repeat: string) {
  const timezone = String(f.get('timezone') ?? '').trim() || browserZone();
  if (byCron) return { timezone, cron: String(f.get('cron') ?? '').trim() };
  const startTime = fromZoned(String(f.get('start') ?? ''), timezone);
  if (Number.isNaN(startTime)) throw new Error('Choose a start time');
  const endsOn = String(f.get('endsOn') ?? '');
  return {
    timezone,
    startTime,
    repeat: repeat
      ? {
          type: repeat,
          repeatOn: repeat === 'WEEKLY' ? f.getAll('day').map(Number) : undefined,
          repeatInterval: repeat === 'TIMER' ? Number(f.get('interval')) : undefined,
          timeUnit: repeat === 'TIMER' ? String(f.get('timeUnit')) : undefined,
          endsOn: endsOn ? fromZoned(endsOn, timezone) : 0,
        }
      : null,
  };
}

function SchedulerDialog(props: {
  event?: SchedulerEvent;
  onClose: () => void;
  onSaved: () => void;
}) {
  const e = props.event;
  const rep = e?.schedule.repeat ?? null;
  const cfg = e?.configuration;
  const rpcEvent = cfg?.msgType === 'RPC_CALL_FROM_SERVER_TO_DEVICE';
  const devices = useLoad(
    () =>
      api<PageData<{ id: Id; name: string }>>(
        `/api/tenant/devices${qs({ pageSize: 1000, page: 0, sortProperty: 'name', sortOrder: 'ASC' })}`,
      ),
    [],
  );
  const [byCron, setByCron] = useState(Boolean(e?.schedule.cron));
  const [repeat, setRepeat] = useState(rep?.type ?? '');
  // Start and end are wall times in the time zone chosen when the dialog opened.
  const zone = e?.schedule.timezone ?? browserZone();
  const save = async (f: FormData) => {
    const action = String(f.get('action'));
    let msgBody: unknown;
    try {
      msgBody = JSON.parse(String(f.get('body')));
    } catch {
      throw new Error('The body is not JSON');
    }
    const rpc = action === 'RPC';
    await api('/api/schedulerEvent', {
      body: {
        ...(e && { id: e.id, version: e.version, enabled: e.enabled }),
        name: String(f.get('name')),
        type: rpc ? 'RPC_CALL' : 'UPDATE_ATTRIBUTES',
        schedule: scheduleOf(f, byCron, repeat),
        configuration: {
          originatorId: { entityType: 'DEVICE', id: String(f.get('device')) },
          msgType: rpc ? 'RPC_CALL_FROM_SERVER_TO_DEVICE' : 'POST_ATTRIBUTES_REQUEST',
          msgBody,
          metadata: rpc ? {} : { scope: action },
        },
      },
    });
    props.onSaved();
  };
  return (
    <FormDialog
      title={e ? `Edit scheduler event ${e.name}` : 'Add scheduler event'}
      label="Save"
      onClose={props.onClose}
      onSubmit={save}
    >
      {e && (
        <p>
          Next run: {e.nextRun ? formatTs(e.nextRun) : 'none'}
          {e.enabled === false && ' (disabled)'}
        </p>
      )}
      <Field label="Name" name="name" required defaultValue={e?.name} />
      {devices.data && (
        <Select
          label="Device"
          name="device"
          required
          options={devices.data.data.map((d) => [d.id.id, d.name] as const)}
          initial={cfg?.originatorId.id}
        />
      )}
      <Select
        label="Action"
        name="action"
        options={ACTIONS}
        initial={cfg && (rpcEvent ? 'RPC' : (cfg.metadata?.scope ?? 'SERVER_SCOPE'))}
      />
      <label>
        Body (JSON: attributes, or {'{"method", "params"}'} for an RPC)
        <textarea
          name="body"
          rows={3}
          required
          defaultValue={cfg ? JSON.stringify(cfg.msgBody ?? {}) : '{}'}
        />
      </label>
      <Field
        label="Time zone"
        name="timezone"
        list="time-zones"
        required
        defaultValue={zone}
        autocomplete="off"
      />
      <datalist id="time-zones">
        {timeZones().map((z) => (
          <option key={z} value={z} />
        ))}
      </datalist>
      <Check checked={byCron} onChange={setByCron} label="Schedule by cron expression" />
      {byCron ? (
        <Field
          label="Cron expression"
          name="cron"
          required
          placeholder="0 30 6 * * 1-5"
          defaultValue={e?.schedule.cron}
        />
      ) : (
        <>
          <Field
            label="Start"
            name="start"
            type="datetime-local"
            required
            defaultValue={toZoned(e?.schedule.startTime, zone)}
          />
          <Select
            label="Repeat"
            name="repeat"
            options={REPEATS}
            value={repeat}
            onChange={setRepeat}
          />
          {repeat === 'TIMER' && (
            <div class="row">
              <Field
                label="Every"
                name="interval"
                type="number"
                min={1}
                required
                defaultValue={String(rep?.repeatInterval ?? 1)}
              />
              <Select label="Unit" name="timeUnit" options={TIME_UNITS} initial={rep?.timeUnit} />
            </div>
          )}
          {repeat && (
            <Field
              label="Ends on (empty: never)"
              name="endsOn"
              type="datetime-local"
              defaultValue={toZoned(rep?.endsOn, zone)}
            />
          )}
          {repeat === 'WEEKLY' && (
            <fieldset class="row">
              <legend>Days</legend>
              {['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'].map((d, i) => (
                <label key={d} class="check">
                  <input
                    type="checkbox"
                    name="day"
                    value={i}
                    defaultChecked={rep?.repeatOn?.includes(i)}
                  />
                  {d}
                </label>
              ))}
            </fieldset>
          )}
        </>
      )}
      <NextRuns scheduleOf={(f) => scheduleOf(f, byCron, repeat)} />
    </FormDialog>
  );
}
