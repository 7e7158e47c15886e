/**
 * Sparkplug B edge nodes (issue 21, transport-profiles.md §4): a device of a profile with
 * `sparkplug: true` connects as an edge node and publishes on
 * `spBv1.0/{group}/{NBIRTH|NDATA|NDEATH|DBIRTH|DDATA|DDEATH}/{edgeNode}[/{deviceId}]` with
 * Sparkplug B payloads (Eclipse Tahu's codec). The node is the authenticated device; each
 * Sparkplug device is a child device, created on first sight through the gateway API's path in
 * the core. Metrics become telemetry, or client attributes for the profile's
 * `sparkplugAttributesMetricNames`, through the one way in. Shared attributes and RPC go out as
 * NCMD/DCMD metric writes.
 */

import type { Logger } from 'pino';
import type * as SparkplugPayloadLib from 'sparkplug-payload';
import { writeKvValue } from '../../attributes/kv-value.js';
import type { KvType } from '../../attributes/types.js';
import type { Subscription } from '../../common/subscriptions.js';
import {
  checkValueLength,
  type TypedValue,
  typeBinaryDouble,
  typeNumber,
  typeText,
  type ValueKind,
} from '../../common/value-typing.js';
import type { DeviceIdentity, DeviceService } from '../../devices/device-service.js';
import type { TransportSettings } from '../../devices/transport-config.js';
import { ValidationError } from '../../errors.js';
import { DecodedTelemetry, type PointCollector } from '../../telemetry/telemetry-parser.js';
import type { DeviceCore } from '../device-core.js';
import type { PublishResult, Send } from './device-session.js';
import {
  readSparkplugPayload,
  type SparkplugMetric,
  type SparkplugPayload,
} from './sparkplug-reader.js';

const NAMESPACE = 'spBv1.0';
const CERT_PREFIX = '$sparkplug/certificates/';
const REBIRTH = 'Node Control/Rebirth';
/** Sparkplug devices one node may bring (each holds two subscriptions). */
const MAX_CHILDREN = 1000;
/** Metric names whose attribute-or-telemetry answer is remembered per node. */
const MAX_NAME_CACHE = 10_000;
/** ThingsBoard's telemetry of the node's and devices' state (transport-profiles.md §4.2). */
const CONNECTION_STATE = 'sparkplugConnectionState';
/** Verbs a verb-keyed shared attribute may pick (§4.6), node and device. */
const NODE_VERBS = new Set(['NCMD', 'NDATA', 'NRECORD']);
const DEVICE_VERBS = new Set(['DCMD', 'DDATA', 'DRECORD']);

type Codec = NonNullable<ReturnType<typeof SparkplugPayloadLib.get>>;
type UMetric = NonNullable<Parameters<Codec['encodePayload']>[0]['metrics']>[number];

interface BirthMetric {
  readonly alias: number | undefined;
  /** Tahu's type name, for the metric writes of NCMD/DCMD. */
  readonly type: string;
}

interface Child {
  readonly device: DeviceIdentity;
  readonly metrics: Map<string, BirthMetric>;
  readonly subs: Subscription[];
}

/** Sparkplug B DataType numbers (§4.5) → Tahu's type names, for the birth metrics. */
const TYPE_NAMES = [
  'Unknown',
  'Int8',
  'Int16',
  'Int32',
  'Int64',
  'UInt8',
  'UInt16',
  'UInt32',
  'UInt64',
  'Float',
  'Double',
  'Boolean',
  'String',
  'DateTime',
  'Text',
  'UUID',
  'DataSet',
  'Bytes',
  'File',
  'Template',
  'PropertySet',
  'PropertySetList',
];

/** A varint, a number or undefined, as a number (aliases, sequence numbers, timestamps). */
function num(v: number | bigint | undefined): number | undefined {
  return typeof v === 'bigint' ? Number(v) : v;
}

/** An integer metric as a LONG (a value beyond int64 stays its digits, as a JSON literal would). */
function long(v: number | bigint, key: string): TypedValue {
  return typeof v === 'number' ? { kind: 'long', value: v } : typeNumber(v.toString(), key);
}

/**
 * A metric's value typed as ThingsBoard stores it (§4.5); undefined = not stored (null, no
 * value, or a type without a scalar: DataSet, Template, PropertySet, arrays).
 */
function metricValue(m: SparkplugMetric, key: string, maxLength: number): TypedValue | undefined {
  const v = m.value;
  if (m.isNull || v === undefined) return undefined;
  switch (m.datatype) {
    case 1: // Int8
    case 2: // Int16
    case 3: // Int32: the uint32 field holds the two's complement
      if (typeof v === 'number') return { kind: 'long', value: v | 0 };
      if (typeof v === 'bigint') return long(BigInt.asIntN(64, v), key);
      return undefined;
    case 4: // Int64
      if (typeof v === 'bigint') return long(BigInt.asIntN(64, v), key);
      return typeof v === 'number' ? { kind: 'long', value: v } : undefined;
    case 5: // UInt8
    case 6: // UInt16
    case 7: // UInt32: int_value or long_value
    case 8: // UInt64
    case 13: // DateTime
      return typeof v === 'number' || typeof v === 'bigint' ? long(v, key) : undefined;
    case 9: // Float
    case 10: // Double
      // @NOTE: ThingsBoard truncates Double to LONG (transport-profiles.md §4.5); we keep DOUBLE.
      return typeof v === 'number' ? typeBinaryDouble(v, key, maxLength) : undefined;
    case 11: // Boolean
      return typeof v === 'boolean' ? { kind: 'bool', value: v } : undefined;
    case 12: // String
    case 14: // Text
    case 15: // UUID
      return typeof v === 'string' ? typeText(v, key, maxLength) : undefined;
    case 17: {
      // Bytes: a JSON array of signed bytes.
      if (!(v instanceof Uint8Array)) return undefined;
      const text = `[${Array.from(v, (b) => (b << 24) >> 24).join(',')}]`;
      checkValueLength(key, text.length, maxLength);
      return { kind: 'json', value: text };
    }
    default:
      return undefined;
  }
}

const KV_TYPES: Record<ValueKind, KvType> = {
  bool: 'BOOLEAN',
  long: 'LONG',
  double: 'DOUBLE',
  string: 'STRING',
  json: 'JSON',
};

/** A typed value as a JSON literal of its type (`40.0` stays a DOUBLE). */
function literal(t: TypedValue): string {
  if (t.kind === 'json') return t.value as string;
  return writeKvValue({ type: KV_TYPES[t.kind], value: t.value });
}

/**
 * The Sparkplug side of one edge-node connection. `publish` takes every non-gateway PUBLISH of
 * the session; `close` marks the node and its devices inactive (connection loss, §4.2).
 */
export class SparkplugSession {
  readonly #codec: Codec;
  #group: string | undefined;
  #edge: string | undefined;
  /** The will's bdSeq (checked at CONNECT), which the NBIRTH must repeat. */
  readonly #willBdSeq: number | undefined;
  #bdSeq: number | undefined;
  /** The `seq` the next message must carry; undefined until an NBIRTH. */
  #nextSeq: number | undefined;
  readonly #nodeMetrics = new Map<string, BirthMetric>();
  /** Metric names by alias, node-wide (NBIRTH and DBIRTH, §4.4). */
  readonly #aliases = new Map<number, string>();
  readonly #children = new Map<string, Child>();
  readonly #subs: Subscription[] = [];
  /** Whether a metric name is an attribute (`sparkplugAttributesMetricNames`), by name. */
  readonly #isAttributeCache = new Map<string, boolean>();
  #childType: string | undefined;
  #closed = false;
  #online = false;
  #rebirths = 0;

  /**
   * `will` is the CONNECT's will message: a Sparkplug node must leave its NDEATH there (§4.1),
   * else the connection is refused (ValidationError).
   */
  constructor(
    private readonly node: DeviceIdentity,
    private readonly core: DeviceCore,
    private readonly devices: DeviceService,
    private readonly settings: TransportSettings,
    private readonly send: Send,
    private readonly log: Logger,
    will?: { readonly topic: string; readonly payload: Buffer },
  ) {
    if (!loadedCodec) throw new Error('the Sparkplug codec is not loaded (loadSparkplugCodec)');
    this.#codec = loadedCodec;
    const death = parseTopic(will?.topic ?? '');
    if (!will || !death || death.type !== 'NDEATH' || death.deviceId !== undefined)
      throw new ValidationError(
        'sparkplug: the CONNECT needs a will on spBv1.0/{group}/NDEATH/{edge node}',
      );
    const bdSeq = readBdSeq(decode(will.payload).metrics);
    if (bdSeq === undefined)
      throw new ValidationError('sparkplug: the will (NDEATH) has no bdSeq metric');
    this.#willBdSeq = bdSeq;
    this.#group = death.group;
    this.#edge = death.edge;
    // §4.1: the node is subscribed to its shared attributes and RPC from the start.
    this.#subs.push(...this.#downlinks(node, undefined));
  }

  /** The connection was accepted: the will's bdSeq is stored (`NDEATH bdSeq`, §4.1). */
  connected(): void {
    const bdSeq = this.#willBdSeq;
    if (bdSeq === undefined) return;
    this.#telemetry(this.node, Date.now(), { 'NDEATH bdSeq': { kind: 'long', value: bdSeq } });
  }

  /** Every filter of this node's own namespace may be subscribed to (NCMD/DCMD, STATE). */
  maySubscribe(filter: string): boolean {
    return filter.startsWith(`${NAMESPACE}/`);
  }

  /** Rebirth requests sent so far (tests, logs). */
  get rebirths(): number {
    return this.#rebirths;
  }

  async publish(rawTopic: string, payload: Buffer): Promise<PublishResult> {
    const topic = rawTopic.startsWith(CERT_PREFIX) ? rawTopic.slice(CERT_PREFIX.length) : rawTopic;
    const parsed = parseTopic(topic);
    if (!parsed) return 'unknown-topic';
    const { group, type, edge, deviceId } = parsed;
    // transport-profiles.md §2.1: rule-engine messages carry the publish topic.
    const meta = { mqttTopic: rawTopic };
    if (type === 'NBIRTH') {
      this.#group = group;
      this.#edge = edge;
    } else if (group !== this.#group || edge !== this.#edge) {
      throw new ValidationError(`sparkplug: topic ${topic} is not this edge node's`);
    }
    switch (type) {
      case 'NBIRTH': {
        const decoded = decode(payload);
        this.#nbirth(decoded);
        const ts = num(decoded.timestamp) ?? Date.now();
        this.#online = true;
        await this.#store(
          this.node,
          decoded,
          payload,
          'NBIRTH',
          meta,
          { [CONNECTION_STATE]: ONLINE },
          ts,
        );
        return 'sparkplug_birth';
      }
      case 'NDATA':
      case 'NCMD': {
        const decoded = decode(payload);
        this.#checkSeq(decoded);
        await this.#store(this.node, decoded, payload, type, meta);
        return 'sparkplug_data';
      }
      case 'NDEATH':
        this.#ndeath(decode(payload));
        return 'sparkplug_death';
      case 'DBIRTH':
      case 'DDATA':
      case 'DCMD':
      case 'DDEATH': {
        if (!deviceId) throw new ValidationError(`sparkplug: ${type} needs a device id`);
        const decoded = decode(payload);
        this.#checkSeq(decoded);
        // @NOTE: ThingsBoard applies a device id `+` to every known device (§4.2), but no
        // PUBLISH can carry it: a wildcard in a topic name is a protocol violation
        // [MQTT-3.3.2-2] that closes the connection before it gets here (strict.ts; Netty's
        // decoder refuses it for ThingsBoard too).
        const ts = num(decoded.timestamp) ?? Date.now();
        if (type === 'DDEATH') {
          const child = this.#children.get(deviceId);
          if (child) this.#offline(child.device, ts);
          return 'sparkplug_death';
        }
        const child = this.#child(deviceId);
        let extra: Record<string, TypedValue> | undefined;
        if (type === 'DBIRTH') {
          child.metrics.clear();
          this.#birthMetrics(decoded.metrics, child.metrics);
          this.core.messages.connected(child.device);
          extra = { [CONNECTION_STATE]: ONLINE };
          const seq = num(decoded.seq);
          if (seq !== undefined) extra['DBIRTH seq'] = { kind: 'long', value: seq };
        }
        await this.#store(child.device, decoded, payload, type, meta, extra, ts);
        return type === 'DBIRTH' ? 'sparkplug_birth' : 'sparkplug_data';
      }
      case 'NRECORD':
      case 'DRECORD':
        return 'sparkplug_data';
      default:
        return 'unknown-topic';
    }
  }

  /** Connection loss, or the session ended: the node and its devices are inactive. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const sub of this.#subs) sub.unsubscribe();
    const now = Date.now();
    for (const child of this.#children.values()) {
      for (const sub of child.subs) sub.unsubscribe();
      this.#offline(child.device, now);
    }
    this.#children.clear();
    this.#nodeOffline(now);
  }

  #nbirth(payload: SparkplugPayload): void {
    const bdSeq = readBdSeq(payload.metrics);
    // Sparkplug B: the NBIRTH repeats the bdSeq of the will registered at CONNECT.
    if (bdSeq !== undefined && this.#willBdSeq !== undefined && bdSeq !== this.#willBdSeq) {
      throw new ValidationError(
        `sparkplug: NBIRTH bdSeq ${bdSeq} is not the will's bdSeq ${this.#willBdSeq}`,
      );
    }
    this.#nodeMetrics.clear();
    this.#aliases.clear();
    for (const child of this.#children.values()) child.metrics.clear();
    this.#birthMetrics(payload.metrics, this.#nodeMetrics);
    this.#bdSeq = bdSeq ?? this.#willBdSeq;
    // Sparkplug B §6.4.2: the birth carries seq 0 (any value restarts the count).
    this.#nextSeq = ((num(payload.seq) ?? 0) + 1) % 256;
  }

  /** A death certificate of an older session (its bdSeq is not this birth's) is ignored. */
  #ndeath(payload: SparkplugPayload): void {
    const bdSeq = readBdSeq(payload.metrics);
    const current = this.#bdSeq ?? this.#willBdSeq;
    if (current !== undefined && bdSeq !== undefined && bdSeq !== current) {
      this.log.info({ deviceId: this.node.id, bdSeq }, 'sparkplug: stale NDEATH ignored');
      return;
    }
    const ts = num(payload.timestamp) ?? Date.now();
    for (const child of this.#children.values()) this.#offline(child.device, ts);
    this.#nodeOffline(ts);
  }

  #birthMetrics(metrics: readonly SparkplugMetric[], into: Map<string, BirthMetric>): void {
    for (const m of metrics) {
      if (!m.name) throw new ValidationError('sparkplug: a birth metric needs a name');
      const alias = num(m.alias);
      if (alias !== undefined) {
        const other = this.#aliases.get(alias);
        if (other !== undefined && other !== m.name)
          throw new ValidationError(`sparkplug: alias ${alias} is used by ${other} already`);
        this.#aliases.set(alias, m.name);
      }
      into.set(m.name, { alias, type: TYPE_NAMES[m.datatype] ?? 'Unknown' });
    }
  }

  /** Sparkplug B §6.4.1: seq counts 0..255 per node; a gap or no birth asks for a rebirth. */
  #checkSeq(payload: SparkplugPayload): void {
    const seq = num(payload.seq);
    if (this.#nextSeq === undefined) {
      this.#rebirth('data before NBIRTH');
      return;
    }
    if (seq !== this.#nextSeq) {
      this.#rebirth(`sequence gap: expected ${this.#nextSeq}, got ${seq}`);
    }
    this.#nextSeq = ((seq ?? this.#nextSeq) + 1) % 256;
  }

  /** NCMD `Node Control/Rebirth` = true (Sparkplug B §6.4.4). */
  #rebirth(reason: string): void {
    if (this.#group === undefined || this.#edge === undefined) return;
    this.#rebirths++;
    this.log.info({ deviceId: this.node.id, reason }, 'sparkplug: rebirth requested');
    const body = this.#codec.encodePayload({
      timestamp: Date.now(),
      metrics: [{ name: REBIRTH, type: 'Boolean', value: true }],
    });
    this.send(`${NAMESPACE}/${this.#group}/NCMD/${this.#edge}`, Buffer.from(body), 1).catch(
      (err: Error) => this.log.debug({ err }, 'sparkplug rebirth request not delivered'),
    );
  }

  /**
   * Metrics → telemetry (per metric timestamp, typed straight into points) and client
   * attributes, through the one way in. `extra` points (connection state, birth seq) join the
   * telemetry at `extraTs`, in the same commit.
   */
  async #store(
    device: DeviceIdentity,
    decoded: SparkplugPayload,
    payload: Buffer,
    type: string,
    meta: Readonly<Record<string, string>>,
    extra?: Record<string, TypedValue>,
    extraTs?: number,
  ): Promise<void> {
    const fallbackTs = num(decoded.timestamp) ?? Date.now();
    const attributes: string[] = [];
    let unknownAlias = false;
    const telemetry: SparkplugMetric[] = [];
    for (const m of decoded.metrics) {
      let name = m.name;
      if (!name) {
        const alias = num(m.alias);
        name = alias === undefined ? undefined : this.#aliases.get(alias);
        if (!name) {
          unknownAlias = true;
          continue;
        }
        m.name = name;
      }
      if (!this.#isAttribute(name)) {
        telemetry.push(m);
        continue;
      }
      const value = metricValue(m, name, Number.POSITIVE_INFINITY);
      if (value) attributes.push(`${JSON.stringify(name)}:${literal(value)}`);
    }
    if (unknownAlias) this.#rebirth('metric with an unknown alias');
    if (attributes.length > 0)
      this.core.messages.postAttributes(device, `{${attributes.join(',')}}`, meta);
    if (telemetry.length === 0 && !extra) return;
    const decodedTelemetry = new DecodedTelemetry(payload.length, (_now, out) => {
      const max = out.limits.maxValueLength;
      for (const m of telemetry) {
        // `bdSeq` is stored as `<TYPE> bdSeq` (§4.4), so births and deaths stay apart.
        const key = m.name === 'bdSeq' ? `${type} bdSeq` : (m.name as string);
        out.checkKey(key);
        const value = metricValue(m, key, max);
        if (value) out.add(key, num(m.timestamp) ?? fallbackTs, value);
      }
      if (extra) addAll(out, extra, extraTs ?? fallbackTs);
    });
    await this.core.messages.postTelemetry(device, decodedTelemetry, undefined, meta);
  }

  /** Points of the gateway's own making (connection state), committed without waiting. */
  #telemetry(device: DeviceIdentity, ts: number, values: Record<string, TypedValue>): void {
    const decoded = new DecodedTelemetry(0, (_now, out) => addAll(out, values, ts));
    this.core.messages
      .postTelemetry(device, decoded)
      .catch((err: unknown) =>
        this.log.warn({ err, deviceId: device.id }, 'sparkplug state not stored'),
      );
  }

  #isAttribute(name: string): boolean {
    const patterns = this.settings.sparkplugAttributesMetricNames;
    if (patterns.length === 0) return false;
    const known = this.#isAttributeCache.get(name);
    if (known !== undefined) return known;
    let found = false;
    for (const pattern of patterns) {
      if (pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : name === pattern) {
        found = true;
        break;
      }
    }
    if (this.#isAttributeCache.size < MAX_NAME_CACHE) this.#isAttributeCache.set(name, found);
    return found;
  }

  /** A Sparkplug device as a child device (the gateway API's path in the core, §4.3). */
  #child(deviceId: string): Child {
    const known = this.#children.get(deviceId);
    if (known && this.devices.identity(known.device.id)) return known;
    if (known) for (const sub of known.subs) sub.unsubscribe();
    if (!known && this.#children.size >= MAX_CHILDREN)
      throw new ValidationError(`sparkplug: more than ${MAX_CHILDREN} devices on one edge node`);
    this.#childType ??= `${this.devices.get(this.node.id).type} device`;
    const device = this.devices.findOrCreateChild(deviceId, this.#childType, this.node.id);
    const metrics = known?.metrics ?? new Map<string, BirthMetric>();
    const child: Child = { device, metrics, subs: [] };
    if (!this.#closed) child.subs.push(...this.#downlinks(device, deviceId));
    this.#children.set(deviceId, child);
    return child;
  }

  /** Shared-attribute changes and RPC of the node (NCMD) or a device (DCMD), §4.6. */
  #downlinks(device: DeviceIdentity, deviceId: string | undefined): Subscription[] {
    const { core } = this;
    const verb = deviceId === undefined ? 'NCMD' : 'DCMD';
    const verbs = deviceId === undefined ? NODE_VERBS : DEVICE_VERBS;
    const birth = () =>
      deviceId === undefined ? this.#nodeMetrics : this.#children.get(deviceId)?.metrics;
    return [
      core.attributes.subscribe(device.id, (update) => {
        if (update.kind !== 'updated') return;
        const metrics = birth();
        const byVerb = new Map<string, Array<{ name: string; value: unknown }>>();
        const add = (v: string, name: string, value: unknown) => {
          if (!metrics?.has(name) && name !== REBIRTH) return;
          const list = byVerb.get(v) ?? [];
          list.push({ name, value });
          byVerb.set(v, list);
        };
        for (const kv of update.values) {
          // §4.6: a JSON value under a verb's name (`{"DDATA":{"metric":5}}`) picks the verb.
          if (verbs.has(kv.key) && kv.type === 'JSON' && isObject(kv.value)) {
            for (const [name, value] of Object.entries(kv.value)) add(kv.key, name, value);
          } else add(verb, kv.key, kv.value);
        }
        for (const [v, writes] of byVerb) this.#command(v, deviceId, writes);
      }),
      core.rpc.subscribe(device.id, (req) => {
        const params = (req.params ?? {}) as { metricName?: unknown; value?: unknown };
        const who = deviceId === undefined ? 'Node' : 'Device';
        let result: Record<string, string>;
        if (req.method !== verb) {
          result = {
            result: 'INVALID_ARGUMENTS',
            error: `Unsupported method: ${req.method}; use ${verb}`,
          };
        } else if (typeof params.metricName !== 'string' || !birth()?.has(params.metricName)) {
          result = {
            result: 'BAD_REQUEST_PARAMS',
            error: `Failed send To ${who} Rpc Request: ${req.method}. This ${who.toLowerCase()} does not have a metricName: [${String(params.metricName)}]`,
          };
        } else {
          this.#command(verb, deviceId, [{ name: params.metricName, value: params.value }]);
          result = { result: `Success: ${verb}` };
        }
        core.rpc.delivered(device.id, req.id);
        core.rpc.reply(device.id, req.id, JSON.stringify(result));
      }),
    ];
  }

  /** An NCMD/DCMD (or another verb, §4.6) with metric writes typed as their birth metrics. */
  #command(
    verb: string,
    deviceId: string | undefined,
    writes: Array<{ name: string; value: unknown }>,
  ): void {
    if (this.#closed || this.#group === undefined || this.#edge === undefined) return;
    const birth =
      deviceId === undefined ? this.#nodeMetrics : this.#children.get(deviceId)?.metrics;
    const now = Date.now();
    const metrics = writes.map(({ name, value }) => {
      const b = birth?.get(name);
      const type = b?.type ?? (typeof value === 'boolean' ? 'Boolean' : 'String');
      const m: Record<string, unknown> = { type, value: commandValue(type, value), timestamp: now };
      if (b?.alias !== undefined) m.alias = b.alias;
      else m.name = name;
      return m;
    });
    const topic = `${NAMESPACE}/${this.#group}/${verb}/${this.#edge}${deviceId ? `/${deviceId}` : ''}`;
    const body = Buffer.from(
      this.#codec.encodePayload({ timestamp: now, metrics: metrics as unknown as UMetric[] }),
    );
    this.send(topic, body, 1).catch((err: Error) =>
      this.log.debug({ err, topic }, 'sparkplug command not delivered'),
    );
  }

  /** A device went away: inactive, and `sparkplugConnectionState` OFFLINE (§4.2). */
  #offline(device: DeviceIdentity, ts: number): void {
    this.#telemetry(device, ts, { [CONNECTION_STATE]: OFFLINE });
    this.core.messages.disconnected(device);
    this.core.activity.lost(device);
  }

  #nodeOffline(ts: number): void {
    if (this.#online) this.#telemetry(this.node, ts, { [CONNECTION_STATE]: OFFLINE });
    this.#online = false;
    this.core.activity.lost(this.node);
  }
}

const ONLINE: TypedValue = { kind: 'string', value: 'ONLINE' };
const OFFLINE: TypedValue = { kind: 'string', value: 'OFFLINE' };

function addAll(out: PointCollector, values: Record<string, TypedValue>, ts: number): void {
  for (const [key, value] of Object.entries(values)) out.add(key, ts, value);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `spBv1.0/{group}/{type}/{edge node}[/{device id}]`, or undefined for any other topic. */
/**
 * Eclipse Tahu's codec, once loaded (it encodes the commands sent to Sparkplug nodes).
 *
 * @NOTE: sparkplug-payload brings a protobufjs of its own; evaluating it and protobufjs cost 3.0 MB
 * of memory in every gateway, most of which never has a Sparkplug node (docs/benchmarks.md, "5,000
 * idle MQTT connections: lighter connections, lazy Protobuf, a trim that sees malloc"). It is
 * imported when the first Sparkplug node connects (`loadSparkplugCodec`, awaited before its session
 * is made). This holds what the import cache holds, the library, and is set once.
 */
let loadedCodec: Codec | undefined;

/** Loads the Sparkplug codec; resolves at once when it is loaded. */
export async function loadSparkplugCodec(): Promise<void> {
  if (loadedCodec) return;
  const codec = (await import('sparkplug-payload')).get(NAMESPACE);
  if (!codec) throw new Error('sparkplug-payload has no spBv1.0 codec');
  loadedCodec = codec;
}

/** Whether the Sparkplug codec is loaded: a Sparkplug session can be made synchronously. */
export function sparkplugCodecLoaded(): boolean {
  return loadedCodec !== undefined;
}

function parseTopic(
  topic: string,
): { group: string; type: string; edge: string; deviceId: string | undefined } | undefined {
  const parts = topic.split('/');
  if (parts[0] !== NAMESPACE || parts.length < 4 || parts.length > 5) return undefined;
  return { group: parts[1], type: parts[2], edge: parts[3], deviceId: parts[4] };
}

function decode(payload: Buffer): SparkplugPayload {
  try {
    return readSparkplugPayload(payload);
  } catch (err) {
    throw new ValidationError('sparkplug: payload is not a Sparkplug B payload', { cause: err });
  }
}

function readBdSeq(metrics: readonly SparkplugMetric[]): number | undefined {
  const m = metrics.find((x) => x.name === 'bdSeq');
  return m && (typeof m.value === 'number' || typeof m.value === 'bigint')
    ? num(m.value)
    : undefined;
}

/** A ThingsBoard value for a metric of a birth type (§4.5 downlink column). */
function commandValue(type: string, value: unknown): unknown {
  switch (type.toLowerCase()) {
    case 'boolean':
      return typeof value === 'number' ? value !== 0 : value === true || value === 'true';
    case 'string':
    case 'text':
    case 'uuid':
      return typeof value === 'string' ? value : JSON.stringify(value);
    case 'float':
    case 'double':
      return Number(value);
    default:
      return typeof value === 'boolean' ? (value ? 1 : 0) : Math.trunc(Number(value));
  }
}
