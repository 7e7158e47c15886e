/** Server-side and client-side RPC types shared by the domain, the event map and the transports. */

/** Persistent RPC states (reference device-api.md §3.1). */
export type RpcStatus =
  | 'QUEUED'
  | 'SENT'
  | 'DELIVERED'
  | 'SUCCESSFUL'
  | 'TIMEOUT'
  | 'EXPIRED'
  | 'FAILED'
  | 'DELETED';

export const RPC_STATUSES: readonly RpcStatus[] = [
  'QUEUED',
  'SENT',
  'DELIVERED',
  'SUCCESSFUL',
  'TIMEOUT',
  'EXPIRED',
  'FAILED',
  'DELETED',
];

/**
 * A request as a device receives it (§3.3): `id` is the per-device integer. HTTP and CoAP send
 * `{"id","method","params"}`; MQTT puts the id in the topic and sends `{"method","params"}`.
 */
export interface ToDeviceRpc {
  readonly id: number;
  readonly method: string;
  readonly params: unknown;
}

/** What a REST caller of `/api/rpc/{oneway|twoway}/{deviceId}` gets back. */
export type RpcCallResult =
  /** Persistent: accepted and stored. */
  | { readonly kind: 'persisted'; readonly rpcId: string }
  /** One-way: handed to a device session. */
  | { readonly kind: 'delivered' }
  /** Two-way: the device's reply, as the text it sent. */
  | { readonly kind: 'reply'; readonly body: string }
  /** Sent but not answered before expiry (two-way). */
  | { readonly kind: 'timeout' }
  /** Never sent: no device session subscribed before expiry. */
  | { readonly kind: 'expired' }
  /** The gateway is stopping, or the device was deleted. */
  | { readonly kind: 'closed'; readonly reason: 'stopping' | 'deleted' };

/** The stored persistent RPC in ThingsBoard's `Rpc` JSON shape (`GET /api/rpc/persistent/{id}`). */
export interface PersistentRpc {
  readonly id: { readonly entityType: 'RPC'; readonly id: string };
  readonly createdTime: number;
  readonly tenantId: { readonly entityType: 'TENANT'; readonly id: string };
  readonly deviceId: { readonly entityType: 'DEVICE'; readonly id: string };
  readonly expirationTime: number;
  readonly request: {
    readonly id: string;
    readonly deviceId: { readonly entityType: 'DEVICE'; readonly id: string };
    readonly oneway: boolean;
    readonly expirationTime: number;
    readonly body: { readonly method: string; readonly params: string };
    readonly persisted: true;
    readonly retries: number | null;
    readonly requestId: number;
  };
  readonly response: unknown;
  readonly status: RpcStatus;
  readonly additionalInfo: unknown;
}
