import type { Logger } from 'pino';
import type { ClientAttributesItem } from '../attributes/attribute-service.js';
import type { OwnerAttributeService } from '../attributes/owner-attributes.js';
import {
  ATTRIBUTE_SCOPES,
  type AttributeScope,
  type TypedAttributeKv,
} from '../attributes/types.js';
import type { CommitHook } from '../common/commit-hook.js';
import { NULL_UUID } from '../common/entity.js';
import type { Db } from '../db/open.js';
import {
  ALARM_SEVERITIES,
  type AlarmRule,
  type AlarmSeverity,
  type DeviceProfileAlarm,
  type DynamicValue,
  type KeyFilterPredicate,
} from '../devices/alarm-rule-schema.js';
import type { DeviceProfile } from '../devices/device-profile-service.js';
import type { Device } from '../devices/device-service.js';
import type { EventBus } from '../events.js';
import type { GatewayMsg, MessageProcessor } from '../messages/types.js';
import { entryValue } from '../telemetry/telemetry-parser.js';
import type { TimeseriesQuery } from '../telemetry/telemetry-query.js';
import type { TimeseriesResult } from '../telemetry/telemetry-service.js';
import type { CommittedItem } from '../telemetry/telemetry-writer.js';
import type { AlarmService, AlarmTx, DeferredAlarmEvents } from './alarm-service.js';
import {
  type DataSource,
  type EvalResult,
  emptyState,
  evalRule,
  evalRuleAt,
  type KeyKind,
  type RuleState,
  renderDetails,
  resetState,
  type SnapshotValue,
  stateMoved,
} from './rule-eval.js';
import { type AlarmRuleStates, RuleStateStore } from './rule-state-store.js';
import type { AlarmEvent } from './types.js';

export interface AlarmEngineDeps {
  readonly db: Db;
  readonly bus: EventBus;
  readonly log: Logger;
  readonly alarms: AlarmService;
  readonly profiles: {
    find(id: string): DeviceProfile | undefined;
    /** `activeOnly`: the profiles devices use. */
    names(activeOnly: boolean): Array<{ id: { id: string } }>;
  };
  readonly devices: {
    get(id: string): Device;
    /** Cached by id: a device of a profile without rules costs no query per message. */
    identity(id: string): { readonly profileId: string } | undefined;
    idsOfProfile(profileId: string): string[];
  };
  readonly attributes: { get(deviceId: string, scope: AttributeScope): TypedAttributeKv[] };
  readonly telemetry: { query(deviceId: string, q: TimeseriesQuery): TimeseriesResult };
  readonly owners: Pick<OwnerAttributeService, 'value'>;
  readonly tenantId: () => string;
  readonly now?: () => number;
  /** How often DURATION rules are re-checked without new data (ThingsBoard: 60 s). */
  readonly checkIntervalMs?: number;
  /** Device states kept in memory; the least recently used beyond it are reloaded on demand. */
  readonly maxDevices?: number;
}

/** One key a rule reads, as `kind:key` (`OWNER:` = a customer or tenant attribute). */
type TouchKey = string;

interface CompiledRule {
  readonly severity?: AlarmSeverity;
  readonly rule: AlarmRule;
  /** Keys whose update makes the rule evaluate (filters, dynamic values, schedule). */
  readonly touch: ReadonlySet<TouchKey>;
  /** Snapshot keys for `${key}` in alarmDetails. */
  readonly keys: ReadonlyArray<readonly [KeyKind, string]>;
  readonly duration: boolean;
}

interface CompiledAlarm {
  readonly def: DeviceProfileAlarm;
  /** Highest severity first (§1.9 step 2). */
  readonly creates: readonly CompiledRule[];
  readonly clear?: CompiledRule;
}

interface CompiledProfile {
  readonly id: string;
  readonly alarms: readonly CompiledAlarm[];
  readonly tsKeys: ReadonlySet<string>;
  readonly attrKeys: ReadonlySet<string>;
  readonly touch: ReadonlySet<TouchKey>;
}

interface DeviceState {
  readonly id: string;
  readonly profile: CompiledProfile;
  customerId: string | null;
  readonly ts: Map<string, SnapshotValue>;
  /** Attribute values per scope; reads merge client < shared < server (§1.4). */
  readonly attrs: Record<AttributeScope, Map<string, SnapshotValue>>;
  readonly fields: Map<string, SnapshotValue>;
  readonly rules: Map<string, AlarmRuleStates>;
  /** Rule ids whose stored state is out of date (written at the end of the turn). */
  readonly dirty: Set<string>;
  /** Uncleared alarm id per alarm type; null = none; absent = not looked up yet. */
  readonly active: Map<string, string | null>;
  /** What the rules read: built once per device state (in `#load`), not per evaluation. */
  src: DataSource;
}

/** One data update (§1.9 step 1): values of one kind at one ts. */
interface Update {
  readonly ts: number;
  readonly kind: 'TS' | 'ATTR';
  readonly scope?: AttributeScope;
  readonly values?: ReadonlyMap<string, unknown>;
  readonly deleted?: readonly string[];
}

export interface AlarmEngineStats {
  readonly devices: number;
  readonly evaluations: number;
  readonly failures: number;
  readonly evicted: number;
  readonly stateWrites: number;
  /** Device uplinks evaluated inside the commit that stored them. */
  readonly inCommit: number;
}

/**
 * Whether a device's message of a type is evaluated inside its commit (its chain reaches the
 * Device Profile node through nothing but message-type routing, `RuleEngine.reaches`).
 */
export type InCommitDecision = (deviceId: string, msgType: string) => boolean;

const TELEMETRY = 'POST_TELEMETRY_REQUEST';
const ATTRIBUTES = 'POST_ATTRIBUTES_REQUEST';

/** What the evaluations inside one commit left for after it: events, and the devices touched. */
interface CommitBatch {
  readonly events: DeferredAlarmEvents[];
  readonly devices: Set<string>;
}

const OWNER = 'alarm-engine';
const CHECKPOINT_MS = 5000;

function touchesAny(keys: ReadonlySet<TouchKey>, touched: ReadonlySet<TouchKey>): boolean {
  for (const k of touched) if (keys.has(k)) return true;
  return false;
}

function dynamicTouch(d: DynamicValue | null | undefined, out: Set<TouchKey>): void {
  if (!d?.sourceType || !d.sourceAttribute) return;
  if (d.sourceType === 'CURRENT_DEVICE') out.add(`ATTR:${d.sourceAttribute}`);
  if (d.sourceType !== 'CURRENT_DEVICE' || d.inherit) out.add(`OWNER:${d.sourceAttribute}`);
}

function predicateTouch(p: KeyFilterPredicate, out: Set<TouchKey>): void {
  if (p.type === 'COMPLEX') for (const c of p.predicates) predicateTouch(c, out);
  else dynamicTouch(p.value.dynamicValue, out);
}

const KIND_TAG: Record<KeyKind, string> = {
  TIME_SERIES: 'TS',
  ATTRIBUTE: 'ATTR',
  ENTITY_FIELD: 'FIELD',
};

function compileRule(rule: AlarmRule, severity?: AlarmSeverity): CompiledRule {
  const touch = new Set<TouchKey>();
  const keys: Array<readonly [KeyKind, string]> = [];
  for (const f of rule.condition.condition) {
    if (f.key.type !== 'CONSTANT') {
      const kind = f.key.type as KeyKind;
      touch.add(`${KIND_TAG[kind]}:${f.key.key}`);
      keys.push([kind, f.key.key]);
    }
    predicateTouch(f.predicate, touch);
  }
  const spec = rule.condition.spec;
  if (spec && spec.type !== 'SIMPLE') dynamicTouch(spec.predicate.dynamicValue, touch);
  const schedule = rule.schedule as { dynamicValue?: DynamicValue | null } | null | undefined;
  dynamicTouch(schedule?.dynamicValue, touch);
  return { severity, rule, touch, keys, duration: spec?.type === 'DURATION' };
}

function compileProfile(p: DeviceProfile): CompiledProfile {
  const alarms: CompiledAlarm[] = [];
  const touch = new Set<TouchKey>();
  for (const def of p.profileData.alarms ?? []) {
    const creates = ALARM_SEVERITIES.filter((s) => def.createRules[s]).map((s) =>
      compileRule(def.createRules[s] as AlarmRule, s),
    );
    const clear = def.clearRule ? compileRule(def.clearRule) : undefined;
    for (const r of [...creates, ...(clear ? [clear] : [])]) for (const k of r.touch) touch.add(k);
    alarms.push({ def, creates, clear });
  }
  const tsKeys = new Set<string>();
  const attrKeys = new Set<string>();
  for (const k of touch) {
    if (k.startsWith('TS:')) tsKeys.add(k.slice(3));
    if (k.startsWith('ATTR:')) attrKeys.add(k.slice(5));
  }
  return { id: p.id.id, alarms, tsKeys, attrKeys, touch };
}

function emptyStates(): AlarmRuleStates {
  return { create: {}, clear: emptyState(), lastTs: 0 };
}

/**
 * The device-profile alarm engine (platform.md §1.9), ThingsBoard's Device Profile rule node.
 * `process(msg)` takes every committed message; telemetry, attributes and activity update a
 * per-device snapshot of the keys the profile's rules read, and each alarm's create rules
 * (highest severity first) and clear rule are evaluated on it. Alarm changes and the rule
 * state that caused them commit in one transaction; other state changes are written at the end
 * of the current turn (one transaction per batch). A timer re-checks DURATION rules, so an
 * alarm fires without new data.
 */
export class AlarmEngine implements MessageProcessor {
  readonly #store: RuleStateStore;
  readonly #profiles = new Map<string, CompiledProfile | null>();
  /** Device states, least recently used first. */
  readonly #devices = new Map<string, DeviceState>();
  /** Devices with rule states not yet written (`DeviceState.dirty` names them). */
  readonly #dirty = new Set<DeviceState>();
  /** Devices evaluated since the last checkpoint of `lastTs`. */
  readonly #seen = new Set<DeviceState>();
  /** Devices with a DURATION rule in progress: what the timer re-checks. */
  readonly #timed = new Set<string>();
  readonly #ownerCache = new Map<string, unknown>();
  readonly #flushAll;
  #flushScheduled = false;
  #timer: NodeJS.Timeout | undefined;
  #checkpointAt = 0;
  #stats = { evaluations: 0, failures: 0, evicted: 0, stateWrites: 0, inCommit: 0 };
  #inCommitFor: InCommitDecision = () => false;
  /** Set while a commit hook evaluates: rule state is written there, not at the end of the turn. */
  #inCommit = false;
  /** The evaluations of the commit running now, settled by the hook's `settled`. */
  #batch: CommitBatch | undefined;
  #commitFailureLogged = false;
  readonly #savepoint: (fn: () => void) => void;

  constructor(private readonly deps: AlarmEngineDeps) {
    this.#store = new RuleStateStore(deps.db);
    this.#flushAll = deps.db.transaction((states: DeviceState[], all: boolean) => {
      for (const d of states) this.#writeStates(d, all);
    });
    this.#savepoint = deps.db.transaction((fn: () => void) => fn());
  }

  #now(): number {
    return this.deps.now?.() ?? Date.now();
  }

  get stats(): AlarmEngineStats {
    return { devices: this.#devices.size, ...this.#stats };
  }

  /**
   * Subscribes to profile and device changes, then re-evaluates the newest data a crash between
   * a commit and its evaluation could have left unevaluated, and starts the DURATION timer.
   */
  start(): void {
    const { bus } = this.deps;
    bus.on(OWNER, 'deviceProfile.updated', ({ profileId }) => this.#profileChanged(profileId));
    bus.on(OWNER, 'deviceProfile.deleted', ({ profileId }) => this.#profileChanged(profileId));
    bus.on(OWNER, 'alarm', (e) => this.#alarmChanged(e));
    this.#recover();
    this.#checkpointAt = this.#now();
    this.#arm();
  }

  stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.deps.bus.removeOwner(OWNER);
    this.#flush(true);
  }

  #arm(): void {
    this.#timer = setTimeout(() => {
      try {
        this.#tick();
      } catch (err) {
        this.#stats.failures++;
        this.deps.log.error({ err }, 'alarm timer failed');
      }
      this.#arm();
    }, this.deps.checkIntervalMs ?? 1000);
    this.#timer.unref();
  }

  /** One turn of the timer: DURATION rules at `now`, then the periodic `lastTs` checkpoint. */
  #tick(): void {
    const now = this.#now();
    for (const id of [...this.#timed]) {
      const d = this.#state(id);
      if (!d) {
        this.#timed.delete(id);
        continue;
      }
      for (const alarm of d.profile.alarms) this.#evalTimed(d, alarm, now);
      this.#updateTimed(d);
    }
    if (now - this.#checkpointAt >= CHECKPOINT_MS || now < this.#checkpointAt) {
      this.#checkpointAt = now;
      this.#flush(true);
    }
  }

  /**
   * Which device uplinks the commit hooks evaluate (the rule engine's answer, known once the
   * chains are loaded); the Device Profile node then passes those messages on without evaluating
   * them again. Until it is set, nothing is evaluated in a commit.
   */
  setInCommitDecision(decide: InCommitDecision): void {
    this.#inCommitFor = decide;
  }

  /**
   * Device telemetry, evaluated inside the group commit that stores it (TelemetryWriter's
   * `inCommit`): the alarm, its rule state and its notification outbox rows commit with the
   * reading, so its acknowledgement implies the alarm is visible. Alarm events go out after it.
   */
  readonly telemetryHook: CommitHook<CommittedItem> = {
    write: (items) =>
      this.#inCommitEval(items, TELEMETRY, (d, item) => {
        for (const [ts, values] of groupByTs(item.points, (p) => [p.key, entryValue(p)]))
          this.#apply(d, { ts, kind: 'TS', values });
      }),
    settled: (ok) => this.#settled(ok),
  };

  /** A device's own client attributes, evaluated inside the transaction that saves them. */
  readonly attributesHook: CommitHook<ClientAttributesItem> = {
    write: (items) =>
      this.#inCommitEval(items, ATTRIBUTES, (d, item) => {
        const values = new Map<string, unknown>();
        for (const kv of item.values)
          values.set(kv.key, typeof kv.value === 'bigint' ? Number(kv.value) : kv.value);
        this.#apply(d, { ts: item.ts, kind: 'ATTR', scope: 'CLIENT_SCOPE', values });
      }),
    settled: (ok) => this.#settled(ok),
  };

  /**
   * Evaluates each item's device inside the caller's transaction. A device whose evaluation
   * fails is rolled back to its savepoint alone (its alarm writes and rule state), counted and
   * logged once, and its cached state dropped; the reading still commits.
   */
  #inCommitEval<T extends { readonly deviceId: string }>(
    items: readonly T[],
    msgType: string,
    apply: (d: DeviceState, item: T) => void,
  ): void {
    this.#batch ??= { events: [], devices: new Set() };
    const batch = this.#batch;
    /** Devices whose rule state moved without an alarm change (written below, at once). */
    const moved = new Set<DeviceState>();
    this.#inCommit = true;
    try {
      const events = this.deps.alarms.deferEvents(() => {
        for (const item of items) {
          if (!this.#inCommitFor(item.deviceId, msgType)) continue;
          batch.devices.add(item.deviceId);
          let d: DeviceState | undefined;
          try {
            d = this.#state(item.deviceId);
            if (!d) continue;
            this.#stats.inCommit++;
            apply(d, item);
            if (d.dirty.size > 0) moved.add(d);
          } catch (err) {
            // SQLite ended the whole transaction (a full disk): the commit itself fails.
            if (!this.deps.db.inTransaction) throw err;
            if (d) moved.delete(d);
            this.#inCommitFailed(item.deviceId, err);
          }
        }
      });
      if (events.length > 0) batch.events.push(events);
      this.#writeMoved(moved);
    } finally {
      this.#inCommit = false;
    }
  }

  /**
   * The rule states that moved, in one savepoint; if it fails, each device in its own, so that
   * only the device whose rows fail loses its state (dropped, reloaded from SQLite).
   */
  #writeMoved(moved: ReadonlySet<DeviceState>): void {
    if (moved.size === 0) return;
    const dirty = [...moved].map((d) => [d, [...d.dirty]] as const);
    try {
      this.#savepoint(() => {
        for (const d of moved) this.#writeStates(d, false);
      });
      return;
    } catch (err) {
      if (!this.deps.db.inTransaction) throw err;
    }
    for (const [d, rules] of dirty) {
      for (const r of rules) d.dirty.add(r);
      try {
        this.#savepoint(() => this.#writeStates(d, false));
      } catch (err) {
        if (!this.deps.db.inTransaction) throw err;
        this.#inCommitFailed(d.id, err);
      }
    }
  }

  #inCommitFailed(deviceId: string, err: unknown): void {
    this.#stats.failures++;
    this.#drop(deviceId);
    if (this.#commitFailureLogged) return;
    this.#commitFailureLogged = true;
    this.deps.log.error(
      { err, deviceId },
      'alarm evaluation failed in the commit of a reading: its alarm writes were rolled back, the ' +
        'reading committed (logged once; counted in edge_alarm_engine_failures_total)',
    );
  }

  /**
   * After the commit: its alarm events go on the bus and to the rule chains on the next turn
   * (after the devices' acknowledgements). Rolled back: the events are dropped and the devices'
   * cached states, now ahead of the database, are reloaded on their next message.
   */
  #settled(ok: boolean): void {
    const batch = this.#batch;
    this.#batch = undefined;
    if (!batch) return;
    if (!ok) {
      for (const id of batch.devices) this.#drop(id);
      return;
    }
    if (batch.events.length === 0) return;
    setImmediate(() => {
      for (const events of batch.events) this.deps.alarms.publish(events);
    });
  }

  /** Forgets a device's cached state without writing it (it is reloaded from SQLite). */
  #drop(id: string): void {
    const d = this.#devices.get(id);
    if (!d) return;
    this.#dirty.delete(d);
    this.#seen.delete(d);
    this.#devices.delete(id);
    this.#timed.delete(id);
  }

  /** The one processing entry point. Never throws: failures are logged and counted. */
  process(msg: GatewayMsg): void {
    // A device uplink the commit hooks evaluated with its commit is not evaluated twice.
    if (
      msg.committed &&
      (msg.type === TELEMETRY || msg.type === ATTRIBUTES) &&
      msg.originator.entityType === 'DEVICE' &&
      this.#inCommitFor(msg.originator.id, msg.type)
    )
      return;
    try {
      this.#process(msg);
    } catch (err) {
      this.#stats.failures++;
      this.deps.log.error(
        { err, msgType: msg.type, originator: msg.originator.id },
        'alarm evaluation failed',
      );
    }
  }

  #process(msg: GatewayMsg): void {
    const { originator } = msg;
    if (originator.entityType === 'CUSTOMER' || originator.entityType === 'TENANT') {
      if (msg.type === 'ATTRIBUTES_UPDATED' || msg.type === 'ATTRIBUTES_DELETED')
        this.#ownerAttributesChanged(originator.entityType, originator.id, keysOf(msg));
      return;
    }
    if (originator.entityType !== 'DEVICE') return;
    switch (msg.type) {
      case 'POST_TELEMETRY_REQUEST':
      case 'TIMESERIES_UPDATED':
        this.#telemetry(originator.id, msg);
        return;
      case 'POST_ATTRIBUTES_REQUEST':
        this.#attributes(originator.id, msg, 'CLIENT_SCOPE');
        return;
      case 'ATTRIBUTES_UPDATED':
        this.#attributes(originator.id, msg, scopeOf(msg.metadata.scope));
        return;
      case 'ATTRIBUTES_DELETED':
        this.#withDevice(originator.id, (d) =>
          this.#apply(d, {
            ts: this.#now(),
            kind: 'ATTR',
            scope: scopeOf(msg.metadata.scope),
            deleted: keysOf(msg),
          }),
        );
        return;
      case 'ACTIVITY_EVENT':
      case 'INACTIVITY_EVENT':
        this.#activity(originator.id, msg);
        return;
      case 'ALARM_CLEAR':
      case 'ALARM_DELETE':
        this.#manualClear(originator.id, msg.data);
        return;
      case 'ENTITY_ASSIGNED':
      case 'ENTITY_UNASSIGNED':
      case 'ENTITY_UPDATED':
        this.#forget(originator.id);
        return;
      case 'ENTITY_DELETED':
        this.#forget(originator.id, true);
        return;
    }
  }

  #withDevice(id: string, fn: (d: DeviceState) => void): void {
    const d = this.#state(id);
    if (d) fn(d);
  }

  #telemetry(deviceId: string, msg: GatewayMsg): void {
    const d = this.#state(deviceId);
    if (!d) return;
    const metaTs = Number(msg.metadata.ts);
    const fallback = Number.isFinite(metaTs) && metaTs > 0 ? metaTs : msg.ts;
    // §1.9: a batch is evaluated per timestamp, ascending.
    const groups: Array<{ ts: number; values: Record<string, unknown> }> = [];
    const add = (ts: number, values: unknown) => {
      if (values !== null && typeof values === 'object')
        groups.push({ ts, values: values as Record<string, unknown> });
    };
    // TIMESERIES_UPDATED carries `{"timeseries": [{"ts", "values"}]}`.
    const body = msg.data as { timeseries?: unknown } | null;
    const data =
      body && typeof body === 'object' && Array.isArray(body.timeseries)
        ? body.timeseries
        : msg.data;
    if (Array.isArray(data)) {
      for (const item of data as Array<{ ts?: unknown; values?: unknown }>) {
        if (item && typeof item === 'object' && 'values' in item)
          add(typeof item.ts === 'number' ? item.ts : fallback, item.values);
        else add(fallback, item);
      }
    } else if (data && typeof data === 'object' && 'ts' in data && 'values' in data) {
      const item = data as { ts: unknown; values: unknown };
      add(typeof item.ts === 'number' ? item.ts : fallback, item.values);
    } else add(fallback, data);
    const entries = groups.flatMap((g) =>
      Object.entries(g.values).map(([key, value]) => ({ ts: g.ts, key, value })),
    );
    for (const [ts, values] of groupByTs(entries, (e) => [e.key, e.value]))
      this.#apply(d, { ts, kind: 'TS', values });
  }

  #attributes(deviceId: string, msg: GatewayMsg, scope: AttributeScope): void {
    const d = this.#state(deviceId);
    if (!d || !msg.data || typeof msg.data !== 'object') return;
    const values = new Map(Object.entries(msg.data as Record<string, unknown>));
    this.#apply(d, { ts: msg.ts, kind: 'ATTR', scope, values });
  }

  /** §1.9: activity fields are attributes when metadata `scope` is set, else telemetry. */
  #activity(deviceId: string, msg: GatewayMsg): void {
    const d = this.#state(deviceId);
    if (!d || !msg.data || typeof msg.data !== 'object') return;
    const values = new Map(Object.entries(msg.data as Record<string, unknown>));
    const scope = msg.metadata.scope;
    if (scope) this.#apply(d, { ts: msg.ts, kind: 'ATTR', scope: scopeOf(scope), values });
    else this.#apply(d, { ts: msg.ts, kind: 'TS', values });
  }

  /** ALARM_CLEAR / ALARM_DELETE (§1.9): the next match creates a new alarm. */
  #manualClear(deviceId: string, data: unknown): void {
    const d = this.#devices.get(deviceId);
    const type = (data as { type?: unknown } | null)?.type;
    if (!d || typeof type !== 'string') return;
    d.active.set(type, null);
    for (const alarm of d.profile.alarms) {
      if (alarm.def.alarmType !== type) continue;
      const st = d.rules.get(alarm.def.id);
      if (!st) continue;
      let changed = false;
      for (const s of Object.values(st.create)) if (s) changed = resetState(s) || changed;
      changed = resetState(st.clear) || changed;
      if (changed) this.#markDirty(d, alarm.def.id);
    }
  }

  #alarmChanged(e: AlarmEvent): void {
    const d = this.#devices.get(e.alarm.originator.id);
    if (!d) return;
    const type = e.alarm.type;
    if (e.action === 'CLEARED' || e.action === 'DELETED') {
      if (d.active.get(type) === e.alarm.id.id) d.active.set(type, null);
    } else if (!e.alarm.cleared) d.active.set(type, e.alarm.id.id);
  }

  #ownerAttributesChanged(type: 'CUSTOMER' | 'TENANT', id: string, keys: readonly string[]): void {
    for (const key of this.#ownerCache.keys())
      if (key.startsWith(`${type}:${id}:`)) this.#ownerCache.delete(key);
    const touched = new Set(keys.map((k) => `OWNER:${k}`));
    const now = this.#now();
    for (const [profileId, p] of this.#profiles) {
      if (!p || !touchesAny(p.touch, touched)) continue;
      for (const deviceId of this.deps.devices.idsOfProfile(profileId)) {
        const d = this.#state(deviceId);
        if (!d || (type === 'CUSTOMER' && d.customerId !== id)) continue;
        for (const alarm of d.profile.alarms) this.#evalAlarm(d, alarm, touched, now);
        this.#afterEval(d);
      }
    }
  }

  /** §1.9 step 1: merge, find the touched keys, evaluate each alarm of the profile. */
  #apply(d: DeviceState, u: Update): void {
    const touched = new Set<TouchKey>();
    const tag = u.kind === 'TS' ? 'TS' : 'ATTR';
    const relevant = u.kind === 'TS' ? d.profile.tsKeys : d.profile.attrKeys;
    const target = u.kind === 'TS' ? d.ts : d.attrs[u.scope ?? 'CLIENT_SCOPE'];
    if (u.values) {
      for (const [key, value] of u.values) {
        if (!relevant.has(key)) continue;
        const prev = target.get(key);
        // A key counts as touched if its value changed or the update ts differs (§1.9). A value
        // loaded from the database with the state may be this very message's (it is committed
        // before it is handed on): the first message after a load always touches its keys.
        if (!prev || prev.loaded || prev.ts !== u.ts || !sameValue(prev.value, value))
          touched.add(`${tag}:${key}`);
        target.set(key, { value, ts: u.ts });
      }
    }
    for (const key of u.deleted ?? []) {
      if (target.delete(key)) touched.add(`${tag}:${key}`);
    }
    if (touched.size === 0) return;
    for (const alarm of d.profile.alarms) this.#evalAlarm(d, alarm, touched, u.ts);
    this.#afterEval(d);
  }

  #afterEval(d: DeviceState): void {
    this.#seen.add(d);
    this.#updateTimed(d);
  }

  #updateTimed(d: DeviceState): void {
    let timed = false;
    for (const alarm of d.profile.alarms) {
      const st = d.rules.get(alarm.def.id);
      if (!st) continue;
      for (const r of alarm.creates)
        if (r.duration && (st.create[r.severity as AlarmSeverity]?.lastEventTs ?? 0) > 0)
          timed = true;
      if (alarm.clear?.duration && st.clear.lastEventTs > 0) timed = true;
    }
    if (timed) this.#timed.add(d.id);
    else this.#timed.delete(d.id);
  }

  #source(d: DeviceState): DataSource {
    return {
      get: (kind, key) => {
        if (kind === 'TIME_SERIES') return d.ts.get(key);
        if (kind === 'ENTITY_FIELD') return d.fields.get(key);
        return (
          d.attrs.SERVER_SCOPE.get(key) ??
          d.attrs.SHARED_SCOPE.get(key) ??
          d.attrs.CLIENT_SCOPE.get(key)
        );
      },
      dynamic: (dv) => this.#dynamic(d, dv),
    };
  }

  /** §1.5: device (any scope) → customer → tenant, climbing only with `inherit`. */
  #dynamic(d: DeviceState, dv: DynamicValue): unknown {
    const key = dv.sourceAttribute;
    if (!key) return undefined;
    const levels =
      dv.sourceType === 'CURRENT_DEVICE'
        ? ['DEVICE', 'CUSTOMER', 'TENANT']
        : dv.sourceType === 'CURRENT_CUSTOMER'
          ? ['CUSTOMER', 'TENANT']
          : ['TENANT'];
    for (const level of dv.inherit ? levels : levels.slice(0, 1)) {
      let v: unknown;
      if (level === 'DEVICE') {
        v = (
          d.attrs.SERVER_SCOPE.get(key) ??
          d.attrs.SHARED_SCOPE.get(key) ??
          d.attrs.CLIENT_SCOPE.get(key)
        )?.value;
      } else if (level === 'CUSTOMER') {
        if (d.customerId) v = this.#owner('CUSTOMER', d.customerId, key);
      } else v = this.#owner('TENANT', this.deps.tenantId(), key);
      if (v !== undefined && v !== null) return v;
    }
    return undefined;
  }

  #owner(type: 'CUSTOMER' | 'TENANT', id: string, key: string): unknown {
    const k = `${type}:${id}:${key}`;
    if (this.#ownerCache.has(k)) return this.#ownerCache.get(k);
    const v = this.deps.owners.value(type, id, key);
    if (this.#ownerCache.size >= 10_000) this.#ownerCache.clear();
    this.#ownerCache.set(k, v);
    return v;
  }

  #activeAlarm(d: DeviceState, type: string): string | null {
    let id = d.active.get(type);
    if (id === undefined) {
      id = this.deps.alarms.activeAlarm(d.id, type)?.id.id ?? null;
      d.active.set(type, id);
    }
    return id;
  }

  /** §1.9 steps 2–4 for one profile alarm on a data update. */
  #evalAlarm(
    d: DeviceState,
    alarm: CompiledAlarm,
    touched: ReadonlySet<TouchKey>,
    ts: number,
  ): void {
    const { src } = d;
    let states = d.rules.get(alarm.def.id);
    if (!states) {
      states = emptyStates();
      d.rules.set(alarm.def.id, states);
    }
    this.#stats.evaluations++;
    let moved = false;
    let winner: CompiledRule | undefined;
    for (const r of alarm.creates) {
      if (!touchesAny(r.touch, touched)) continue;
      const sev = r.severity as AlarmSeverity;
      states.create[sev] ??= emptyState();
      const s = states.create[sev] as RuleState;
      const res = this.#run(d, alarm, r, s, ts);
      if (res.moved) moved = true;
      if (res.result === 'TRUE') {
        winner = r;
        break;
      }
    }
    if (winner) {
      this.#raise(d, alarm, winner, ts, src, false);
      return;
    }
    if (alarm.clear && touchesAny(alarm.clear.touch, touched)) {
      const activeId = this.#activeAlarm(d, alarm.def.alarmType);
      if (activeId) {
        const res = this.#run(d, alarm, alarm.clear, states.clear, ts);
        if (res.moved) moved = true;
        if (res.result === 'TRUE') {
          this.#clear(d, alarm, activeId, src);
          return;
        }
      }
    }
    if (moved) this.#markDirty(d, alarm.def.id);
  }

  /** One rule on one update; `moved`: its stored state must be written (see `stateMoved`). */
  #run(
    d: DeviceState,
    alarm: CompiledAlarm,
    r: CompiledRule,
    s: RuleState,
    ts: number,
  ): { result: EvalResult; moved: boolean } {
    const { eventCount, lastEventTs, duration } = s;
    let result: EvalResult;
    try {
      result = evalRule(r.rule, s, ts, d.src);
    } catch (err) {
      // §1.6: a dynamic count or duration that is not a number fails the evaluation.
      this.#stats.failures++;
      this.deps.log.warn(
        { err, deviceId: d.id, alarmType: alarm.def.alarmType },
        'alarm rule failed',
      );
      result = 'NOT_YET_TRUE';
    }
    return { result, moved: stateMoved(eventCount, lastEventTs, duration, s) };
  }

  /** The timer's turn for one alarm (§1.9 DURATION details). */
  #evalTimed(d: DeviceState, alarm: CompiledAlarm, now: number): void {
    const st = d.rules.get(alarm.def.id);
    if (!st) return;
    const { src } = d;
    for (const r of alarm.creates) {
      const s = st.create[r.severity as AlarmSeverity];
      if (!r.duration || !s) continue;
      let res: EvalResult;
      try {
        res = evalRuleAt(r.rule, s, now, src);
      } catch {
        continue;
      }
      if (res === 'FALSE') this.#markDirty(d, alarm.def.id);
      if (res === 'TRUE') {
        this.#raise(d, alarm, r, now, src, true);
        return;
      }
    }
    if (alarm.clear?.duration && st.clear.lastEventTs > 0) {
      const activeId = this.#activeAlarm(d, alarm.def.alarmType);
      if (activeId && evalRuleAt(alarm.clear.rule, st.clear, now, src) === 'TRUE')
        this.#clear(d, alarm, activeId, src);
    }
  }

  #details(r: CompiledRule, src: DataSource): unknown {
    const { alarmDetails, dashboardId } = r.rule;
    if (!alarmDetails && !dashboardId) return undefined;
    const out: Record<string, unknown> = {};
    if (alarmDetails) out.data = renderDetails(alarmDetails, src, r.keys);
    if (dashboardId) out.dashboardId = dashboardId.id;
    return out;
  }

  /** §1.9 step 3: create, or update the current alarm unless that would lower its severity. */
  #raise(
    d: DeviceState,
    alarm: CompiledAlarm,
    r: CompiledRule,
    ts: number,
    src: DataSource,
    timer: boolean,
  ): void {
    const st = d.rules.get(alarm.def.id) as AlarmRuleStates;
    const def = alarm.def;
    this.#commit(d, (tx) => {
      if (timer) {
        // The timer only creates or raises: an unchanged alarm needs no write every tick.
        const current = tx.active(d.id, def.alarmType);
        if (
          current &&
          ALARM_SEVERITIES.indexOf(r.severity as AlarmSeverity) >=
            ALARM_SEVERITIES.indexOf(current.severity)
        )
          return;
      }
      const event = tx.raise(
        {
          originatorId: d.id,
          type: def.alarmType,
          severity: r.severity as AlarmSeverity,
          ts,
          details: this.#details(r, src),
          propagate: def.propagate ?? false,
          propagateToOwner: def.propagateToOwner ?? false,
          propagateToTenant: def.propagateToTenant ?? false,
          propagateRelationTypes: def.propagateRelationTypes ?? null,
        },
        { noDowngrade: true },
      );
      if (event) d.active.set(def.alarmType, event.alarm.id.id);
      resetState(st.clear);
    });
  }

  /** §1.9 step 4: clear, reset every rule state of the alarm, forget it. */
  #clear(d: DeviceState, alarm: CompiledAlarm, alarmId: string, src: DataSource): void {
    const st = d.rules.get(alarm.def.id) as AlarmRuleStates;
    this.#commit(d, (tx) => {
      tx.clear(alarmId, alarm.clear ? this.#details(alarm.clear, src) : undefined);
      for (const s of Object.values(st.create)) if (s) resetState(s);
      resetState(st.clear);
      d.active.set(alarm.def.alarmType, null);
    });
  }

  /** The alarm change and this device's rule state, in one transaction. */
  #commit(d: DeviceState, fn: (tx: AlarmTx) => void): void {
    this.deps.alarms.transact((tx) => {
      fn(tx);
      this.#writeStates(d, true);
    });
    this.#dirty.delete(d);
    this.#seen.delete(d);
  }

  /** Every rule state of the device with the `lastTs` checkpoint (`all`), or the dirty ones. */
  #writeStates(d: DeviceState, all: boolean): void {
    let lastTs = 0;
    for (const v of d.ts.values()) lastTs = Math.max(lastTs, v.ts);
    for (const [ruleId, st] of d.rules) {
      if (!all && !d.dirty.has(ruleId)) continue;
      st.lastTs = Math.max(st.lastTs, lastTs);
      this.#store.save(d.id, ruleId, st);
      this.#stats.stateWrites++;
    }
    d.dirty.clear();
  }

  #markDirty(d: DeviceState, ruleId: string): void {
    d.dirty.add(ruleId);
    // A commit hook writes it in the commit (`#inCommitEval`).
    if (this.#inCommit) return;
    this.#dirty.add(d);
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => {
      this.#flushScheduled = false;
      this.#flush(false);
    });
  }

  /** Writes changed rule states in one transaction; `all` adds the `lastTs` checkpoint. */
  #flush(all: boolean): void {
    const set = new Set(this.#dirty);
    if (all) for (const d of this.#seen) set.add(d);
    this.#dirty.clear();
    if (all) this.#seen.clear();
    if (set.size === 0 || !this.deps.db.open) return;
    try {
      this.#flushAll([...set], all);
    } catch (err) {
      this.#stats.failures++;
      this.deps.log.error({ err }, 'alarm rule state not saved');
    }
  }

  /** Attribute keys a profile's alarm rules read (conditions and the device's dynamic values). */
  attributeKeys(profileId: string): string[] {
    return [...(this.#compiled(profileId)?.attrKeys ?? [])];
  }

  #compiled(profileId: string): CompiledProfile | null {
    let p = this.#profiles.get(profileId);
    if (p === undefined) {
      const profile = this.deps.profiles.find(profileId);
      p = profile && (profile.profileData.alarms?.length ?? 0) > 0 ? compileProfile(profile) : null;
      this.#profiles.set(profileId, p);
    }
    return p;
  }

  /** The device's state, loaded on first use; undefined when its profile has no alarm rules. */
  #state(id: string): DeviceState | undefined {
    const cached = this.#devices.get(id);
    if (cached) {
      this.#devices.delete(id);
      this.#devices.set(id, cached);
      return cached;
    }
    const identity = this.deps.devices.identity(id);
    if (!identity || this.#compiled(identity.profileId) === null) return undefined;
    let device: Device;
    try {
      device = this.deps.devices.get(id);
    } catch {
      return undefined;
    }
    const profile = this.#compiled(device.deviceProfileId.id);
    if (!profile) return undefined;
    const d = this.#load(device, profile);
    const max = this.deps.maxDevices ?? 10_000;
    while (this.#devices.size >= max) {
      const oldest = this.#devices.values().next().value as DeviceState;
      if (this.#dirty.has(oldest) || this.#seen.has(oldest)) {
        this.#dirty.delete(oldest);
        this.#seen.delete(oldest);
        this.#flushAll([oldest], true);
      }
      this.#devices.delete(oldest.id);
      this.#timed.delete(oldest.id);
      this.#stats.evicted++;
    }
    this.#devices.set(id, d);
    this.#updateTimed(d);
    return d;
  }

  #load(
    device: Device,
    profile: CompiledProfile,
    skipTsAfter?: Map<string, SnapshotValue>,
  ): DeviceState {
    const id = device.id.id;
    const ts = new Map<string, SnapshotValue>();
    if (profile.tsKeys.size > 0) {
      const latest = this.deps.telemetry.query(id, {
        mode: 'latest',
        keys: [...profile.tsKeys],
        strict: true,
      });
      for (const [key, points] of Object.entries(latest)) {
        const p = points[0];
        if (p && p.value !== null) ts.set(key, { value: p.value, ts: p.ts, loaded: true });
      }
    }
    const attrs = {} as Record<AttributeScope, Map<string, SnapshotValue>>;
    for (const scope of ATTRIBUTE_SCOPES) {
      attrs[scope] = new Map();
      if (profile.attrKeys.size === 0) continue;
      for (const kv of this.deps.attributes.get(id, scope)) {
        if (profile.attrKeys.has(kv.key))
          attrs[scope].set(kv.key, { value: kv.value, ts: kv.lastUpdateTs, loaded: true });
      }
    }
    const fields = new Map<string, SnapshotValue>([
      ['name', { value: device.name, ts: 0 }],
      ['type', { value: device.type, ts: 0 }],
      ['label', { value: device.label ?? '', ts: 0 }],
      ['createdTime', { value: device.createdTime, ts: 0 }],
    ]);
    const rules = this.#store.ofDevice(id);
    // Rule ids no longer in the profile are dropped (§1.9 state is per rule id).
    for (const ruleId of rules.keys()) {
      if (!profile.alarms.some((a) => a.def.id === ruleId)) {
        rules.delete(ruleId);
        this.#store.delete(id, ruleId);
      }
    }
    if (skipTsAfter) {
      let lastTs = Number.POSITIVE_INFINITY;
      for (const st of rules.values()) lastTs = Math.min(lastTs, st.lastTs);
      if (rules.size === 0) lastTs = 0;
      for (const [key, v] of ts) {
        if (v.ts > lastTs) {
          skipTsAfter.set(key, v);
          ts.delete(key);
        }
      }
    }
    const customerId = device.customerId.id === NULL_UUID ? null : device.customerId.id;
    const d: DeviceState = {
      id,
      profile,
      customerId,
      ts,
      attrs,
      fields,
      rules,
      dirty: new Set(),
      active: new Map(),
      src: undefined as unknown as DataSource,
    };
    d.src = this.#source(d);
    return d;
  }

  /**
   * Crash recovery: for every device of a profile with alarm rules, the newest telemetry of the
   * rule keys that is newer than the state's `lastTs` is evaluated again (only the latest value
   * per key is kept by the telemetry store's latest table).
   */
  #recover(): void {
    const started = Date.now();
    let devices = 0;
    let replayed = 0;
    const profileIds = this.deps.profiles.names(true).map((p) => p.id.id);
    for (const profileId of profileIds) {
      const profile = this.#compiled(profileId);
      if (!profile) continue;
      for (const id of this.deps.devices.idsOfProfile(profileId)) {
        try {
          const skipped = new Map<string, SnapshotValue>();
          const d = this.#load(this.deps.devices.get(id), profile, skipped);
          if (this.#devices.size < (this.deps.maxDevices ?? 10_000)) this.#devices.set(id, d);
          devices++;
          const latest = [...skipped].map(([key, v]) => ({ key, ts: v.ts, value: v.value }));
          for (const [ts, values] of groupByTs(latest, (e) => [e.key, e.value])) {
            this.#apply(d, { ts, kind: 'TS', values });
            replayed++;
          }
          this.#updateTimed(d);
        } catch (err) {
          this.#stats.failures++;
          this.deps.log.error({ err, deviceId: id }, 'alarm state not recovered');
        }
      }
    }
    this.#flush(true);
    this.deps.log.info({ devices, replayed, ms: Date.now() - started }, 'alarm engine started');
  }

  #profileChanged(profileId: string): void {
    this.#profiles.delete(profileId);
    const ids = [...this.#devices.values()]
      .filter((d) => d.profile.id === profileId)
      .map((d) => d.id);
    for (const id of ids) this.#forget(id);
  }

  /** Drops a device's cached state (written first); it is reloaded on its next message. */
  #forget(id: string, deleted = false): void {
    const d = this.#devices.get(id);
    if (d && !deleted && (this.#dirty.has(d) || this.#seen.has(d))) this.#flushAll([d], true);
    if (d) {
      this.#dirty.delete(d);
      this.#seen.delete(d);
    }
    this.#devices.delete(id);
    this.#timed.delete(id);
    // A reloaded device may start a DURATION again at once (profile change, restart).
    if (!deleted) {
      const again = this.#state(id);
      if (again) this.#updateTimed(again);
    }
  }
}

/** Values per timestamp, ascending (§1.9: a batch is evaluated per timestamp, in order). */
function groupByTs<E extends { readonly ts: number }>(
  entries: Iterable<E>,
  kv: (e: E) => readonly [string, unknown],
): Array<[number, Map<string, unknown>]> {
  const list = Array.isArray(entries) ? (entries as readonly E[]) : [...entries];
  // One timestamp (the usual payload): no sort.
  if (list.length > 0 && list.every((e) => e.ts === list[0].ts)) {
    const m = new Map<string, unknown>();
    for (const e of list) {
      const [k, v] = kv(e);
      m.set(k, v);
    }
    return [[list[0].ts, m]];
  }
  const byTs = new Map<number, Map<string, unknown>>();
  for (const e of list) {
    let m = byTs.get(e.ts);
    if (!m) {
      m = new Map();
      byTs.set(e.ts, m);
    }
    const [k, v] = kv(e);
    m.set(k, v);
  }
  return [...byTs].sort((a, b) => a[0] - b[0]);
}

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'object' && typeof b === 'object' && a !== null && b !== null)
    return JSON.stringify(a) === JSON.stringify(b);
  return false;
}

function scopeOf(raw: string | undefined): AttributeScope {
  return raw === 'SHARED_SCOPE' || raw === 'SERVER_SCOPE' || raw === 'CLIENT_SCOPE'
    ? raw
    : 'CLIENT_SCOPE';
}

/** Keys of an ATTRIBUTES_UPDATED (`{k: v}`) or ATTRIBUTES_DELETED (`{attributes: [k]}`) body. */
function keysOf(msg: GatewayMsg): string[] {
  const data = msg.data as Record<string, unknown> | null;
  if (!data || typeof data !== 'object') return [];
  if (msg.type === 'ATTRIBUTES_DELETED' && Array.isArray(data.attributes))
    return (data.attributes as unknown[]).filter((k): k is string => typeof k === 'string');
  return Object.keys(data);
}
