import type { IncomingMessage, OutgoingMessage } from 'coap';
import { parseKeyList } from '../../attributes/attribute-service.js';
import {
  deviceAttributesJson,
  flatAttributesJson,
  sharedUpdateJson,
} from '../../attributes/payloads.js';
import type { DeviceIdentity, DeviceService } from '../../devices/device-service.js';
import { AuthenticationError, TimeoutError, ValidationError } from '../../errors.js';
import type { DeviceCore } from '../device-core.js';
import { parseJsonPayload as parseJson } from '../payload.js';

/**
 * CoAP device resources (reference §10), one dispatcher by method and path:
 * `/api/v1/{token}/{telemetry|attributes|rpc[/{id}]|claim}`, `/api/v1/provision`,
 * `/fw/{token}` and `/sw/{token}`. Domain errors are thrown and mapped by the server.
 */

/**
 * Live observations by peer, device and resource. A new registration from the same peer replaces
 * the old one, and `Observe: 1` ends it (reference §2.3, RFC 7641 §3.6).
 */
export class Observations {
  readonly #live = new Map<string, OutgoingMessage>();

  key(req: IncomingMessage, deviceId: string, resource: string): string {
    return `${req.rsinfo.address}|${req.rsinfo.port}|${deviceId}|${resource}`;
  }

  add(key: string, res: OutgoingMessage, release: () => void): void {
    this.end(key);
    this.#live.set(key, res);
    const done = () => {
      release();
      if (this.#live.get(key) === res) this.#live.delete(key);
    };
    res.once('finish', done);
    res.once('error', done);
  }

  end(key: string): void {
    const old = this.#live.get(key);
    this.#live.delete(key);
    old?.end();
  }

  endAll(): void {
    for (const key of [...this.#live.keys()]) this.end(key);
  }

  get size(): number {
    return this.#live.size;
  }
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
// Reference §10: the CoAP wait for a client-side RPC reply (transport.coap.timeout).
const CLIENT_RPC_TIMEOUT_MS = 10_000;

function reply(res: OutgoingMessage, code: string, body?: string | Buffer, json = true): void {
  res.code = code;
  if (body !== undefined && json) res.setOption('Content-Format', JSON_FORMAT);
  res.end(body);
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

function authenticate(devices: DeviceService, token: string | undefined): DeviceIdentity {
  const device = token ? devices.byAccessToken(token) : undefined;
  if (!device) throw new AuthenticationError('unknown access token');
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
      provision(ctx);
      return;
    }
    // Reference §10: a path too short to hold a token is 4.01, an unknown feature 4.00.
    if (parts.length < 4) throw new AuthenticationError('no access token in the path');
    const device = authenticate(deps.devices, parts[2]);
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
      await core.messages.postTelemetry(device, req.payload);
      reply(res, '2.01');
      return;
    case 'attributes':
      if (post) {
        core.messages.postAttributes(device, req.payload);
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
      if (rest.length !== 1 || !/^\d{1,9}$/.test(rest[0])) {
        throw new ValidationError(`RPC id must be an integer: ${rest.join('/')}`);
      }
      // Checked as JSON, forwarded as the device wrote it (number formatting kept).
      parseJson(req.payload, 'rpc reply');
      core.rpc.reply(device.id, Number(rest[0]), req.payload.toString('utf8'));
      reply(res, '2.01');
      return;
    }
    case 'claim': {
      if (!post) methodNotAllowed();
      const body = req.payload.length === 0 ? {} : parseJson(req.payload, 'claim');
      core.messages.claim(device, body);
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
  reply(ctx.res, '2.05', deviceAttributesJson(found));
}

/** `Observe: 1` deregisters (2.02 Deleted), as ThingsBoard answers. */
function cancel(ctx: Ctx, device: DeviceIdentity, resource: string): void {
  ctx.observations.end(ctx.observations.key(ctx.req, device.id, resource));
  reply(ctx.res, '2.02');
}

/** §2.3: the first notification is every shared attribute, then one per change. */
function observeAttributes(ctx: Ctx, device: DeviceIdentity): void {
  const { res, core } = ctx;
  res.setOption('Content-Format', JSON_FORMAT);
  res.write(flatAttributesJson(core.attributes.get(device.id, 'SHARED_SCOPE')));
  const sub = core.attributes.subscribe(device.id, (update) => res.write(sharedUpdateJson(update)));
  ctx.observations.add(ctx.observations.key(ctx.req, device.id, 'attributes'), res, () =>
    sub.unsubscribe(),
  );
}

/** §3.3: 2.03 at once, then a 2.05 notification `{id, method, params}` per request. */
function observeRpc(ctx: Ctx, device: DeviceIdentity): void {
  const { res, core } = ctx;
  const response = res as OutgoingMessage & { statusCode: string };
  response.statusCode = '2.03';
  res.write(Buffer.alloc(0));
  response.statusCode = '2.05';
  res.setOption('Content-Format', JSON_FORMAT);
  const sub = core.rpc.subscribe(device.id, (request) => {
    res.write(JSON.stringify(request));
    core.rpc.delivered(device.id, request.id);
  });
  ctx.observations.add(ctx.observations.key(ctx.req, device.id, 'rpc'), res, () =>
    sub.unsubscribe(),
  );
}

/** §4: the reply as 2.05; no reply within the CoAP wait answers 5.04 (our choice, documented). */
async function clientRpc(ctx: Ctx, device: DeviceIdentity): Promise<void> {
  const body = parseJson(ctx.req.payload, 'rpc request');
  const outcome = await ctx.core.messages.toServerRpc(device, body, {
    timeoutMs: CLIENT_RPC_TIMEOUT_MS,
  });
  if (outcome.kind !== 'value') throw new TimeoutError('no reply to the client-side RPC');
  reply(ctx.res, '2.05', outcome.value);
}

/** §6.4: 2.01 and the JSON on success; 4.00 and the JSON on NOT_FOUND or FAILURE. */
function provision(ctx: Ctx): void {
  const { core } = ctx;
  const result = core.messages.provision(parseJson(ctx.req.payload, 'provision request'));
  reply(ctx.res, result.status === 'SUCCESS' ? '2.01' : '4.00', JSON.stringify(result));
}

/** §7.2: `GET /fw/{token}?title=&version=&size=&chunk=`; Block2 is handled by the CoAP library. */
function firmware(ctx: Ctx, type: 'FIRMWARE' | 'SOFTWARE', token: string): void {
  const device = authenticate(ctx.devices, token);
  ctx.core.activity.record(device);
  const int = (name: string): number | undefined => {
    const raw = ctx.query.get(name);
    if (raw === null || raw === '') return undefined;
    if (!/^\d{1,9}$/.test(raw)) throw new ValidationError(`${name} must be a non-negative integer`);
    return Number(raw);
  };
  const { data } = ctx.core.messages.firmware(device, type, {
    title: ctx.query.get('title') ?? undefined,
    version: ctx.query.get('version') ?? undefined,
    size: int('size'),
    chunk: int('chunk'),
  });
  reply(ctx.res, '2.05', data, false);
}
