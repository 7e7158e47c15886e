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
import { get as sparkplugCodec } from 'sparkplug-payload';
import type { Subscription } from '../../common/subscriptions.js';
import type { DeviceIdentity, DeviceService } from '../../devices/device-service.js';
import type { TransportSettings } from '../../devices/transport-config.js';
import { ValidationError } from '../../errors.js';
import type { DeviceCore } from '../device-core.js';
import type { PublishResult, Send } from './device-session.js';

const NAMESPACE = 'spBv1.0';
const CERT_PREFIX = '$sparkplug/certificates/';
const REBIRTH = 'Node Control/Rebirth';
/** Sparkplug devices one node may bring (each holds two subscriptions). */
const MAX_CHILDREN = 1000;

type Codec = NonNullable<ReturnType<typeof sparkplugCodec>>;
type UMetric = NonNullable<Parameters<Codec['encodePayload']>[0]['metrics']>[number];
type Payload = ReturnType<Codec['decodePayload']>;
interface Metric {
  name?: string;
  alias?: unknown;
  timestamp?: unknown;
  type: string;
  value: unknown;
}

interface BirthMetric {
  readonly alias: number | undefined;
  readonly type: string;
}

interface Child {
  readonly device: DeviceIdentity;
  readonly metrics: Map<string, BirthMetric>;
  readonly subs: Subscription[];
}

/** A Long (protobufjs 6), a number or undefined, as a number. */
function num(v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'number') return v;
  const long = v as { toNumber?: () => number };
  return typeof long.toNumber === 'function' ? long.toNumber() : Number(v);
}

/** A metric value as a JSON literal of ThingsBoard's type (§4.5); undefined = not stored. */
function valueJson(m: Metric): string | undefined {
  const v = m.value;
  if (v === null || v === undefined) return undefined;
  switch (m.type.toLowerCase()) {
    case 'int8':
    case 'int16':
    case 'int32':
    case 'int64':
    case 'uint8':
    case 'uint16':
    case 'uint32':
    case 'uint64':
    case 'datetime':
      return String(num(v) ?? 0);
    case 'float':
    case 'double': {
      // @NOTE: ThingsBoard truncates Double to LONG (transport-profiles.md §4.5); we keep DOUBLE.
      const n = num(v) ?? 0;
      if (!Number.isFinite(n)) return undefined;
      return Number.isInteger(n) && Math.abs(n) < 1e21 ? `${n}.0` : String(n);
    }
    case 'boolean':
      return v ? 'true' : 'false';
    case 'string':
    case 'text':
    case 'uuid':
      return JSON.stringify(String(v));
    case 'bytes':
      return JSON.stringify([...Buffer.from(v as Uint8Array)].map((b) => (b << 24) >> 24));
    default:
      return undefined;
  }
}

/**
 * The Sparkplug side of one edge-node connection. `publish` takes every non-gateway PUBLISH of
 * the session; `close` marks the node and its devices inactive (connection loss, §4.2).
 */
export class SparkplugSession {
  readonly #codec: Codec;
  #group: string | undefined;
  #edge: string | undefined;
  #bdSeq: number | undefined;
  /** The `seq` the next message must carry; undefined until an NBIRTH. */
  #nextSeq: number | undefined;
  readonly #nodeMetrics = new Map<string, BirthMetric>();
  /** Metric names by alias, node-wide (NBIRTH and DBIRTH, §4.4). */
  readonly #aliases = new Map<number, string>();
  readonly #children = new Map<string, Child>();
  readonly #subs: Subscription[] = [];
  #childType: string | undefined;
  #closed = false;
  #rebirths = 0;

  constructor(
    private readonly node: DeviceIdentity,
    private readonly core: DeviceCore,
    private readonly devices: DeviceService,
    private readonly settings: TransportSettings,
    private readonly send: Send,
    private readonly log: Logger,
  ) {
    const codec = sparkplugCodec(NAMESPACE);
    if (!codec) throw new Error('sparkplug-payload has no spBv1.0 codec');
    this.#codec = codec;
    // §4.1: the node is subscribed to its shared attributes and RPC from the start.
    this.#subs.push(...this.#downlinks(node, undefined));
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
    const parts = topic.split('/');
    if (parts[0] !== NAMESPACE || parts.length < 4 || parts.length > 5) return 'unknown-topic';
    const [, group, type, edge, deviceId] = parts;
    if (this.#group === undefined || type === 'NBIRTH') {
      this.#group = group;
      this.#edge = edge;
    } else if (group !== this.#group || edge !== this.#edge) {
      throw new ValidationError(`sparkplug: topic ${topic} is not this edge node's`);
    }
    let decoded: Payload;
    try {
      decoded = this.#codec.decodePayload(payload);
    } catch (err) {
      throw new ValidationError('sparkplug: payload is not a Sparkplug B payload', { cause: err });
    }
    const metrics = (decoded.metrics ?? []) as Metric[];
    switch (type) {
      case 'NBIRTH':
        this.#nbirth(decoded, metrics);
        await this.#store(this.node, metrics, decoded);
        return 'handled';
      case 'NDATA':
      case 'NCMD':
        this.#checkSeq(decoded);
        await this.#store(this.node, metrics, decoded);
        return 'handled';
      case 'NDEATH':
        this.#ndeath(metrics);
        return 'handled';
      case 'DBIRTH':
      case 'DDATA':
      case 'DCMD':
      case 'DDEATH': {
        if (!deviceId) throw new ValidationError(`sparkplug: ${type} needs a device id`);
        this.#checkSeq(decoded);
        if (type === 'DDEATH') {
          const child = this.#children.get(deviceId);
          if (child) this.#inactive(child.device);
          return 'handled';
        }
        const child = this.#child(deviceId);
        if (type === 'DBIRTH') {
          child.metrics.clear();
          this.#birthMetrics(metrics, child.metrics);
          this.core.messages.connected(child.device);
        }
        await this.#store(child.device, metrics, decoded);
        return 'handled';
      }
      case 'NRECORD':
      case 'DRECORD':
        return 'handled';
      default:
        return 'unknown-topic';
    }
  }

  /** Connection loss, or the session ended: the node and its devices are inactive. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const sub of this.#subs) sub.unsubscribe();
    for (const child of this.#children.values()) {
      for (const sub of child.subs) sub.unsubscribe();
      this.#inactive(child.device);
    }
    this.#children.clear();
    this.core.activity.lost(this.node);
  }

  #nbirth(payload: Payload, metrics: Metric[]): void {
    this.#nodeMetrics.clear();
    this.#aliases.clear();
    for (const child of this.#children.values()) child.metrics.clear();
    this.#birthMetrics(metrics, this.#nodeMetrics);
    const bdSeq = metrics.find((m) => m.name === 'bdSeq');
    this.#bdSeq = num(bdSeq?.value);
    // Sparkplug B §6.4.2: the birth carries seq 0 (any value restarts the count).
    this.#nextSeq = ((num(payload.seq) ?? 0) + 1) % 256;
  }

  /** A death certificate of an older session (its bdSeq is not this birth's) is ignored. */
  #ndeath(metrics: Metric[]): void {
    const bdSeq = num(metrics.find((m) => m.name === 'bdSeq')?.value);
    if (this.#bdSeq !== undefined && bdSeq !== undefined && bdSeq !== this.#bdSeq) {
      this.log.info({ deviceId: this.node.id, bdSeq }, 'sparkplug: stale NDEATH ignored');
      return;
    }
    for (const child of this.#children.values()) this.#inactive(child.device);
    this.core.activity.lost(this.node);
  }

  #birthMetrics(metrics: Metric[], into: Map<string, BirthMetric>): void {
    for (const m of metrics) {
      if (!m.name) throw new ValidationError('sparkplug: a birth metric needs a name');
      const alias = num(m.alias);
      if (alias !== undefined) {
        const other = this.#aliases.get(alias);
        if (other !== undefined && other !== m.name)
          throw new ValidationError(`sparkplug: alias ${alias} is used by ${other} already`);
        this.#aliases.set(alias, m.name);
      }
      into.set(m.name, { alias, type: m.type });
    }
  }

  /** Sparkplug B §6.4.1: seq counts 0..255 per node; a gap or no birth asks for a rebirth. */
  #checkSeq(payload: Payload): void {
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

  /** Metrics → telemetry (per metric timestamp) and client attributes, via the one way in. */
  async #store(device: DeviceIdentity, metrics: Metric[], payload: Payload): Promise<void> {
    const fallbackTs = num(payload.timestamp) ?? Date.now();
    const byTs = new Map<number, string[]>();
    const attributes: string[] = [];
    let unknownAlias = false;
    for (const m of metrics) {
      let name = m.name;
      if (!name) {
        const alias = num(m.alias);
        name = alias === undefined ? undefined : this.#aliases.get(alias);
      }
      if (!name) {
        unknownAlias = true;
        continue;
      }
      const value = valueJson(m);
      if (value === undefined) continue;
      const entry = `${JSON.stringify(name)}:${value}`;
      if (this.#isAttribute(name)) {
        attributes.push(entry);
        continue;
      }
      const ts = num(m.timestamp) ?? fallbackTs;
      const list = byTs.get(ts) ?? [];
      list.push(entry);
      byTs.set(ts, list);
    }
    if (unknownAlias) this.#rebirth('metric with an unknown alias');
    if (attributes.length > 0)
      this.core.messages.postAttributes(device, `{${attributes.join(',')}}`);
    if (byTs.size === 0) return;
    const items = [...byTs].map(([ts, values]) => `{"ts":${ts},"values":{${values.join(',')}}}`);
    await this.core.messages.postTelemetry(device, `[${items.join(',')}]`);
  }

  #isAttribute(name: string): boolean {
    for (const pattern of this.settings.sparkplugAttributesMetricNames) {
      if (pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : name === pattern)
        return true;
    }
    return false;
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
    const birth = () =>
      deviceId === undefined ? this.#nodeMetrics : this.#children.get(deviceId)?.metrics;
    return [
      core.attributes.subscribe(device.id, (update) => {
        if (update.kind !== 'updated') return;
        const metrics = birth();
        const writes = update.values.filter((kv) => metrics?.has(kv.key) || kv.key === REBIRTH);
        if (writes.length === 0) return;
        this.#command(
          verb,
          deviceId,
          writes.map((kv) => ({ name: kv.key, value: kv.value })),
        );
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

  /** An NCMD/DCMD with metric writes typed as their birth metrics (§4.6). */
  #command(
    verb: 'NCMD' | 'DCMD',
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

  #inactive(device: DeviceIdentity): void {
    this.core.messages.disconnected(device);
    this.core.activity.lost(device);
  }
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
