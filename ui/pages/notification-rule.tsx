import { useState } from 'preact/hooks';
import { Field, Select } from '../components/list.js';
import { useLoad } from '../components/ui.js';
import { api, type Id, type PageData, qs } from '../lib/api.js';

/**
 * The notification rule editor (docs/notifications.md "Rules"): every trigger the REST API takes
 * and every option of it, and the recipients (any number of escalation levels for alarm rules),
 * without JSON typing. The dialog edits a copy of the stored rule, so a field it does not show,
 * and a rule saved unchanged, go back exactly as they came.
 */

export const TRIGGERS = [
  ['ALARM', 'Alarm'],
  ['ALARM_ASSIGNMENT', 'Alarm assignment'],
  ['ALARM_COMMENT', 'Alarm comment'],
  ['DEVICE_ACTIVITY', 'Device activity'],
  ['ENTITY_ACTION', 'Device created, updated or deleted'],
  ['EDGE_CONNECTION', 'Link to the cloud'],
] as const;
export type TriggerType = (typeof TRIGGERS)[number][0];

export interface Rule {
  id: Id;
  name: string;
  enabled: boolean;
  templateId?: Id;
  triggerType: TriggerType;
  triggerConfig: TriggerConfig;
  recipientsConfig: {
    triggerType?: string;
    escalationTable?: Record<string, string[]>;
    targets?: string[];
  };
  additionalConfig?: { description?: string | null } | null;
}

interface TriggerConfig {
  triggerType: TriggerType;
  notifyOn?: string[];
  alarmTypes?: string[] | null;
  alarmSeverities?: string[] | null;
  alarmStatuses?: string[] | null;
  clearRule?: { alarmStatuses?: string[] } | null;
  onlyUserComments?: boolean | null;
  notifyOnCommentUpdate?: boolean | null;
  devices?: string[] | null;
  deviceProfiles?: string[] | null;
  entityTypes?: string[] | null;
  created?: boolean | null;
  updated?: boolean | null;
  deleted?: boolean | null;
  [key: string]: unknown;
}

/** notifyOn choices by trigger (ALARM_COMMENT and ENTITY_ACTION have none). */
const NOTIFY_ON: Record<TriggerType, readonly string[]> = {
  ALARM: ['CREATED', 'SEVERITY_CHANGED', 'ACKNOWLEDGED', 'CLEARED'],
  ALARM_ASSIGNMENT: ['ASSIGNED', 'UNASSIGNED'],
  ALARM_COMMENT: [],
  DEVICE_ACTIVITY: ['ACTIVE', 'INACTIVE'],
  ENTITY_ACTION: [],
  EDGE_CONNECTION: ['CONNECTED', 'DISCONNECTED'],
};
const ALARM_TRIGGERS: readonly string[] = ['ALARM', 'ALARM_ASSIGNMENT', 'ALARM_COMMENT'];
const SEVERITIES = ['CRITICAL', 'MAJOR', 'MINOR', 'WARNING', 'INDETERMINATE'] as const;
/** ThingsBoard's alarm search statuses (clear rule, status filters). */
const STATUSES = ['ANY', 'ACTIVE', 'CLEARED', 'ACK', 'UNACK'] as const;

/** The trigger configuration a new rule of `type` starts with. */
function newTrigger(type: TriggerType): TriggerConfig {
  const notifyOn = NOTIFY_ON[type].length > 0 ? { notifyOn: [NOTIFY_ON[type][0]] } : {};
  if (type === 'ENTITY_ACTION')
    return {
      triggerType: type,
      entityTypes: ['DEVICE'],
      created: true,
      updated: false,
      deleted: false,
    };
  return {
    triggerType: type,
    ...notifyOn,
    ...(ALARM_TRIGGERS.includes(type) ? { alarmTypes: null } : {}),
  };
}

/** A rule being edited (a new one has no id yet). */
type Draft = Omit<Rule, 'id'> & { id?: Id };

/** A rule's recipients as levels: `[delay in seconds as stored, targets]`, by delay. */
type Level = { delay: string; targets: string[] };

function levelsOf(rule: Draft): Level[] {
  const r = rule.recipientsConfig;
  if (rule.triggerType !== 'ALARM') return [{ delay: '0', targets: r.targets ?? [] }];
  const table = r.escalationTable ?? {};
  const levels = Object.entries(table)
    .map(([delay, targets]) => ({ delay, targets }))
    .sort((a, b) => Number(a.delay) - Number(b.delay));
  return levels.length ? levels : [{ delay: '0', targets: [] }];
}

/** Levels back into ThingsBoard's recipients JSON (an escalation table for alarm rules). */
function recipientsOf(rule: Draft, levels: Level[]): Rule['recipientsConfig'] {
  const base = { ...rule.recipientsConfig, triggerType: rule.triggerType };
  if (rule.triggerType !== 'ALARM') {
    const { escalationTable: _, ...rest } = base;
    return { ...rest, targets: levels[0]?.targets ?? [] };
  }
  const table: Record<string, string[]> = {};
  for (const [i, l] of levels.entries()) {
    const delay = l.delay.trim();
    if (!/^\d+$/.test(delay))
      throw new Error(`Escalation level ${i + 1}: the delay is a whole number of seconds`);
    if (table[delay] || Object.keys(table).some((d) => Number(d) === Number(delay)))
      throw new Error(`Two escalation levels have the delay ${delay} s`);
    table[delay] = l.targets;
  }
  const { targets: _, ...rest } = base;
  return { ...rest, escalationTable: table };
}

/** The rule as the dialog saves it (fields beyond id and name: EntityDialog adds those). */
export function useRuleDraft(item: Rule | undefined) {
  const [rule, setRule] = useState<Draft>(
    () =>
      (item && (JSON.parse(JSON.stringify(item)) as Rule)) ?? {
        name: '',
        enabled: true,
        triggerType: 'ALARM',
        triggerConfig: newTrigger('ALARM'),
        recipientsConfig: { triggerType: 'ALARM', escalationTable: { '0': [] } },
      },
  );
  const [levels, setLevels] = useState<Level[]>(() => levelsOf(rule));
  const setTrigger = (type: TriggerType) => {
    const stored = item?.triggerType === type;
    setRule((r) => ({
      ...r,
      triggerType: type,
      triggerConfig: stored
        ? (JSON.parse(JSON.stringify(item.triggerConfig)) as TriggerConfig)
        : newTrigger(type),
    }));
    // Leaving alarm rules keeps the first level's targets; back to the stored trigger, its levels.
    setLevels((ls) => (stored ? levelsOf(item) : [{ delay: '0', targets: ls[0]?.targets ?? [] }]));
  };
  const patch = (p: Partial<TriggerConfig>) =>
    setRule((r) => ({ ...r, triggerConfig: { ...r.triggerConfig, ...p } }));
  const body = (): Record<string, unknown> => {
    const { id: _, name: __, ...rest } = rule;
    return { ...rest, recipientsConfig: recipientsOf(rule, levels) };
  };
  return { rule, setRule, setTrigger, patch, levels, setLevels, body };
}

/** The rule's fields (everything but its name): trigger, its options, template, recipients. */
export function RuleFields(props: {
  draft: ReturnType<typeof useRuleDraft>;
  templates: Array<{ id: Id; name: string; notificationType: string }> | undefined;
  targets: Array<{ id: Id; name: string }> | undefined;
}) {
  const { rule, setRule, setTrigger, patch, levels, setLevels } = props.draft;
  const c = rule.triggerConfig;
  const type = rule.triggerType;
  const targetOptions = props.targets?.map((t) => [t.id.id, t.name] as const) ?? [];
  const activity = type === 'DEVICE_ACTIVITY';
  const devices = useLoad(
    () =>
      activity
        ? Promise.all([
            api<PageData<{ id: Id; name: string }>>(
              `/api/tenant/devices${qs({ pageSize: 1000, page: 0, sortProperty: 'name', sortOrder: 'ASC' })}`,
            ),
            api<PageData<{ id: Id; name: string }>>(
              `/api/deviceProfiles${qs({ pageSize: 1000, page: 0, sortProperty: 'name', sortOrder: 'ASC' })}`,
            ),
          ])
        : Promise.resolve(undefined),
    [activity],
  );
  const setLevel = (i: number, l: Partial<Level>) =>
    setLevels((ls) => ls.map((x, j) => (j === i ? { ...x, ...l } : x)));
  return (
    <>
      <label class="check">
        <input
          type="checkbox"
          checked={rule.enabled}
          onChange={(e) => setRule((r) => ({ ...r, enabled: e.currentTarget.checked }))}
        />
        Enabled
      </label>
      <Select
        label="Trigger"
        options={TRIGGERS}
        value={type}
        onChange={(v) => setTrigger(v as TriggerType)}
      />
      {NOTIFY_ON[type].length > 0 && (
        <Checks
          legend="Notify on"
          values={NOTIFY_ON[type]}
          checked={c.notifyOn}
          onChange={(v) => patch({ notifyOn: v })}
        />
      )}
      {ALARM_TRIGGERS.includes(type) && (
        <>
          <label>
            Alarm types (one a line; empty: every type)
            <textarea
              rows={2}
              value={c.alarmTypes?.join('\n') ?? ''}
              onInput={(e) => {
                const v = lines(e.currentTarget.value);
                patch({ alarmTypes: v.length ? v : null });
              }}
            />
          </label>
          <Checks
            legend="Severities (none checked: every severity)"
            values={SEVERITIES}
            checked={c.alarmSeverities}
            onChange={(v) => patch({ alarmSeverities: v.length ? v : undefined })}
          />
        </>
      )}
      {type === 'ALARM' && (
        <Checks
          legend="Stop escalating once the alarm is"
          values={STATUSES}
          checked={c.clearRule?.alarmStatuses}
          onChange={(v) =>
            patch({ clearRule: v.length ? { ...c.clearRule, alarmStatuses: v } : undefined })
          }
        />
      )}
      {(type === 'ALARM_ASSIGNMENT' || type === 'ALARM_COMMENT') && (
        <Checks
          legend="Alarm statuses (none checked: any status)"
          values={STATUSES}
          checked={c.alarmStatuses}
          onChange={(v) => patch({ alarmStatuses: v.length ? v : undefined })}
        />
      )}
      {type === 'ALARM_COMMENT' && (
        <>
          <Flag
            label="Only users' comments (not the gateway's: acknowledged, cleared, assigned)"
            value={c.onlyUserComments}
            onChange={(v) => patch({ onlyUserComments: v })}
          />
          <Flag
            label="Also when a comment is edited"
            value={c.notifyOnCommentUpdate}
            onChange={(v) => patch({ notifyOnCommentUpdate: v })}
          />
        </>
      )}
      {activity && (
        <>
          <IdSelect
            label="Devices (none selected: every device)"
            options={devices.data?.[0].data.map((d) => [d.id.id, d.name] as const)}
            value={c.devices}
            onChange={(v) => patch({ devices: v.length ? v : undefined })}
          />
          <IdSelect
            label="Device profiles (none selected: every profile)"
            options={devices.data?.[1].data.map((d) => [d.id.id, d.name] as const)}
            value={c.deviceProfiles}
            onChange={(v) => patch({ deviceProfiles: v.length ? v : undefined })}
          />
        </>
      )}
      {type === 'ENTITY_ACTION' && (
        <fieldset class="row">
          <legend>Notify when a device is</legend>
          {(['created', 'updated', 'deleted'] as const).map((k) => (
            <Flag key={k} label={k} value={c[k]} onChange={(v) => patch({ [k]: v })} />
          ))}
        </fieldset>
      )}
      <Select
        label="Template"
        required
        options={[
          ['', 'Choose a template'],
          ...(props.templates?.map((t) => [t.id.id, t.name] as const) ?? []),
        ]}
        value={rule.templateId?.id ?? ''}
        onChange={(v) =>
          setRule((r) => ({ ...r, templateId: { entityType: 'NOTIFICATION_TEMPLATE', id: v } }))
        }
      />
      {levels.map((l, i) => (
        <fieldset key={i} class="stack">
          <legend>{i === 0 ? 'Send to' : `Escalation level ${i + 1}`}</legend>
          {(i > 0 || l.delay !== '0') && (
            <Field
              label={`Level ${i + 1}: after (seconds)`}
              name={`delay${i}`}
              type="number"
              min={i === 0 ? 0 : 1}
              required
              value={l.delay}
              onInput={(e) => setLevel(i, { delay: e.currentTarget.value })}
            />
          )}
          <Checks
            legend={i === 0 ? undefined : `Level ${i + 1}: send to`}
            values={targetOptions}
            checked={l.targets}
            onChange={(v) => setLevel(i, { targets: v })}
          />
          {i > 0 && (
            <button type="button" onClick={() => setLevels((ls) => ls.filter((_, j) => j !== i))}>
              Remove level {i + 1}
            </button>
          )}
        </fieldset>
      ))}
      {type === 'ALARM' && (
        <button
          type="button"
          onClick={() =>
            setLevels((ls) => {
              const last = Math.max(0, ...ls.map((x) => Number(x.delay) || 0));
              return [...ls, { delay: String(last + 300), targets: [] }];
            })
          }
        >
          Add escalation level
        </button>
      )}
      <label>
        Description
        <textarea
          rows={2}
          value={rule.additionalConfig?.description ?? ''}
          onInput={(e) => {
            const description = e.currentTarget.value;
            setRule((r) => ({ ...r, additionalConfig: { ...r.additionalConfig, description } }));
          }}
        />
      </label>
    </>
  );
}

/** Lines of a textarea, trimmed, without empty ones. */
export const lines = (v: FormDataEntryValue | null) =>
  String(v ?? '')
    .split(/[\n,]/)
    .map((s) => s.trim())
    .filter(Boolean);

/**
 * Controlled check boxes of a list of strings: `values` are strings or `[value, text]` pairs; a
 * change keeps the stored order of what stays checked and appends what is checked anew. Without
 * a legend the boxes go straight into the enclosing fieldset.
 */
function Checks(props: {
  legend?: string;
  values: ReadonlyArray<string | readonly [string, string]>;
  checked: readonly string[] | null | undefined;
  onChange: (v: string[]) => void;
}) {
  const checked = props.checked ?? [];
  const boxes = props.values.map((v) => {
    const [value, text] = typeof v === 'string' ? [v, v] : v;
    return (
      <label key={value} class="check">
        <input
          type="checkbox"
          checked={checked.includes(value)}
          onChange={(e) =>
            props.onChange(
              e.currentTarget.checked ? [...checked, value] : checked.filter((x) => x !== value),
            )
          }
        />
        {text}
      </label>
    );
  });
  if (props.legend === undefined) return <div class="row">{boxes}</div>;
  return (
    <fieldset class="row">
      <legend>{props.legend}</legend>
      {boxes}
    </fieldset>
  );
}

/** One boolean option; shown unchecked while unset (null or absent stays so until changed). */
function Flag(props: {
  label: string;
  value: boolean | null | undefined;
  onChange: (v: boolean) => void;
}) {
  return (
    <label class="check">
      <input
        type="checkbox"
        checked={props.value === true}
        onChange={(e) => props.onChange(e.currentTarget.checked)}
      />
      {props.label}
    </label>
  );
}

/**
 * A multiple select of entity ids by name; ids not among `options` (not loaded, or gone) stay
 * chosen and are shown as such. A change keeps the stored order of what stays chosen.
 */
export function IdSelect(props: {
  label: string;
  options: ReadonlyArray<readonly [string, string]> | undefined;
  value: string[] | null | undefined;
  onChange: (v: string[]) => void;
}) {
  const chosen = props.value ?? [];
  const known = new Set((props.options ?? []).map(([id]) => id));
  const all = [
    ...(props.options ?? []),
    ...chosen.filter((id) => !known.has(id)).map((id) => [id, `(not found: ${id})`] as const),
  ];
  return (
    <label>
      {props.label}
      <select
        multiple
        size={Math.min(6, Math.max(3, all.length))}
        onChange={(e) => {
          const sel = Array.from(e.currentTarget.selectedOptions).map((o) => o.value);
          const kept = chosen.filter((id) => sel.includes(id));
          props.onChange([...kept, ...sel.filter((id) => !kept.includes(id))]);
        }}
      >
        {all.map(([id, name]) => (
          <option key={id} value={id} selected={chosen.includes(id)}>
            {name}
          </option>
        ))}
      </select>
    </label>
  );
}
