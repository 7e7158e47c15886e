import type { Db } from '../db/open.js';

export interface AuditRow {
  id: string;
  created_time: number;
  tenant_id: string;
  customer_id: string | null;
  entity_type: string | null;
  entity_id: string | null;
  entity_name: string | null;
  user_id: string | null;
  user_name: string | null;
  action_type: string;
  action_data: string | null;
  action_status: 'SUCCESS' | 'FAILURE';
  action_failure_details: string | null;
}

export interface AuditFilter {
  readonly startTime?: number;
  readonly endTime?: number;
  readonly actionTypes?: readonly string[];
  /** Entries about one entity (ThingsBoard's `/audit/logs/entity/{type}/{id}`). */
  readonly entity?: { readonly entityType: string; readonly id: string };
  /** Entries by users of one customer (`/audit/logs/customer/{id}`). */
  readonly customerId?: string;
  /** Entries by one user (`/audit/logs/user/{id}`). */
  readonly userId?: string;
}

/** SQL for the `audit_log` table. */
export class AuditStore {
  readonly #insert;
  readonly #prune;

  constructor(private readonly db: Db) {
    this.#insert = db.prepare<[AuditRow]>(
      `INSERT INTO audit_log (id, created_time, tenant_id, customer_id, entity_type, entity_id,
         entity_name, user_id, user_name, action_type, action_data, action_status,
         action_failure_details)
       VALUES (@id, @created_time, @tenant_id, @customer_id, @entity_type, @entity_id,
         @entity_name, @user_id, @user_name, @action_type, @action_data, @action_status,
         @action_failure_details)`,
    );
    this.#prune = db.prepare<[number]>(
      'DELETE FROM audit_log WHERE rid <= (SELECT max(rid) FROM audit_log) - ?',
    );
  }

  insert(row: AuditRow): void {
    this.#insert.run(row);
  }

  /** Keeps the newest `keep` rows; returns how many were deleted. */
  prune(keep: number): number {
    return this.#prune.run(keep).changes;
  }

  page(
    filter: AuditFilter,
    limit: number,
    offset: number,
    order: 'ASC' | 'DESC',
  ): { rows: AuditRow[]; total: number } {
    const where: string[] = [];
    const params: Record<string, unknown> = {};
    if (filter.startTime !== undefined) {
      where.push('created_time >= @startTime');
      params.startTime = filter.startTime;
    }
    if (filter.endTime !== undefined) {
      where.push('created_time <= @endTime');
      params.endTime = filter.endTime;
    }
    if (filter.entity) {
      // `audit_log_entity` (migration 021) serves this and its order.
      where.push('entity_id = @entityId AND entity_type = @entityType');
      params.entityId = filter.entity.id;
      params.entityType = filter.entity.entityType;
    }
    if (filter.customerId !== undefined) {
      where.push('customer_id = @customerId');
      params.customerId = filter.customerId;
    }
    if (filter.userId !== undefined) {
      where.push('user_id = @userId');
      params.userId = filter.userId;
    }
    if (filter.actionTypes?.length) {
      const names = filter.actionTypes.map((t, i) => {
        params[`t${i}`] = t;
        return `@t${i}`;
      });
      where.push(`action_type IN (${names.join(', ')})`);
    }
    const clause = where.length ? ` WHERE ${where.join(' AND ')}` : '';
    const total = (
      this.db.prepare(`SELECT count(*) AS n FROM audit_log${clause}`).get(params) as { n: number }
    ).n;
    const rows = this.db
      .prepare(
        `SELECT * FROM audit_log${clause} ORDER BY created_time ${order}, rid ${order}
         LIMIT @limit OFFSET @offset`,
      )
      .all({ ...params, limit, offset }) as AuditRow[];
    return { rows, total };
  }
}
