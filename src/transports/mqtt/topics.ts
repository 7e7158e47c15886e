/**
 * ThingsBoard device topics (reference §0, §11). Only these filters may be subscribed to; the
 * gateway is not a general broker, so nothing a device publishes is forwarded to other clients.
 */

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

/** SUBSCRIBE filters a device session may use (reference §11, "Not a broker"). */
const DEVICE_FILTERS = new Set([
  'v1/devices/me/attributes',
  'v1/devices/me/attributes/response/+',
  'v1/devices/me/rpc/request/+',
  'v1/devices/me/rpc/response/+',
  'v2/fw/response/+/chunk/+',
  'v2/sw/response/+/chunk/+',
  'v2/fw/error',
  'v2/sw/error',
  // @NOTE: ThingsBoard refuses this SDK filter, but the SDKs use it and depend on getting the
  // chunks; we accept it and deliver chunks on the full topic either way (issue 5).
  'v2/fw/response/+',
  'v2/sw/response/+',
]);

const GATEWAY_FILTERS = new Set([
  'v1/gateway/attributes',
  'v1/gateway/rpc',
  'v1/gateway/attributes/response',
]);

const PROVISION_FILTERS = new Set<string>([TOPIC.provisionResponse]);

export type SessionKind = 'device' | 'provision';

export function maySubscribe(kind: SessionKind, filter: string, isGateway = false): boolean {
  if (kind === 'provision') return PROVISION_FILTERS.has(filter);
  return DEVICE_FILTERS.has(filter) || (isGateway && GATEWAY_FILTERS.has(filter));
}

const GATEWAY_TYPES = new Map([
  ['v1/gateway/connect', 'gateway_connect'],
  ['v1/gateway/disconnect', 'gateway_disconnect'],
  ['v1/gateway/telemetry', 'gateway_telemetry'],
  ['v1/gateway/attributes', 'gateway_attributes'],
  ['v1/gateway/attributes/request', 'gateway_attributes_request'],
  ['v1/gateway/rpc', 'gateway_rpc'],
  ['v1/gateway/claim', 'gateway_claim'],
]);

/** The message type of a device PUBLISH, for metrics (a small fixed set of labels). */
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
