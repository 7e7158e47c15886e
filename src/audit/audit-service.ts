import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import {
  type EntityId,
  type EntityType,
  entityId,
  NULL_UUID,
  type PageData,
  type PageQuery,
  pageData,
} from '../common/entity.js';
import type { Db } from '../db/open.js';
import { ValidationError } from '../errors.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { type AuditFilter, type AuditRow, AuditStore } from './audit-store.js';

/** The ThingsBoard `ActionType` names this gateway records (subset of TB's enum). */
export const ACTION_TYPES = [
  'ADDED',
  'UPDATED',
  'DELETED',
  'LOGIN',
  'LOGOUT',
  'LOCKOUT',
  'ACTIVATED',
  'SUSPENDED',
  'CREDENTIALS_UPDATED',
  'ASSIGNED_TO_CUSTOMER',
  'UNASSIGNED_FROM_CUSTOMER',
  'CHANGE_OWNER',
  'ADDED_TO_ENTITY_GROUP',
  'REMOVED_FROM_ENTITY_GROUP',
  'ALARM_ACK',
  'ALARM_CLEAR',
  'ALARM_ASSIGNED',
  'ALARM_UNASSIGNED',
  'ADDED_COMMENT',
  'UPDATED_COMMENT',
  'DELETED_COMMENT',
] as const;
export type ActionType = (typeof ACTION_TYPES)[number];
export type ActionStatus = 'SUCCESS' | 'FAILURE';

/** Who did it. `name` is the email for users, or the attempted username of a failed login. */
export interface AuditActor {
  readonly id?: string | null;
  readonly name: string;
  readonly customerId?: string | null;
}

export interface AuditRecord {
  readonly actionType: ActionType;
  readonly entityId?: { readonly entityType: EntityType; readonly id: string } | null;
  readonly entityName?: string | null;
  readonly user?: AuditActor | null;
  readonly status?: ActionStatus;
  readonly failureDetails?: string | null;
  /** Free JSON describing the change. Never passwords or tokens. */
  readonly actionData?: Record<string, unknown> | null;
}

/** ThingsBoard's AuditLog JSON. */
export interface AuditLog {
  readonly id: EntityId<'AUDIT_LOG'>;
  readonly createdTime: number;
  readonly tenantId: EntityId<'TENANT'>;
  readonly customerId: EntityId<'CUSTOMER'>;
  readonly entityId: EntityId | null;
  readonly entityName: string | null;
  readonly userId: EntityId<'USER'>;
  readonly userName: string | null;
  readonly actionType: string;
  readonly actionData: unknown;
  readonly actionStatus: ActionStatus;
  readonly actionFailureDetails: string | null;
}

export interface AuditServiceDeps {
  readonly db: Db;
  readonly tenants: TenantService;
  readonly log: Logger;
  /** Rows kept; older ones are pruned (the log lives on an SD card). Default 100 000. */
  readonly maxRows?: number;
}

const PRUNE_EVERY = 1000;

/** Records security events and lists them for the tenant administrator. */
export class AuditService {
  readonly #store: AuditStore;
  #sincePrune = 0;
  #maxRows: number;

  constructor(private readonly deps: AuditServiceDeps) {
    this.#store = new AuditStore(deps.db);
    this.#maxRows = deps.maxRows ?? 100_000;
  }

  /** A new bound from the retention settings; applied at once. Returns the rows removed. */
  setMaxRows(maxRows: number): number {
    this.#maxRows = maxRows;
    return this.#store.prune(maxRows);
  }

  /** Appends one record. An audit failure is logged, never thrown into the audited operation. */
  record(r: AuditRecord): void {
    try {
      this.#store.insert({
        id: randomUUID(),
        created_time: Date.now(),
        tenant_id: this.deps.tenants.id,
        customer_id: r.user?.customerId ?? null,
        entity_type: r.entityId?.entityType ?? null,
        entity_id: r.entityId?.id ?? null,
        entity_name: r.entityName ?? null,
        user_id: r.user?.id ?? null,
        user_name: r.user?.name ?? null,
        action_type: r.actionType,
        action_data: r.actionData ? JSON.stringify(r.actionData) : null,
        action_status: r.status ?? 'SUCCESS',
        action_failure_details: r.failureDetails ?? null,
      });
      if (++this.#sincePrune >= PRUNE_EVERY) {
        this.#sincePrune = 0;
        this.#store.prune(this.#maxRows);
      }
    } catch (err) {
      this.deps.log.error({ err, actionType: r.actionType }, 'audit record failed');
    }
  }

  /** Newest first unless `sortOrder` says otherwise. */
  list(q: PageQuery, filter: AuditFilter): PageData<AuditLog> {
    for (const t of filter.actionTypes ?? []) {
      if (!(ACTION_TYPES as readonly string[]).includes(t))
        throw new ValidationError(`Unknown action type: ${t}`);
    }
    const { rows, total } = this.#store.page(filter, q.pageSize, q.page * q.pageSize, q.sortOrder);
    return pageData(rows.map(toAuditLog), total, q);
  }
}

function toAuditLog(row: AuditRow): AuditLog {
  return {
    id: entityId('AUDIT_LOG', row.id),
    createdTime: row.created_time,
    tenantId: entityId('TENANT', row.tenant_id),
    customerId: entityId('CUSTOMER', row.customer_id ?? NULL_UUID),
    entityId:
      row.entity_type && row.entity_id
        ? entityId(row.entity_type as EntityType, row.entity_id)
        : null,
    entityName: row.entity_name,
    userId: entityId('USER', row.user_id ?? NULL_UUID),
    userName: row.user_name,
    actionType: row.action_type,
    actionData: row.action_data === null ? {} : JSON.parse(row.action_data),
    actionStatus: row.action_status,
    actionFailureDetails: row.action_failure_details,
  };
}
