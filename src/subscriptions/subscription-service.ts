/**
 * Live subscriptions of users (platform reference §4): the core of the WebSocket API. A
 * transport opens one session per socket for an authenticated user and hands it each parsed
 * command message; the session answers through its sink with ThingsBoard's update messages.
 *
 * Updates are pushed from the event bus, which emits after commit, so a reading reaches the sink
 * in the same turn as its commit. Every subscription is checked with the authorization module
 * when it starts and again when a device changes owner; a session ends when its token expires
 * or its user is disabled or deleted (checked every `recheckIntervalMs`).
 */

import type { Logger } from 'pino';
import type { AlarmService } from '../alarms/alarm-service.js';
import type { AlarmEvent } from '../alarms/types.js';
import type { AttributeService } from '../attributes/attribute-service.js';
import type { OwnerAttributeService, OwnerType } from '../attributes/owner-attributes.js';
import type { AttributeScope, TypedAttributeKv } from '../attributes/types.js';
import type { Principal } from '../auth/auth-service.js';
import type { OwnerRef, SharedDeviceAccess } from '../auth/authorization.js';
import type { DeviceService } from '../devices/device-service.js';
import { GatewayError } from '../errors.js';
import type { EventBus, GatewayEvents, TelemetryPoint } from '../events.js';
import type { TelemetryService } from '../telemetry/telemetry-service.js';
import { cmdIdOf, type RawCmd, readWrapper } from './commands.js';
import { EntityResolver } from './entity-query.js';
import type { InboxChange, NotificationInbox } from './notification-subs.js';
import { createSub, type Sub, type SubContext } from './subs.js';
import { CLOSE, ERROR_CODE, type WsCmdType, type WsUpdate } from './types.js';

const OWNER = 'subscriptions';

/** Where a session's updates go: the transport's socket. */
export interface SessionSink {
  /** Queues one update; never blocks (a transport bounds its own buffer). */
  send(update: WsUpdate): void;
  /** Ends the connection with a WebSocket close code and reason. */
  close(code: number, reason: string): void;
}

export interface SubscriptionServiceDeps {
  readonly bus: EventBus;
  readonly log: Logger;
  readonly devices: Pick<DeviceService, 'get' | 'list'>;
  readonly telemetry: Pick<TelemetryService, 'query'>;
  readonly attributes: Pick<AttributeService, 'get'>;
  readonly alarms: Pick<AlarmService, 'list'>;
  /**
   * User, customer and tenant attributes: dynamic values of key filters (absent: their defaults)
   * and `ATTRIBUTES` subscriptions; their changes arrive as `ownerAttributes.updated` events.
   */
  readonly owners?: Pick<OwnerAttributeService, 'value' | 'get'>;
  /** The tenant, a customer or a user by id (`ATTRIBUTES` subscriptions on them; absent: refused). */
  readonly ownerRef?: (type: OwnerType, id: string) => OwnerRef | undefined;
  readonly shared: SharedDeviceAccess;
  /** Users' inboxes (NOTIFICATIONS commands); their changes arrive as `notification.*` events. */
  readonly notifications?: NotificationInbox;
  /** Whether the user still exists and may sign in. */
  readonly userActive: (userId: string) => boolean;
  /** Most live subscriptions of one session; the session is closed above it. */
  readonly maxSubscriptionsPerSession: number;
  /** How often token expiry and disabled users are checked (default 1000 ms). */
  readonly recheckIntervalMs?: number;
  readonly now?: () => number;
}

/** Which namespace a command's `cmdId` lives in (a new command with the same id replaces). */
function slotOf(type: WsCmdType): string {
  switch (type) {
    case 'TIMESERIES':
      return 'ts';
    case 'ATTRIBUTES':
      return 'attr';
    case 'ALARM_STATUS':
    case 'ALARM_STATUS_UNSUBSCRIBE':
      return 'status';
    case 'NOTIFICATIONS':
    case 'NOTIFICATIONS_COUNT':
    case 'NOTIFICATIONS_UNSUBSCRIBE':
      return 'notifications';
    default:
      return 'data';
  }
}

export class ApiSession {
  readonly #subs = new Map<string, Sub>();
  #closed = false;

  constructor(
    readonly principal: Principal,
    /** Epoch ms when the session's token expires. */
    readonly expiresAt: number,
    readonly sink: SessionSink,
    private readonly service: SubscriptionService,
  ) {}

  get closed(): boolean {
    return this.#closed;
  }

  get subscriptions(): number {
    return this.#subs.size;
  }

  /** Handles one parsed command message (either wrapper form). */
  handle(msg: unknown): void {
    if (this.#closed) return;
    let cmds: RawCmd[];
    try {
      cmds = readWrapper(msg).cmds;
    } catch (err) {
      this.#error(1, ERROR_CODE.badRequest, (err as Error).message);
      return;
    }
    for (const cmd of cmds) {
      if (this.#closed) return;
      this.#run(cmd);
    }
  }

  #run(cmd: RawCmd): void {
    let cmdId = -1;
    try {
      cmdId = cmdIdOf(cmd.body);
      const key = `${slotOf(cmd.type)}:${cmdId}`;
      if (cmd.type.endsWith('_UNSUBSCRIBE')) {
        this.#drop(key);
        return;
      }
      if (
        (cmd.type === 'TIMESERIES' || cmd.type === 'ATTRIBUTES') &&
        cmd.body.unsubscribe === true
      ) {
        // An empty entityId drops every subscription of the session (§4.2).
        if (!cmd.body.entityId) for (const k of [...this.#subs.keys()]) this.#drop(k);
        else this.#drop(key);
        return;
      }
      const existing = this.#subs.get(key);
      if (existing?.amend?.(cmd)) return;
      const sub = createSub(cmd, cmdId, this.service.context(this));
      if (!sub) return;
      this.#drop(key);
      if (this.#subs.size >= this.service.maxSubscriptions) {
        sub.dispose();
        this.sink.close(CLOSE.policy, 'Max subscriptions limit reached!');
        this.close();
        return;
      }
      this.#subs.set(key, sub);
      this.service.index(sub);
      sub.start();
    } catch (err) {
      if (err instanceof GatewayError) {
        this.#error(cmdId, ERROR_CODE.badRequest, err.message);
        return;
      }
      this.service.log.error({ err, type: cmd.type, cmdId }, 'websocket command failed');
      this.#error(cmdId, ERROR_CODE.internal, 'Internal Server error!');
    }
  }

  /** ThingsBoard's error update (`TelemetrySubscriptionUpdate` with an error code). */
  #error(cmdId: number, errorCode: number, errorMsg: string): void {
    this.sink.send({ subscriptionId: cmdId, errorCode, errorMsg, data: null });
  }

  /** Ends one subscription (the sub itself calls this when access is lost). */
  drop(sub: Sub): void {
    for (const [key, s] of this.#subs) if (s === sub) this.#drop(key);
  }

  #drop(key: string): void {
    const sub = this.#subs.get(key);
    if (!sub) return;
    this.#subs.delete(key);
    this.service.unindex(sub);
    sub.dispose();
  }

  /** Releases every subscription; idempotent. The transport calls it when the socket closes. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const key of [...this.#subs.keys()]) this.#drop(key);
    this.service.forget(this);
  }
}

/** Sessions, their subscriptions indexed by device, and the bus listeners that feed them. */
export class SubscriptionService {
  readonly #sessions = new Set<ApiSession>();
  readonly #byDevice = new Map<string, Set<Sub>>();
  readonly #indexed = new Map<Sub, readonly string[]>();
  readonly #alarmSubs = new Set<Sub>();
  readonly #deviceSetSubs = new Set<Sub>();
  readonly #inboxSubs = new Set<Sub>();
  /** `ATTRIBUTES` subscriptions on users, customers and the tenant. */
  readonly #ownerSubs = new Set<Sub>();
  /** Subscriptions whose key filters read user, customer or tenant attributes. */
  readonly #dynamicSubs = new Set<Sub>();
  readonly #resolver: EntityResolver;
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: SubscriptionServiceDeps) {
    this.#resolver = new EntityResolver({ devices: deps.devices, shared: deps.shared });
  }

  get log(): Logger {
    return this.deps.log;
  }

  get maxSubscriptions(): number {
    return this.deps.maxSubscriptionsPerSession;
  }

  start(): void {
    const { bus } = this.deps;
    bus.on(OWNER, 'telemetry', ({ deviceId, points }) => this.#telemetry(deviceId, points));
    bus.on(OWNER, 'attributes.updated', ({ deviceId, scope, values }) =>
      this.#attributes(deviceId, scope, values),
    );
    // Deleted keys go out as ThingsBoard sends them: each key with ts 0 and an empty value.
    bus.on(OWNER, 'telemetry.deleted', ({ deviceId, keys }) =>
      this.#telemetry(
        deviceId,
        keys.map((key) => ({ key, ts: 0, value: '', kind: 'string' as const })),
      ),
    );
    bus.on(OWNER, 'attributes.deleted', ({ deviceId, scope, keys }) =>
      this.#attributes(
        deviceId,
        scope,
        keys.map((key) => ({ key, value: '', lastUpdateTs: 0, type: 'STRING' as const })),
      ),
    );
    bus.on(OWNER, 'alarm', (ev) => this.#alarm(ev));
    bus.on(OWNER, 'ownerAttributes.updated', (ev) => {
      this.#dynamicValues(ev);
      if (this.#ownerSubs.size > 0)
        this.#each(this.#ownerSubs, 'owner attributes', (s) => s.onOwnerAttributes?.(ev));
    });
    const changed = () => this.#devicesChanged();
    bus.on(OWNER, 'device.created', changed);
    bus.on(OWNER, 'device.updated', changed);
    bus.on(OWNER, 'device.deleted', changed);
    bus.on(OWNER, 'device.owner', changed);
    bus.on(OWNER, 'notification.created', ({ notification }) =>
      this.#inboxChanged({
        kind: 'created',
        recipientId: notification.recipientId.id,
        notification,
      }),
    );
    bus.on(OWNER, 'notification.read', ({ recipientId, unread }) =>
      this.#inboxChanged({ kind: 'read', recipientId, unread }),
    );
    bus.on(OWNER, 'notification.deleted', ({ recipientId, unread }) =>
      this.#inboxChanged({ kind: 'deleted', recipientId, unread }),
    );
    const every = this.deps.recheckIntervalMs ?? 1000;
    this.#timer = setInterval(() => this.#recheck(), every);
    this.#timer.unref();
  }

  /** Closes every session (the gateway is stopping). */
  stop(): void {
    this.deps.bus.removeOwner(OWNER);
    clearInterval(this.#timer);
    this.#timer = undefined;
    for (const s of [...this.#sessions]) {
      s.sink.close(CLOSE.goingAway, 'Server is stopping');
      s.close();
    }
  }

  /** A session for an authenticated user whose token expires at `expiresAt` (epoch ms). */
  open(principal: Principal, expiresAt: number, sink: SessionSink): ApiSession {
    const session = new ApiSession(principal, expiresAt, sink, this);
    this.#sessions.add(session);
    return session;
  }

  get stats(): { sessions: number; subscriptions: number } {
    let subscriptions = 0;
    for (const s of this.#sessions) subscriptions += s.subscriptions;
    return { sessions: this.#sessions.size, subscriptions };
  }

  /** @internal what a subscription of `session` works with. */
  context(session: ApiSession): SubContext {
    return {
      session,
      principal: session.principal,
      send: (u) => {
        if (!session.closed) session.sink.send(u);
      },
      resolver: this.#resolver,
      telemetry: this.deps.telemetry,
      attributes: this.deps.attributes,
      alarms: this.deps.alarms,
      owners: this.deps.owners,
      ownerRef: this.deps.ownerRef,
      notifications: this.deps.notifications,
      now: () => this.#now(),
      reindex: (sub) => {
        this.unindex(sub);
        this.index(sub);
      },
      end: (sub) => session.drop(sub),
    };
  }

  /** @internal */
  index(sub: Sub): void {
    const ids = [...sub.devices()];
    this.#indexed.set(sub, ids);
    for (const id of ids) {
      let set = this.#byDevice.get(id);
      if (!set) {
        set = new Set();
        this.#byDevice.set(id, set);
      }
      set.add(sub);
    }
    if (sub.onAlarm) this.#alarmSubs.add(sub);
    if (sub.onDevicesChanged) this.#deviceSetSubs.add(sub);
    if (sub.onInbox) this.#inboxSubs.add(sub);
    if (sub.onOwnerAttributes) this.#ownerSubs.add(sub);
    if (sub.dynamicSources?.length) this.#dynamicSubs.add(sub);
  }

  /** @internal */
  unindex(sub: Sub): void {
    for (const id of this.#indexed.get(sub) ?? []) {
      const set = this.#byDevice.get(id);
      set?.delete(sub);
      if (set?.size === 0) this.#byDevice.delete(id);
    }
    this.#indexed.delete(sub);
    this.#alarmSubs.delete(sub);
    this.#deviceSetSubs.delete(sub);
    this.#inboxSubs.delete(sub);
    this.#ownerSubs.delete(sub);
    this.#dynamicSubs.delete(sub);
  }

  /** @internal */
  forget(session: ApiSession): void {
    this.#sessions.delete(session);
  }

  #now(): number {
    return this.deps.now?.() ?? Date.now();
  }

  #each(subs: Iterable<Sub>, what: string, fn: (sub: Sub) => void): void {
    for (const sub of [...subs]) {
      try {
        fn(sub);
      } catch (err) {
        this.deps.log.error({ err, what }, 'subscription update failed');
      }
    }
  }

  #telemetry(deviceId: string, points: readonly TelemetryPoint[]): void {
    const subs = this.#byDevice.get(deviceId);
    if (subs) this.#each(subs, 'telemetry', (s) => s.onTelemetry?.(deviceId, points));
  }

  #attributes(deviceId: string, scope: AttributeScope, values: readonly TypedAttributeKv[]): void {
    const subs = this.#byDevice.get(deviceId);
    if (subs) this.#each(subs, 'attributes', (s) => s.onAttributes?.(deviceId, scope, values));
  }

  #alarm(ev: AlarmEvent): void {
    this.#each(this.#alarmSubs, 'alarm', (s) => s.onAlarm?.(ev));
  }

  /** A user's inbox changed (after its commit): NOTIFICATIONS and NOTIFICATIONS_COUNT update. */
  #inboxChanged(change: InboxChange): void {
    this.#each(this.#inboxSubs, 'notifications', (s) => s.onInbox?.(change));
  }

  /**
   * A user's, customer's or tenant's attribute changed (after its commit): queries whose dynamic
   * values read it run again, as ThingsBoard's dynamic-value subscriptions do (server scope only).
   * Costs nothing while no live query has a dynamic value.
   */
  #dynamicValues(ev: GatewayEvents['ownerAttributes.updated']): void {
    if (this.#dynamicSubs.size === 0 || ev.scope !== 'SERVER_SCOPE') return;
    const keys = new Set(ev.keys);
    const reads = (s: Sub) =>
      s.dynamicSources?.some(
        (src) =>
          src.type === ev.entityType &&
          (src.id === undefined || src.id === ev.entityId) &&
          keys.has(src.key),
      );
    this.#each([...this.#dynamicSubs].filter(reads), 'dynamic values', (s) => s.onDynamicValue?.());
  }

  #devicesChanged(): void {
    this.#each(this.#deviceSetSubs, 'devices', (s) => s.onDevicesChanged?.());
  }

  /** Ends sessions whose token expired or whose user is disabled or gone. */
  #recheck(): void {
    const now = this.#now();
    for (const s of [...this.#sessions]) {
      let reason: string | undefined;
      if (now >= s.expiresAt) reason = 'Token has expired';
      else if (!this.deps.userActive(s.principal.userId)) reason = 'User account is not active';
      if (!reason) continue;
      this.deps.log.info({ userId: s.principal.userId, reason }, 'websocket session ended');
      s.sink.close(CLOSE.policy, reason);
      s.close();
    }
  }
}
