import { useState } from 'preact/hooks';
import { BarButton, Field, FormDialog, ListPage, usePagedList } from '../components/list.js';
import { Check, ErrorText, useAction, useLoad } from '../components/ui.js';
import { api, type Id, qs } from '../lib/api.js';
import { Link, navigate } from '../lib/router.js';

/**
 * Device profiles and their alarm rules (platform.md §1): an editor of forms (severity, key,
 * value type, operation, static or dynamic threshold, SIMPLE/DURATION/REPEATING, schedule, clear
 * rule), and a JSON view of the alarms for experts.
 */

interface Profile {
  id?: Id;
  name: string;
  description?: string | null;
  default?: boolean;
  type?: string;
  transportType?: string;
  profileData: { alarms?: AlarmDef[] | null } & Record<string, unknown>;
  [k: string]: unknown;
}

interface PredicateValue {
  defaultValue: unknown;
  userValue?: unknown;
  dynamicValue: { sourceType: string; sourceAttribute: string; inherit?: boolean } | null;
}

interface Predicate {
  type: 'NUMERIC' | 'STRING' | 'BOOLEAN' | 'COMPLEX';
  operation: string;
  value?: PredicateValue;
  ignoreCase?: boolean;
  predicates?: Predicate[];
}

interface Filter {
  key: { type: string; key: string };
  valueType: string;
  value: unknown;
  predicate: Predicate;
}

interface Spec {
  type: 'SIMPLE' | 'DURATION' | 'REPEATING';
  unit?: string;
  predicate?: PredicateValue;
}

interface Schedule {
  type: 'ANY_TIME' | 'SPECIFIC_TIME' | 'CUSTOM';
  timezone?: string;
  daysOfWeek?: number[];
  startsOn?: number;
  endsOn?: number;
  items?: unknown[];
  dynamicValue?: unknown;
}

interface Rule {
  condition: { condition: Filter[]; spec?: Spec };
  schedule: Schedule | null;
  alarmDetails: string | null;
  dashboardId?: unknown;
}

interface AlarmDef {
  id: string;
  alarmType: string;
  createRules: Record<string, Rule>;
  clearRule: Rule | null;
  propagate: boolean;
  propagateToOwner: boolean;
  propagateToTenant: boolean;
  propagateRelationTypes: string[] | null;
}

const SEVERITIES = ['CRITICAL', 'MAJOR', 'MINOR', 'WARNING', 'INDETERMINATE'];
const KEY_TYPES: Array<[string, string]> = [
  ['TIME_SERIES', 'Time series'],
  ['ATTRIBUTE', 'Attribute'],
  ['ENTITY_FIELD', 'Entity field'],
  ['CONSTANT', 'Constant'],
];
const VALUE_TYPES = ['NUMERIC', 'STRING', 'BOOLEAN', 'DATE_TIME'];
const OPERATIONS: Record<string, Array<[string, string]>> = {
  NUMERIC: [
    ['GREATER', '>'],
    ['GREATER_OR_EQUAL', '≥'],
    ['LESS', '<'],
    ['LESS_OR_EQUAL', '≤'],
    ['EQUAL', '='],
    ['NOT_EQUAL', '≠'],
  ],
  STRING: [
    ['EQUAL', 'equals'],
    ['NOT_EQUAL', 'not equals'],
    ['STARTS_WITH', 'starts with'],
    ['ENDS_WITH', 'ends with'],
    ['CONTAINS', 'contains'],
    ['NOT_CONTAINS', 'does not contain'],
    ['IN', 'in list'],
    ['NOT_IN', 'not in list'],
  ],
  BOOLEAN: [
    ['EQUAL', 'equals'],
    ['NOT_EQUAL', 'not equals'],
  ],
};
const SOURCES: Array<[string, string]> = [
  ['', 'Static value'],
  ['CURRENT_DEVICE', 'Device attribute'],
  ['CURRENT_CUSTOMER', 'Customer attribute'],
  ['CURRENT_TENANT', 'Tenant attribute'],
];
const UNITS = ['SECONDS', 'MINUTES', 'HOURS', 'DAYS'];
const DAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];

const predicateType = (valueType: string): Predicate['type'] =>
  valueType === 'STRING' ? 'STRING' : valueType === 'BOOLEAN' ? 'BOOLEAN' : 'NUMERIC';

function newFilter(): Filter {
  return {
    key: { type: 'TIME_SERIES', key: '' },
    valueType: 'NUMERIC',
    value: null,
    predicate: {
      type: 'NUMERIC',
      operation: 'GREATER',
      value: { defaultValue: 0, userValue: null, dynamicValue: null },
    },
  };
}

const newRule = (): Rule => ({
  condition: { condition: [newFilter()], spec: { type: 'SIMPLE' } },
  schedule: null,
  alarmDetails: null,
});

function newAlarm(): AlarmDef {
  return {
    id: crypto.randomUUID?.() ?? String(Date.now()),
    alarmType: 'New alarm',
    createRules: { CRITICAL: newRule() },
    clearRule: null,
    propagate: false,
    propagateToOwner: false,
    propagateToTenant: false,
    propagateRelationTypes: null,
  };
}

export function ProfilesPage() {
  const [creating, setCreating] = useState(false);
  const list = usePagedList<Profile>(
    (page) =>
      `/api/deviceProfiles${qs({ pageSize: 20, page, sortProperty: 'name', sortOrder: 'ASC' })}`,
  );
  return (
    <ListPage
      title="Device profiles"
      actions={<BarButton primary label="Add profile" onClick={() => setCreating(true)} />}
      label="Device profiles"
      list={list}
      rowKey={(p) => p.id?.id ?? p.name}
      columns={[
        { title: 'Name', cell: (p) => <Link href={`/profiles/${p.id?.id}`}>{p.name}</Link> },
        { title: 'Alarm rules', cell: (p) => p.profileData?.alarms?.length ?? 0 },
        { title: 'Transport', wide: true, cell: (p) => p.transportType },
        { title: 'Default', cell: (p) => (p.default ? 'Yes' : '') },
      ]}
    >
      {creating && (
        <FormDialog
          title="Add profile"
          label="Create"
          onClose={() => setCreating(false)}
          onSubmit={async (f) => {
            const p = await api<Profile>('/api/deviceProfile', {
              body: {
                name: String(f.get('name')),
                type: 'DEFAULT',
                transportType: 'DEFAULT',
                profileData: { alarms: [] },
              },
            });
            navigate(`/profiles/${p.id?.id}`);
          }}
        >
          <Field label="Name" name="name" required />
        </FormDialog>
      )}
    </ListPage>
  );
}

export function ProfilePage(props: { params: Record<string, string> }) {
  const id = props.params.id;
  const loaded = useLoad(() => api<Profile>(`/api/deviceProfile/${id}`), [id]);
  const [draft, setDraft] = useState<Profile | null>(null);
  const [json, setJson] = useState<string | null>(null);
  const [saved, setSaved] = useState('');
  const save = useAction();
  const profile = draft ?? loaded.data;
  if (!profile) return <ErrorText error={loaded.error || undefined} />;
  const alarms = profile.profileData.alarms ?? [];
  const setAlarms = (next: AlarmDef[]) => {
    setSaved('');
    setDraft({ ...profile, profileData: { ...profile.profileData, alarms: next } });
  };
  const doSave = () => {
    let toSave = profile;
    if (json !== null) {
      try {
        toSave = { ...profile, profileData: { ...profile.profileData, alarms: JSON.parse(json) } };
      } catch (err) {
        save.setError(`The JSON does not parse: ${(err as Error).message}`);
        return;
      }
    }
    void save.run(async () => {
      const p = await api<Profile>('/api/deviceProfile', { body: toSave });
      setDraft(p);
      setJson(null);
      setSaved('Saved');
    });
  };
  return (
    <section class="stack">
      <p class="crumbs">
        <Link href="/profiles">Device profiles</Link> /
      </p>
      <div class="bar">
        <h1>{profile.name}</h1>
        <button
          type="button"
          aria-pressed={json !== null}
          onClick={() => setJson(json === null ? JSON.stringify(alarms, null, 2) : null)}
        >
          {json === null ? 'JSON view' : 'Form view'}
        </button>
        <button type="button" class="primary" onClick={doSave} disabled={save.busy}>
          Save profile
        </button>
        <output aria-live="polite">{saved}</output>
      </div>
      <ErrorText error={save.error} />
      {json !== null ? (
        <label>
          Alarm rules (JSON, platform.md §1)
          <textarea rows={24} value={json} onInput={(e) => setJson(e.currentTarget.value)} />
        </label>
      ) : (
        <>
          {alarms.map((a, i) => (
            <AlarmEditor
              key={a.id}
              alarm={a}
              onChange={(next) => setAlarms(alarms.map((x, j) => (j === i ? next : x)))}
              onRemove={() => setAlarms(alarms.filter((_, j) => j !== i))}
            />
          ))}
          <div>
            <button type="button" onClick={() => setAlarms([...alarms, newAlarm()])}>
              Add alarm rule
            </button>
          </div>
        </>
      )}
    </section>
  );
}

function AlarmEditor(props: {
  alarm: AlarmDef;
  onChange: (a: AlarmDef) => void;
  onRemove: () => void;
}) {
  const a = props.alarm;
  const set = (patch: Partial<AlarmDef>) => props.onChange({ ...a, ...patch });
  const used = Object.keys(a.createRules);
  const free = SEVERITIES.filter((s) => !used.includes(s));
  return (
    <fieldset class="card stack alarm-def" aria-label={`Alarm ${a.alarmType}`}>
      <legend>Alarm: {a.alarmType}</legend>
      <div class="row">
        <label>
          Alarm type
          <input
            value={a.alarmType}
            required
            onInput={(e) => set({ alarmType: e.currentTarget.value })}
          />
        </label>
        <Check
          checked={a.propagate}
          onChange={(v) => set({ propagate: v })}
          label="Propagate to related"
        />
        <Check
          checked={a.propagateToOwner}
          onChange={(v) => set({ propagateToOwner: v })}
          label="Propagate to owner"
        />
        <Check
          checked={a.propagateToTenant}
          onChange={(v) => set({ propagateToTenant: v })}
          label="Propagate to tenant"
        />
        <button type="button" onClick={props.onRemove}>
          Remove alarm
        </button>
      </div>
      {used.map((sev) => (
        <RuleEditor
          key={sev}
          title={`Create ${sev}`}
          rule={a.createRules[sev]}
          onChange={(r) => set({ createRules: { ...a.createRules, [sev]: r } })}
          onRemove={() => {
            const next = { ...a.createRules };
            delete next[sev];
            set({ createRules: next });
          }}
          severity={{
            value: sev,
            choices: [sev, ...free],
            onChange: (s) => {
              const next: Record<string, Rule> = {};
              for (const [k, v] of Object.entries(a.createRules)) next[k === sev ? s : k] = v;
              set({ createRules: next });
            },
          }}
        />
      ))}
      <div class="row">
        {free.length > 0 && (
          <button
            type="button"
            onClick={() => set({ createRules: { ...a.createRules, [free[0]]: newRule() } })}
          >
            Add create condition
          </button>
        )}
        {!a.clearRule && (
          <button type="button" onClick={() => set({ clearRule: newRule() })}>
            Add clear condition
          </button>
        )}
      </div>
      {a.clearRule && (
        <RuleEditor
          title="Clear"
          rule={a.clearRule}
          onChange={(r) => set({ clearRule: r })}
          onRemove={() => set({ clearRule: null })}
        />
      )}
    </fieldset>
  );
}

function RuleEditor(props: {
  title: string;
  rule: Rule;
  onChange: (r: Rule) => void;
  onRemove: () => void;
  severity?: { value: string; choices: string[]; onChange: (s: string) => void };
}) {
  const r = props.rule;
  const filters = r.condition.condition;
  const spec = r.condition.spec ?? { type: 'SIMPLE' };
  const setFilters = (f: Filter[]) =>
    props.onChange({ ...r, condition: { ...r.condition, condition: f } });
  const setSpec = (s: Spec) => props.onChange({ ...r, condition: { ...r.condition, spec: s } });
  const specValue = spec.predicate?.defaultValue;
  return (
    <fieldset class="rule stack" aria-label={`${props.title} rule`}>
      <legend>{props.title} rule</legend>
      {props.severity && (
        <label>
          Severity
          <select
            value={props.severity.value}
            onChange={(e) => props.severity?.onChange(e.currentTarget.value)}
          >
            {props.severity.choices.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
      )}
      {filters.map((f, i) => (
        <FilterEditor
          key={i}
          index={i}
          filter={f}
          onChange={(nf) => setFilters(filters.map((x, j) => (j === i ? nf : x)))}
          onRemove={() => setFilters(filters.filter((_, j) => j !== i))}
        />
      ))}
      <div>
        <button type="button" onClick={() => setFilters([...filters, newFilter()])}>
          Add key filter
        </button>
      </div>
      <div class="row">
        <label>
          Condition type
          <select
            value={spec.type}
            onChange={(e) => {
              const type = e.currentTarget.value as Spec['type'];
              if (type === 'SIMPLE') setSpec({ type });
              else
                setSpec({
                  type,
                  ...(type === 'DURATION' ? { unit: 'MINUTES' } : {}),
                  predicate: {
                    defaultValue: type === 'DURATION' ? 5 : 3,
                    userValue: null,
                    dynamicValue: null,
                  },
                });
            }}
          >
            <option value="SIMPLE">Simple</option>
            <option value="DURATION">Duration</option>
            <option value="REPEATING">Repeating</option>
          </select>
        </label>
        {spec.type !== 'SIMPLE' && (
          <label>
            {spec.type === 'DURATION' ? 'For more than' : 'Times in a row'}
            <input
              type="number"
              min={1}
              value={String(specValue ?? '')}
              onInput={(e) =>
                setSpec({
                  ...spec,
                  predicate: {
                    ...(spec.predicate ?? { userValue: null, dynamicValue: null }),
                    defaultValue: Number(e.currentTarget.value),
                  },
                })
              }
            />
          </label>
        )}
        {spec.type === 'DURATION' && (
          <label>
            Unit
            <select
              value={spec.unit ?? 'MINUTES'}
              onChange={(e) => setSpec({ ...spec, unit: e.currentTarget.value })}
            >
              {UNITS.map((u) => (
                <option key={u}>{u}</option>
              ))}
            </select>
          </label>
        )}
      </div>
      <ScheduleEditor
        schedule={r.schedule}
        onChange={(s) => props.onChange({ ...r, schedule: s })}
      />
      <label>
        Alarm details (${'{key}'} is replaced by the key's value)
        <input
          value={r.alarmDetails ?? ''}
          onInput={(e) => props.onChange({ ...r, alarmDetails: e.currentTarget.value || null })}
        />
      </label>
      <div>
        <button type="button" onClick={props.onRemove}>
          Remove {props.title.toLowerCase()} rule
        </button>
      </div>
    </fieldset>
  );
}

function FilterEditor(props: {
  index: number;
  filter: Filter;
  onChange: (f: Filter) => void;
  onRemove: () => void;
}) {
  const f = props.filter;
  const p = f.predicate;
  const n = props.index + 1;
  if (p.type === 'COMPLEX') {
    return (
      <p class="muted">
        Filter {n} on {f.key.key} is a complex (AND/OR) predicate: edit it in the JSON view.
      </p>
    );
  }
  const value = p.value ?? { defaultValue: null, userValue: null, dynamicValue: null };
  const setValue = (v: PredicateValue) => props.onChange({ ...f, predicate: { ...p, value: v } });
  const ops = OPERATIONS[predicateType(f.valueType)];
  const toTyped = (text: string): unknown =>
    f.valueType === 'BOOLEAN' ? text === 'true' : f.valueType === 'STRING' ? text : Number(text);
  return (
    <fieldset class="row filter" aria-label={`Key filter ${n}`}>
      <legend>Key filter {n}</legend>
      <label>
        Key type
        <select
          value={f.key.type}
          onChange={(e) => props.onChange({ ...f, key: { ...f.key, type: e.currentTarget.value } })}
        >
          {KEY_TYPES.map(([v, l]) => (
            <option key={v} value={v}>
              {l}
            </option>
          ))}
        </select>
      </label>
      <label>
        Key
        <input
          value={f.key.key}
          required
          onInput={(e) => props.onChange({ ...f, key: { ...f.key, key: e.currentTarget.value } })}
        />
      </label>
      <label>
        Value type
        <select
          value={f.valueType}
          onChange={(e) => {
            const valueType = e.currentTarget.value;
            const type = predicateType(valueType);
            props.onChange({
              ...f,
              valueType,
              predicate: {
                type,
                operation: OPERATIONS[type][0][0],
                value: {
                  defaultValue: type === 'BOOLEAN' ? true : type === 'STRING' ? '' : 0,
                  userValue: null,
                  dynamicValue: null,
                },
                ...(type === 'STRING' ? { ignoreCase: false } : {}),
              },
            });
          }}
        >
          {VALUE_TYPES.map((v) => (
            <option key={v}>{v}</option>
          ))}
        </select>
      </label>
      <label>
        Operation
        <select
          value={p.operation}
          onChange={(e) =>
            props.onChange({ ...f, predicate: { ...p, operation: e.currentTarget.value } })
          }
        >
          {ops.map(([v, l]) => (
            <option key={v} value={v}>
              {l}
            </option>
          ))}
        </select>
      </label>
      <label>
        Threshold source
        <select
          value={value.dynamicValue?.sourceType ?? ''}
          onChange={(e) => {
            const src = e.currentTarget.value;
            setValue({
              ...value,
              dynamicValue: src
                ? {
                    sourceType: src,
                    sourceAttribute: value.dynamicValue?.sourceAttribute ?? '',
                    inherit: false,
                  }
                : null,
            });
          }}
        >
          {SOURCES.map(([v, l]) => (
            <option key={v} value={v}>
              {l}
            </option>
          ))}
        </select>
      </label>
      {value.dynamicValue && (
        <label>
          Threshold attribute
          <input
            required
            value={value.dynamicValue.sourceAttribute}
            onInput={(e) =>
              setValue({
                ...value,
                dynamicValue: {
                  ...(value.dynamicValue as NonNullable<PredicateValue['dynamicValue']>),
                  sourceAttribute: e.currentTarget.value,
                },
              })
            }
          />
        </label>
      )}
      {value.dynamicValue && (
        <label class="check">
          <input
            type="checkbox"
            checked={value.dynamicValue.inherit === true}
            onChange={(e) =>
              setValue({
                ...value,
                dynamicValue: {
                  ...(value.dynamicValue as NonNullable<PredicateValue['dynamicValue']>),
                  inherit: e.currentTarget.checked,
                },
              })
            }
          />
          Inherit from owner
        </label>
      )}
      {f.valueType === 'BOOLEAN' ? (
        <label>
          {value.dynamicValue ? 'Default threshold' : 'Threshold'}
          <select
            value={String(value.defaultValue)}
            onChange={(e) => setValue({ ...value, defaultValue: toTyped(e.currentTarget.value) })}
          >
            <option value="true">true</option>
            <option value="false">false</option>
          </select>
        </label>
      ) : (
        <label>
          {value.dynamicValue ? 'Default threshold' : 'Threshold'}
          <input
            type={f.valueType === 'STRING' ? 'text' : 'number'}
            step="any"
            value={
              value.defaultValue === null || value.defaultValue === undefined
                ? ''
                : String(value.defaultValue)
            }
            onInput={(e) => setValue({ ...value, defaultValue: toTyped(e.currentTarget.value) })}
          />
        </label>
      )}
      {p.type === 'STRING' && (
        <label class="check">
          <input
            type="checkbox"
            checked={p.ignoreCase === true}
            onChange={(e) =>
              props.onChange({ ...f, predicate: { ...p, ignoreCase: e.currentTarget.checked } })
            }
          />
          Ignore case
        </label>
      )}
      <button type="button" onClick={props.onRemove} aria-label={`Remove key filter ${n}`}>
        Remove
      </button>
    </fieldset>
  );
}

const msOfDay = (hhmm: string): number => {
  const [h, m] = hhmm.split(':').map(Number);
  return ((h || 0) * 60 + (m || 0)) * 60_000;
};
const hhmm = (ms = 0): string => {
  const m = Math.floor(ms / 60_000);
  return `${String(Math.floor(m / 60) % 24).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
};

function ScheduleEditor(props: {
  schedule: Schedule | null;
  onChange: (s: Schedule | null) => void;
}) {
  const s = props.schedule ?? { type: 'ANY_TIME' };
  return (
    <div class="row">
      <label>
        Schedule
        <select
          value={s.type}
          onChange={(e) => {
            const type = e.currentTarget.value as Schedule['type'];
            if (type === 'ANY_TIME') props.onChange(null);
            else if (type === 'SPECIFIC_TIME')
              props.onChange({
                type,
                timezone: Intl.DateTimeFormat().resolvedOptions().timeZone,
                daysOfWeek: [1, 2, 3, 4, 5],
                startsOn: 8 * 3600_000,
                endsOn: 17 * 3600_000,
                dynamicValue: null,
              });
          }}
        >
          <option value="ANY_TIME">Any time</option>
          <option value="SPECIFIC_TIME">Specific time</option>
          {s.type === 'CUSTOM' && <option value="CUSTOM">Custom (edit in the JSON view)</option>}
        </select>
      </label>
      {s.type === 'SPECIFIC_TIME' && (
        <>
          <label>
            Time zone
            <input
              value={s.timezone ?? ''}
              onInput={(e) => props.onChange({ ...s, timezone: e.currentTarget.value })}
            />
          </label>
          <fieldset class="row">
            <legend>Days</legend>
            {DAYS.map((d, i) => (
              <label key={d} class="check">
                <input
                  type="checkbox"
                  checked={s.daysOfWeek?.includes(i + 1) ?? false}
                  onChange={(e) => {
                    const days = new Set(s.daysOfWeek ?? []);
                    if (e.currentTarget.checked) days.add(i + 1);
                    else days.delete(i + 1);
                    props.onChange({ ...s, daysOfWeek: [...days].sort() });
                  }}
                />
                {d}
              </label>
            ))}
          </fieldset>
          <label>
            From
            <input
              type="time"
              value={hhmm(s.startsOn)}
              onInput={(e) => props.onChange({ ...s, startsOn: msOfDay(e.currentTarget.value) })}
            />
          </label>
          <label>
            To
            <input
              type="time"
              value={hhmm(s.endsOn)}
              onInput={(e) => props.onChange({ ...s, endsOn: msOfDay(e.currentTarget.value) })}
            />
          </label>
        </>
      )}
    </div>
  );
}
