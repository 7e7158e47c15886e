/**
 * The live WebSocket API's messages (platform reference §4): ThingsBoard's command wrappers and
 * update shapes. Shared by the subscription service, the WebSocket adapter and the page (`ui/`).
 */

/** `SubscriptionErrorCode` (§4.3). */
export const ERROR_CODE = { none: 0, internal: 1, badRequest: 2, unauthorized: 3 } as const;

export const UNAUTHORIZED_MSG = 'Unauthorized';

/** Command types of `/api/ws` (`WsCmdType`). */
export const WS_CMD_TYPES = [
  'ATTRIBUTES',
  'TIMESERIES',
  'TIMESERIES_HISTORY',
  'ENTITY_DATA',
  'ENTITY_COUNT',
  'ALARM_DATA',
  'ALARM_COUNT',
  'ALARM_STATUS',
  'NOTIFICATIONS',
  'NOTIFICATIONS_COUNT',
  'MARK_NOTIFICATIONS_AS_READ',
  'MARK_ALL_NOTIFICATIONS_AS_READ',
  'ENTITY_DATA_UNSUBSCRIBE',
  'ENTITY_COUNT_UNSUBSCRIBE',
  'ALARM_DATA_UNSUBSCRIBE',
  'ALARM_COUNT_UNSUBSCRIBE',
  'ALARM_STATUS_UNSUBSCRIBE',
  'NOTIFICATIONS_UNSUBSCRIBE',
] as const;
export type WsCmdType = (typeof WS_CMD_TYPES)[number];

/** `cmdUpdateType` of the v2 updates (`CmdUpdateType`). */
export type CmdUpdateType =
  | 'ENTITY_DATA'
  | 'ALARM_DATA'
  | 'ALARM_COUNT_DATA'
  | 'ALARM_STATUS'
  | 'COUNT_DATA'
  | 'NOTIFICATIONS'
  | 'NOTIFICATIONS_COUNT';

/** Legacy update (`TelemetrySubscriptionUpdate`): values are `[ts, "text"]` pairs. */
export interface TelemetryUpdate {
  readonly subscriptionId: number;
  readonly errorCode: number;
  readonly errorMsg: string | null;
  readonly data: Record<string, Array<[number, string | null]>> | null;
  readonly latestValues?: Record<string, number>;
}

export interface EntityIdRef {
  readonly entityType: string;
  readonly id: string;
}

export interface TsValue {
  readonly ts: number;
  readonly value: string;
}

/** Entity key types of the entity data query. */
export type EntityKeyType =
  | 'ATTRIBUTE'
  | 'CLIENT_ATTRIBUTE'
  | 'SHARED_ATTRIBUTE'
  | 'SERVER_ATTRIBUTE'
  | 'TIME_SERIES'
  | 'ENTITY_FIELD'
  | 'ALARM_FIELD';

export interface EntityKey {
  readonly type: EntityKeyType;
  readonly key: string;
}

export interface EntityData {
  readonly entityId: EntityIdRef;
  readonly latest: Partial<Record<EntityKeyType, Record<string, TsValue>>>;
  readonly timeseries: Record<string, TsValue[]>;
}

export interface PageDataOut<T> {
  readonly data: readonly T[];
  readonly totalPages: number;
  readonly totalElements: number;
  readonly hasNext: boolean;
}

interface CmdUpdateBase {
  readonly cmdId: number;
  readonly errorCode: number;
  readonly errorMsg: string | null;
  readonly cmdUpdateType: CmdUpdateType;
}

export interface EntityDataUpdate extends CmdUpdateBase {
  readonly cmdUpdateType: 'ENTITY_DATA';
  readonly data: PageDataOut<EntityData> | null;
  readonly update: EntityData[] | null;
  readonly allowedEntities: number;
}

export interface AlarmDataUpdate extends CmdUpdateBase {
  readonly cmdUpdateType: 'ALARM_DATA';
  readonly data: PageDataOut<Record<string, unknown>> | null;
  readonly update: Array<Record<string, unknown>> | null;
  readonly allowedEntities: number;
  readonly totalEntities: number;
}

export interface CountUpdate extends CmdUpdateBase {
  readonly cmdUpdateType: 'COUNT_DATA' | 'ALARM_COUNT_DATA';
  readonly count: number;
}

export interface AlarmStatusUpdate extends CmdUpdateBase {
  readonly cmdUpdateType: 'ALARM_STATUS';
  readonly active: boolean;
}

export interface NotificationsUpdate extends CmdUpdateBase {
  readonly cmdUpdateType: 'NOTIFICATIONS';
  readonly notifications: readonly unknown[] | null;
  readonly update: unknown;
  readonly totalUnreadCount: number;
  readonly sequenceNumber: number;
}

export interface NotificationsCountUpdate extends CmdUpdateBase {
  readonly cmdUpdateType: 'NOTIFICATIONS_COUNT';
  readonly totalUnreadCount: number;
  readonly sequenceNumber: number;
}

export type CmdUpdate =
  | EntityDataUpdate
  | AlarmDataUpdate
  | CountUpdate
  | AlarmStatusUpdate
  | NotificationsUpdate
  | NotificationsCountUpdate;

/** Anything the server sends on the socket. */
export type WsUpdate = TelemetryUpdate | CmdUpdate;

/** Why the server closes a socket (RFC 6455 §7.4.1 codes). */
export const CLOSE = {
  /** 1001: the gateway is stopping. */
  goingAway: 1001,
  /** 1007: a payload that is not a command before authentication (Spring's BAD_DATA). */
  badData: 1007,
  /** 1008: authentication missing, failed or ended, or a client that fell behind. */
  policy: 1008,
  /** 1011: an unexpected server error. */
  serverError: 1011,
} as const;
