/**
 * A device's payload format (issue 21), shared by the MQTT and CoAP adapters: JSON as it always
 * was, or Protobuf with the profile's schemas (transport-profiles.md §2.2) and ThingsBoard's
 * fixed messages for the rest. Uplinks become what the core already reads from JSON: typed points
 * and attributes straight from the decoded message, JSON text or the key lists for the rest (so
 * the one way in cannot tell the difference); downlinks are encoded from what the core hands out.
 */

import type * as protobufTypes from 'protobufjs';
import { parseKeyList } from '../attributes/attribute-service.js';
import { deviceAttributesJson, sharedUpdateJson } from '../attributes/payloads.js';
import type { KvValue, SharedAttributeUpdate, TypedAttributeKv } from '../attributes/types.js';
import type { ClaimRequest } from '../claims/claim-service.js';
import { parseJsonPayload } from '../common/json-payload.js';
import { messageJson } from '../devices/proto-points.js';
import { protobuf } from '../devices/protobuf-lib.js';
import type { PayloadSettings, ProtoTypes } from '../devices/transport-config.js';
import { ValidationError } from '../errors.js';
import type { ProvisionResponse } from '../provisioning/provision-service.js';
import type { ToDeviceRpc } from '../rpc/types.js';
import type { DecodedTelemetry } from '../telemetry/telemetry-parser.js';

/**
 * Which format a topic or path asks for: `profile` follows the profile (the v1 topics, custom
 * topics, `v2/t`...), `json`/`proto` are forced by a `/j` or `/p` topic (transport-profiles.md
 * §2.3). `v1` marks the default downlink topics, which may stay JSON on a Protobuf profile.
 */
export type Wire = 'profile' | 'v1' | 'json' | 'proto';

// ThingsBoard's fixed transport messages (transport-profiles.md §2.2), same field numbers.
const FIXED_SCHEMA = `syntax = "proto3";
package transport;
enum KeyValueType { BOOLEAN_V = 0; LONG_V = 1; DOUBLE_V = 2; STRING_V = 3; JSON_V = 4; }
message KeyValueProto { string key = 1; KeyValueType type = 2; bool bool_v = 3; int64 long_v = 4;
  double double_v = 5; string string_v = 6; string json_v = 7; }
message TsKvProto { int64 ts = 1; KeyValueProto kv = 2; optional int64 version = 3; }
message AttributesRequest { string clientKeys = 1; string sharedKeys = 2; }
message GetAttributeResponseMsg { int32 requestId = 1; repeated TsKvProto clientAttributeList = 2;
  repeated TsKvProto sharedAttributeList = 3; bool isMultipleAttributesRequest = 4; string error = 5; }
message AttributeUpdateNotificationMsg { repeated TsKvProto sharedUpdated = 1;
  repeated string sharedDeleted = 2; }
message RpcRequest { string method = 1; string params = 2; }
message ToServerRpcResponseMsg { int32 requestId = 1; string payload = 2; string error = 3; }
message ClaimDevice { string secretKey = 1; int64 durationMs = 2; }
enum CredentialsType { ACCESS_TOKEN = 0; X509_CERTIFICATE = 1; MQTT_BASIC = 2; LWM2M_CREDENTIALS = 3; }
message ValidateDeviceTokenRequestMsg { string token = 1; }
message ValidateDeviceX509CertRequestMsg { string hash = 1; }
message ValidateBasicMqttCredRequestMsg { string clientId = 1; string userName = 2; string password = 3; }
message CredentialsDataProto { ValidateDeviceTokenRequestMsg validateDeviceTokenRequestMsg = 1;
  ValidateDeviceX509CertRequestMsg validateDeviceX509CertRequestMsg = 2;
  ValidateBasicMqttCredRequestMsg validateBasicMqttCredRequestMsg = 3; }
message ProvisionDeviceCredentialsMsg { string provisionDeviceKey = 1; string provisionDeviceSecret = 2; }
message ProvisionDeviceRequestMsg { string deviceName = 1; CredentialsType credentialsType = 2;
  ProvisionDeviceCredentialsMsg provisionDeviceCredentialsMsg = 3;
  CredentialsDataProto credentialsDataProto = 4; bool gateway = 5; }
enum ResponseStatus { UNKNOWN = 0; SUCCESS = 1; NOT_FOUND = 2; FAILURE = 3; }
message ProvisionDeviceResponseMsg { ResponseStatus status = 1; CredentialsType credentialsType = 2;
  string credentialsValue = 3; }
`;

type FixedTypes = Readonly<
  Record<
    | 'attributesRequest'
    | 'attributeResponse'
    | 'attributeUpdate'
    | 'clientRpcRequest'
    | 'clientRpcResponse'
    | 'claim'
    | 'provisionRequest'
    | 'provisionResponse',
    protobufTypes.Type
  >
>;

/**
 * The fixed messages' types, parsed on first use (protobufjs is loaded by then: protobuf-lib.ts).
 * @NOTE: a parse result of a constant schema, kept once it is made.
 */
let fixedTypes: FixedTypes | undefined;

function T(): FixedTypes {
  if (fixedTypes) return fixedTypes;
  const root = protobuf().parse(FIXED_SCHEMA).root;
  fixedTypes = {
    attributesRequest: root.lookupType('transport.AttributesRequest'),
    attributeResponse: root.lookupType('transport.GetAttributeResponseMsg'),
    attributeUpdate: root.lookupType('transport.AttributeUpdateNotificationMsg'),
    clientRpcRequest: root.lookupType('transport.RpcRequest'),
    clientRpcResponse: root.lookupType('transport.ToServerRpcResponseMsg'),
    claim: root.lookupType('transport.ClaimDevice'),
    provisionRequest: root.lookupType('transport.ProvisionDeviceRequestMsg'),
    provisionResponse: root.lookupType('transport.ProvisionDeviceResponseMsg'),
  };
  return fixedTypes;
}

const KV_TYPE = { BOOLEAN: 0, LONG: 1, DOUBLE: 2, STRING: 3, JSON: 4 } as const;

/** What an uplink decodes to: JSON text (or the raw JSON payload) for the core. */
export type JsonPayload = Buffer | string;

/**
 * The payload format of one device session: every method takes the wire the message came on
 * and returns what the core (uplinks) or the device (downlinks) reads.
 */
export class PayloadCodec {
  readonly #types: ProtoTypes | undefined;
  readonly #compat: boolean;
  readonly #jsonV1: boolean;

  constructor(private readonly settings: PayloadSettings) {
    this.#types = settings.kind === 'PROTOBUF' ? settings.types : undefined;
    this.#compat = settings.kind === 'PROTOBUF' && settings.jsonCompatible;
    this.#jsonV1 = settings.kind === 'PROTOBUF' && settings.jsonOnDefaultDownlinks;
  }

  /** True when the profile's payloads are Protobuf (CoAP's Content-Format 42). */
  get protobuf(): boolean {
    return this.settings.kind === 'PROTOBUF';
  }

  /** Whether a message on `wire` is Protobuf; downlinks on v1 may be kept JSON (§2.3). */
  isProto(wire: Wire, downlink = false): boolean {
    if (wire === 'json') return false;
    if (wire === 'proto') return true;
    if (!this.#types) return false;
    return !(downlink && wire === 'v1' && this.#jsonV1);
  }

  // ---- Uplinks ---------------------------------------------------------------------------------

  /** Telemetry: JSON as sent, or a Protobuf message decoded into typed points. */
  telemetry(payload: Buffer, wire: Wire): JsonPayload | DecodedTelemetry {
    return this.#typed(payload, wire, 'telemetry', (s) => s.telemetryDecoder(payload));
  }

  /** Client attributes: JSON as sent, or a Protobuf message decoded into typed values. */
  attributes(payload: Buffer, wire: Wire): JsonPayload | ReadonlyMap<string, KvValue> {
    return this.#typed(payload, wire, 'attributes', (s) => s.attributesDecoder(payload));
  }

  /** A device's reply to a server-side RPC, as text for the caller. */
  rpcReply(payload: Buffer, wire: Wire): string {
    const out = this.#dynamic(payload, wire, 'rpcResponse', 'rpc reply');
    if (typeof out === 'string') return out;
    // Checked as JSON, forwarded as the device wrote it (number formatting kept).
    parseJsonPayload(out, 'rpc reply');
    return out.toString('utf8');
  }

  /** An attribute request: the key lists (§2.2; Protobuf: `AttributesRequest`). */
  attributeRequest(
    payload: Buffer,
    wire: Wire,
  ): { clientKeys: string[] | undefined; sharedKeys: string[] | undefined } {
    let req: { clientKeys?: unknown; sharedKeys?: unknown };
    if (this.isProto(wire)) {
      const m = this.#decodeFixed(T().attributesRequest, payload, wire, 'attribute request');
      if (m === undefined) return this.attributeRequest(payload, 'json');
      req = { clientKeys: m.clientKeys || undefined, sharedKeys: m.sharedKeys || undefined };
    } else {
      const body = parseJsonPayload(payload, 'attribute request');
      if (typeof body !== 'object' || body === null || Array.isArray(body))
        throw new ValidationError('attribute request must be a JSON object');
      req = body as typeof req;
    }
    return {
      clientKeys: parseKeyList(req.clientKeys, 'clientKeys'),
      sharedKeys: parseKeyList(req.sharedKeys, 'sharedKeys'),
    };
  }

  /**
   * A claim request (device-api.md §5.1): the JSON payload as sent, or a Protobuf `ClaimDevice`
   * read into the request (proto3 has no presence: an empty key or a zero duration is unset,
   * as ThingsBoard reads them; compatibility mode tries JSON when the message does not decode).
   */
  claim(payload: Buffer, wire: Wire): Buffer | ClaimRequest {
    if (!this.isProto(wire)) return payload;
    const m = this.#decodeFixed(T().claim, payload, wire, 'claim');
    if (m === undefined) return payload;
    const durationMs = Number(m.durationMs ?? 0);
    return {
      secretKey: (m.secretKey as string | undefined) || undefined,
      durationMs: durationMs > 0 ? durationMs : undefined,
    };
  }

  /** A client-side RPC request: `{method, params}` (Protobuf: `RpcRequest`, params as text). */
  clientRpcRequest(payload: Buffer, wire: Wire): unknown {
    if (this.isProto(wire)) {
      const m = this.#decodeFixed(T().clientRpcRequest, payload, wire, 'rpc request');
      if (m !== undefined) return { method: m.method, params: paramsOf(m.params as string) };
    }
    return parseJsonPayload(payload, 'rpc request');
  }

  // ---- Downlinks -------------------------------------------------------------------------------

  attributeResponse(
    res: { client?: readonly TypedAttributeKv[]; shared?: readonly TypedAttributeKv[] },
    requestId: number,
    wire: Wire,
  ): string | Buffer {
    if (!this.isProto(wire, true)) return deviceAttributesJson(res);
    return encode(T().attributeResponse, {
      requestId,
      clientAttributeList: (res.client ?? []).map(tsKv),
      sharedAttributeList: (res.shared ?? []).map(tsKv),
    });
  }

  sharedUpdate(update: SharedAttributeUpdate, wire: Wire): string | Buffer {
    if (!this.isProto(wire, true)) return sharedUpdateJson(update);
    return encode(
      T().attributeUpdate,
      update.kind === 'updated'
        ? { sharedUpdated: update.values.map(tsKv) }
        : { sharedDeleted: [...update.keys] },
    );
  }

  /** Every shared attribute at once (the first CoAP observe notification). */
  sharedSnapshot(
    kvs: readonly TypedAttributeKv[],
    wire: Wire,
    json: () => string,
  ): string | Buffer {
    if (!this.isProto(wire, true)) return json();
    return encode(T().attributeUpdate, { sharedUpdated: kvs.map(tsKv) });
  }

  /**
   * A server-side RPC for the device. JSON: `{"method","params"}` (plus `id` where the
   * transport adds it). Protobuf: the profile's request schema filled with `method`,
   * `requestId` and `params`: object params go into a message-typed `params` field, and are
   * written as JSON text into a string one (ThingsBoard refuses those; we send them).
   */
  rpcRequest(req: ToDeviceRpc, wire: Wire, json: () => string): string | Buffer {
    const types = this.#types;
    if (!this.isProto(wire, true) || !types) {
      if (wire === 'proto') throw new ValidationError('the device profile has no proto schemas');
      return json();
    }
    const type = types.rpcRequest;
    const field = type.fields.params;
    let params: unknown = req.params;
    if (field.resolvedType instanceof protobuf().Type) {
      if (typeof params === 'string') params = parseJsonPayload(params, 'rpc params');
    } else if (field.type === 'string' && typeof params !== 'string') {
      params = JSON.stringify(params);
    }
    try {
      return encode(type, { method: req.method, requestId: req.id, params });
    } catch (err) {
      throw new ValidationError(
        `Failed to convert device RPC command to protobuf: ${(err as Error).message}`,
        { cause: err },
      );
    }
  }

  /** The answer to a client-side RPC (Protobuf: `ToServerRpcResponseMsg`). */
  clientRpcResponse(value: string, requestId: number, wire: Wire, error?: string): string | Buffer {
    if (!this.isProto(wire, true)) return error === undefined ? value : JSON.stringify({ error });
    return encode(T().clientRpcResponse, { requestId, payload: error ? '' : value, error });
  }

  // ---- Internals -------------------------------------------------------------------------------

  /** Decodes with a profile schema's compiled decoder; compatibility mode falls back to JSON. */
  #typed<T>(
    payload: Buffer,
    wire: Wire,
    schema: 'telemetry' | 'attributes',
    decode: (settings: Extract<PayloadSettings, { kind: 'PROTOBUF' }>) => T,
  ): JsonPayload | T {
    const { settings } = this;
    if (!this.isProto(wire) || settings.kind !== 'PROTOBUF')
      return this.#dynamic(payload, wire, schema, schema);
    try {
      return decode(settings);
    } catch (err) {
      return this.#undecodable(payload, wire, schema, err);
    }
  }

  /** Decodes with a profile schema into JSON text; compatibility mode falls back to JSON. */
  #dynamic(payload: Buffer, wire: Wire, schema: keyof ProtoTypes, what: string): JsonPayload {
    if (!this.isProto(wire)) return payload;
    const type = this.#types?.[schema];
    if (!type) throw new ValidationError(`${what}: the device profile has no proto schemas`);
    try {
      return messageJson(type, type.decode(payload));
    } catch (err) {
      return this.#undecodable(payload, wire, what, err);
    }
  }

  /** A payload the schema does not fit: compatibility mode tries it as JSON. */
  #undecodable(payload: Buffer, wire: Wire, what: string, err: unknown): JsonPayload {
    if (this.#compat && wire !== 'proto') return payload;
    throw new ValidationError(`${what}: payload does not fit the profile's proto schema`, {
      cause: err,
    });
  }

  /** Decodes a fixed message; undefined when compatibility mode should try JSON instead. */
  #decodeFixed(
    type: protobufTypes.Type,
    payload: Buffer,
    wire: Wire,
    what: string,
  ): Record<string, unknown> | undefined {
    try {
      return type.toObject(type.decode(payload), { longs: String, enums: String });
    } catch (err) {
      if (this.#compat && wire !== 'proto') return undefined;
      throw new ValidationError(`${what}: not a valid ${type.name}`, { cause: err });
    }
  }
}

/**
 * A provisioning request (device-api.md §6, reference transport-profiles.md §3): JSON first, and
 * a Protobuf `ProvisionDeviceRequestMsg` when the payload is not JSON text, as ThingsBoard reads
 * it on MQTT and CoAP (no profile is known yet). The body is in the JSON request's shape, for the
 * same validation; `proto` says the answer goes back in Protobuf. Empty strings of the message
 * are unset fields (proto3 has no presence), as a missing JSON member is.
 */
export function provisionRequest(payload: Buffer): { body: unknown; proto: boolean } {
  const what = 'provision request';
  let json: ValidationError;
  try {
    return { body: parseJsonPayload(payload, what), proto: false };
  } catch (err) {
    // An empty payload is neither: it stays the error it always was.
    if (payload.byteLength === 0) throw err;
    json = err as ValidationError;
  }
  let m: Record<string, unknown>;
  try {
    m = T().provisionRequest.toObject(T().provisionRequest.decode(payload), { enums: String });
  } catch (err) {
    throw new ValidationError(`${json.message}; nor is it a ProvisionDeviceRequestMsg`, {
      cause: err,
    });
  }
  const keys = (m.provisionDeviceCredentialsMsg ?? {}) as Record<string, string | undefined>;
  const data = (m.credentialsDataProto ?? {}) as Record<string, Record<string, string> | undefined>;
  const token = data.validateDeviceTokenRequestMsg ?? {};
  const basic = data.validateBasicMqttCredRequestMsg ?? {};
  const x509 = data.validateDeviceX509CertRequestMsg ?? {};
  const set = (v: unknown) => (v === '' || v === undefined ? undefined : v);
  return {
    proto: true,
    body: {
      provisionDeviceKey: keys.provisionDeviceKey ?? '',
      provisionDeviceSecret: keys.provisionDeviceSecret ?? '',
      deviceName: set(m.deviceName),
      credentialsType: m.credentialsType,
      token: set(token.token),
      clientId: set(basic.clientId),
      username: set(basic.userName),
      password: set(basic.password),
      hash: set(x509.hash),
      gateway: m.gateway === true ? true : undefined,
    },
  };
}

/**
 * Whether `provisionRequest` reads this payload as Protobuf (it is not JSON text): the
 * transports load protobufjs before handling it (protobuf-lib.ts).
 */
export function provisionIsProtobuf(payload: Buffer): boolean {
  if (payload.byteLength === 0) return false;
  try {
    parseJsonPayload(payload, 'provision request');
    return false;
  } catch {
    return true;
  }
}

/** The answer to a provisioning request, in the format it came in. */
export function provisionResponse(res: ProvisionResponse, proto: boolean): string | Buffer {
  if (!proto) return JSON.stringify(res);
  if (res.status !== 'SUCCESS') return encode(T().provisionResponse, { status: res.status });
  const value = res.credentialsValue;
  return encode(T().provisionResponse, {
    status: res.status,
    credentialsType: res.credentialsType,
    // MQTT_BASIC credentials travel as their JSON text (ThingsBoard's credentialsValue).
    credentialsValue: typeof value === 'string' ? value : JSON.stringify(value),
  });
}

/** Client RPC params arrive as text: JSON when they parse, else the text itself. */
function paramsOf(text: string): unknown {
  if (text === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function encode(type: protobufTypes.Type, value: Record<string, unknown>): Buffer {
  const message = type.fromObject(value);
  const bytes = type.encode(message).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function tsKv(kv: TypedAttributeKv): Record<string, unknown> {
  const value: Record<string, unknown> = { key: kv.key, type: KV_TYPE[kv.type] };
  switch (kv.type) {
    case 'BOOLEAN':
      value.boolV = kv.value;
      break;
    case 'LONG':
      value.longV = String(kv.value);
      break;
    case 'DOUBLE':
      value.doubleV = kv.value;
      break;
    case 'STRING':
      value.stringV = kv.value;
      break;
    default:
      value.jsonV = typeof kv.value === 'string' ? kv.value : JSON.stringify(kv.value);
  }
  return { ts: kv.lastUpdateTs, kv: value };
}
