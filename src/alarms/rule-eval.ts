/**
 * Pure evaluation of device-profile alarm rules (platform.md §1.4–§1.7, §1.9): key filters,
 * predicates with dynamic values, schedules in IANA time zones, and the SIMPLE / DURATION /
 * REPEATING specs over a rule's state. No I/O: the engine passes a `DataSource`.
 */

import type {
  AlarmConditionFilter,
  AlarmRule,
  AlarmSchedule,
  DynamicValue,
  FilterPredicateValue,
  KeyFilterPredicate,
} from '../devices/alarm-rule-schema.js';

/** A value the snapshot holds for one key, with the ts it was last updated. */
export interface SnapshotValue {
  readonly value: unknown;
  readonly ts: number;
  /** Read from the database when the state was loaded, not yet seen in a message. */
  readonly loaded?: true;
}

export type KeyKind = 'TIME_SERIES' | 'ATTRIBUTE' | 'ENTITY_FIELD';

export interface DataSource {
  /** The device's value for a key of that kind (ATTRIBUTE = any scope). */
  get(kind: KeyKind, key: string): SnapshotValue | undefined;
  /** A dynamic value: device attribute, customer or tenant server attribute, with `inherit`. */
  dynamic(d: DynamicValue): unknown;
}

/** Per-rule progress (§1.9): consecutive matches and the matching time accumulated. */
export interface RuleState {
  eventCount: number;
  lastEventTs: number;
  duration: number;
}

export type EvalResult = 'TRUE' | 'FALSE' | 'NOT_YET_TRUE';

export function emptyState(): RuleState {
  return { eventCount: 0, lastEventTs: 0, duration: 0 };
}

export function resetState(s: RuleState): boolean {
  const changed = s.eventCount !== 0 || s.lastEventTs !== 0 || s.duration !== 0;
  s.eventCount = 0;
  s.lastEventTs = 0;
  s.duration = 0;
  return changed;
}

// §1.5 coercions: a value that does not coerce makes the filter false.
export function asNumber(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'string' && v.trim() !== '') {
    const n = Number(v);
    return Number.isFinite(n) ? n : undefined;
  }
  return undefined;
}

export function asBoolean(v: unknown): boolean | undefined {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v > 0;
  if (typeof v === 'bigint') return v > 0n;
  if (typeof v === 'string') return v.toLowerCase() === 'true';
  return undefined;
}

export function asString(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean') return String(v);
  if (v !== null && typeof v === 'object') return JSON.stringify(v);
  return undefined;
}

type Leaf = 'NUMERIC' | 'STRING' | 'BOOLEAN';
const coerce: Record<Leaf, (v: unknown) => unknown> = {
  NUMERIC: asNumber,
  STRING: asString,
  BOOLEAN: asBoolean,
};

/**
 * The right operand (§1.5): the dynamic value when it resolves (and coerces), else the default;
 * `undefined` when neither exists (a CONSTANT filter's default is not used).
 */
function operand(
  pv: FilterPredicateValue<unknown>,
  leaf: Leaf,
  src: DataSource,
  useDefault: boolean,
): unknown {
  if (pv.dynamicValue?.sourceType) {
    const dyn = coerce[leaf](src.dynamic(pv.dynamicValue));
    if (dyn !== undefined) return dyn;
  }
  return useDefault ? coerce[leaf](pv.defaultValue) : undefined;
}

/** `IN`/`NOT_IN` list (§1.5): comma-separated, trimmed, quotes stripped when all items share them. */
export function splitList(text: string): string[] {
  const items = text.split(',').map((s) => s.trim());
  const q = items[0]?.[0];
  if (
    (q === '"' || q === "'") &&
    items.every((s) => s.length >= 2 && s[0] === q && s[s.length - 1] === q)
  ) {
    return items.map((s) => s.slice(1, -1));
  }
  return items;
}

function evalPredicate(
  p: KeyFilterPredicate,
  left: unknown,
  src: DataSource,
  useDefault: boolean,
): boolean {
  switch (p.type) {
    case 'COMPLEX': {
      const results = p.predicates.map((c) => evalPredicate(c, left, src, useDefault));
      return p.operation === 'AND' ? results.every(Boolean) : results.some(Boolean);
    }
    case 'NUMERIC': {
      const l = asNumber(left);
      const r = operand(p.value, 'NUMERIC', src, useDefault) as number | undefined;
      if (l === undefined || r === undefined) return false;
      switch (p.operation) {
        case 'EQUAL':
          return l === r;
        case 'NOT_EQUAL':
          return l !== r;
        case 'GREATER':
          return l > r;
        case 'LESS':
          return l < r;
        case 'GREATER_OR_EQUAL':
          return l >= r;
        case 'LESS_OR_EQUAL':
          return l <= r;
      }
      return false;
    }
    case 'BOOLEAN': {
      const l = asBoolean(left);
      const r = operand(p.value, 'BOOLEAN', src, useDefault) as boolean | undefined;
      if (l === undefined || r === undefined) return false;
      return p.operation === 'EQUAL' ? l === r : l !== r;
    }
    case 'STRING': {
      let l = asString(left);
      let r = operand(p.value, 'STRING', src, useDefault) as string | undefined;
      if (l === undefined || r === undefined) return false;
      if (p.ignoreCase) {
        l = l.toLowerCase();
        r = r.toLowerCase();
      }
      switch (p.operation) {
        case 'EQUAL':
          return l === r;
        case 'NOT_EQUAL':
          return l !== r;
        case 'STARTS_WITH':
          return l.startsWith(r);
        case 'ENDS_WITH':
          return l.endsWith(r);
        case 'CONTAINS':
          return l.includes(r);
        case 'NOT_CONTAINS':
          return !l.includes(r);
        case 'IN':
          return splitList(r).includes(l);
        case 'NOT_IN':
          return !splitList(r).includes(l);
      }
      return false;
    }
  }
}

/** One key filter (§1.4): CONSTANT compares its own value; other keys read the snapshot. */
export function evalFilter(f: AlarmConditionFilter, src: DataSource): boolean {
  const leaf: Leaf = f.valueType === 'DATE_TIME' ? 'NUMERIC' : (f.valueType as Leaf);
  if (f.key.type === 'CONSTANT') {
    const left = coerce[leaf](f.value);
    return left !== undefined && evalPredicate(f.predicate, left, src, false);
  }
  const v = src.get(f.key.type as KeyKind, f.key.key);
  if (v === undefined || v.value === null || v.value === undefined) return false;
  return evalPredicate(f.predicate, v.value, src, true);
}

const DAY_MS = 86_400_000;
const formatters = new Map<string, Intl.DateTimeFormat>();
const WEEKDAY: Record<string, number> = { Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6, Sun: 7 };

/** Local day of week (1 = Monday) and ms since local midnight of `ts` in `timeZone`. */
export function localTime(ts: number, timeZone: string): { day: number; msOfDay: number } {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      weekday: 'short',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(timeZone, f);
  }
  const parts: Record<string, string> = {};
  for (const p of f.formatToParts(ts)) parts[p.type] = p.value;
  const ms =
    ((Number(parts.hour) * 60 + Number(parts.minute)) * 60 + Number(parts.second)) * 1000 +
    (((ts % 1000) + 1000) % 1000);
  return { day: WEEKDAY[parts.weekday] ?? 1, msOfDay: ms };
}

/** §1.7: `startsOn <= t < endsOn`, wrapping midnight when start > end; `endsOn = 0` is 24 h. */
function inWindow(t: number, startsOn: number, endsOn: number): boolean {
  const end = endsOn === 0 ? DAY_MS : endsOn;
  if (startsOn <= end) return startsOn <= t && t < end;
  return t >= startsOn || t < end;
}

function parseSchedule(v: unknown): Record<string, unknown> | undefined {
  let obj = v;
  if (typeof v === 'string') {
    try {
      obj = JSON.parse(v);
    } catch {
      return undefined;
    }
  }
  return obj !== null && typeof obj === 'object' && !Array.isArray(obj)
    ? (obj as Record<string, unknown>)
    : undefined;
}

/** Whether the schedule is active at `ts` (§1.7); a parsable dynamic schedule overrides it. */
export function scheduleActive(
  schedule: AlarmSchedule | null | undefined,
  ts: number,
  src: DataSource,
): boolean {
  if (!schedule || schedule.type === 'ANY_TIME') return true;
  let s = schedule as Record<string, unknown>;
  const dyn = (schedule as { dynamicValue?: DynamicValue | null }).dynamicValue;
  if (dyn?.sourceType) {
    const override = parseSchedule(src.dynamic(dyn));
    if (override && override.type === schedule.type) s = { ...schedule, ...override };
  }
  const tz = typeof s.timezone === 'string' ? s.timezone : 'UTC';
  let local: { day: number; msOfDay: number };
  try {
    local = localTime(ts, tz);
  } catch {
    return false;
  }
  if (s.type === 'SPECIFIC_TIME') {
    const days = Array.isArray(s.daysOfWeek) ? (s.daysOfWeek as number[]) : [];
    if (!days.includes(local.day)) return false;
    return inWindow(local.msOfDay, Number(s.startsOn ?? 0), Number(s.endsOn ?? 0));
  }
  const items = Array.isArray(s.items)
    ? (s.items as Array<{ enabled: boolean; dayOfWeek: number; startsOn: number; endsOn: number }>)
    : [];
  const item = items.find((i) => i.dayOfWeek === local.day);
  if (!item?.enabled) return false;
  return inWindow(local.msOfDay, item.startsOn, item.endsOn);
}

const UNIT_MS: Record<string, number> = {
  SECONDS: 1000,
  MINUTES: 60_000,
  HOURS: 3_600_000,
  DAYS: DAY_MS,
};

/** DURATION threshold in ms, or REPEATING count; a dynamic value that is not numeric throws. */
export function specThreshold(rule: AlarmRule, src: DataSource): number {
  const spec = rule.condition.spec;
  if (!spec || spec.type === 'SIMPLE') return 0;
  const pv = spec.predicate as FilterPredicateValue<number>;
  let n = pv.defaultValue ?? undefined;
  if (pv.dynamicValue?.sourceType) {
    const raw = src.dynamic(pv.dynamicValue);
    if (raw !== undefined && raw !== null) {
      const dyn = asNumber(raw);
      if (dyn === undefined)
        throw new Error(
          `dynamic ${spec.type} value ${pv.dynamicValue.sourceAttribute} is not a number`,
        );
      n = dyn;
    }
  }
  if (n === undefined) throw new Error(`${spec.type} spec has no value`);
  return spec.type === 'DURATION' ? n * (UNIT_MS[(spec as { unit: string }).unit] ?? 1000) : n;
}

/**
 * Whether a rule state (now `s`, before the three numbers) moved in a way its stored row must
 * follow: a count, a DURATION that
 * started or reset. A DURATION that goes on keeps its start (`lastEventTs - duration`), which
 * is all a restart needs (the timer's elapsed time is `duration + now - lastEventTs`), so it is
 * not written on every message; the periodic checkpoint writes it anyway.
 */
export function stateMoved(count: number, last: number, duration: number, s: RuleState): boolean {
  if (count !== s.eventCount) return true;
  if (last === s.lastEventTs && duration === s.duration) return false;
  return !(last > 0 && s.lastEventTs > 0 && last - duration === s.lastEventTs - s.duration);
}

/**
 * Evaluates a rule on a data update at `ts` (§1.9 step 2): schedule and filters, then the spec
 * over `state` (mutated). FALSE resets the state.
 */
export function evalRule(
  rule: AlarmRule,
  state: RuleState,
  ts: number,
  src: DataSource,
): EvalResult {
  const ok =
    scheduleActive(rule.schedule, ts, src) &&
    rule.condition.condition.every((f) => evalFilter(f, src));
  if (!ok) {
    resetState(state);
    return 'FALSE';
  }
  const spec = rule.condition.spec;
  if (!spec || spec.type === 'SIMPLE') return 'TRUE';
  if (spec.type === 'REPEATING') {
    state.eventCount++;
    return state.eventCount >= specThreshold(rule, src) ? 'TRUE' : 'NOT_YET_TRUE';
  }
  // DURATION: time the filters have stayed true, from the first match on (strictly longer).
  if (state.lastEventTs > 0) {
    if (ts > state.lastEventTs) {
      state.duration += ts - state.lastEventTs;
      state.lastEventTs = ts;
    }
  } else {
    state.lastEventTs = ts;
    state.duration = 0;
  }
  return state.duration > specThreshold(rule, src) ? 'TRUE' : 'NOT_YET_TRUE';
}

/**
 * The timer's re-check of a DURATION rule at `now` with no new data (§1.9): the filters are
 * assumed still true since the last match. Only DURATION rules can become true this way.
 */
export function evalRuleAt(
  rule: AlarmRule,
  state: RuleState,
  now: number,
  src: DataSource,
): EvalResult {
  const spec = rule.condition.spec;
  if (spec?.type !== 'DURATION' || state.lastEventTs <= 0) return 'NOT_YET_TRUE';
  if (!scheduleActive(rule.schedule, now, src)) {
    resetState(state);
    return 'FALSE';
  }
  const elapsed = state.duration + Math.max(0, now - state.lastEventTs);
  return elapsed > specThreshold(rule, src) ? 'TRUE' : 'NOT_YET_TRUE';
}

/** `alarmDetails` (§1.3): `${key}` replaced by the key's current value; unknown keys stay. */
export function renderDetails(
  template: string,
  src: DataSource,
  keys: Iterable<readonly [KeyKind, string]>,
): string {
  const values = new Map<string, string>();
  for (const [kind, key] of keys) {
    const v = src.get(kind, key);
    if (v !== undefined && !values.has(key)) values.set(key, asString(v.value) ?? '');
  }
  return template.replace(/\$\{([^}]+)\}/g, (m, key: string) => values.get(key) ?? m);
}
