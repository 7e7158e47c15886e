import type { IncomingMessage, OutgoingMessage } from 'coap';
import { parseKeyList } from '../../attributes/attribute-service.js';
import { flatAttributesJson } from '../../attributes/payloads.js';
import { DEVICE_LIMITS, nonNegativeInt } from '../../common/limits.js';
import type { DeviceIdentity, DeviceService } from '../../devices/device-service.js';
import { loadProtobuf, protobufLoaded } from '../../devices/protobuf-lib.js';
import {
  AuthenticationError,
  TimeoutError,
  TooManyRequestsError,
  ValidationError,
} from '../../errors.js';
import type { DeviceCore } from '../device-core.js';
import {
  PayloadCodec,
  provisionIsProtobuf,
  provisionRequest,
  provisionResponse,
} from '../payload-codec.js';

/**
 * CoAP device resources (reference §10), one dispatcher by method and path:
 * `/api/v1/{token}/{telemetry|attributes|rpc[/{id}]|claim}`, `/api/v1/provision`,
 * `/fw/{token}` and `/sw/{token}`. Domain errors are thrown and mapped by the server.
 */

/** Bounds of CoAP observations (RFC 7641); see docs/security.md. */
export interface ObservationLimits {
  /** Live observations in total: a registration beyond it is answered 5.03. */
  readonly maxTotal: number;
  /** Live observations of one endpoint (address and port): the oldest ends for a new one. */
  readonly maxPerEndpoint: number;
  /** An observation not re-registered within this time ends (RFC 7641 §3.3.1, Max-Age). */
  readonly lifetimeMs: number;
  /** A confirmable notification not acknowledged within this time ends it (RFC 7641 §4.5). */
  readonly ackTimeoutMs: number;
}

export const DEFAULT_OBSERVATION_LIMITS: ObservationLimits = Object.freeze({
  maxTotal: 10_000,
  maxPerEndpoint: 16,
  lifetimeMs: 86_400_000,
  // RFC 7252 §4.8.2 MAX_TRANSMIT_SPAN: the library stops retransmitting by then.
  ackTimeoutMs: 45_000,
});

interface Observation {
  readonly res: OutgoingMessage;
  readonly endpoint: string;
  readonly token: string;
  readonly lifetime: NodeJS.Timeout;
}

/**
 * Live observations by peer, device and resource. A new registration from the same peer replaces
 * the old one, and `Observe: 1` ends it (reference §2.3, RFC 7641 §3.6). An observation also
 * ends when a confirmable notification is not acknowledged or is answered with a RST (RFC 7641
 * §3.6, §4.5), when its lifetime passes without a re-registration, and when its endpoint opens
 * more than its share; the total is capped.
 */
export class Observations {
  readonly #live = new Map<string, Observation>();
  /** Keys by `endpoint|token`: notifications are matched to observations by their token. */
  readonly #byToken = new Map<string, string>();
  /** Keys of each endpoint, oldest first. */
  readonly #byEndpoint = new Map<string, Set<string>>();
  /** Confirmable notifications waiting for their ACK, by `endpoint|messageId`. */
  readonly #unacked = new Map<string, { key: string; timer: NodeJS.Timeout }>();
  readonly #limits: ObservationLimits;
  #refused = 0;
  #expired = 0;

  constructor(
    limits: Partial<ObservationLimits> = {},
    private readonly onEnd: (key: string, reason: string) => void = () => undefined,
  ) {
    this.#limits = { ...DEFAULT_OBSERVATION_LIMITS, ...limits };
  }

  key(req: IncomingMessage, deviceId: string, resource: string): string {
    return `${endpointOf(req.rsinfo)}|${deviceId}|${resource}`;
  }

  /**
   * Registers an observation; false when the total is at its bound (the caller answers 5.03 and
   * `release` is not kept).
   */
  add(key: string, req: IncomingMessage, res: OutgoingMessage, release: () => void): boolean {
    this.end(key);
    const endpoint = endpointOf(req.rsinfo);
    let mine = this.#byEndpoint.get(endpoint);
    if (mine && mine.size >= this.#limits.maxPerEndpoint) {
      const oldest = mine.values().next().value;
      if (oldest !== undefined) this.#end(oldest, 'endpoint observation limit');
    }
    if (this.#live.size >= this.#limits.maxTotal) {
      this.#refused++;
      return false;
    }
    const token = `${endpoint}|${req._packet.token?.toString('hex') ?? ''}`;
    const lifetime = setTimeout(() => this.#end(key, 'lifetime passed'), this.#limits.lifetimeMs);
    lifetime.unref();
    this.#live.set(key, { res, endpoint, token, lifetime });
    this.#byToken.set(token, key);
    mine = this.#byEndpoint.get(endpoint) ?? new Set();
    mine.add(key);
    this.#byEndpoint.set(endpoint, mine);
    const done = () => {
      release();
      if (this.#live.get(key)?.res === res) this.#forget(key);
    };
    res.once('finish', done);
    res.once('error', done);
    return true;
  }

  /** A datagram the server sends: a confirmable notification starts its ACK wait. */
  sent(endpoint: string, type: number, messageId: number, token: Buffer): void {
    if (type !== 0 || token.length === 0) return;
    const key = this.#byToken.get(`${endpoint}|${token.toString('hex')}`);
    const id = `${endpoint}|${messageId}`;
    // A retransmission keeps the first wait.
    if (key === undefined || this.#unacked.has(id)) return;
    const timer = setTimeout(() => {
      this.#unacked.delete(id);
      this.#end(key, 'confirmable notification not acknowledged');
    }, this.#limits.ackTimeoutMs);
    timer.unref();
    this.#unacked.set(id, { key, timer });
  }

  /** An Empty ACK or RST from `endpoint`: a RST to a notification ends its observation. */
  answered(endpoint: string, messageId: number, reset: boolean): void {
    const id = `${endpoint}|${messageId}`;
    const wait = this.#unacked.get(id);
    if (!wait) return;
    clearTimeout(wait.timer);
    this.#unacked.delete(id);
    if (reset) this.#end(wait.key, 'client answered a notification with RST');
  }

  end(key: string): void {
    const old = this.#live.get(key);
    if (!old) return;
    this.#forget(key);
    old.res.end();
  }

  #end(key: string, reason: string): void {
    if (!this.#live.has(key)) return;
    this.#expired++;
    this.onEnd(key, reason);
    this.end(key);
  }

  #forget(key: string): void {
    const o = this.#live.get(key);
    if (!o) return;
    clearTimeout(o.lifetime);
    this.#live.delete(key);
    if (this.#byToken.get(o.token) === key) this.#byToken.delete(o.token);
    const mine = this.#byEndpoint.get(o.endpoint);
    mine?.delete(key);
    if (mine?.size === 0) this.#byEndpoint.delete(o.endpoint);
  }

  endAll(): void {
    for (const key of [...this.#live.keys()]) this.end(key);
    for (const { timer } of this.#unacked.values()) clearTimeout(timer);
    this.#unacked.clear();
  }

  get size(): number {
    return this.#live.size;
  }

  /** Registrations refused at the total bound, and observations ended by a bound, since start. */
  get counts(): { refused: number; ended: number } {
    return { refused: this.#refused, ended: this.#expired };
  }
}

/** An endpoint (RFC 7252 §1.2): address and port. */
export function endpointOf(rsinfo: { address: string; port: number }): string {
  return `${rsinfo.address}|${rsinfo.port}`;
}

interface Ctx {
  readonly req: IncomingMessage;
  readonly res: OutgoingMessage;
  readonly core: DeviceCore;
  readonly devices: DeviceService;
  readonly observations: Observations;
  readonly query: URLSearchParams;
}

const JSON_FORMAT = 'application/json';
const OCTET_STREAM = 'application/octet-stream';

function reply(res: OutgoingMessage, code: string, body?: string | Buffer, json = true): void {
  res.code = code;
  if (body !== undefined && json) res.setOption('Content-Format', JSON_FORMAT);
  res.end(body);
}

/** A device payload: JSON text, or Protobuf bytes with Content-Format 42 (transport-profiles.md §3). */
function replyPayload(res: OutgoingMessage, code: string, body: string | Buffer): void {
  res.code = code;
  res.setOption('Content-Format', typeof body === 'string' ? JSON_FORMAT : OCTET_STREAM);
  res.end(body);
}

/** The device profile's payload format (issue 21): JSON, or its Protobuf schemas. */
function codecOf(ctx: Ctx, device: DeviceIdentity): PayloadCodec {
  return new PayloadCodec(ctx.core.profileTransports.settings(device.profileId).payload);
}

/** A CoAP answer that has no domain error behind it (4.05 Method Not Allowed). */
class CoapStatus extends Error {
  override name = 'CoapStatus';
  constructor(readonly code: string) {
    super(`CoAP ${code}`);
  }
}

function methodNotAllowed(): never {
  throw new CoapStatus('4.05');
}

function authenticate(ctx: Ctx, token: string | undefined): DeviceIdentity {
  const device = token ? ctx.devices.byAccessToken(token) : undefined;
  if (!device) {
    // RFC 8516 4.29 for an address throttled after too many failures (issue 20).
    if (ctx.core.deviceAuth.failed(ctx.req.rsinfo.address, 'coap') !== undefined) {
      throw new TooManyRequestsError('too many failed authentications from this address');
    }
    throw new AuthenticationError('unknown access token');
  }
  return device;
}

export async function handleDeviceRequest(
  req: IncomingMessage,
  res: OutgoingMessage,
  deps: { devices: DeviceService; core: DeviceCore; observations: Observations },
): Promise<void> {
  const url = new URL(req.url, 'coap://gateway');
  const parts = url.pathname.split('/').filter((p) => p !== '');
  const ctx: Ctx = {
    req,
    res,
    core: deps.core,
    devices: deps.devices,
    observations: deps.observations,
    query: url.searchParams,
  };
  try {
    if ((parts[0] === 'fw' || parts[0] === 'sw') && parts.length === 2) {
      if (req.method !== 'GET') methodNotAllowed();
      firmware(ctx, parts[0] === 'fw' ? 'FIRMWARE' : 'SOFTWARE', parts[1]);
      return;
    }
    if (parts[0] !== 'api' || parts[1] !== 'v1')
      throw new ValidationError(`unknown resource ${url.pathname}`);
    if (parts[2] === 'provision' && parts.length === 3) {
      if (req.method !== 'POST') methodNotAllowed();
      // A Protobuf request needs protobufjs, loaded on first use (protobuf-lib.ts).
      if (!protobufLoaded() && provisionIsProtobuf(req.payload)) await loadProtobuf();
      provision(ctx);
      return;
    }
    // Reference §10: a path too short to hold a token is 4.01, an unknown feature 4.00.
    if (parts.length < 4) throw new AuthenticationError('no access token in the path');
    const device = authenticate(ctx, parts[2]);
    deps.core.activity.record(device);
    await feature(ctx, device, parts[3], parts.slice(4));
  } catch (err) {
    if (!(err instanceof CoapStatus)) throw err;
    reply(res, err.code);
  }
}

async function feature(
  ctx: Ctx,
  device: DeviceIdentity,
  name: string,
  rest: string[],
): Promise<void> {
  const { req, res, core } = ctx;
  if (req.method !== 'GET' && req.method !== 'POST') methodNotAllowed();
  const post = req.method === 'POST';
  switch (rest.length === 0 ? name : `${name}/id`) {
    case 'telemetry':
      if (!post) throw new ValidationError('telemetry cannot be read over CoAP');
      await core.messages.postTelemetry(
        device,
        codecOf(ctx, device).telemetry(req.payload, 'profile'),
      );
      reply(res, '2.01');
      return;
    case 'attributes':
      if (post) {
        core.messages.postAttributes(
          device,
          codecOf(ctx, device).attributes(req.payload, 'profile'),
        );
        reply(res, '2.01');
      } else if (req.headers.Observe === 0) {
        observeAttributes(ctx, device);
      } else if (req.headers.Observe === 1) {
        cancel(ctx, device, 'attributes');
      } else {
        attributeRequest(ctx, device);
      }
      return;
    case 'rpc':
      if (post) await clientRpc(ctx, device);
      else if (req.headers.Observe === 0) observeRpc(ctx, device);
      else if (req.headers.Observe === 1) cancel(ctx, device, 'rpc');
      else throw new ValidationError('server-side RPC needs an Observe registration');
      return;
    case 'rpc/id': {
      if (!post) methodNotAllowed();
      if (rest.length !== 1) throw new ValidationError(`unknown resource rpc/${rest.join('/')}`);
      const id = nonNegativeInt(rest[0], 'RPC id');
      // Checked, forwarded as the device wrote it (JSON number formatting kept).
      core.rpc.reply(device.id, id, codecOf(ctx, device).rpcReply(req.payload, 'profile'));
      reply(res, '2.01');
      return;
    }
    case 'claim': {
      if (!post) methodNotAllowed();
      core.messages.claim(device, codecOf(ctx, device).claim(req.payload, 'profile'));
      reply(res, '2.01');
      return;
    }
    default:
      throw new ValidationError(`unknown feature ${name}`);
  }
}

/** §2.2: nothing found answers 4.04 on CoAP (HTTP and MQTT answer `{}`). */
function attributeRequest(ctx: Ctx, device: DeviceIdentity): void {
  const found = ctx.core.attributes.forDevice(device, {
    clientKeys: parseKeyList(ctx.query.get('clientKeys'), 'clientKeys'),
    sharedKeys: parseKeyList(ctx.query.get('sharedKeys'), 'sharedKeys'),
  });
  if (!found.client && !found.shared) {
    reply(ctx.res, '4.04');
    return;
  }
  replyPayload(ctx.res, '2.05', codecOf(ctx, device).attributeResponse(found, 0, 'profile'));
}

/** `Observe: 1` deregisters (2.02 Deleted), as ThingsBoard answers. */
function cancel(ctx: Ctx, device: DeviceIdentity, resource: string): void {
  ctx.observations.end(ctx.observations.key(ctx.req, device.id, resource));
  reply(ctx.res, '2.02');
}

/** §2.3: the first notification is every shared attribute, then one per change. */
function observeAttributes(ctx: Ctx, device: DeviceIdentity): void {
  const { res, core } = ctx;
  const sub = observe(ctx, device, 'attributes');
  if (!sub) return;
  const codec = codecOf(ctx, device);
  res.setOption('Content-Format', codec.protobuf ? OCTET_STREAM : JSON_FORMAT);
  const all = core.attributes.get(device.id, 'SHARED_SCOPE');
  res.write(codec.sharedSnapshot(all, 'profile', () => flatAttributesJson(all)));
  sub.set(
    core.attributes.subscribe(device.id, (update) =>
      res.write(codec.sharedUpdate(update, 'profile')),
    ),
  );
}

/** §3.3: 2.03 at once, then a 2.05 notification `{id, method, params}` per request. */
function observeRpc(ctx: Ctx, device: DeviceIdentity): void {
  const { res, core } = ctx;
  const sub = observe(ctx, device, 'rpc');
  if (!sub) return;
  const response = res as OutgoingMessage & { statusCode: string };
  response.statusCode = '2.03';
  res.write(Buffer.alloc(0));
  response.statusCode = '2.05';
  const codec = codecOf(ctx, device);
  res.setOption('Content-Format', codec.protobuf ? OCTET_STREAM : JSON_FORMAT);
  sub.set(
    core.rpc.subscribe(device.id, (request) => {
      let body: string | Buffer;
      try {
        body = codec.rpcRequest(request, 'profile', () => JSON.stringify(request));
      } catch (err) {
        core.rpc.failed(device.id, request.id, (err as Error).message);
        return;
      }
      res.write(body);
      core.rpc.delivered(device.id, request.id);
    }),
  );
}

/**
 * Registers an observation; returns where to put its subscription, or undefined when the bound
 * on observations refused it (answered 5.03, RFC 7641 §4.1: the client is not added).
 */
function observe(
  ctx: Ctx,
  device: DeviceIdentity,
  resource: string,
): { set: (sub: { unsubscribe(): void }) => void } | undefined {
  let subscription: { unsubscribe(): void } | undefined;
  let ended = false;
  let session: (() => void) | undefined;
  const release = () => {
    ended = true;
    subscription?.unsubscribe();
    session?.();
  };
  const key = ctx.observations.key(ctx.req, device.id, resource);
  if (!ctx.observations.add(key, ctx.req, ctx.res, release)) {
    // An observe stream sends its `statusCode`; with no payload it carries no Observe option.
    (ctx.res as OutgoingMessage & { statusCode: string }).statusCode = '5.03';
    ctx.res.end();
    return undefined;
  }
  // The device's session (CONNECT_EVENT / DISCONNECT_EVENT) is the core's to decide.
  session = ctx.core.messages.observe(device);
  if (ended) session();
  return {
    set: (sub) => {
      subscription = sub;
      if (ended) sub.unsubscribe();
    },
  };
}

/** §4: the reply as 2.05; no reply within the CoAP wait answers 5.04 (our choice, documented). */
async function clientRpc(ctx: Ctx, device: DeviceIdentity): Promise<void> {
  const codec = codecOf(ctx, device);
  const body = codec.clientRpcRequest(ctx.req.payload, 'profile');
  const outcome = await ctx.core.messages.toServerRpc(device, body, {
    timeoutMs: DEVICE_LIMITS.coapClientRpcTimeoutMs,
  });
  if (outcome.kind !== 'value') throw new TimeoutError('no reply to the client-side RPC');
  replyPayload(ctx.res, '2.05', codec.clientRpcResponse(outcome.value, 0, 'profile'));
}

/**
 * §6.4: 2.01 and the JSON on success; 4.00 and the JSON on NOT_FOUND or FAILURE. A Protobuf
 * request is answered the same way in Protobuf (Content-Format 42, transport-profiles.md §3).
 */
function provision(ctx: Ctx): void {
  const { core } = ctx;
  const { body, proto } = provisionRequest(ctx.req.payload);
  const result = core.messages.provision(body);
  const code = result.status === 'SUCCESS' ? '2.01' : '4.00';
  replyPayload(ctx.res, code, provisionResponse(result, proto));
}

/** §7.2: `GET /fw/{token}?title=&version=&size=&chunk=`; Block2 is handled by the CoAP library. */
function firmware(ctx: Ctx, type: 'FIRMWARE' | 'SOFTWARE', token: string): void {
  const device = authenticate(ctx, token);
  ctx.core.activity.record(device);
  const int = (name: string): number | undefined => {
    const raw = ctx.query.get(name);
    return raw === null || raw === '' ? undefined : nonNegativeInt(raw, name);
  };
  const { data } = ctx.core.messages.firmware(device, type, {
    title: ctx.query.get('title') ?? undefined,
    version: ctx.query.get('version') ?? undefined,
    size: int('size'),
    chunk: int('chunk'),
  });
  reply(ctx.res, '2.05', data, false);
}
