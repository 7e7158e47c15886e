import type { Statement } from 'better-sqlite3';
import type { PageQuery } from '../common/entity.js';
import type { Db } from '../db/open.js';
import type { AlarmSeverity, AlarmStatus } from './types.js';

export interface AlarmRow {
  id: string;
  created_time: number;
  tenant_id: string;
  customer_id: string | null;
  type: string;
  originator_type: string;
  originator_id: string;
  severity: AlarmSeverity;
  acknowledged: number;
  cleared: number;
  start_ts: number;
  end_ts: number;
  ack_ts: number;
  clear_ts: number;
  assign_ts: number;
  assignee_id: string | null;
  details: string | null;
  propagate: number;
  propagate_to_owner: number;
  propagate_to_tenant: number;
  propagate_relation_types: string | null;
}

/** An alarm row with its originator's name and label and its assignee (AlarmInfo). */
export interface AlarmInfoRow extends AlarmRow {
  originator_name: string | null;
  originator_label: string | null;
  assignee_email: string | null;
  assignee_first_name: string | null;
  assignee_last_name: string | null;
}

export interface CommentRow {
  id: string;
  alarm_id: string;
  created_time: number;
  user_id: string | null;
  type: 'SYSTEM' | 'OTHER';
  comment: string;
  email?: string | null;
  first_name?: string | null;
  last_name?: string | null;
}

export const ALARM_SORT = [
  'createdTime',
  'startTs',
  'endTs',
  'type',
  'ackTs',
  'clearTs',
  'severity',
  'status',
] as const;
export type AlarmSort = (typeof ALARM_SORT)[number];

const STATUS_SQL = `CASE WHEN a.cleared = 1 THEN
  CASE WHEN a.acknowledged = 1 THEN 'CLEARED_ACK' ELSE 'CLEARED_UNACK' END
  ELSE CASE WHEN a.acknowledged = 1 THEN 'ACTIVE_ACK' ELSE 'ACTIVE_UNACK' END END`;
// Highest severity first when sorted ascending by rank.
const SEVERITY_RANK_SQL = `CASE a.severity WHEN 'CRITICAL' THEN 0 WHEN 'MAJOR' THEN 1
  WHEN 'MINOR' THEN 2 WHEN 'WARNING' THEN 3 ELSE 4 END`;

const SORT_SQL: Record<AlarmSort, string> = {
  createdTime: 'a.created_time',
  startTs: 'a.start_ts',
  endTs: 'a.end_ts',
  type: 'a.type',
  ackTs: 'a.ack_ts',
  clearTs: 'a.clear_ts',
  // @NOTE: by rank (CRITICAL first on DESC), not by name as ThingsBoard's varchar column sorts.
  severity: `(4 - ${SEVERITY_RANK_SQL})`,
  status: STATUS_SQL,
};

const INFO_SELECT = `SELECT a.*, d.name AS originator_name, d.label AS originator_label,
    u.email AS assignee_email, u.first_name AS assignee_first_name, u.last_name AS assignee_last_name
  FROM alarm a LEFT JOIN device d ON d.id = a.originator_id LEFT JOIN user u ON u.id = a.assignee_id`;

/** Which alarms a list returns; every field narrows it. */
export interface AlarmFilter {
  readonly originatorId?: string;
  /** Any of these originators (entity filters of the WebSocket API); empty matches none. */
  readonly originatorIds?: readonly string[];
  /** A customer user's view: devices of its customer plus these shared device ids. */
  readonly visibleTo?: { readonly customerId: string; readonly sharedDeviceIds: readonly string[] };
  readonly acknowledged?: boolean;
  readonly cleared?: boolean;
  readonly statusList?: readonly AlarmStatus[];
  readonly severityList?: readonly AlarmSeverity[];
  readonly typeList?: readonly string[];
  readonly assigneeId?: string;
  readonly startTime?: number;
  readonly endTime?: number;
  readonly textSearch?: string;
}

function where(f: AlarmFilter): { sql: string; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  if (f.originatorId !== undefined) {
    parts.push('a.originator_id = ?');
    params.push(f.originatorId);
  }
  if (f.originatorIds !== undefined) {
    parts.push('a.originator_id IN (SELECT value FROM json_each(?))');
    params.push(JSON.stringify(f.originatorIds));
  }
  if (f.visibleTo) {
    parts.push(
      `(a.originator_id IN (SELECT id FROM device WHERE customer_id = ?)
        OR a.originator_id IN (SELECT value FROM json_each(?)))`,
    );
    params.push(f.visibleTo.customerId, JSON.stringify(f.visibleTo.sharedDeviceIds));
  }
  if (f.acknowledged !== undefined) {
    parts.push('a.acknowledged = ?');
    params.push(f.acknowledged ? 1 : 0);
  }
  if (f.cleared !== undefined) {
    parts.push('a.cleared = ?');
    params.push(f.cleared ? 1 : 0);
  }
  const inList = (expr: string, list: readonly string[] | undefined) => {
    if (!list || list.length === 0) return;
    parts.push(`${expr} IN (SELECT value FROM json_each(?))`);
    params.push(JSON.stringify(list));
  };
  inList(STATUS_SQL, f.statusList);
  inList('a.severity', f.severityList);
  inList('a.type', f.typeList);
  if (f.assigneeId !== undefined) {
    parts.push('a.assignee_id = ?');
    params.push(f.assigneeId);
  }
  if (f.startTime !== undefined) {
    parts.push('a.created_time >= ?');
    params.push(f.startTime);
  }
  if (f.endTime !== undefined) {
    parts.push('a.created_time <= ?');
    params.push(f.endTime);
  }
  if (f.textSearch) {
    // §2.4: textSearch matches type, severity or status, case-insensitively.
    parts.push(`(instr(lower(a.type), ?) > 0 OR instr(lower(a.severity), ?) > 0
      OR instr(lower(${STATUS_SQL}), ?) > 0)`);
    const t = f.textSearch.toLowerCase();
    params.push(t, t, t);
  }
  return { sql: parts.length ? `WHERE ${parts.join(' AND ')}` : '', params };
}

const STATEMENT_CACHE = 64;

/** SQL for `alarm` and `alarm_comment`. */
export class AlarmStore {
  readonly #insert;
  readonly #update;
  readonly #get;
  readonly #info;
  readonly #active;
  readonly #delete;
  readonly #count;
  readonly #purgeCleared;
  readonly #oldestCleared;
  readonly #insertComment;
  readonly #updateComment;
  readonly #getComment;
  readonly #deleteComment;
  readonly #listComments;
  readonly #countComments;
  readonly #trimComments;
  readonly #byStatus;
  readonly #activeBySeverity;
  /** Dynamic list queries, by SQL text; bounded, oldest dropped first. */
  readonly #dynamic = new Map<string, Statement<unknown[]>>();

  constructor(private readonly db: Db) {
    this.#insert = db.prepare<[AlarmRow]>(
      `INSERT INTO alarm (id, created_time, tenant_id, customer_id, type, originator_type,
         originator_id, severity, acknowledged, cleared, start_ts, end_ts, ack_ts, clear_ts,
         assign_ts, assignee_id, details, propagate, propagate_to_owner, propagate_to_tenant,
         propagate_relation_types)
       VALUES (@id, @created_time, @tenant_id, @customer_id, @type, @originator_type,
         @originator_id, @severity, @acknowledged, @cleared, @start_ts, @end_ts, @ack_ts, @clear_ts,
         @assign_ts, @assignee_id, @details, @propagate, @propagate_to_owner, @propagate_to_tenant,
         @propagate_relation_types)`,
    );
    this.#update = db.prepare<[AlarmRow]>(
      `UPDATE alarm SET severity = @severity, acknowledged = @acknowledged, cleared = @cleared,
         start_ts = @start_ts, end_ts = @end_ts, ack_ts = @ack_ts, clear_ts = @clear_ts,
         assign_ts = @assign_ts, assignee_id = @assignee_id, details = @details,
         propagate = @propagate, propagate_to_owner = @propagate_to_owner,
         propagate_to_tenant = @propagate_to_tenant,
         propagate_relation_types = @propagate_relation_types
       WHERE id = @id`,
    );
    this.#get = db.prepare<[string], AlarmRow>('SELECT * FROM alarm WHERE id = ?');
    this.#info = db.prepare<[string], AlarmInfoRow>(`${INFO_SELECT} WHERE a.id = ?`);
    this.#active = db.prepare<[string, string], AlarmRow>(
      'SELECT * FROM alarm WHERE originator_id = ? AND type = ? AND cleared = 0',
    );
    this.#delete = db.prepare<[string]>('DELETE FROM alarm WHERE id = ?');
    this.#count = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM alarm');
    this.#activeBySeverity = db.prepare<[], { severity: AlarmSeverity; n: number }>(
      'SELECT severity, count(*) AS n FROM alarm WHERE cleared = 0 GROUP BY severity',
    );
    this.#purgeCleared = db.prepare<[number, number], AlarmRow>(
      `DELETE FROM alarm WHERE id IN (SELECT id FROM alarm
         WHERE cleared = 1 AND clear_ts < ? ORDER BY clear_ts LIMIT ?) RETURNING *`,
    );
    this.#oldestCleared = db.prepare<[number], AlarmRow>(
      `DELETE FROM alarm WHERE id IN (SELECT id FROM alarm
         WHERE cleared = 1 ORDER BY clear_ts LIMIT ?) RETURNING *`,
    );
    this.#insertComment = db.prepare<[CommentRow]>(
      `INSERT INTO alarm_comment (id, alarm_id, created_time, user_id, type, comment)
       VALUES (@id, @alarm_id, @created_time, @user_id, @type, @comment)`,
    );
    this.#updateComment = db.prepare<[string, string]>(
      'UPDATE alarm_comment SET comment = ? WHERE id = ?',
    );
    this.#getComment = db.prepare<[string], CommentRow>(
      `SELECT c.*, u.email, u.first_name, u.last_name FROM alarm_comment c
       LEFT JOIN user u ON u.id = c.user_id WHERE c.id = ?`,
    );
    this.#deleteComment = db.prepare<[string]>('DELETE FROM alarm_comment WHERE id = ?');
    this.#listComments = db.prepare<[string, number, number], CommentRow>(
      `SELECT c.*, u.email, u.first_name, u.last_name FROM alarm_comment c
       LEFT JOIN user u ON u.id = c.user_id WHERE c.alarm_id = ?
       ORDER BY c.created_time, c.rowid LIMIT ? OFFSET ?`,
    );
    this.#countComments = db.prepare<[string], { n: number }>(
      'SELECT count(*) AS n FROM alarm_comment WHERE alarm_id = ?',
    );
    this.#byStatus = db.prepare<[], { acknowledged: number; cleared: number; n: number }>(
      'SELECT acknowledged, cleared, count(*) AS n FROM alarm GROUP BY acknowledged, cleared',
    );
    this.#trimComments = db.prepare<[string, string, number]>(
      `DELETE FROM alarm_comment WHERE alarm_id = ? AND id IN (SELECT id FROM alarm_comment
         WHERE alarm_id = ? ORDER BY created_time DESC, rowid DESC LIMIT -1 OFFSET ?)`,
    );
  }

  insert(row: AlarmRow): void {
    this.#insert.run(row);
  }

  update(row: AlarmRow): void {
    this.#update.run(row);
  }

  get(id: string): AlarmRow | undefined {
    return this.#get.get(id);
  }

  info(id: string): AlarmInfoRow | undefined {
    return this.#info.get(id);
  }

  /** The one uncleared alarm of this type on this originator (§2.3). */
  active(originatorId: string, type: string): AlarmRow | undefined {
    return this.#active.get(originatorId, type);
  }

  delete(id: string): boolean {
    return this.#delete.run(id).changes > 0;
  }

  count(): number {
    return this.#count.get()?.n ?? 0;
  }

  /** Alarms per status (§2.2), every status present. */
  countByStatus(): Record<string, number> {
    const out: Record<string, number> = {
      ACTIVE_UNACK: 0,
      ACTIVE_ACK: 0,
      CLEARED_UNACK: 0,
      CLEARED_ACK: 0,
    };
    for (const r of this.#byStatus.all())
      out[`${r.cleared ? 'CLEARED' : 'ACTIVE'}_${r.acknowledged ? 'ACK' : 'UNACK'}`] += r.n;
    return out;
  }

  /** Uncleared alarms per severity (severities without one are absent). */
  activeBySeverity(): Array<{ severity: AlarmSeverity; n: number }> {
    return this.#activeBySeverity.all();
  }

  /** Deletes up to `limit` alarms cleared before `ts`, oldest first. */
  purgeClearedBefore(ts: number, limit: number): AlarmRow[] {
    return this.#purgeCleared.all(ts, limit);
  }

  /** Deletes the `n` oldest cleared alarms. */
  purgeOldestCleared(n: number): AlarmRow[] {
    return this.#oldestCleared.all(n);
  }

  list(f: AlarmFilter, q: PageQuery<AlarmSort>): { rows: AlarmInfoRow[]; total: number } {
    const w = where(f);
    const total =
      (this.#stmt(`SELECT count(*) AS n FROM alarm a ${w.sql}`).get(...w.params) as { n: number })
        .n ?? 0;
    const order = `${SORT_SQL[q.sortProperty ?? 'createdTime']} ${q.sortOrder}, a.id ${q.sortOrder}`;
    const rows = this.#stmt(`${INFO_SELECT} ${w.sql} ORDER BY ${order} LIMIT ? OFFSET ?`).all(
      ...w.params,
      q.pageSize,
      q.page * q.pageSize,
    ) as AlarmInfoRow[];
    return { rows, total };
  }

  /** The highest severity among matching alarms, or undefined. */
  highestSeverity(f: AlarmFilter): AlarmSeverity | undefined {
    const w = where(f);
    const row = this.#stmt(
      `SELECT a.severity FROM alarm a ${w.sql} ORDER BY ${SEVERITY_RANK_SQL} LIMIT 1`,
    ).get(...w.params) as { severity: AlarmSeverity } | undefined;
    return row?.severity;
  }

  /** Distinct alarm types, sorted, with an optional case-insensitive substring. */
  types(f: AlarmFilter, q: PageQuery): { rows: string[]; total: number } {
    const w = where({ ...f, textSearch: undefined });
    const search = q.textSearch ? `${w.sql ? 'AND' : 'WHERE'} instr(lower(a.type), ?) > 0` : '';
    const params = q.textSearch ? [...w.params, q.textSearch.toLowerCase()] : w.params;
    const base = `SELECT DISTINCT a.type FROM alarm a ${w.sql} ${search}`;
    const total = (
      this.#stmt(`SELECT count(*) AS n FROM (${base})`).get(...params) as { n: number }
    ).n;
    const rows = this.#stmt(`${base} ORDER BY a.type ${q.sortOrder} LIMIT ? OFFSET ?`).all(
      ...params,
      q.pageSize,
      q.page * q.pageSize,
    ) as Array<{ type: string }>;
    return { rows: rows.map((r) => r.type), total };
  }

  insertComment(row: CommentRow): void {
    this.#insertComment.run(row);
  }

  updateComment(id: string, comment: string): void {
    this.#updateComment.run(comment, id);
  }

  getComment(id: string): CommentRow | undefined {
    return this.#getComment.get(id);
  }

  /** Deletes the oldest comments of an alarm beyond the newest `keep`; returns how many. */
  trimComments(alarmId: string, keep: number): number {
    return this.#trimComments.run(alarmId, alarmId, keep).changes;
  }

  deleteComment(id: string): void {
    this.#deleteComment.run(id);
  }

  comments(alarmId: string, limit: number, offset: number): { rows: CommentRow[]; total: number } {
    return {
      rows: this.#listComments.all(alarmId, limit, offset),
      total: this.#countComments.get(alarmId)?.n ?? 0,
    };
  }

  #stmt(sql: string): Statement<unknown[]> {
    let s = this.#dynamic.get(sql);
    if (!s) {
      s = this.db.prepare<unknown[]>(sql);
      if (this.#dynamic.size >= STATEMENT_CACHE) {
        const oldest = this.#dynamic.keys().next().value;
        if (oldest !== undefined) this.#dynamic.delete(oldest);
      }
      this.#dynamic.set(sql, s);
    }
    return s;
  }
}
