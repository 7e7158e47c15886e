/**
 * The message type of a device API request over HTTP or CoAP (`/api/v1/{token}/{feature}`,
 * `/api/v1/provision`, CoAP's `/fw|sw/{token}`), for metrics: a small fixed set of labels.
 */
export function deviceApiMessageType(method: string, url: string): string {
  const parts = url.split('?')[0].split('/').filter(Boolean);
  if (parts[0] === 'fw' || parts[0] === 'sw' || parts[3] === 'firmware') return 'ota';
  if (parts[2] === 'provision') return 'provision';
  const post = method === 'POST';
  switch (parts[3]) {
    case 'telemetry':
      return 'telemetry';
    case 'attributes':
      return post ? 'attributes' : 'attributes_request';
    case 'rpc':
      return post ? (parts.length > 4 ? 'rpc_response' : 'rpc_request') : 'rpc_subscribe';
    case 'claim':
      return 'claim';
    default:
      return 'other';
  }
}
