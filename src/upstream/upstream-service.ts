import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Statement } from 'better-sqlite3';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import type { Logger } from 'pino';
import type { AttributeService, ClientAttributesItem } from '../attributes/attribute-service.js';
import type { DeviceClaimItem } from '../claims/claim-service.js';
import type { CommitHook } from '../common/commit-hook.js';
import type { Config } from '../config.js';
import type { Db } from '../db/open.js';
import type { DeviceIdentity } from '../devices/device-service.js';
import type { EventBus } from '../events.js';
import type { GatewayMsg } from '../messages/types.js';
import type { RpcService } from '../rpc/rpc-service.js';
import type { AdminSettingsStore } from '../settings/admin-settings-store.js';
import type { CommittedItem } from '../telemetry/telemetry-writer.js';
import { KIND, Outbox, type OutboxEntry, type OutboxRow } from './outbox.js';
import { attributesJson, pack, telemetryFromMsg, telemetryJson } from './payload.js';
import {
  type PublicSettings,
  publicSettings,
  type UpstreamConfig,
  UpstreamSettingsStore,
} from './upstream-settings.js';

export interface UpstreamDeps {
  readonly db: Db;
  /** `admin_settings`, where the settings saved over REST are kept. */
  readonly settings: AdminSettingsStore;
  readonly bus: EventBus;
  readonly log: Logger;
  readonly config: Config['upstream'];
  readonly devices: {
    identity(id: string): DeviceIdentity | undefined;
    byName(name: string): DeviceIdentity | undefined;
  };
  readonly attributes: Pick<AttributeService, 'save' | 'delete' | 'get' | 'findByKey'>;
  readonly rpc: Pick<RpcService, 'call'>;
  /**
   * Attribute keys a device profile names (its alarm rules'), requested from the cloud on
   * connect besides the device's local shared keys.
   */
  readonly profileKeys?: (profileId: string) => readonly string[];
  readonly now?: () => number;
  /** Test hook: the reconnect backoff's first delay (default 1 s; the cap is 60 s). */
  readonly backoffMinMs?: number;
}

/** What `GET /api/upstream/status` answers (issue 16 §5). */
export interface UpstreamStatus {
  readonly enabled: boolean;
  readonly connected: boolean;
  readonly url: string;
  readonly backlog: number;
  readonly oldestBacklogTs: number | null;
  readonly sentTotal: number;
  readonly droppedTotal: number;
  readonly rejectedTotal: number;
  readonly lastError: string | null;
  readonly lastConnectedTs: number | null;
}

export type PushDecision = (deviceId: string, msgType: string) => boolean;

const OWNER = 'upstream';
/** The server attribute of a device that keeps it local (`false`). */
export const OPT_OUT_KEY = 'upstreamEnabled';
const READ_AHEAD = 2_000;
/**
 * While the outbox is caught up (a steady flow, no backlog), rows wait this long for more to
 * fill a publish: a few large publishes cost the gateway less than many small ones.
 */
const LINGER_MS = 100;
/**
 * A message the cloud refuses this often on its own is set aside. A publish of several messages
 * that fails twice is sent again one message per publish, to find the one refused.
 */
const MAX_ATTEMPTS = 3;
/** Failed publishes remembered (by their first and last seq). */
const MAX_FAILURES = 10_000;
const BACKOFF_MAX_MS = 60_000;
/** Devices announced with `v1/gateway/connect` when the link comes up. */
const MAX_ANNOUNCED = 10_000;
const SESSION_LIMITS_REQUEST = 'v1/devices/me/rpc/request/1';
/**
 * How long a new connection waits for the cloud's `getSessionLimits` answer before it sends
 * data (a backlog sent at once could trip the cloud's rate limits, which close the connection);
 * a cloud that does not answer is then not paced.
 */
const LIMITS_WAIT_MS = 2_000;
const SESSION_LIMITS_RESPONSE = 'v1/devices/me/rpc/response/1';
/** Messages the pushed rule-node types carry (TbMsgPushToCloudNode's accepted types). */
const TELEMETRY_TYPES = new Set(['POST_TELEMETRY_REQUEST', 'TIMESERIES_UPDATED']);
const ATTRIBUTE_TYPES = new Set(['POST_ATTRIBUTES_REQUEST', 'ATTRIBUTES_UPDATED']);
/** Loop guard: changes that came from the cloud are never pushed back. */
const CLOUD = { kind: 'system' } as const;

interface InFlight {
  readonly rows: readonly OutboxRow[];
  readonly first: number;
  readonly last: number;
  readonly topic: string;
  readonly payload: string;
}

/**
 * Upstream sync (issue 16, docs/upstream.md): the gateway is one device of a cloud ThingsBoard
 * with "Is gateway" set and speaks its gateway MQTT API (device-api.md §9) as a client.
 *
 * Uplink: what the rule chains push (`TbMsgPushToCloudNode`) goes through the SQLite outbox.
 * Device telemetry and client attributes are written to it in the same commit as their data
 * (`telemetryHook`, `attributesHook`) when the device's chain pushes that message type, so an
 * acknowledged reading is never lost to a crash; the node itself queues what was not queued at
 * commit (other types, messages a chain made). Rows go up in `seq` order, many per publish, QoS 1,
 * and are deleted on their PUBACK: at-least-once, in order per device.
 *
 * Downlink: shared-attribute updates and deletes, RPC and attribute responses from the cloud are
 * applied to the local device of that name.
 */
export class UpstreamService {
  readonly outbox: Outbox;
  readonly #deps: UpstreamDeps;
  readonly #settings: UpstreamSettingsStore;
  /** The settings in effect: the config's, with the saved ones over them (`saveSettings`). */
  #config: UpstreamConfig;
  readonly #optOut = new Set<number>();
  #pushes: PushDecision = () => false;
  #pushesGeneration: () => number = () => 0;
  /**
   * `#pushes` answers per device rid (bits: DECIDED_* known, PUSHES_* yes), for the per-message
   * checks; cleared when the chains (generation), a device or a profile change. Bounded.
   */
  readonly #decisions = new Map<number, number>();
  #decisionsGeneration = -1;
  #client: MqttClient | undefined;
  /** Connection generation: callbacks of a closed connection are ignored. */
  #gen = 0;
  #connected = false;
  #stopped = false;
  #lastError: string | null = null;
  #lastConnectedTs: number | null = null;
  #backoffAttempt = 0;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #paceTimer: NodeJS.Timeout | undefined;
  /** Set from connect until the cloud's session limits are in (or `LIMITS_WAIT_MS` passed). */
  #limitsTimer: NodeJS.Timeout | undefined;
  #pumpScheduled: NodeJS.Immediate | undefined;
  #lingerTimer: NodeJS.Timeout | undefined;
  /** When the rows waiting in a caught-up outbox go, full or not (0: none waits). */
  #lingerUntil = 0;
  /** Last seq read from the outbox; rows after it are not yet read. */
  #cursor = 0;
  #ahead: OutboxRow[] = [];
  /** Rows added by the commit in progress (its first seq), for `#ahead` once it commits. */
  #pending: Array<{ first: number; entries: OutboxEntry[] }> = [];
  readonly #inFlight = new Map<number, InFlight>();
  /** Failures of a publish (`first-last` seq) without its PUBACK: refused, or connection cut. */
  readonly #failures = new Map<string, number>();
  /** Rows up to this seq go one per publish, one at a time (a refused one is among them). */
  #isolateUntil = 0;
  #nextFlightId = 1;
  /** Devices announced (`v1/gateway/connect`) on this connection. */
  readonly #announced = new Set<string>();
  /** Devices whose session closed: their disconnect goes once the data up to this seq is sent. */
  readonly #closing = new Map<string, number>();
  /**
   * Lasting local sessions (MQTT connections, CoAP observations) open now, per device rid; a
   * device without an entry has none. Sessions die with the process: empty at start.
   */
  readonly #sessions = new Map<number, number>();
  #hasSessions: Statement | undefined;
  /** Last seq of the last publish sent on this connection. */
  #sentUpTo = 0;
  /** Attribute requests waiting for their response: id → device and keys. */
  readonly #attrRequests = new Map<number, { device: string; keys: readonly string[] }>();
  #nextRequestId = 1;
  // Limits: the configured ones, lowered by the cloud's getSessionLimits.
  #maxInFlight: number;
  #maxPayload: number;
  #msgRate: number;
  #pointRate = 0;
  #nextSendAt = 0;

  constructor(deps: UpstreamDeps) {
    this.#deps = deps;
    this.#settings = new UpstreamSettingsStore(deps.settings);
    this.#config = this.#settings.effective(deps.config);
    this.outbox = new Outbox(deps.db, this.#config.maxBacklog);
    this.#maxInFlight = this.#config.maxInFlight;
    this.#maxPayload = this.#config.maxPayloadBytes;
    this.#msgRate = this.#config.maxMessagesPerSec;
  }

  get enabled(): boolean {
    return this.#config.url !== '';
  }

  /** The settings in effect, the secrets only as set or not. */
  settings(): PublicSettings {
    return publicSettings(this.#config, Object.keys(this.#settings.saved()).length > 0);
  }

  /**
   * Saves settings (a partial update, validated; 400 on a bad one) and applies them at once:
   * the link is closed and opened again with them (docs/upstream.md, Settings).
   */
  saveSettings(body: unknown): PublicSettings {
    this.#apply(this.#settings.save(body, this.#deps.config));
    return this.settings();
  }

  /** Forgets the saved settings: the config file, environment and flags apply again, at once. */
  resetSettings(): PublicSettings {
    this.#settings.clear();
    this.#apply(this.#deps.config);
    return this.settings();
  }

  #apply(next: UpstreamConfig): void {
    const { log, config } = this.#deps;
    clearTimeout(this.#reconnectTimer);
    const client = this.#client;
    this.#client = undefined;
    // Callbacks of the old connection see another generation and do nothing.
    this.#gen++;
    if (client) client.end(true);
    this.#linkDown(null);
    this.#config = next;
    this.outbox.setMax(next.maxBacklog);
    this.#maxInFlight = next.maxInFlight;
    this.#maxPayload = next.maxPayloadBytes;
    this.#msgRate = next.maxMessagesPerSec;
    this.#pointRate = 0;
    this.#backoffAttempt = 0;
    this.#lastError = null;
    log.info({ url: next.url, saved: next !== config }, 'upstream settings applied');
    if (this.enabled && !this.#stopped) this.#connect();
  }

  /**
   * Which messages the rule chains push: the rule engine answers whether a push-to-cloud node
   * is reachable for a device's message type (set once the rule engine exists).
   */
  setPushDecision(decide: PushDecision, generation: () => number = () => 0): void {
    this.#pushes = decide;
    this.#pushesGeneration = generation;
    this.#decisions.clear();
  }

  /** Loads the outbox and the opted-out devices, connects when a URL is set. */
  start(): void {
    const { bus, attributes, devices } = this.#deps;
    this.outbox.init();
    for (const { deviceId, kv } of attributes.findByKey('SERVER_SCOPE', OPT_OUT_KEY)) {
      const rid = devices.identity(deviceId)?.rid;
      if (rid !== undefined && kv.value === false) this.#optOut.add(rid);
    }
    bus.on(OWNER, 'attributes.updated', ({ deviceId, scope, values }) => {
      if (scope !== 'SERVER_SCOPE') return;
      const kv = values.find((v) => v.key === OPT_OUT_KEY);
      if (kv) this.#setOptOut(deviceId, kv.value === false);
      // Device activity (ThingsBoard's server attributes) marks a session opening or closing.
      if (values.some((v) => v.key === 'lastDisconnectTime')) this.#session(deviceId, false);
      else if (values.some((v) => v.key === 'lastConnectTime')) this.#session(deviceId, true);
    });
    bus.on(OWNER, 'attributes.deleted', ({ deviceId, scope, keys }) => {
      if (scope === 'SERVER_SCOPE' && keys.includes(OPT_OUT_KEY)) this.#setOptOut(deviceId, false);
    });
    bus.on(OWNER, 'device.created', ({ device }) => {
      if (this.#connected) this.#announce(this.#localDevices(device.id));
    });
    const forget = () => {
      this.outbox.forgetNames();
      this.#decisions.clear();
    };
    bus.on(OWNER, 'device.updated', forget);
    bus.on(OWNER, 'deviceProfile.updated', forget);
    bus.on(OWNER, 'device.deleted', ({ device }) => {
      forget();
      if (this.#announced.delete(device.name)) {
        this.#publishControl('v1/gateway/disconnect', { device: device.name });
      }
    });
    if (this.enabled) this.#connect();
  }

  /** Disconnects; what is not acknowledged stays in the outbox for the next start. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#deps.bus.removeOwner(OWNER);
    clearTimeout(this.#reconnectTimer);
    clearTimeout(this.#paceTimer);
    clearTimeout(this.#limitsTimer);
    clearTimeout(this.#lingerTimer);
    if (this.#pumpScheduled) clearImmediate(this.#pumpScheduled);
    const client = this.#client;
    this.#client = undefined;
    this.#gen++;
    if (client) await client.endAsync(true).catch(() => undefined);
  }

  status(): UpstreamStatus {
    const c = this.outbox.counters;
    return {
      enabled: this.enabled,
      connected: this.#connected,
      url: this.#config.url,
      backlog: this.outbox.backlog,
      oldestBacklogTs: this.outbox.oldestTs(),
      sentTotal: c.sent,
      droppedTotal: c.dropped,
      rejectedTotal: c.rejected,
      lastError: this.#lastError,
      lastConnectedTs: this.#lastConnectedTs,
    };
  }

  /** Device telemetry committed by the telemetry writer: queued in the same transaction. */
  readonly telemetryHook: CommitHook<CommittedItem> = this.#hook(TELEMETRY, (item) =>
    item.points.length === 0
      ? undefined
      : { kind: KIND.telemetry, ts: item.points[0].ts, data: telemetryJson(item.points) },
  );

  /** Client attributes a device posted: queued in the same transaction as their save. */
  readonly attributesHook: CommitHook<ClientAttributesItem> = this.#hook(ATTRIBUTES, (item) =>
    item.values.length === 0
      ? undefined
      : { kind: KIND.attributes, ts: item.ts, data: attributesJson(item.values) },
  );

  /**
   * A device's claim request (`v1/devices/me/claim`, HTTP, CoAP): queued in the same transaction
   * as the local claim, as `v1/gateway/claim` `{"Device":{"secretKey","durationMs"}}` with the
   * fields the device gave (the cloud applies its defaults and its own claiming rules). Claims
   * are not rule-chain messages: every device's goes up unless it opted out.
   */
  readonly claimsHook: CommitHook<DeviceClaimItem> = {
    write: (items) => {
      if (!this.enabled) return;
      const entries: OutboxEntry[] = [];
      for (const { rid, request } of items) {
        if (this.#optOut.has(rid)) continue;
        const data: Record<string, unknown> = {};
        if (request.secretKey !== undefined) data.secretKey = request.secretKey;
        if (request.durationMs !== undefined) data.durationMs = request.durationMs;
        entries.push({ rid, kind: KIND.claim, ts: this.#now(), data: JSON.stringify(data) });
      }
      this.#queue(entries);
    },
    settled: (ok) => this.#settled(ok),
  };

  /** A commit hook queuing the items whose device's chain pushes `msgType`. */
  #hook<T extends { readonly rid: number; readonly deviceId: string }>(
    msgType: string,
    entry: (item: T) => Omit<OutboxEntry, 'rid'> | undefined,
  ): CommitHook<T> {
    return {
      write: (items) => {
        if (!this.enabled) return;
        const entries: OutboxEntry[] = [];
        for (const item of items) {
          if (!this.#wants(item.rid, item.deviceId, msgType)) continue;
          const e = entry(item);
          if (e) entries.push({ rid: item.rid, ...e });
        }
        this.#queue(entries);
      },
      settled: (ok) => this.#settled(ok),
    };
  }

  /**
   * The push-to-cloud node: a committed device uplink that the commit already queued passes on;
   * anything else of a pushed type is queued now. Returns false for a type it cannot push.
   */
  push(msg: GatewayMsg): boolean {
    if (!this.enabled || msg.metadata.source === 'cloud') return true;
    if (msg.originator.entityType !== 'DEVICE') return false;
    const device = this.#deps.devices.identity(msg.originator.id);
    if (!device) return false;
    if (this.#optOut.has(device.rid)) return true;
    const committedType = msg.type === TELEMETRY || msg.type === ATTRIBUTES;
    if (msg.committed && committedType && this.#decide(device.rid, device.id, msg.type)) {
      return true;
    }
    let entry: OutboxEntry | undefined;
    if (TELEMETRY_TYPES.has(msg.type)) {
      const data =
        msg.type === 'TIMESERIES_UPDATED'
          ? (msg.data as { timeseries?: unknown } | null)?.timeseries
          : msg.data;
      const ts = Number(msg.metadata.ts) || msg.ts;
      const json = telemetryFromMsg(data, ts);
      if (json) entry = { rid: device.rid, kind: KIND.telemetry, ts, data: json };
    } else if (ATTRIBUTE_TYPES.has(msg.type)) {
      const d = msg.data;
      if (d !== null && typeof d === 'object' && !Array.isArray(d)) {
        entry = { rid: device.rid, kind: KIND.attributes, ts: msg.ts, data: JSON.stringify(d) };
      }
    }
    if (!entry) return false;
    this.outbox.addNow([entry]);
    this.#kick();
    return true;
  }

  /** Adds rows inside the caller's commit; they go to the sender once it commits. */
  #queue(entries: OutboxEntry[]): void {
    const first = this.outbox.add(entries);
    if (first > 0) this.#pending.push({ first, entries });
  }

  #wants(rid: number, deviceId: string, type: string): boolean {
    return !this.#optOut.has(rid) && this.#decide(rid, deviceId, type);
  }

  /** `#pushes` for a device's telemetry or client attributes, cached (`#decisions`). */
  #decide(rid: number, deviceId: string, type: string): boolean {
    const generation = this.#pushesGeneration();
    if (generation !== this.#decisionsGeneration) {
      this.#decisions.clear();
      this.#decisionsGeneration = generation;
    }
    const known = type === TELEMETRY ? 1 : 4;
    const yes = known * 2;
    let bits = this.#decisions.get(rid) ?? 0;
    if ((bits & known) === 0) {
      bits |= known | (this.#pushes(deviceId, type) ? yes : 0);
      if (this.#decisions.size >= MAX_ANNOUNCED) this.#decisions.clear();
      this.#decisions.set(rid, bits);
    }
    return (bits & yes) !== 0;
  }

  /**
   * A local device's session (an MQTT connection, a CoAP observation) opened or closed; with
   * several at once, the last one to close closes it. Closed: `v1/gateway/disconnect` once the
   * publishes of everything committed before it are sent (MQTT keeps their order), so its last
   * data still goes up as connected. Opened: announced again at once (`v1/gateway/connect` and
   * its shared attributes requested). Rule: docs/upstream.md.
   */
  #session(deviceId: string, open: boolean): void {
    const device = this.#deps.devices.identity(deviceId);
    if (!device) return;
    // Counted with upstream off too: it can be turned on over REST at any time.
    const n = (this.#sessions.get(device.rid) ?? 0) + (open ? 1 : -1);
    if (n > 0) this.#sessions.set(device.rid, n);
    else this.#sessions.delete(device.rid);
    if (!this.enabled || this.#optOut.has(device.rid)) return;
    if (open) {
      this.#closing.delete(device.name);
      if (this.#connected) this.#announce(this.#localDevices(device.id));
      return;
    }
    if (n > 0) return;
    this.#closeAfterData(device.name);
    this.#sendDisconnects();
  }

  /** The device's disconnect goes once everything committed so far is sent. */
  #closeAfterData(name: string): void {
    if (this.#closing.size >= MAX_ANNOUNCED) this.#closing.clear();
    this.#closing.set(name, this.outbox.lastSeq);
  }

  /**
   * Whether the cloud should see a device connected: a lasting session of it is open now, or it
   * never had one (HTTP devices, CoAP devices that do not observe: always connected). A device
   * has had one when its `lastConnectTime` activity attribute is set.
   */
  #sessionLive(rid: number): boolean {
    if (this.#sessions.has(rid)) return true;
    this.#hasSessions ??= this.#deps.db.prepare(
      `SELECT 1 FROM attribute_kv
        WHERE device_rid = ? AND scope = 'SERVER_SCOPE' AND key = 'lastConnectTime'`,
    );
    return this.#hasSessions.get(rid) === undefined;
  }

  /** Disconnects whose device's earlier data has gone out (`#sentUpTo`), or had nothing to send. */
  #sendDisconnects(): void {
    if (!this.#connected) return;
    const sentAll = this.#cursor >= this.outbox.lastSeq && this.#ahead.length === 0;
    for (const [name, seq] of this.#closing) {
      if (seq > this.#sentUpTo && !sentAll) continue;
      this.#closing.delete(name);
      if (this.#announced.delete(name)) {
        this.#publishControl('v1/gateway/disconnect', { device: name });
      }
    }
  }

  #setOptOut(deviceId: string, out: boolean): void {
    const device = this.#deps.devices.identity(deviceId);
    if (!device) return;
    if (out) this.#optOut.add(device.rid);
    else this.#optOut.delete(device.rid);
  }

  #settled(ok: boolean): void {
    if (!this.enabled && this.#pending.length === 0) return;
    const pending = this.#pending;
    this.#pending = [];
    // The backlog count and totals were changed inside a transaction that did not commit.
    if (!ok) {
      this.outbox.init();
      return;
    }
    // Rows right after the last one read go to the read-ahead from memory (no read back);
    // anything else (a gap, the link down, a full read-ahead) is read from the outbox later.
    for (const { first, entries } of pending) {
      if (
        !this.#connected ||
        first !== this.#cursor + 1 ||
        this.#ahead.length + entries.length > READ_AHEAD
      )
        break;
      for (const row of this.#live(this.outbox.rowsOf(entries, first))) this.#ahead.push(row);
      this.#cursor = first + entries.length - 1;
    }
    this.#kick();
  }

  // ---- the link ----------------------------------------------------------------------------

  #connect(): void {
    if (this.#stopped) return;
    const { log } = this.#deps;
    const config = this.#config;
    const gen = ++this.#gen;
    const opts: IClientOptions = {
      protocolVersion: config.mqttVersion === '5' ? 5 : 4,
      clientId: config.clientId || `edge-gateway-${hostname()}`,
      clean: true,
      reconnectPeriod: 0,
      connectTimeout: 15_000,
      keepalive: 60,
      resubscribe: false,
    };
    const username = config.token || config.username;
    if (username) opts.username = username;
    if (config.password) opts.password = config.password;
    try {
      if (config.caFile) opts.ca = readFileSync(config.caFile);
      if (config.certFile) opts.cert = readFileSync(config.certFile);
      if (config.keyFile) opts.key = readFileSync(config.keyFile);
    } catch (err) {
      this.#lastError = `cannot read a TLS file: ${(err as Error).message}`;
      log.error({ err }, 'upstream: cannot read a TLS file');
      this.#scheduleReconnect();
      return;
    }
    const client = mqtt.connect(config.url, opts);
    this.#client = client;
    client.on('connect', () => {
      if (gen !== this.#gen) return;
      this.#onConnected(client);
    });
    client.on('message', (topic, payload) => {
      if (gen !== this.#gen) return;
      try {
        this.#onMessage(client, topic, payload);
      } catch (err) {
        log.warn({ err, topic }, 'upstream: downlink message failed');
      }
    });
    client.on('error', (err) => {
      if (gen !== this.#gen) return;
      this.#lastError = err.message;
    });
    client.on('close', () => {
      if (gen !== this.#gen) return;
      this.#onClosed(client);
    });
  }

  #onConnected(client: MqttClient): void {
    const { log, bus } = this.#deps;
    const config = this.#config;
    this.#connected = true;
    this.#backoffAttempt = 0;
    const now = this.#now();
    this.#lastConnectedTs = now;
    log.info({ url: config.url, backlog: this.outbox.backlog }, 'upstream connected');
    bus.emit('upstream.connected', { url: config.url, ts: now });
    client.subscribe(
      ['v1/gateway/attributes', 'v1/gateway/rpc', 'v1/gateway/attributes/response'],
      { qos: 1 },
    );
    client.subscribe(SESSION_LIMITS_RESPONSE, { qos: 1 });
    // Data waits for the cloud's limits (announcements and requests do not).
    const gen = this.#gen;
    this.#limitsTimer = setTimeout(() => {
      this.#limitsTimer = undefined;
      if (gen === this.#gen) this.#kick();
    }, LIMITS_WAIT_MS);
    client.publish(
      SESSION_LIMITS_REQUEST,
      JSON.stringify({ method: 'getSessionLimits', params: { timeout: 5000 } }),
      { qos: 1 },
    );
    this.#announce(this.#localDevices());
    this.#kick();
  }

  #onClosed(client: MqttClient): void {
    client.removeAllListeners('connect');
    client.end(true);
    // The cloud closes the connection on a message it cannot process (MQTT 3.1.1): the oldest
    // publish without its PUBACK holds it.
    let oldest: InFlight | undefined;
    for (const f of this.#inFlight.values()) if (!oldest || f.first < oldest.first) oldest = f;
    if (oldest) {
      const why = `the cloud closed the connection before its PUBACK (${this.#lastError ?? 'no reason given'})`;
      this.#failed(oldest, why, false);
    }
    this.#linkDown(this.#lastError);
    this.#scheduleReconnect();
  }

  /** The link is down (closed, or closed for new settings): what is not acknowledged waits. */
  #linkDown(error: string | null): void {
    const { log, bus } = this.#deps;
    const wasUp = this.#connected;
    this.#connected = false;
    this.#announced.clear();
    this.#attrRequests.clear();
    // Everything not acknowledged is read again, in order, on the next connection (a retried
    // publish can stand in the read-ahead before rows of lower seqs: the lowest of all counts).
    let lowest = Number.POSITIVE_INFINITY;
    for (const r of this.#ahead) lowest = Math.min(lowest, r.seq);
    for (const f of this.#inFlight.values()) lowest = Math.min(lowest, f.first);
    if (lowest !== Number.POSITIVE_INFINITY) this.#cursor = lowest - 1;
    this.#ahead = [];
    this.#inFlight.clear();
    this.#sentUpTo = 0;
    clearTimeout(this.#paceTimer);
    this.#paceTimer = undefined;
    clearTimeout(this.#limitsTimer);
    this.#limitsTimer = undefined;
    if (wasUp) {
      const url = this.#config.url;
      if (error) log.warn({ url, error }, 'upstream disconnected');
      else log.info({ url }, 'upstream disconnected');
      bus.emit('upstream.disconnected', { url, ts: this.#now(), error });
    }
  }

  /** Exponential backoff with jitter, 1 s to 60 s (`reconnectDelay`). */
  #scheduleReconnect(): void {
    if (this.#stopped) return;
    const delay = reconnectDelay(
      this.#backoffAttempt,
      this.#deps.backoffMinMs ?? 1_000,
      Math.random(),
    );
    this.#backoffAttempt = Math.min(this.#backoffAttempt + 1, 16);
    this.#reconnectTimer = setTimeout(() => this.#connect(), delay);
  }

  // ---- uplink --------------------------------------------------------------------------------

  #kick(): void {
    if (!this.#connected || this.#pumpScheduled) return;
    this.#pumpScheduled = setImmediate(() => {
      this.#pumpScheduled = undefined;
      this.#pump();
    });
  }

  /** Publishes while the window has room, the pace allows and rows wait. */
  #pump(): void {
    const client = this.#client;
    if (!client || !this.#connected || this.#paceTimer || this.#limitsTimer) return;
    while (this.#inFlight.size < this.#maxInFlight) {
      const wait = this.#nextSendAt - performance.now();
      if (wait > 0) {
        this.#paceTimer = setTimeout(() => {
          this.#paceTimer = undefined;
          this.#pump();
        }, wait);
        return;
      }
      if (this.#ahead.length === 0) {
        if (this.#cursor >= this.outbox.lastSeq) return;
        const rows = this.outbox.read(this.#cursor, READ_AHEAD);
        if (rows.length === 0) return;
        this.#cursor = rows[rows.length - 1].seq;
        this.#ahead = this.#live(rows);
        if (this.#ahead.length === 0) continue;
      }
      const isolate = this.#ahead[0].seq <= this.#isolateUntil;
      if (isolate && this.#inFlight.size > 0) return;
      if (!isolate && this.#linger()) return;
      const pub = pack(
        isolate ? this.#ahead.slice(0, 1) : this.#ahead,
        Math.floor(this.#maxPayload * 0.9),
        this.#pointRate > 0,
      );
      this.#ahead = this.#ahead.slice(pub.rows.length);
      this.#announce(pub.rows);
      const flight: InFlight = {
        rows: pub.rows,
        first: pub.rows[0].seq,
        last: pub.rows[pub.rows.length - 1].seq,
        topic: pub.topic,
        payload: pub.payload,
      };
      const id = this.#nextFlightId++;
      this.#inFlight.set(id, flight);
      this.#send(client, id, flight);
      this.#sentUpTo = flight.last;
      this.#sendDisconnects();
      let gap = this.#msgRate > 0 ? 1000 / this.#msgRate : 0;
      if (this.#pointRate > 0 && pub.points > 0)
        gap = Math.max(gap, (1000 * pub.points) / this.#pointRate);
      if (gap > 0) this.#nextSendAt = Math.max(this.#nextSendAt, performance.now()) + gap;
    }
  }

  /** Rows of a deleted device cannot go up: dropped and counted; the others are returned. */
  #live(rows: OutboxRow[]): OutboxRow[] {
    const gone = rows.filter((r) => r.name === null);
    if (gone.length === 0) return rows;
    this.outbox.dropRows(gone.map((r) => r.seq));
    return rows.filter((r) => r.name !== null);
  }

  /**
   * A caught-up outbox (everything read, less than a publish waiting) holds its rows up to
   * `LINGER_MS` for more; true while it waits (a timer pumps again).
   */
  #linger(): boolean {
    const full = Math.floor(this.#maxPayload * 0.9);
    let bytes = 0;
    for (const row of this.#ahead) {
      bytes += row.data.length + 8;
      if (bytes >= full) break;
    }
    const now = performance.now();
    if (bytes >= full || this.#cursor < this.outbox.lastSeq || now >= this.#lingerUntil) {
      if (this.#lingerUntil === 0 && bytes < full && this.#cursor >= this.outbox.lastSeq) {
        this.#lingerUntil = now + LINGER_MS;
      } else {
        this.#lingerUntil = 0;
        return false;
      }
    }
    if (!this.#lingerTimer) {
      this.#lingerTimer = setTimeout(
        () => {
          this.#lingerTimer = undefined;
          this.#pump();
        },
        Math.max(0, this.#lingerUntil - now),
      );
    }
    return true;
  }

  #send(client: MqttClient, id: number, flight: InFlight): void {
    const gen = this.#gen;
    client.publish(flight.topic, flight.payload, { qos: 1 }, (err) => {
      if (gen !== this.#gen || !this.#inFlight.has(id)) return;
      if (!err) {
        this.#inFlight.delete(id);
        this.#failures.delete(`${flight.first}-${flight.last}`);
        this.outbox.ack(flight.first, flight.last, flight.rows.length);
        this.#kick();
        return;
      }
      // A PUBACK with an error reason code (MQTT 5); a closed connection ends in #onClosed.
      const code = (err as { code?: unknown }).code;
      if (typeof code !== 'number' || !this.#connected) return;
      this.#inFlight.delete(id);
      this.#failed(flight, `PUBACK reason code ${code}: ${err.message}`, true);
      this.#kick();
    });
  }

  /**
   * A publish went without its PUBACK. Sent again (after the publishes already in flight, when
   * the connection stays); the second failure of several messages isolates them, one per
   * publish; a message refused `MAX_ATTEMPTS` times on its own is set aside with the reason.
   */
  #failed(flight: InFlight, reason: string, retryNow: boolean): void {
    const key = `${flight.first}-${flight.last}`;
    const n = (this.#failures.get(key) ?? 0) + 1;
    if (this.#failures.size >= MAX_FAILURES) this.#failures.clear();
    this.#failures.set(key, n);
    this.#lastError = reason;
    if (flight.rows.length === 1 && n >= MAX_ATTEMPTS) {
      this.#failures.delete(key);
      this.#deps.log.warn(
        { topic: flight.topic, device: flight.rows[0].name, reason },
        'upstream: the cloud refused a message; it is set aside',
      );
      this.outbox.setAside(flight.rows, reason, this.#now());
      return;
    }
    if (n >= 2) this.#isolateUntil = Math.max(this.#isolateUntil, flight.last);
    if (retryNow) this.#ahead = [...flight.rows, ...this.#ahead];
  }

  /**
   * Local devices for the cloud to know connected on this connection (its profile name as
   * `type`): those with a live session (`#sessionLive`), except the opted-out ones.
   */
  #localDevices(id?: string): Array<{ name: string; type: string; rid: number }> {
    const rows = this.#deps.db
      .prepare(
        `SELECT d.rid, d.name, p.name AS type FROM device d
           JOIN device_profile p ON p.id = d.device_profile_id
          WHERE (? IS NULL OR d.id = ?)
            AND (d.rid IN (SELECT value FROM json_each(?))
                 OR NOT EXISTS (SELECT 1 FROM attribute_kv a WHERE a.device_rid = d.rid
                                   AND a.scope = 'SERVER_SCOPE' AND a.key = 'lastConnectTime'))
          ORDER BY d.rid LIMIT ?`,
      )
      .all(
        id ?? null,
        id ?? null,
        JSON.stringify([...this.#sessions.keys()]),
        MAX_ANNOUNCED,
      ) as Array<{
      rid: number;
      name: string;
      type: string;
    }>;
    return rows.filter((r) => !this.#optOut.has(r.rid));
  }

  /**
   * `v1/gateway/connect` for devices not yet announced on this connection, each followed by a
   * request of its shared attributes, so that settings made in the cloud while the link was
   * down reach the device. A device announced for its data (`#pump`) whose session is not live
   * (it ended while the link was down, or before a restart) is disconnected again once the data
   * committed so far has gone up.
   */
  #announce(
    devices: ReadonlyArray<{ rid: number; name: string | null; type: string | null }>,
  ): void {
    for (const d of devices) {
      if (d.name === null || this.#announced.has(d.name)) continue;
      this.#announced.add(d.name);
      this.#publishControl('v1/gateway/connect', { device: d.name, type: d.type ?? 'default' });
      this.#requestSharedAttributes(d.name);
      if (!this.#closing.has(d.name) && !this.#sessionLive(d.rid)) this.#closeAfterData(d.name);
    }
  }

  #requestSharedAttributes(name: string): void {
    const device = this.#deps.devices.byName(name);
    if (!device) return;
    const keys = [
      ...new Set([
        ...this.#deps.attributes.get(device.id, 'SHARED_SCOPE').map((kv) => kv.key),
        ...(this.#deps.profileKeys?.(device.profileId) ?? []),
      ]),
    ];
    if (keys.length === 0) return;
    const id = this.#nextRequestId++;
    if (this.#attrRequests.size >= MAX_ANNOUNCED) this.#attrRequests.clear();
    this.#attrRequests.set(id, { device: name, keys });
    this.#publishControl('v1/gateway/attributes/request', {
      id,
      device: name,
      client: false,
      keys,
    });
  }

  /** A publish that is not in the outbox (connect, attribute request, RPC reply): QoS 1. */
  #publishControl(topic: string, body: unknown): void {
    const client = this.#client;
    if (!client || !this.#connected) return;
    client.publish(topic, JSON.stringify(body), { qos: 1 }, (err) => {
      if (err && this.#connected) this.#deps.log.warn({ err, topic }, 'upstream: publish failed');
    });
  }

  // ---- downlink ------------------------------------------------------------------------------

  #onMessage(client: MqttClient, topic: string, payload: Buffer): void {
    const body = JSON.parse(payload.toString('utf8')) as Record<string, unknown>;
    if (topic === SESSION_LIMITS_RESPONSE) {
      this.#applyLimits(body);
      clearTimeout(this.#limitsTimer);
      this.#limitsTimer = undefined;
      this.#kick();
      return;
    }
    const name = typeof body.device === 'string' ? body.device : undefined;
    const device = name === undefined ? undefined : this.#deps.devices.byName(name);
    if (topic === 'v1/gateway/attributes') {
      if (!device) return;
      const data = body.data as Record<string, unknown> | undefined;
      if (!data || typeof data !== 'object') return;
      if (Array.isArray(data.deleted)) {
        const keys = data.deleted.filter((k): k is string => typeof k === 'string');
        void this.#deps.attributes.delete(device.id, 'SHARED_SCOPE', keys, CLOUD);
      } else {
        void this.#deps.attributes.save(device.id, 'SHARED_SCOPE', data, CLOUD);
      }
    } else if (topic === 'v1/gateway/attributes/response') {
      const req = typeof body.id === 'number' ? this.#attrRequests.get(body.id) : undefined;
      if (!req || !device) return;
      this.#attrRequests.delete(body.id as number);
      let values: Record<string, unknown> | undefined;
      if (body.values && typeof body.values === 'object') {
        values = body.values as Record<string, unknown>;
      } else if ('value' in body && req.keys.length === 1) {
        values = { [req.keys[0]]: body.value };
      }
      if (values && Object.keys(values).length > 0) {
        void this.#deps.attributes.save(device.id, 'SHARED_SCOPE', values, CLOUD);
      }
    } else if (topic === 'v1/gateway/rpc') {
      const data = body.data as { id?: unknown; method?: unknown; params?: unknown } | undefined;
      if (!name || !data || typeof data.id !== 'number' || typeof data.method !== 'string') return;
      void this.#rpc(client, name, device, data.id, data.method, data.params);
    }
  }

  /** A cloud RPC to a local device over whatever transport it uses; the outcome goes back. */
  async #rpc(
    client: MqttClient,
    name: string,
    device: DeviceIdentity | undefined,
    id: number,
    method: unknown,
    params: unknown,
  ): Promise<void> {
    let data: unknown;
    try {
      if (!device) throw new Error(`Device ${name} is not found`);
      const result = await this.#deps.rpc.call(
        device.id,
        { method, params: params ?? null },
        false,
      );
      if (result.kind === 'reply') {
        try {
          data = JSON.parse(result.body);
        } catch {
          data = result.body;
        }
      } else if (result.kind === 'timeout' || result.kind === 'expired') {
        data = { error: `RPC ${result.kind === 'timeout' ? 'timed out' : 'expired'}` };
      } else {
        data = { error: `RPC not delivered: ${result.kind}` };
      }
    } catch (err) {
      data = { error: (err as Error).message };
    }
    if (client !== this.#client) return;
    this.#publishControl('v1/gateway/rpc', { device: name, id, data });
  }

  /**
   * `getSessionLimits` (device-api.md §4): the window, payload size and pace are lowered to
   * what the cloud allows. Which of `rateLimits`/`gatewayRateLimits` applies to the gateway is
   * unsettled, so the stricter of both paces it.
   */
  #applyLimits(body: Record<string, unknown>): void {
    const { log } = this.#deps;
    const config = this.#config;
    if (typeof body.maxInflightMessages === 'number' && body.maxInflightMessages > 0) {
      this.#maxInFlight = Math.min(config.maxInFlight, body.maxInflightMessages);
    }
    if (typeof body.maxPayloadSize === 'number' && body.maxPayloadSize > 0) {
      this.#maxPayload = Math.min(config.maxPayloadBytes, body.maxPayloadSize);
    }
    const groups = [body.rateLimits, body.gatewayRateLimits].filter(
      (g): g is Record<string, unknown> => g !== null && typeof g === 'object',
    );
    const rateOf = (key: string): number => {
      let rate = 0;
      for (const g of groups) {
        const r = limitRate(g[key]);
        if (r > 0 && (rate === 0 || r < rate)) rate = r;
      }
      return rate;
    };
    if (config.maxMessagesPerSec === 0) {
      const messages = [rateOf('messages'), rateOf('telemetryMessages')].filter((r) => r > 0);
      this.#msgRate = messages.length > 0 ? Math.min(...messages) : 0;
    }
    this.#pointRate = rateOf('telemetryDataPoints');
    log.info(
      {
        maxInFlight: this.#maxInFlight,
        maxPayload: this.#maxPayload,
        msgRate: this.#msgRate,
        pointRate: this.#pointRate,
      },
      'upstream: cloud session limits applied',
    );
  }

  #now(): number {
    return this.#deps.now?.() ?? Date.now();
  }
}

const TELEMETRY = 'POST_TELEMETRY_REQUEST';
const ATTRIBUTES = 'POST_ATTRIBUTES_REQUEST';

/**
 * The wait before reconnect attempt `attempt` (0 first): the base doubles from `minMs` up to
 * 60 s, and a random point (`random` in [0, 1)) of its upper half is taken, never below `minMs`:
 * gateways cut off together do not come back together.
 */
export function reconnectDelay(attempt: number, minMs: number, random: number): number {
  const base = Math.min(BACKOFF_MAX_MS, minMs * 2 ** attempt);
  return Math.max(minMs, base / 2 + random * (base / 2));
}

/**
 * ThingsBoard's rate limit text (`"20:1,600:60"`: 20 per second, 600 per minute) as the steady
 * rate that respects every window, with 10 % margin; 0 when none.
 */
export function limitRate(text: unknown): number {
  if (typeof text !== 'string' || text.trim() === '') return 0;
  let rate = 0;
  for (const part of text.split(',')) {
    const [n, s] = part.split(':').map(Number);
    if (!(n > 0 && s > 0)) continue;
    const r = (0.9 * n) / s;
    if (rate === 0 || r < rate) rate = r;
  }
  return rate;
}
