import type { Logger } from 'pino';
import { writeKvObject, writeKvValue } from '../../attributes/kv-value.js';
import { sharedUpdateJson } from '../../attributes/payloads.js';
import type { TypedAttributeKv } from '../../attributes/types.js';
import {
  JsonNumber,
  type JsonText,
  parseJsonText,
  stringifyJsonText,
} from '../../common/json-text.js';
import { DEVICE_LIMITS, nonNegativeInt } from '../../common/limits.js';
import type { Subscription } from '../../common/subscriptions.js';
import type { DeviceIdentity, DeviceService } from '../../devices/device-service.js';
import { ValidationError } from '../../errors.js';
import { parseTelemetry, TELEMETRY_LIMITS } from '../../telemetry/telemetry-parser.js';
import type { DeviceCore } from '../device-core.js';
import type { PublishResult, Send } from './device-session.js';
import { GATEWAY_TOPIC } from './topics.js';

type JsonObject = { [key: string]: JsonText };

/** A connected child device and what it is subscribed to for this gateway connection. */
interface Child {
  readonly device: DeviceIdentity;
  readonly subs: readonly Subscription[];
}

// The device map and the per-device array wrap the §1.1 forms in two more levels.
const MAX_DEPTH = TELEMETRY_LIMITS.maxDepth + 2;
const MAX_NAME_LENGTH = DEVICE_LIMITS.maxDeviceNameLength;

function isObject(v: JsonText | undefined): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof JsonNumber);
}

/** Parses a payload that must be a JSON object; number literals are kept as written. */
function parseBody(payload: Buffer, what: string): JsonObject {
  const text = payload.toString('utf8');
  if (text.trim() === '') throw new ValidationError(`${what}: payload is empty`);
  let body: JsonText;
  try {
    body = parseJsonText(text, MAX_DEPTH);
  } catch (err) {
    throw new ValidationError(`${what}: ${(err as Error).message}`, { cause: err });
  }
  if (!isObject(body)) throw new ValidationError(`${what}: payload must be a JSON object`);
  return body;
}

function checkName(name: string, what: string): string {
  if (name === '' || name.trim() !== name || name.length > MAX_NAME_LENGTH) {
    throw new ValidationError(
      `${what}: device name must be 1 to ${MAX_NAME_LENGTH} characters without leading or trailing blanks`,
    );
  }
  return name;
}

/** The `"device"` member of a single-device message. */
function deviceName(body: JsonObject, what: string): string {
  const name = body.device;
  if (typeof name !== 'string') throw new ValidationError(`${what}: "device" must be a string`);
  return checkName(name, what);
}

/** §9: `{"Device A": ..., "Device B": ...}`; an empty map is invalid. */
function deviceMap(body: JsonObject, what: string): Array<[string, JsonText]> {
  const entries = Object.entries(body);
  if (entries.length === 0) throw new ValidationError(`${what}: payload names no device`);
  for (const [name] of entries) checkName(name, what);
  return entries;
}

/** A request id: a non-negative integer, or its decimal string (ThingsBoard's Gson accepts both). */
function requestId(v: JsonText | undefined, what: string): number {
  const raw = v instanceof JsonNumber ? v.raw : typeof v === 'string' ? v : undefined;
  if (raw === undefined) throw new ValidationError(`${what}: "id" must be a non-negative integer`);
  return nonNegativeInt(raw, `${what}: "id"`);
}

/** §9: per-element `metadata` (gateway latency statistics) is not stored. */
function withoutMetadata(el: JsonText): JsonText {
  if (!isObject(el) || !Object.hasOwn(el, 'metadata')) return el;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(el)) {
    // defineProperty, as the JSON parser does, so that a "__proto__" key stays plain data.
    if (key !== 'metadata')
      Object.defineProperty(out, key, {
        value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  return out;
}

/** §9: `value` for a `key` request, `values` for a `keys` request, neither when nothing was found. */
function attributeResponseJson(
  id: number,
  device: string,
  found: readonly TypedAttributeKv[],
  single: boolean,
): string {
  let text = `{"id":${id},"device":${JSON.stringify(device)}`;
  if (found.length > 0) {
    text += single
      ? `,"value":${writeKvValue(found[0])}`
      : `,"values":${writeKvObject(found.map((kv) => [kv.key, kv] as const))}`;
  }
  return `${text}}`;
}

/**
 * The ThingsBoard gateway MQTT API (reference §9) for a device flagged as a gateway
 * (`additionalInfo.gateway = true`): child devices connect, publish and get RPC and shared
 * attributes through the gateway's one connection.
 *
 * Children are looked up by name and created on first sight, by `connect` or by any message
 * that names them, as ThingsBoard does. A connected child is subscribed at once to its shared
 * attributes and server-side RPC for this connection; ThingsBoard publishes those whether or not
 * the gateway subscribed to `v1/gateway/attributes` / `v1/gateway/rpc` (§11: downlinks need no
 * matching subscription), and so do we. Multi-device messages are validated as a whole before
 * anything is stored, so an invalid one stores nothing (the adapter then applies §11).
 */
export class GatewaySession {
  readonly #children = new Map<string, Child>();
  #closed = false;

  constructor(
    readonly gateway: DeviceIdentity,
    private readonly core: DeviceCore,
    private readonly devices: DeviceService,
    private readonly send: Send,
    private readonly log: Logger,
  ) {}

  /**
   * Handles a PUBLISH on a `v1/gateway/...` topic; resolves once everything it carries is
   * committed (so the adapter acknowledges a multi-device publish once). Throws ValidationError
   * on an invalid payload.
   */
  async publish(topic: string, payload: Buffer): Promise<PublishResult> {
    switch (topic) {
      case GATEWAY_TOPIC.connect:
        this.#connect(payload);
        return 'handled';
      case GATEWAY_TOPIC.disconnect:
        this.#disconnect(payload);
        return 'handled';
      case GATEWAY_TOPIC.telemetry:
        await this.#telemetry(payload);
        return 'handled';
      case GATEWAY_TOPIC.attributes:
        this.#attributes(payload);
        return 'handled';
      case GATEWAY_TOPIC.attributesRequest:
        this.#attributeRequest(payload);
        return 'handled';
      case GATEWAY_TOPIC.rpc:
        this.#rpcReply(payload);
        return 'handled';
      case GATEWAY_TOPIC.claim:
        this.#claim(payload);
        return 'handled';
      default:
        return 'unknown-topic';
    }
  }

  /**
   * @NOTE: pushes to children do not wait for these: ThingsBoard sends them with or without a
   * matching subscription (only the QoS would differ; we always publish at QoS 1).
   */
  subscribed(_filter: string): void {}

  unsubscribed(_filter: string): void {}

  /** Ends every child session of this gateway (the gateway connection is gone). Idempotent. */
  close(): void {
    this.#closed = true;
    for (const name of [...this.#children.keys()]) this.#release(name);
  }

  /** Connected children (tests, metrics). */
  get childCount(): number {
    return this.#children.size;
  }

  /** `{"device":"A","type":"thermostat"}`: `type` names the profile of a new device. */
  #connect(payload: Buffer): void {
    const what = 'gateway connect';
    const body = parseBody(payload, what);
    const name = deviceName(body, what);
    const type = body.type;
    if (type !== undefined && type !== null && typeof type !== 'string') {
      throw new ValidationError(`${what}: "type" must be a string`);
    }
    this.#child(name, type ?? undefined);
  }

  #disconnect(payload: Buffer): void {
    const what = 'gateway disconnect';
    const name = deviceName(parseBody(payload, what), what);
    if (this.#release(name)) {
      this.log.debug({ gatewayId: this.gateway.id, device: name }, 'gateway child disconnected');
    }
  }

  /** `{"A":[<§1.1 element>, ...], "B":[...]}`; resolves after every device's data is committed. */
  async #telemetry(payload: Buffer): Promise<void> {
    const what = 'gateway telemetry';
    const now = Date.now();
    const batches = deviceMap(parseBody(payload, what), what).map(([name, value]) => {
      if (!Array.isArray(value)) {
        throw new ValidationError(`${what}: the value of "${name}" must be an array`);
      }
      const data = value.map(withoutMetadata);
      try {
        // A dry run, so that one bad device stores nothing for the others either.
        parseTelemetry(data, now);
      } catch (err) {
        throw new ValidationError(`${what}: "${name}": ${(err as Error).message}`, { cause: err });
      }
      return { name, data };
    });
    const children = batches.map((b) => this.#child(b.name));
    await Promise.all(
      batches.map((b, i) => this.core.messages.postTelemetry(children[i], b.data, now)),
    );
  }

  /** `{"A":{"attr":1}, ...}`: client-scope attributes of each child. */
  #attributes(payload: Buffer): void {
    const what = 'gateway attributes';
    const typed = deviceMap(parseBody(payload, what), what).map(([name, value]) => {
      if (!isObject(value)) {
        throw new ValidationError(`${what}: the value of "${name}" must be a JSON object`);
      }
      return { name, values: this.core.messages.parseClientAttributes(stringifyJsonText(value)) };
    });
    const children = typed.map((t) => this.#child(t.name));
    for (const [i, t] of typed.entries()) {
      this.core.messages.saveClientAttributes(children[i], t.values);
    }
  }

  /** `{"id":1,"device":"A","client":true,"key":"k"}` or `..."keys":["a","b"]}`. */
  #attributeRequest(payload: Buffer): void {
    const what = 'gateway attribute request';
    const body = parseBody(payload, what);
    const id = requestId(body.id, what);
    const name = deviceName(body, what);
    if (typeof body.client !== 'boolean') {
      throw new ValidationError(`${what}: "client" must be true or false`);
    }
    let keys: string[];
    const single = Object.hasOwn(body, 'key');
    if (single) {
      if (typeof body.key !== 'string')
        throw new ValidationError(`${what}: "key" must be a string`);
      keys = [body.key];
    } else if (Array.isArray(body.keys) && body.keys.every((k) => typeof k === 'string')) {
      keys = body.keys as string[];
    } else {
      throw new ValidationError(
        `${what}: "key" (a string) or "keys" (an array of strings) is required`,
      );
    }
    const child = this.#child(name);
    // @NOTE: an empty "keys" array asks for every attribute of the scope.
    const found = this.core.attributes.get(
      child.id,
      body.client ? 'CLIENT_SCOPE' : 'SHARED_SCOPE',
      keys.length > 0 ? keys : undefined,
    );
    void this.#push(
      GATEWAY_TOPIC.attributesResponse,
      attributeResponseJson(id, name, found, single),
    );
  }

  /** `{"device":"A","id":0,"data":{...}}`: the child's reply to a server-side RPC. */
  #rpcReply(payload: Buffer): void {
    const what = 'gateway rpc reply';
    const body = parseBody(payload, what);
    const name = deviceName(body, what);
    const id = requestId(body.id, what);
    if (!Object.hasOwn(body, 'data')) throw new ValidationError(`${what}: "data" is required`);
    const child = this.#child(name);
    // §3.2: forwarded as its JSON text; a stale id is dropped by the RPC service.
    this.core.rpc.reply(child.id, id, stringifyJsonText(body.data));
  }

  /** `{"A":{"secretKey":"s","durationMs":60000}, "B":{}}`. */
  #claim(payload: Buffer): void {
    const what = 'gateway claim';
    const requests = deviceMap(parseBody(payload, what), what).map(([name, value]) => {
      if (!isObject(value)) {
        throw new ValidationError(`${what}: the value of "${name}" must be a JSON object`);
      }
      // Validated for every device before any is claimed.
      return { name, request: this.core.messages.parseClaim(stringifyJsonText(value)) };
    });
    const children = requests.map((r) => this.#child(r.name));
    for (const [i, r] of requests.entries()) this.core.messages.claim(children[i], r.request);
  }

  /**
   * The connected child of that name; connects it first (finding or creating the device and
   * subscribing it to shared attributes and RPC) when it is not.
   */
  #child(name: string, type?: string): DeviceIdentity {
    const known = this.#children.get(name);
    if (known) {
      // A device deleted through REST meanwhile is forgotten and, as in ThingsBoard, created anew.
      if (this.devices.identity(known.device.id)) return known.device;
      this.#release(name);
    }
    const device = this.devices.findOrCreateChild(name, type, this.gateway.id);
    if (this.#closed) return device;
    const { core } = this;
    const subs = [
      core.attributes.subscribe(device.id, (update) => {
        const body = `{"device":${JSON.stringify(name)},"data":${sharedUpdateJson(update)}}`;
        void this.#push(GATEWAY_TOPIC.attributes, body);
      }),
      // §3.2: pending requests are pushed at once (BURST), then each new one.
      core.rpc.subscribe(device.id, (req) => {
        const data = { id: req.id, method: req.method, params: req.params };
        this.send(GATEWAY_TOPIC.rpc, JSON.stringify({ device: name, data }), 1).then(
          () => core.rpc.delivered(device.id, req.id),
          (err: Error) => core.rpc.failed(device.id, req.id, err.message),
        );
      }),
    ];
    this.#children.set(name, { device, subs });
    // A child's session starts and ends with the gateway's connect/disconnect (or its first
    // message, or the gateway's own disconnect), as any device's: activity and CONNECT_EVENT.
    core.messages.connected(device);
    this.log.debug(
      { gatewayId: this.gateway.id, device: name, deviceId: device.id },
      'gateway child connected',
    );
    return device;
  }

  /** Ends a child's subscriptions; false when it was not connected. */
  #release(name: string): boolean {
    const child = this.#children.get(name);
    if (!child) return false;
    for (const sub of child.subs) sub.unsubscribe();
    this.#children.delete(name);
    this.core.messages.disconnected(child.device);
    return true;
  }

  async #push(topic: string, payload: string): Promise<void> {
    if (this.#closed) return;
    try {
      await this.send(topic, payload, 1);
    } catch (err) {
      this.log.debug({ err, gatewayId: this.gateway.id, topic }, 'mqtt gateway push not delivered');
    }
  }
}
