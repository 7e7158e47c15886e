import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AttributeService } from '../attributes/attribute-service.js';
import { parseTypedObject } from '../attributes/kv-value.js';
import type { KvValue, TypedAttributeKv } from '../attributes/types.js';
import type { ClaimRequest, ClaimService, DeviceClaimOutcome } from '../claims/claim-service.js';
import { NULL_UUID } from '../common/entity.js';
import { parseJsonPayload } from '../common/json-payload.js';
import type { PollOutcome } from '../common/subscriptions.js';
import type { ActivityService, ActivitySnapshot } from '../devices/activity-service.js';
import type { Device, DeviceIdentity, DeviceService } from '../devices/device-service.js';
import { ValidationError } from '../errors.js';
import type { ChangeSource, EventBus } from '../events.js';
import type { OtaChunk, OtaService, OtaType } from '../ota/ota-service.js';
import type { ProvisionResponse, ProvisionService } from '../provisioning/provision-service.js';
import type { ClientRpcService } from '../rpc/client-rpc.js';
import { entryValue, type TsEntry } from '../telemetry/telemetry-parser.js';
import type { TelemetryService } from '../telemetry/telemetry-service.js';
import { MessagePipeline, type MessagePipelineStats, type PendingMsg } from './message-pipeline.js';
import type { EntityRef, GatewayMsg, MessageProcessor, MsgType } from './types.js';

export interface DeviceMessageServiceDeps {
  readonly log: Logger;
  readonly bus: EventBus;
  readonly devices: Pick<DeviceService, 'get'>;
  readonly telemetry: TelemetryService;
  readonly attributes: AttributeService;
  readonly clientRpc: ClientRpcService;
  readonly claims: ClaimService;
  readonly provisioning: ProvisionService;
  readonly ota: OtaService;
  readonly activity: ActivityService;
  /** Most queued entries before the oldest is dropped (`messages.queueSize`). */
  readonly queueSize: number;
  /** ThingsBoard's `serviceId` metadata of `TO_SERVER_RPC_REQUEST`: this gateway. */
  readonly serviceId: string;
  /** A customer's title for `ENTITY_ASSIGNED` metadata; undefined when unknown. */
  readonly customerName?: (customerId: string) => string | undefined;
  readonly processor?: MessageProcessor;
  readonly now?: () => number;
}

/** What a device message needs to know of its device, cached (bounded) off the hot path. */
interface DeviceInfo {
  readonly name: string;
  readonly type: string;
  readonly customerId: string | null;
}

interface DeviceMsgParts {
  readonly metadata: Record<string, string>;
  readonly data: unknown;
}

const OWNER = 'messages';
/** Devices whose name, type and customer are kept in memory for message metadata. */
const INFO_CACHE_SIZE = 10_000;

/** Client-side RPC: where the device's reply goes, and how long it waits. */
export interface ToServerRpcOptions {
  /** The transport session (an MQTT connection); default: a new one (HTTP, CoAP). */
  readonly sessionId?: string;
  /** The device's request id in that session (MQTT topic suffix); default 0. */
  readonly requestId?: number;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
}

/**
 * The one way in for device messages (issue 13, platform reference §7.1): every transport turns
 * its wire format into these calls, and every uplink and every server-side change becomes a
 * `GatewayMsg` of ThingsBoard's type once its data is committed, handed to the one processing
 * entry point through a bounded queue (`MessagePipeline`), never before the device's reply.
 *
 * Device uplinks come in through the methods below; server-side changes (REST attribute and
 * time-series writes, device CRUD and assignment, activity) arrive as post-commit bus events.
 * Other producers (the alarm engine: `ALARM_ACK`, ...) call `submit`.
 */
export class DeviceMessageService {
  readonly #deps: DeviceMessageServiceDeps;
  readonly #pipeline: MessagePipeline;
  readonly #info = new Map<string, DeviceInfo>();
  /** Live observations per device (`observe`): a device with any has a session. */
  readonly #observing = new Map<string, number>();

  constructor(deps: DeviceMessageServiceDeps) {
    this.#deps = deps;
    this.#pipeline = new MessagePipeline({
      log: deps.log,
      capacity: deps.queueSize,
      processor: deps.processor,
    });
  }

  /** Turns committed server-side changes (bus events) into messages. */
  start(): void {
    const { bus } = this.#deps;
    const forget = (deviceId: string) => this.#info.delete(deviceId);
    bus.on(OWNER, 'attributes.updated', ({ deviceId, scope, values, source }) => {
      if (source?.kind !== 'user') return;
      this.#deferDevice(deviceId, 'ATTRIBUTES_UPDATED', () => ({
        metadata: { scope, ...userMetadata(source) },
        data: attributeData(values),
      }));
    });
    bus.on(OWNER, 'attributes.deleted', ({ deviceId, scope, keys, source }) => {
      if (source?.kind !== 'user') return;
      this.#deferDevice(deviceId, 'ATTRIBUTES_DELETED', () => ({
        metadata: { scope, ...userMetadata(source) },
        data: { attributes: [...keys] },
      }));
    });
    bus.on(OWNER, 'telemetry.saved', ({ deviceId, points, source }) => {
      // A rule chain's own save makes no message (as ThingsBoard's save node): no loop.
      if (source?.kind === 'system') return;
      this.#deferDevice(deviceId, 'TIMESERIES_UPDATED', () => ({
        metadata: userMetadata(source),
        data: {
          timeseries: byTs(points, (p) => p.value).map(([ts, values]) => ({ ts, values })),
        },
      }));
    });
    bus.on(OWNER, 'telemetry.deleted', ({ deviceId, keys, startTs, endTs, source }) => {
      this.#deferDevice(deviceId, 'TIMESERIES_DELETED', () => ({
        metadata: userMetadata(source),
        data: { timeseries: [...keys], startTs: startTs ?? null, endTs: endTs ?? null },
      }));
    });
    bus.on(OWNER, 'device.activity', (snapshot) => {
      const type = snapshot.active ? 'ACTIVITY_EVENT' : 'INACTIVITY_EVENT';
      this.#deferDevice(snapshot.deviceId, type, () => ({
        metadata: { scope: 'SERVER_SCOPE' },
        data: activityData(snapshot, true),
      }));
    });
    bus.on(OWNER, 'device.created', ({ device, entity }) => {
      this.#entityMsg('ENTITY_CREATED', device.id, entity, {});
    });
    bus.on(OWNER, 'device.updated', ({ device, entity }) => {
      forget(device.id);
      this.#entityMsg('ENTITY_UPDATED', device.id, entity, {});
    });
    bus.on(OWNER, 'device.deleted', ({ device, entity }) => {
      forget(device.id);
      this.#entityMsg('ENTITY_DELETED', device.id, entity, {});
    });
    bus.on(OWNER, 'device.owner', ({ device, customerId, previousCustomerId }) => {
      forget(device.id);
      const entity = this.#device(device.id);
      if (previousCustomerId !== null) {
        this.#entityMsg('ENTITY_UNASSIGNED', device.id, entity, {
          unassignedCustomerId: previousCustomerId,
          unassignedCustomerName: this.#deps.customerName?.(previousCustomerId) ?? '',
        });
      }
      if (customerId !== null) {
        this.#entityMsg('ENTITY_ASSIGNED', device.id, entity, {
          assignedCustomerId: customerId,
          assignedCustomerName: this.#deps.customerName?.(customerId) ?? '',
        });
      }
    });
    // A renamed profile is a new `deviceType`.
    bus.on(OWNER, 'deviceProfile.updated', () => this.#info.clear());
  }

  /** Hands what is queued to the processor, then stops. Safe to call twice. */
  stop(): void {
    this.#deps.bus.removeOwner(OWNER);
    this.#pipeline.stop();
  }

  /** Plugs in the one processing entry point (the alarm engine, then the rule engine). */
  setProcessor(processor: MessageProcessor): void {
    this.#pipeline.setProcessor(processor);
  }

  get processor(): MessageProcessor {
    return this.#pipeline.processor;
  }

  /**
   * Queues a message of another producer (the alarm engine's `ALARM_ACK`, ...) for the processor.
   * Never throws; false when the queue was full (the oldest entry was dropped for it).
   */
  submit(msg: PendingMsg): boolean {
    return this.#pipeline.submit(msg);
  }

  /** Queue figures: what waits, what was processed, dropped at the bound, or failed. */
  stats(): MessagePipelineStats {
    return this.#pipeline.stats();
  }

  /** Processes everything queued now (tests, shutdown). */
  flush(): void {
    this.#pipeline.flush();
  }

  /** A new message of the gateway's own making (id and creation time filled in). */
  newMsg(init: {
    type: MsgType;
    originator: EntityRef;
    metadata?: Record<string, string>;
    data?: unknown;
    customerId?: string | null;
  }): GatewayMsg {
    return {
      id: randomUUID(),
      type: init.type,
      originator: init.originator,
      customerId: init.customerId ?? null,
      metadata: init.metadata ?? {},
      data: init.data ?? {},
      ts: this.#now(),
    };
  }

  // ---- Device uplinks -------------------------------------------------------------------------

  /**
   * Telemetry of one device (device-api.md §1): committed, then one `POST_TELEMETRY_REQUEST` per
   * timestamp (metadata `ts`, `deviceName`, `deviceType`, plus `metadata`: an MQTT profile's
   * `mqttTopic`), in ascending order. Resolves with the number of points once they are committed.
   */
  async postTelemetry(
    device: DeviceIdentity,
    payload: unknown,
    receivedTs?: number,
    metadata?: Readonly<Record<string, string>>,
  ): Promise<number> {
    const points = await this.#deps.telemetry.ingestPoints(device, payload, receivedTs);
    if (points.length > 0)
      this.#pipeline.submit(() => this.#telemetryMsgs(device.id, points, metadata));
    return points.length;
  }

  /**
   * Client attributes of a device (device-api.md §2.1): a JSON object typed as §1.2 (numeric
   * strings cast), or values a transport already typed that way (a Protobuf payload, issue 21).
   * Committed, then one `POST_ATTRIBUTES_REQUEST`.
   */
  postAttributes(
    device: DeviceIdentity,
    payload: Buffer | string | ReadonlyMap<string, KvValue>,
    metadata?: Readonly<Record<string, string>>,
  ): void {
    const values =
      typeof payload === 'string' || Buffer.isBuffer(payload)
        ? this.parseClientAttributes(payload)
        : payload;
    this.saveClientAttributes(device, values, undefined, metadata);
  }

  /** A client-attribute payload: one JSON object, typed as §1.2 (numeric strings cast). */
  parseClientAttributes(payload: Buffer | string): Map<string, KvValue> {
    const text = typeof payload === 'string' ? payload : payload.toString('utf8');
    if (text.trim() === '') throw new ValidationError('attributes: payload is empty');
    return parseTypedObject(text, { cast: true });
  }

  /**
   * Client attributes already typed (several devices validated first: the gateway API; a
   * connector's poll, with `ts` the time they were read).
   */
  saveClientAttributes(
    device: DeviceIdentity,
    values: ReadonlyMap<string, KvValue>,
    ts?: number,
    metadata?: Readonly<Record<string, string>>,
  ): void {
    const saved = this.#deps.attributes.saveTyped(device.id, 'CLIENT_SCOPE', values, DEVICE, ts);
    if (saved.length === 0) return;
    this.#deferDevice(device.id, 'POST_ATTRIBUTES_REQUEST', () => ({
      metadata: { ...metadata, notifyDevice: 'false' },
      data: attributeData(saved),
    }));
  }

  /**
   * A client-side RPC (device-api.md §4): validated, then a `TO_SERVER_RPC_REQUEST` (data
   * `{"method","params"}`, metadata `requestId`, `serviceId`, `sessionId`) while the call waits
   * for its reply (`ClientRpcService.reply(sessionId, requestId, json)`) or its timeout.
   */
  toServerRpc(
    device: DeviceIdentity,
    body: unknown,
    opts: ToServerRpcOptions = {},
  ): Promise<PollOutcome<string>> {
    const { clientRpc } = this.#deps;
    const request = clientRpc.parse(body);
    const sessionId = opts.sessionId ?? randomUUID();
    const requestId = opts.requestId ?? 0;
    const outcome = clientRpc.call(device, request, { ...opts, sessionId, requestId });
    this.#deferDevice(device.id, 'TO_SERVER_RPC_REQUEST', () => ({
      metadata: {
        requestId: String(requestId),
        serviceId: this.#deps.serviceId,
        sessionId,
      },
      data: { method: request.method, params: request.params },
    }));
    return outcome;
  }

  /**
   * A claim payload (device-api.md §5.1): optional JSON `{"secretKey","durationMs"}`; empty or
   * blank means the defaults. ValidationError for malformed JSON or wrongly typed fields.
   */
  parseClaim(payload: Buffer | string | undefined): ClaimRequest {
    const text = typeof payload === 'string' ? payload : (payload?.toString('utf8') ?? '');
    if (text.trim() === '') return {};
    return this.#deps.claims.parseRequest(parseJsonPayload(text, 'claim'));
  }

  /**
   * A device's claim request (device-api.md §5.1): the payload as `parseClaim` reads it, or a
   * request it already read. Then a `CLAIM_REQUEST` (the secret left out).
   */
  claim(
    device: DeviceIdentity,
    payload: Buffer | string | ClaimRequest | undefined,
  ): DeviceClaimOutcome {
    const { claims } = this.#deps;
    const request =
      typeof payload === 'object' && !(payload instanceof Uint8Array)
        ? payload
        : this.parseClaim(payload);
    const outcome = claims.claimByDevice(device.id, request);
    this.#deferDevice(device.id, 'CLAIM_REQUEST', () => ({
      metadata: { outcome },
      data: { durationMs: request.durationMs ?? null },
    }));
    return outcome;
  }

  /**
   * Device provisioning (device-api.md §6): `PROVISION_SUCCESS` from the device provisioned
   * (data: the device), `PROVISION_FAILURE` from the profile that refused (data: the device name
   * asked for). A request naming no known profile key makes no message.
   */
  provision(body: unknown): ProvisionResponse {
    const { provisioning } = this.#deps;
    const request = provisioning.parseRequest(body);
    const { response, deviceId, profileId } = provisioning.provisionDevice(request);
    if (response.status === 'SUCCESS' && deviceId) {
      this.#deferDevice(deviceId, 'PROVISION_SUCCESS', () => ({
        metadata: {},
        data: this.#device(deviceId) ?? {},
      }));
    } else if (profileId) {
      this.#pipeline.submit(() => [
        this.newMsg({
          type: 'PROVISION_FAILURE',
          originator: { entityType: 'DEVICE_PROFILE', id: profileId },
          metadata: { status: response.status },
          data: { deviceName: request.deviceName ?? null },
        }),
      ]);
    }
    return response;
  }

  /** A firmware/software download over HTTP or CoAP (device-api.md §7.2): `FIRMWARE_REQUEST`. */
  firmware(
    device: DeviceIdentity,
    type: OtaType,
    opts: Parameters<OtaService['download']>[2],
  ): OtaChunk {
    const result = this.#deps.ota.download(device.id, type, opts);
    this.firmwareRequested(device, type, {
      title: result.info.title,
      version: result.info.version,
      size: opts?.size ?? 0,
      chunk: opts?.chunk ?? 0,
    });
    return result;
  }

  /** A firmware chunk a device asked for (MQTT `v2/fw/request/...`). */
  firmwareRequested(
    device: DeviceIdentity,
    type: OtaType,
    request: { title?: string; version?: string; size: number; chunk: number; requestId?: string },
  ): void {
    this.#deferDevice(
      device.id,
      'FIRMWARE_REQUEST',
      (): DeviceMsgParts => ({
        metadata: request.requestId === undefined ? {} : { requestId: String(request.requestId) },
        data: { type, ...request },
      }),
    );
  }

  /** A transport session opened (MQTT CONNECT): activity, then a `CONNECT_EVENT`. */
  connected(device: DeviceIdentity): void {
    this.#deps.activity.connected(device);
    this.#sessionEvent(device, 'CONNECT_EVENT');
  }

  /** A transport session closed: activity, then a `DISCONNECT_EVENT`. */
  disconnected(device: DeviceIdentity): void {
    this.#deps.activity.disconnected(device);
    this.#sessionEvent(device, 'DISCONNECT_EVENT');
  }

  /**
   * A device's observation started (CoAP `Observe: 0` on attributes or RPC, device-api.md §10).
   * As ThingsBoard's CoAP transport, a device has a session while it observes anything: its first
   * observation opens it (`connected`: CONNECT_EVENT), the end of its last one closes it
   * (`disconnected`: DISCONNECT_EVENT), whatever ended it (`Observe: 1`, a RST, a notification
   * not acknowledged, its lifetime, a bound, the gateway stopping). Plain requests are
   * ThingsBoard's sync sessions: activity, no connect event. Returns the end of this
   * observation (safe to call twice).
   */
  observe(device: DeviceIdentity): () => void {
    const live = this.#observing.get(device.id) ?? 0;
    this.#observing.set(device.id, live + 1);
    if (live === 0) this.connected(device);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const left = (this.#observing.get(device.id) ?? 1) - 1;
      if (left > 0) {
        this.#observing.set(device.id, left);
        return;
      }
      this.#observing.delete(device.id);
      this.disconnected(device);
    };
  }

  /** platform.md §7.4: the device state as it is now, without `active`. */
  #sessionEvent(device: DeviceIdentity, type: 'CONNECT_EVENT' | 'DISCONNECT_EVENT'): void {
    const snapshot = this.#deps.activity.snapshot(device.id);
    this.#deferDevice(device.id, type, () => ({
      metadata: { scope: 'SERVER_SCOPE' },
      data: snapshot ? activityData(snapshot, false) : {},
    }));
  }

  // ---- Building ---------------------------------------------------------------------------------

  /** Queues a message of a device, built (with `deviceName`, `deviceType`) when its turn comes. */
  #deferDevice(deviceId: string, type: MsgType, build: () => DeviceMsgParts): void {
    this.#pipeline.submit(() => {
      const info = this.#infoOf(deviceId);
      if (!info) return [];
      const { metadata, data } = build();
      return [this.#deviceMsg(deviceId, info, type, metadata, data)];
    });
  }

  #deviceMsg(
    deviceId: string,
    info: DeviceInfo,
    type: MsgType,
    metadata: Record<string, string>,
    data: unknown,
  ): GatewayMsg {
    return {
      id: randomUUID(),
      type,
      originator: { entityType: 'DEVICE', id: deviceId },
      customerId: info.customerId,
      metadata: { deviceName: info.name, deviceType: info.type, ...metadata },
      data,
      ts: this.#now(),
      // Device uplinks are stored before they are acknowledged: the rule chains' save nodes must
      // not store them a second time (docs/rules.md).
      ...(type === 'POST_TELEMETRY_REQUEST' || type === 'POST_ATTRIBUTES_REQUEST'
        ? { committed: true }
        : {}),
    };
  }

  /** One message per timestamp, ascending (ThingsBoard: one per `ts` of the payload). */
  #telemetryMsgs(
    deviceId: string,
    points: readonly TsEntry[],
    metadata?: Readonly<Record<string, string>>,
  ): GatewayMsg[] {
    const info = this.#infoOf(deviceId);
    if (!info) return [];
    return byTs(points, entryValue).map(([ts, data]) =>
      this.#deviceMsg(
        deviceId,
        info,
        'POST_TELEMETRY_REQUEST',
        { ...metadata, ts: String(ts) },
        data,
      ),
    );
  }

  /** ENTITY_* messages: data is the device as REST returns it (TB: the entity JSON). */
  #entityMsg(
    type: MsgType,
    deviceId: string,
    entity: Device | undefined,
    metadata: Record<string, string>,
  ): void {
    this.#pipeline.submit(() => {
      const device = entity ?? this.#device(deviceId);
      const customerId = device ? customerOf(device) : null;
      return [
        this.newMsg({
          type,
          originator: { entityType: 'DEVICE', id: deviceId },
          customerId,
          metadata: device
            ? { deviceName: device.name, deviceType: device.type, ...metadata }
            : metadata,
          data: device ?? { id: { entityType: 'DEVICE', id: deviceId } },
        }),
      ];
    });
  }

  #device(deviceId: string): Device | undefined {
    try {
      return this.#deps.devices.get(deviceId);
    } catch {
      // Deleted meanwhile: its messages have no device to describe.
      return undefined;
    }
  }

  #infoOf(deviceId: string): DeviceInfo | undefined {
    const cached = this.#info.get(deviceId);
    if (cached) return cached;
    const device = this.#device(deviceId);
    if (!device) return undefined;
    const info = { name: device.name, type: device.type, customerId: customerOf(device) };
    // A bound, not an LRU: a full cache starts over (a lookup is one indexed read).
    if (this.#info.size >= INFO_CACHE_SIZE) this.#info.clear();
    this.#info.set(deviceId, info);
    return info;
  }

  #now(): number {
    return this.#deps.now?.() ?? Date.now();
  }
}

const DEVICE: ChangeSource = { kind: 'device' };

function customerOf(device: Device): string | null {
  const id = device.customerId.id;
  return id === NULL_UUID ? null : id;
}

/** ThingsBoard's `userId`/`userName` metadata of a REST change. */
function userMetadata(source: ChangeSource | undefined): Record<string, string> {
  return source?.kind === 'user' ? { userId: source.userId, userName: source.userName } : {};
}

/** `{"key": value}` with JSON types (a LONG beyond 2^53 becomes a number, as JSON has no longs). */
function attributeData(values: readonly TypedAttributeKv[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of values) put(out, kv.key, jsonValue(kv.value));
  return out;
}

function jsonValue(value: unknown): unknown {
  return typeof value === 'bigint' ? Number(value) : value;
}

/**
 * Points grouped by timestamp, ascending; each group `{"key": value}`. A payload of one
 * timestamp (the usual case) takes no map and no sort.
 */
function byTs<P extends { readonly key: string; readonly ts: number }>(
  points: readonly P[],
  value: (p: P) => unknown,
): Array<[number, Record<string, unknown>]> {
  const first = points[0]?.ts;
  if (points.every((p) => p.ts === first)) {
    const data: Record<string, unknown> = {};
    for (const p of points) put(data, p.key, value(p));
    return points.length > 0 ? [[first, data]] : [];
  }
  const groups = new Map<number, Record<string, unknown>>();
  for (const p of points) {
    let data = groups.get(p.ts);
    if (!data) {
      data = {};
      groups.set(p.ts, data);
    }
    put(data, p.key, value(p));
  }
  return [...groups].sort((a, b) => a[0] - b[0]);
}

/** Sets a key as plain data (a `__proto__` key stays a key, as the JSON parser keeps it). */
function put(obj: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(obj, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else {
    obj[key] = value;
  }
}

/** platform.md §7.4: the device state as event data (`active` left out of connect events). */
function activityData(s: ActivitySnapshot, withActive: boolean): Record<string, unknown> {
  const data: Record<string, unknown> = {
    lastConnectTime: s.lastConnectTime,
    lastActivityTime: s.lastActivityTime,
    lastDisconnectTime: s.lastDisconnectTime,
    lastInactivityAlarmTime: s.lastInactivityAlarmTime,
    inactivityTimeout: s.inactivityTimeout,
  };
  return withActive ? { active: s.active, ...data } : data;
}
