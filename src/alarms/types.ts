/** Alarm entity types (platform.md §2), shared by the alarm domain, the event map and the transports. */

import { ALARM_SEVERITIES, type AlarmSeverity } from '../devices/alarm-rule-schema.js';
import { ValidationError } from '../errors.js';

export { ALARM_SEVERITIES, type AlarmSeverity };

export const ALARM_STATUSES = [
  'ACTIVE_UNACK',
  'ACTIVE_ACK',
  'CLEARED_UNACK',
  'CLEARED_ACK',
] as const;
export type AlarmStatus = (typeof ALARM_STATUSES)[number];

/** `searchStatus` of the list endpoints (§2.4). */
export const ALARM_SEARCH_STATUSES = ['ANY', 'ACTIVE', 'CLEARED', 'ACK', 'UNACK'] as const;
export type AlarmSearchStatus = (typeof ALARM_SEARCH_STATUSES)[number];

export interface Ref<T extends string> {
  readonly entityType: T;
  readonly id: string;
}

/** ThingsBoard's `Alarm` JSON (v4.2). */
export interface Alarm {
  readonly id: Ref<'ALARM'>;
  readonly createdTime: number;
  readonly tenantId: Ref<'TENANT'>;
  readonly customerId: Ref<'CUSTOMER'>;
  readonly type: string;
  readonly name: string;
  readonly originator: Ref<'DEVICE'>;
  readonly severity: AlarmSeverity;
  readonly acknowledged: boolean;
  readonly cleared: boolean;
  readonly status: AlarmStatus;
  readonly startTs: number;
  readonly endTs: number;
  readonly ackTs: number;
  readonly clearTs: number;
  readonly assignTs: number;
  readonly assigneeId: Ref<'USER'> | null;
  readonly details: unknown;
  readonly propagate: boolean;
  readonly propagateToOwner: boolean;
  readonly propagateToTenant: boolean;
  readonly propagateRelationTypes: readonly string[] | null;
}

export interface AlarmAssignee {
  readonly id: Ref<'USER'>;
  readonly firstName: string | null;
  readonly lastName: string | null;
  readonly email: string;
}

/** `AlarmInfo`: the alarm plus its originator's name and label and the assignee. */
export interface AlarmInfo extends Alarm {
  readonly originatorName: string | null;
  readonly originatorLabel: string | null;
  readonly assignee: AlarmAssignee | null;
}

/** What happened to an alarm: one bus event and one `GatewayMsg` each. */
export type AlarmAction =
  | 'CREATED'
  | 'SEVERITY_UPDATED'
  | 'UPDATED'
  | 'ACKNOWLEDGED'
  | 'CLEARED'
  | 'DELETED'
  | 'ASSIGNED'
  | 'UNASSIGNED';

export interface AlarmEvent {
  readonly action: AlarmAction;
  readonly alarm: Alarm;
}

export function statusOf(acknowledged: boolean, cleared: boolean): AlarmStatus {
  return cleared
    ? acknowledged
      ? 'CLEARED_ACK'
      : 'CLEARED_UNACK'
    : acknowledged
      ? 'ACTIVE_ACK'
      : 'ACTIVE_UNACK';
}

/** 0 = CRITICAL (highest) ... 4 = INDETERMINATE. */
export function severityRank(s: AlarmSeverity): number {
  return ALARM_SEVERITIES.indexOf(s);
}

/**
 * A v2 `statusList` (ThingsBoard's `AlarmStatusFilter`, REST and WebSocket alike): ACTIVE/CLEARED
 * and ACK/UNACK narrow independently; both sides of a pair (or ANY) mean no narrowing. Exact
 * statuses are accepted too. ValidationError for anything else.
 */
export function statusListFilter(raw: readonly string[]): {
  cleared?: boolean;
  acknowledged?: boolean;
  statusList?: AlarmStatus[];
} {
  const exact = raw.filter((s): s is AlarmStatus =>
    (ALARM_STATUSES as readonly string[]).includes(s),
  );
  const search = raw.filter((s) => !exact.includes(s as AlarmStatus));
  for (const s of search) {
    if (!(ALARM_SEARCH_STATUSES as readonly string[]).includes(s))
      throw new ValidationError(
        `statusList: ${s} is not one of ${ALARM_SEARCH_STATUSES.join(', ')}`,
      );
  }
  const has = (s: string) => search.includes(s);
  const out: { cleared?: boolean; acknowledged?: boolean; statusList?: AlarmStatus[] } = {};
  if (!has('ANY')) {
    if (has('ACTIVE') !== has('CLEARED')) out.cleared = has('CLEARED');
    if (has('ACK') !== has('UNACK')) out.acknowledged = has('ACK');
  }
  if (exact.length) out.statusList = exact;
  return out;
}
