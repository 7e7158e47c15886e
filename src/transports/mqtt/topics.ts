/**
 * Every MQTT topic of the gateway, in one module (issue 13): the device API (reference §0, §11),
 * firmware downloads (§7.2), provisioning (§6.4) and the gateway API (§9). Only the filters below
 * may be subscribed to; the gateway is not a general broker, so nothing a device publishes is
 * forwarded to other clients.
 */

import type { OtaType } from '../../ota/ota-service.js';

export const TOPIC = {
  telemetry: 'v1/devices/me/telemetry',
  attributes: 'v1/devices/me/attributes',
  attributesRequestPrefix: 'v1/devices/me/attributes/request/',
  attributesResponsePrefix: 'v1/devices/me/attributes/response/',
  rpcRequestPrefix: 'v1/devices/me/rpc/request/',
  rpcResponsePrefix: 'v1/devices/me/rpc/response/',
  claim: 'v1/devices/me/claim',
  provisionRequest: '/provision/request',
  provisionResponse: '/provision/response',
} as const;

/** Topics of the gateway API (reference §9), for devices flagged as gateways. */
export const GATEWAY_TOPIC = {
  prefix: 'v1/gateway/',
  connect: 'v1/gateway/connect',
  disconnect: 'v1/gateway/disconnect',
  telemetry: 'v1/gateway/telemetry',
  attributes: 'v1/gateway/attributes',
  attributesRequest: 'v1/gateway/attributes/request',
  attributesResponse: 'v1/gateway/attributes/response',
  rpc: 'v1/gateway/rpc',
  claim: 'v1/gateway/claim',
} as const;

/** Firmware (`v2/fw/...`) and software (`v2/sw/...`) download topics (reference §7.2). */
export const OTA_TOPIC = {
  /** @NOTE: errors of both types go to `v2/fw/error`, as the gateway has always sent them. */
  error: 'v2/fw/error',
  response: (type: OtaType, requestId: string, chunk: number) =>
    `${otaPrefix(type)}/response/${requestId}/chunk/${chunk}`,
} as const;

function otaPrefix(type: OtaType): string {
  return type === 'FIRMWARE' ? 'v2/fw' : 'v2/sw';
}

// v2/fw/request/{requestId}/chunk/{chunk} (and v2/sw/...); the numbers are checked by the core.
const OTA_REQUEST = /^v2\/(fw|sw)\/request\/(\d+)\/chunk\/(\d+)$/;

/** A firmware chunk request topic, its parts as written; undefined for any other topic. */
export function otaRequest(
  topic: string,
): { type: OtaType; requestId: string; chunk: string } | undefined {
  const m = OTA_REQUEST.exec(topic);
  return m
    ? { type: m[1] === 'fw' ? 'FIRMWARE' : 'SOFTWARE', requestId: m[2], chunk: m[3] }
    : undefined;
}

/** What a short v2 topic carries (reference §11; transport-profiles.md §2.3). */
export type V2Kind = 'telemetry' | 'attributes' | 'attributeRequest' | 'clientRpc' | 'rpcReply';

/** The payload format a `/j` or `/p` v2 topic forces; undefined = the profile's. */
export type V2Format = 'json' | 'proto' | undefined;

const V2_PUBLISH: ReadonlyArray<readonly [RegExp, V2Kind]> = [
  [/^v2\/t(?:\/([jp]))?$/, 'telemetry'],
  [/^v2\/a(?:\/([jp]))?$/, 'attributes'],
  [/^v2\/a\/req\/(?:([jp])\/)?([^/]+)$/, 'attributeRequest'],
  [/^v2\/r\/req\/(?:([jp])\/)?([^/]+)$/, 'clientRpc'],
  [/^v2\/r\/res\/(?:([jp])\/)?([^/]+)$/, 'rpcReply'],
];

/** A device PUBLISH on a short v2 topic: its kind, forced format and request id. */
export function v2Publish(
  topic: string,
): { kind: V2Kind; format: V2Format; id: string | undefined } | undefined {
  if (!topic.startsWith('v2/')) return undefined;
  for (const [re, kind] of V2_PUBLISH) {
    const m = re.exec(topic);
    if (m) return { kind, format: formatOf(m[1]), id: m[2] };
  }
  return undefined;
}

function formatOf(letter: string | undefined): V2Format {
  return letter === 'j' ? 'json' : letter === 'p' ? 'proto' : undefined;
}

/** Short v2 downlink topics; `format` adds the `/j/` or `/p/` level. */
export const V2_TOPIC = {
  sfx: (format: V2Format) => (format === 'json' ? 'j/' : format === 'proto' ? 'p/' : ''),
  attributes: (format: V2Format) => `v2/a${format ? `/${format[0]}` : ''}`,
  attributeResponse: (format: V2Format, id: number) => `v2/a/res/${V2_TOPIC.sfx(format)}${id}`,
  rpcRequest: (format: V2Format, id: number) => `v2/r/req/${V2_TOPIC.sfx(format)}${id}`,
  rpcResponse: (format: V2Format, id: number) => `v2/r/res/${V2_TOPIC.sfx(format)}${id}`,
} as const;

/** v2 SUBSCRIBE filters: shared updates and server-side RPC, with their forced format. */
export function v2Subscription(
  filter: string,
): { kind: 'attributes' | 'rpc'; format: V2Format } | undefined {
  const m = /^v2\/(?:a(?:\/([jp]))?|r\/req\/(?:([jp])\/)?\+)$/.exec(filter);
  if (!m) return undefined;
  return filter.startsWith('v2/a')
    ? { kind: 'attributes', format: formatOf(m[1]) }
    : { kind: 'rpc', format: formatOf(m[2]) };
}

/** SUBSCRIBE filters a device session may use (reference §11, "Not a broker"). */
const DEVICE_FILTERS = new Set([
  TOPIC.attributes,
  `${TOPIC.attributesResponsePrefix}+`,
  `${TOPIC.rpcRequestPrefix}+`,
  `${TOPIC.rpcResponsePrefix}+`,
  'v2/fw/response/+/chunk/+',
  'v2/sw/response/+/chunk/+',
  'v2/fw/error',
  'v2/sw/error',
  // @NOTE: ThingsBoard refuses this SDK filter, but the SDKs use it and depend on getting the
  // chunks; we accept it and deliver chunks on the full topic either way (issue 5).
  'v2/fw/response/+',
  'v2/sw/response/+',
  // Short v2 topics (reference §11): shared updates, RPC and responses, `/j` JSON, `/p` Protobuf.
  ...['', '/j', '/p'].map((f) => `v2/a${f}`),
  ...['', 'j/', 'p/'].flatMap((f) => [`v2/a/res/${f}+`, `v2/r/req/${f}+`, `v2/r/res/${f}+`]),
]);

const GATEWAY_FILTERS = new Set<string>([
  GATEWAY_TOPIC.attributes,
  GATEWAY_TOPIC.rpc,
  GATEWAY_TOPIC.attributesResponse,
]);

const PROVISION_FILTERS = new Set<string>([TOPIC.provisionResponse]);

export type SessionKind = 'device' | 'provision';

export function maySubscribe(kind: SessionKind, filter: string, isGateway = false): boolean {
  if (kind === 'provision') return PROVISION_FILTERS.has(filter);
  return DEVICE_FILTERS.has(filter) || (isGateway && GATEWAY_FILTERS.has(filter));
}

const GATEWAY_TYPES = new Map<string, string>([
  [GATEWAY_TOPIC.connect, 'gateway_connect'],
  [GATEWAY_TOPIC.disconnect, 'gateway_disconnect'],
  [GATEWAY_TOPIC.telemetry, 'gateway_telemetry'],
  [GATEWAY_TOPIC.attributes, 'gateway_attributes'],
  [GATEWAY_TOPIC.attributesRequest, 'gateway_attributes_request'],
  [GATEWAY_TOPIC.rpc, 'gateway_rpc'],
  [GATEWAY_TOPIC.claim, 'gateway_claim'],
]);

/**
 * Labels of device messages for metrics (`edge_ingest_messages_total{type}`): a small fixed set.
 * Custom-topic, v2 and Sparkplug publishes are labelled by the session that routed them.
 */
export type MessageLabel =
  | 'telemetry'
  | 'attributes'
  | 'attributes_request'
  | 'rpc_request'
  | 'rpc_response'
  | 'claim'
  | 'sparkplug_birth'
  | 'sparkplug_data'
  | 'sparkplug_death';

/** The message type of a device PUBLISH on a fixed topic, for metrics (a small fixed set of labels). */
export function messageType(topic: string): string {
  if (topic === TOPIC.telemetry) return 'telemetry';
  if (topic === TOPIC.attributes) return 'attributes';
  if (topic.startsWith(TOPIC.attributesRequestPrefix)) return 'attributes_request';
  if (topic.startsWith(TOPIC.rpcRequestPrefix)) return 'rpc_request';
  if (topic.startsWith(TOPIC.rpcResponsePrefix)) return 'rpc_response';
  if (topic === TOPIC.claim) return 'claim';
  if (topic === TOPIC.provisionRequest) return 'provision';
  if (topic.startsWith('v2/fw/') || topic.startsWith('v2/sw/')) return 'ota';
  return GATEWAY_TYPES.get(topic) ?? 'other';
}
