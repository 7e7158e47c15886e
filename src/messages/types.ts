/**
 * The messages of the processing pipeline, in ThingsBoard's model (platform reference §7.1,
 * rule-engine reference "TbMsg"): every device uplink and every server-side change becomes one
 * `GatewayMsg` after its data is committed, and is handed to the one processing entry point
 * (the alarm engine, then the root rule chain).
 *
 * Shared by the device-message service (producer), the alarm engine and the rule engine
 * (consumers). Transports never build these: they call the core, which does.
 */

/** ThingsBoard's message types that the gateway produces or routes (reference §7.1). */
export const MSG_TYPES = [
  'POST_TELEMETRY_REQUEST',
  'POST_ATTRIBUTES_REQUEST',
  'TO_SERVER_RPC_REQUEST',
  'RPC_CALL_FROM_SERVER_TO_DEVICE',
  'ACTIVITY_EVENT',
  'INACTIVITY_EVENT',
  'CONNECT_EVENT',
  'DISCONNECT_EVENT',
  'ENTITY_CREATED',
  'ENTITY_UPDATED',
  'ENTITY_DELETED',
  'ENTITY_ASSIGNED',
  'ENTITY_UNASSIGNED',
  'ATTRIBUTES_UPDATED',
  'ATTRIBUTES_DELETED',
  'TIMESERIES_UPDATED',
  'TIMESERIES_DELETED',
  'ALARM',
  'ALARM_ACK',
  'ALARM_CLEAR',
  'ALARM_DELETE',
  'ALARM_ASSIGNED',
  'ALARM_UNASSIGNED',
  'COMMENT_CREATED',
  'COMMENT_UPDATED',
  'RPC_QUEUED',
  'RPC_SENT',
  'RPC_DELIVERED',
  'RPC_SUCCESSFUL',
  'RPC_TIMEOUT',
  'RPC_EXPIRED',
  'RPC_FAILED',
  'RPC_DELETED',
  'PROVISION_SUCCESS',
  'PROVISION_FAILURE',
  'CLAIM_REQUEST',
  'FIRMWARE_REQUEST',
  'REST_API_REQUEST',
  'SEND_EMAIL',
  'GENERATOR',
] as const;

/** A known type, or any custom type a script or a generator node gives a message. */
export type MsgType = (typeof MSG_TYPES)[number] | (string & {});

export type OriginatorType =
  | 'DEVICE'
  | 'DEVICE_PROFILE'
  | 'ASSET'
  | 'CUSTOMER'
  | 'TENANT'
  | 'USER'
  | 'ALARM'
  | 'RULE_CHAIN'
  | 'RULE_NODE'
  | 'DASHBOARD';

export interface EntityRef {
  readonly entityType: OriginatorType;
  readonly id: string;
}

/**
 * One message. `metadata` is ThingsBoard's string map (`deviceName`, `deviceType`, `ts`,
 * `requestId`, `scope`, ...); `data` is the JSON body (an object for telemetry and attributes:
 * `{"key": value}`, or `[{"ts", "values"}]` for telemetry with several timestamps).
 */
export interface GatewayMsg {
  /** Unique id (UUID). */
  readonly id: string;
  readonly type: MsgType;
  readonly originator: EntityRef;
  /** Customer owning the originator, when there is one (ThingsBoard's `customerId`). */
  readonly customerId?: string | null;
  readonly metadata: Readonly<Record<string, string>>;
  readonly data: unknown;
  /** Server time the message was made (ms since the epoch). */
  readonly ts: number;
  /**
   * True when `data` is already stored: a device uplink the pipeline committed before it
   * acknowledged the device. The rule engine's save nodes pass such a message on without writing
   * it again; a node that changes the data, type or timestamp drops the flag (docs/rules.md).
   */
  readonly committed?: boolean;
  /**
   * Rule chains this message was sent from by a rule chain node (`TbRuleChainInputNode`), the
   * innermost last: an output node sends it back to the last one (ThingsBoard's TbMsg stack).
   */
  readonly callers?: readonly ChainCaller[];
}

/** A rule chain node that called another chain: where an output node returns the message. */
export interface ChainCaller {
  readonly chainId: string;
  readonly nodeIndex: number;
}

/**
 * The one processing entry point. `process` is called after the message's data is committed,
 * off the acknowledgement path; it must not throw (failures are its own to log and count), and
 * the caller never awaits it before answering a device.
 */
export interface MessageProcessor {
  process(msg: GatewayMsg): void;
  /**
   * Called after each batch of `process` calls (one turn of the message queue): a processor
   * that queues messages itself (the rule engine) runs them now instead of on a later turn of
   * the event loop, so a message is not queued twice on its way. Must not throw.
   */
  endBatch?(): void;
}
