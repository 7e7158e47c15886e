import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import { type PageData, type PageQuery, pageData } from '../common/entity.js';
import {
  DeviceSubscribers,
  LongPolls,
  type PollOutcome,
  type Subscription,
} from '../common/subscriptions.js';
import { validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import type { DeviceIdentity, DeviceService } from '../devices/device-service.js';
import { NotFoundError, UnavailableError, ValidationError } from '../errors.js';
import type { EventBus } from '../events.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { type RpcRow, type RpcSort, RpcStore } from './rpc-store.js';
import type { PersistentRpc, RpcCallResult, RpcStatus, ToDeviceRpc } from './types.js';

export type { PersistentRpc, RpcCallResult, RpcStatus, ToDeviceRpc } from './types.js';

export interface RpcServiceDeps {
  readonly db: Db;
  readonly devices: DeviceService;
  readonly tenants: TenantService;
  readonly bus: EventBus;
  readonly log: Logger;
  /** `server.rest.server_side_rpc.default_timeout` (§3.1), default 10000 ms. */
  readonly defaultTimeoutMs?: number;
  /** `server.rest.server_side_rpc.min_timeout`, default 5000 ms. */
  readonly minTimeoutMs?: number;
  /**
   * Server time (default Date.now); the gateway passes a clock that never runs backwards
   * (common/clock.ts), so that a wall clock set back does not hold an RPC past its timeout.
   */
  readonly now?: () => number;
}

const rpcBody = z.object({
  method: z.string().min(1, 'must not be empty'),
  params: z.unknown(),
  timeout: z.number().int().positive().optional(),
  expirationTime: z.number().int().positive().optional(),
  persistent: z.boolean().optional(),
  retries: z.number().int().min(0).optional().nullable(),
  additionalInfo: z.unknown().optional(),
});

/** An RPC still waiting to be delivered or answered. */
interface LiveRpc {
  readonly rpcId: string;
  readonly deviceId: string;
  readonly requestId: number;
  readonly method: string;
  readonly params: unknown;
  readonly oneway: boolean;
  readonly persistent: boolean;
  readonly expirationTime: number;
  status: RpcStatus;
  timer: NodeJS.Timeout | undefined;
  /** Resolves the REST call of a non-persistent RPC. */
  settle?: (result: RpcCallResult) => void;
}

const OWNER = 'rpc';
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Server-side RPC (reference device-api.md §3): requests from REST, per-device integer ids,
 * a queue per device until expiry, delivery to subscribed device sessions, replies, and
 * persistent RPCs stored with their states.
 *
 * Transport contract: a session calls `subscribe` (or `poll` for one request), writes each
 * request it gets, then calls `delivered`; a reply goes to `reply`; a failed delivery to `failed`.
 */
export class RpcService {
  readonly #store: RpcStore;
  readonly #subscribers: DeviceSubscribers<ToDeviceRpc>;
  readonly #polls = new LongPolls();
  readonly #live = new Map<string, Map<number, LiveRpc>>();
  readonly #nextId = new Map<string, number>();
  readonly #defaultTimeoutMs: number;
  readonly #minTimeoutMs: number;
  #closed = false;

  constructor(private readonly deps: RpcServiceDeps) {
    this.#store = new RpcStore(deps.db);
    this.#subscribers = new DeviceSubscribers(deps.log);
    this.#defaultTimeoutMs = deps.defaultTimeoutMs ?? 10_000;
    this.#minTimeoutMs = deps.minTimeoutMs ?? 5_000;
  }

  /** Reloads persistent RPCs that may still be delivered or answered, and expires the rest. */
  start(): void {
    const now = this.#now();
    let restored = 0;
    for (const row of this.#store.open()) {
      if (row.expiration_time <= now) {
        this.#persistStatus(row.device_id, row.id, row.request_id, expiredStatus(row.status));
        continue;
      }
      const live: LiveRpc = {
        rpcId: row.id,
        deviceId: row.device_id,
        requestId: row.request_id,
        method: row.method,
        params: JSON.parse(row.params),
        oneway: row.oneway === 1,
        persistent: true,
        expirationTime: row.expiration_time,
        // @NOTE: SENT means handed to a session that may never have written it: send again.
        status: row.status === 'SENT' ? 'QUEUED' : row.status,
        timer: undefined,
      };
      this.#track(live);
      restored++;
    }
    if (restored > 0) this.deps.log.info({ restored }, 'persistent rpc restored');
    this.deps.bus.on(OWNER, 'device.deleted', ({ device }) => this.#dropDevice(device.id));
  }

  /**
   * `POST /api/rpc/{oneway|twoway}/{deviceId}`. Persistent RPCs resolve at once with their id;
   * others when delivered (one-way), answered (two-way) or expired.
   */
  call(deviceId: string, body: unknown, oneway: boolean): Promise<RpcCallResult> {
    const input = validate(rpcBody, body, 'rpc request');
    if (!(typeof body === 'object' && body !== null && 'params' in body)) {
      throw new ValidationError('Invalid rpc request: params: is required');
    }
    const device = this.#device(deviceId);
    if (this.#closed) throw new UnavailableError('Gateway is stopping');
    const now = this.#now();
    // §3.1: expiry = now + max(min_timeout, timeout) unless expirationTime is given.
    const expirationTime =
      input.expirationTime ??
      now + Math.max(this.#minTimeoutMs, input.timeout ?? this.#defaultTimeoutMs);
    const live: LiveRpc = {
      rpcId: randomUUID(),
      deviceId: device.id,
      requestId: this.#allocateId(device),
      method: input.method,
      params: input.params ?? null,
      oneway,
      persistent: input.persistent === true,
      expirationTime,
      status: 'QUEUED',
      timer: undefined,
    };
    if (live.persistent) {
      this.#store.insert({
        id: live.rpcId,
        device_rid: device.rid,
        request_id: live.requestId,
        oneway: oneway ? 1 : 0,
        method: live.method,
        params: JSON.stringify(live.params),
        status: 'QUEUED',
        expiration_time: expirationTime,
        retries: input.retries ?? null,
        additional_info:
          input.additionalInfo === undefined ? null : JSON.stringify(input.additionalInfo),
        created_time: now,
      });
      this.#emitStatus(live);
    }
    const result = live.persistent
      ? Promise.resolve<RpcCallResult>({ kind: 'persisted', rpcId: live.rpcId })
      : new Promise<RpcCallResult>((resolve) => {
          live.settle = resolve;
        });
    this.#track(live);
    this.deps.log.debug(
      { deviceId: device.id, requestId: live.requestId, method: live.method, oneway },
      'rpc queued',
    );
    if (this.#subscribers.has(device.id)) {
      this.#markSent(live);
      this.#subscribers.publish(device.id, toDevice(live));
    }
    return result;
  }

  /**
   * Subscribes a device session to RPC requests (MQTT SUBSCRIBE `v1/devices/me/rpc/request/+`,
   * CoAP observe). Pending requests are pushed at once, in id order (BURST, §3.2). With `once`,
   * the subscription ends after the first request (HTTP long poll).
   */
  subscribe(
    deviceId: string,
    sink: (request: ToDeviceRpc) => void,
    opts: { once?: boolean } = {},
  ): Subscription {
    let taken = false;
    let sub: Subscription | undefined;
    const entry = (request: ToDeviceRpc) => {
      if (opts.once) {
        if (taken) return;
        taken = true;
        sub?.unsubscribe();
      }
      sink(request);
    };
    sub = this.#subscribers.add(deviceId, entry);
    for (const live of [...(this.#live.get(deviceId)?.values() ?? [])]) {
      if (taken) {
        sub.unsubscribe();
        break;
      }
      if (live.status !== 'QUEUED') continue;
      this.#markSent(live);
      entry(toDevice(live));
    }
    return sub;
  }

  /** HTTP long poll: the first pending or new request within `timeoutMs` (§3.3). */
  poll(
    deviceId: string,
    opts: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<PollOutcome<ToDeviceRpc>> {
    return this.#polls.wait<ToDeviceRpc>(
      (deliver) => this.subscribe(deviceId, deliver, { once: true }),
      { deviceId, ...opts },
    );
  }

  /** The session wrote the request to the device (HTTP response, QoS 0 publish, MQTT PUBACK). */
  delivered(deviceId: string, requestId: number): void {
    const live = this.#live.get(deviceId)?.get(requestId);
    if (!live || (live.status !== 'SENT' && live.status !== 'QUEUED')) return;
    if (live.oneway) {
      this.#setStatus(live, 'DELIVERED');
      this.#finish(live, 'SUCCESSFUL', { kind: 'delivered' });
    } else {
      this.#setStatus(live, 'DELIVERED');
    }
  }

  /** Delivery failed for good (e.g. MQTT PUBACK retries exhausted). */
  failed(deviceId: string, requestId: number, error: string): void {
    const live = this.#live.get(deviceId)?.get(requestId);
    if (!live) return;
    this.#finish(live, 'FAILED', { kind: 'timeout' }, JSON.stringify({ error }));
  }

  /**
   * The device's reply to request `requestId`, as the text it sent. A reply to an unknown,
   * one-way or expired request is dropped as stale (§3.2); returns whether it was used.
   */
  reply(deviceId: string, requestId: number, body: string): boolean {
    const live = this.#live.get(deviceId)?.get(requestId);
    if (!live || live.oneway) {
      this.deps.log.debug({ deviceId, requestId }, 'stale rpc reply dropped');
      return false;
    }
    this.#finish(live, 'SUCCESSFUL', { kind: 'reply', body }, responseJson(body));
    return true;
  }

  /** `GET /api/rpc/persistent/{rpcId}`. */
  get(rpcId: string): PersistentRpc {
    const row = this.#store.byId(rpcId.toLowerCase());
    if (!row) throw new NotFoundError(`Rpc with id [${rpcId}] is not found`);
    return this.#toPersistent(row);
  }

  /** `GET /api/rpc/persistent/device/{deviceId}`: a device's persistent RPCs, one page. */
  list(deviceId: string, q: PageQuery<RpcSort>, status?: RpcStatus): PageData<PersistentRpc> {
    const device = this.#device(deviceId);
    const { rows, total } = this.#store.page(device.rid, q, status);
    return pageData(
      rows.map((r) => this.#toPersistent(r)),
      total,
      q,
    );
  }

  /** `DELETE /api/rpc/persistent/{rpcId}`: forgets the RPC; a pending one is not sent. */
  delete(rpcId: string): void {
    const row = this.#store.byId(rpcId.toLowerCase());
    if (!row) throw new NotFoundError(`Rpc with id [${rpcId}] is not found`);
    const live = this.#live.get(row.device_id)?.get(row.request_id);
    if (live?.rpcId === row.id) this.#untrack(live);
    this.#store.delete(row.id);
  }

  /** Ends long polls and waiting REST calls (gateway stopping) and refuses new ones. */
  releasePolls(): void {
    this.#closed = true;
    this.#polls.closeAll();
    for (const byId of this.#live.values()) {
      for (const live of [...byId.values()]) {
        if (live.persistent) continue;
        this.#untrack(live);
        live.settle?.({ kind: 'closed', reason: 'stopping' });
      }
    }
  }

  stop(): void {
    this.releasePolls();
    for (const byId of this.#live.values())
      for (const live of byId.values()) clearTimeout(live.timer);
    this.#live.clear();
    this.#subscribers.clear();
    this.deps.bus.removeOwner(OWNER);
  }

  /** Subscriptions, long polls and RPCs in memory (each holding one timer). */
  get counts(): { subscribers: number; polls: number; pending: number } {
    let pending = 0;
    for (const byId of this.#live.values()) pending += byId.size;
    return { subscribers: this.#subscribers.size, polls: this.#polls.size, pending };
  }

  #device(deviceId: string): DeviceIdentity {
    const device = this.deps.devices.identity(deviceId.toLowerCase());
    if (!device) throw new NotFoundError(`Device with id [${deviceId}] is not found`);
    return device;
  }

  /**
   * §3.2: ids are small integers per device, counting from 0. We continue after the highest
   * stored persistent id so that a reply after a restart cannot hit the wrong request.
   */
  #allocateId(device: DeviceIdentity): number {
    let next = this.#nextId.get(device.id);
    if (next === undefined) {
      const max = this.#store.maxRequestId(device.rid);
      next = max === undefined ? 0 : max + 1;
    }
    this.#nextId.set(device.id, next + 1);
    return next;
  }

  #track(live: LiveRpc): void {
    let byId = this.#live.get(live.deviceId);
    if (!byId) {
      byId = new Map();
      this.#live.set(live.deviceId, byId);
    }
    byId.set(live.requestId, live);
    this.#arm(live);
  }

  #now(): number {
    return this.deps.now?.() ?? Date.now();
  }

  /** Node fires longer timeouts than 2^31-1 ms at once: far expiries are re-armed in steps. */
  #arm(live: LiveRpc): void {
    const delay = Math.min(Math.max(0, live.expirationTime - this.#now()), MAX_TIMER_MS);
    live.timer = setTimeout(() => {
      if (this.#now() < live.expirationTime) this.#arm(live);
      else this.#expire(live);
    }, delay);
  }

  #untrack(live: LiveRpc): void {
    clearTimeout(live.timer);
    const byId = this.#live.get(live.deviceId);
    if (byId?.get(live.requestId) !== live) return;
    byId.delete(live.requestId);
    if (byId.size === 0) this.#live.delete(live.deviceId);
  }

  #expire(live: LiveRpc): void {
    const status = expiredStatus(live.status);
    this.deps.log.debug(
      { deviceId: live.deviceId, requestId: live.requestId, status },
      'rpc expired',
    );
    this.#finish(live, status, { kind: status === 'EXPIRED' ? 'expired' : 'timeout' });
  }

  #finish(live: LiveRpc, status: RpcStatus, result: RpcCallResult, response?: string): void {
    this.#untrack(live);
    this.#setStatus(live, status, response);
    live.settle?.(result);
  }

  #markSent(live: LiveRpc): void {
    this.#setStatus(live, 'SENT');
  }

  #setStatus(live: LiveRpc, status: RpcStatus, response?: string): void {
    live.status = status;
    if (!live.persistent) return;
    this.#store.setStatus(live.rpcId, status, response);
    this.#emitStatus(live);
  }

  #persistStatus(deviceId: string, rpcId: string, requestId: number, status: RpcStatus): void {
    this.#store.setStatus(rpcId, status);
    this.deps.bus.emit('rpc.status', { deviceId, rpcId, requestId, status });
  }

  #emitStatus(live: LiveRpc): void {
    this.deps.bus.emit('rpc.status', {
      deviceId: live.deviceId,
      rpcId: live.rpcId,
      requestId: live.requestId,
      status: live.status,
    });
  }

  #dropDevice(deviceId: string): void {
    for (const live of [...(this.#live.get(deviceId)?.values() ?? [])]) {
      this.#untrack(live);
      live.settle?.({ kind: 'closed', reason: 'deleted' });
    }
    this.#nextId.delete(deviceId);
    this.#polls.closeDevice(deviceId);
  }

  #toPersistent(row: RpcRow): PersistentRpc {
    const deviceId = { entityType: 'DEVICE', id: row.device_id } as const;
    return {
      id: { entityType: 'RPC', id: row.id },
      createdTime: row.created_time,
      tenantId: { entityType: 'TENANT', id: this.deps.tenants.id },
      deviceId,
      expirationTime: row.expiration_time,
      request: {
        id: row.id,
        deviceId,
        oneway: row.oneway === 1,
        expirationTime: row.expiration_time,
        body: { method: row.method, params: row.params },
        persisted: true,
        retries: row.retries,
        requestId: row.request_id,
      },
      response: row.response === null ? null : JSON.parse(row.response),
      status: row.status,
      additionalInfo: row.additional_info === null ? null : JSON.parse(row.additional_info),
    };
  }
}

function toDevice(live: LiveRpc): ToDeviceRpc {
  return { id: live.requestId, method: live.method, params: live.params };
}

/** §3.1 / TB `processServerSideRpcTimeout`: never sent -> EXPIRED, sent but unanswered -> TIMEOUT. */
function expiredStatus(status: RpcStatus): RpcStatus {
  return status === 'QUEUED' ? 'EXPIRED' : 'TIMEOUT';
}

/** A stored response is JSON: the device's reply if it parses, else the reply as a JSON string. */
function responseJson(body: string): string {
  try {
    JSON.parse(body);
    return body;
  } catch {
    return JSON.stringify(body);
  }
}
