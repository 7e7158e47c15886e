import type { Logger } from 'pino';
import type { AttributeService } from '../attributes/attribute-service.js';
import type { Db } from '../db/open.js';
import type { EventBus } from '../events.js';
import type { PeriodicJobs } from '../scheduler/scheduler.js';
import type { DeviceIdentity } from './device-service.js';

/**
 * Device activity as ThingsBoard keeps it (platform reference §7.4): server-scope attributes
 * `active`, `lastConnectTime`, `lastDisconnectTime`, `lastActivityTime` and
 * `inactivityAlarmTime`, and a `device.activity` event on every change of state.
 *
 * Transports report connects, disconnects and every message; the hot path only touches memory.
 * `lastActivityTime` reaches the database on state changes and on each periodic check, so a
 * chatty device costs no extra writes on the SD card.
 */

export interface ActivityServiceDeps {
  readonly attributes: AttributeService;
  /** For one transaction around a change of state and `inCommit`. */
  readonly db?: Db;
  /**
   * Runs in the transaction that saves a change of state (active or inactive): the
   * notification outbox of DEVICE_ACTIVITY rules commits with the attributes.
   */
  readonly inCommit?: (snapshot: ActivitySnapshot) => void;
  readonly bus: EventBus;
  readonly log: Logger;
  /** Default inactivity timeout; a device's `inactivityTimeout` server attribute (ms) overrides it. */
  readonly inactivityTimeoutMs: number;
  /** How often inactivity is checked and activity times are saved. */
  readonly checkIntervalMs: number;
  /** The scheduler host that runs the check (`gateway.activity-check`); else a plain timer. */
  readonly jobs?: PeriodicJobs;
  readonly now?: () => number;
}

interface State {
  readonly device: Pick<DeviceIdentity, 'id' | 'name'>;
  active: boolean;
  lastActivityTime: number;
  lastConnectTime: number;
  lastDisconnectTime: number;
  lastInactivityAlarmTime: number;
  /** Per-device override in ms (≤ 0: the default). */
  inactivityTimeout: number;
  /** lastActivityTime changed since it was last saved. */
  dirty: boolean;
}

export interface ActivitySnapshot {
  readonly deviceId: string;
  readonly active: boolean;
  readonly lastConnectTime: number;
  readonly lastActivityTime: number;
  readonly lastDisconnectTime: number;
  readonly lastInactivityAlarmTime: number;
  readonly inactivityTimeout: number;
}

const OWNER = 'activity';
const JOB = 'gateway.activity-check';

export class ActivityService {
  readonly #states = new Map<string, State>();
  #timer: NodeJS.Timeout | undefined;
  readonly #commit: (fn: () => void) => void;

  constructor(private readonly deps: ActivityServiceDeps) {
    this.#commit = deps.db ? deps.db.transaction((fn: () => void) => fn()) : (fn) => fn();
  }

  #now(): number {
    return this.deps.now?.() ?? Date.now();
  }

  /** Loads devices that were active when the gateway stopped, then checks periodically. */
  start(): void {
    const { attributes, bus } = this.deps;
    for (const { deviceId, kv } of attributes.findByKey('SERVER_SCOPE', 'active')) {
      if (kv.value !== true) continue;
      const saved = new Map(attributes.get(deviceId, 'SERVER_SCOPE').map((a) => [a.key, a.value]));
      const num = (key: string) =>
        typeof saved.get(key) === 'number' ? (saved.get(key) as number) : 0;
      this.#states.set(deviceId, {
        device: { id: deviceId, name: '' },
        active: true,
        lastActivityTime: num('lastActivityTime'),
        lastConnectTime: num('lastConnectTime'),
        lastDisconnectTime: num('lastDisconnectTime'),
        lastInactivityAlarmTime: num('inactivityAlarmTime'),
        inactivityTimeout: num('inactivityTimeout'),
        dirty: false,
      });
    }
    bus.on(OWNER, 'device.deleted', ({ device }) => this.#states.delete(device.id));
    // A per-device timeout set over REST applies at once.
    bus.on(OWNER, 'attributes.updated', ({ deviceId, scope, values }) => {
      const state = this.#states.get(deviceId);
      const timeout = values.find((v) => v.key === 'inactivityTimeout');
      if (state && scope === 'SERVER_SCOPE' && timeout && typeof timeout.value === 'number') {
        state.inactivityTimeout = timeout.value;
      }
    });
    if (this.deps.jobs) {
      this.deps.jobs.every(JOB, this.deps.checkIntervalMs, () => this.check());
    } else {
      this.#timer = setInterval(() => this.check(), this.deps.checkIntervalMs);
      this.#timer.unref();
    }
  }

  /** Saves pending activity times and stops the periodic check. */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.deps.jobs?.cancel(JOB);
    this.deps.bus.removeOwner(OWNER);
    this.#saveDirty();
  }

  /** A transport session opened (MQTT CONNECT, CoAP observation). */
  connected(device: DeviceIdentity): void {
    const state = this.#state(device);
    state.lastConnectTime = this.#now();
    this.#persist(state, { lastConnectTime: state.lastConnectTime });
    this.record(device);
  }

  /** A transport session closed. */
  disconnected(device: DeviceIdentity): void {
    const state = this.#state(device);
    state.lastDisconnectTime = this.#now();
    this.#persist(state, { lastDisconnectTime: state.lastDisconnectTime });
  }

  /** Any uplink: cheap, called per message. */
  record(device: DeviceIdentity): void {
    const state = this.#state(device);
    state.lastActivityTime = this.#now();
    if (state.active) {
      state.dirty = true;
      return;
    }
    state.active = true;
    this.#persist(state, { active: true, lastActivityTime: state.lastActivityTime });
  }

  /**
   * The device stopped answering a poll (a connector's slave, issue 17): inactive at once rather
   * than after the inactivity timeout, so that an inactivity alarm follows the bus.
   */
  lost(device: DeviceIdentity): void {
    const state = this.#state(device);
    if (state.active) this.#deactivate(state, this.#now());
  }

  /** Marks devices past their timeout inactive and saves activity times. Runs periodically. */
  check(): void {
    const now = this.#now();
    for (const state of this.#states.values()) {
      if (!state.active) continue;
      const timeout =
        state.inactivityTimeout > 0 ? state.inactivityTimeout : this.deps.inactivityTimeoutMs;
      if (now < state.lastActivityTime + timeout) continue;
      this.#deactivate(state, now);
    }
    this.#saveDirty();
  }

  #deactivate(state: State, now: number): void {
    state.active = false;
    state.lastInactivityAlarmTime = now;
    this.#persist(state, {
      active: false,
      inactivityAlarmTime: now,
      lastActivityTime: state.lastActivityTime,
    });
  }

  snapshot(deviceId: string): ActivitySnapshot | undefined {
    const s = this.#states.get(deviceId);
    return s && snapshotOf(s);
  }

  #state(device: DeviceIdentity): State {
    let state = this.#states.get(device.id);
    if (!state) {
      state = {
        // The identity itself (shared with the device service's cache), not a copy of it.
        device,
        active: false,
        lastActivityTime: 0,
        lastConnectTime: 0,
        lastDisconnectTime: 0,
        lastInactivityAlarmTime: 0,
        inactivityTimeout: 0,
        dirty: false,
      };
      this.#states.set(device.id, state);
      const override = this.deps.attributes.get(device.id, 'SERVER_SCOPE', [
        'inactivityTimeout',
      ])[0];
      if (override && typeof override.value === 'number') state.inactivityTimeout = override.value;
    }
    return state;
  }

  #saveDirty(): void {
    for (const state of this.#states.values()) {
      if (state.dirty) this.#persist(state, { lastActivityTime: state.lastActivityTime }, false);
    }
  }

  /**
   * Writes server attributes; on a change of state, `inCommit` runs in the same transaction, and
   * `device.activity` is emitted after it committed.
   */
  #persist(state: State, values: Record<string, unknown>, emit = 'active' in values): void {
    state.dirty = false;
    const snapshot = snapshotOf(state);
    try {
      this.#commit(() => {
        if (emit) this.deps.inCommit?.(snapshot);
        this.deps.attributes.saveValues(state.device.id, 'SERVER_SCOPE', values);
      });
    } catch (err) {
      // The device was deleted meanwhile: nothing to keep.
      this.deps.log.debug({ err, deviceId: state.device.id }, 'activity not saved');
      return;
    }
    if (emit) this.deps.bus.emit('device.activity', snapshot);
  }
}

function snapshotOf(s: State): ActivitySnapshot {
  return {
    deviceId: s.device.id,
    active: s.active,
    lastConnectTime: s.lastConnectTime,
    lastActivityTime: s.lastActivityTime,
    lastDisconnectTime: s.lastDisconnectTime,
    lastInactivityAlarmTime: s.lastInactivityAlarmTime,
    inactivityTimeout: s.inactivityTimeout,
  };
}
