import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { ActionType, AuditService } from '../audit/audit-service.js';
import { NULL_UUID, type PageData, type PageQuery, pageData } from '../common/entity.js';
import type { Db } from '../db/open.js';
import { NotFoundError, ValidationError } from '../errors.js';
import type { EventBus } from '../events.js';
import type { GatewayMsg } from '../messages/types.js';
import type { TenantService } from '../tenant/tenant-service.js';
import {
  type AlarmFilter,
  type AlarmInfoRow,
  type AlarmRow,
  type AlarmSort,
  AlarmStore,
  type CommentRow,
} from './alarm-store.js';
import {
  ALARM_SEVERITIES,
  type Alarm,
  type AlarmAction,
  type AlarmEvent,
  type AlarmInfo,
  type AlarmSeverity,
  statusOf,
} from './types.js';

export interface AlarmServiceDeps {
  readonly db: Db;
  readonly tenants: Pick<TenantService, 'id'>;
  readonly bus: EventBus;
  readonly log: Logger;
  /** The originator device's owner and name; throws NotFoundError for an unknown device. */
  readonly device: (id: string) => { id: string; name: string; customerId: string | null };
  /** A user's email and names, or undefined when there is no such user. */
  readonly user: (
    id: string,
  ) => { email: string; firstName: string | null; lastName: string | null } | undefined;
  /**
   * Called for each alarm change inside its transaction, before the commit: what it writes
   * (notification inbox and outbox rows) commits with the alarm.
   */
  readonly inTransaction?: (event: AlarmEvent) => void;
  /**
   * Runs in the transaction of a comment (ALARM_COMMENT notifications): a user's, added or
   * edited, or a system comment the gateway adds (`system`; `user` is who acted, if anyone).
   */
  readonly onComment?: (c: {
    alarm: Alarm;
    text: string;
    user: AlarmActor | undefined;
    updated: boolean;
    system?: true;
  }) => void;
  /** Where alarm messages go after commit (the processing pipeline); none by default. */
  readonly submit?: (msg: GatewayMsg) => void;
  /** Where users' alarm operations are recorded (ThingsBoard's audit log action types). */
  readonly audit?: Pick<AuditService, 'record'>;
  /**
   * Comments kept per alarm (default 1,000): past it the oldest are deleted, counted in
   * `stats.commentsTrimmed` (assign/unassign cycles and user comments never grow it further).
   */
  readonly maxCommentsPerAlarm?: number;
  readonly now?: () => number;
}

/** Who acts on an alarm (REST callers); system comments and the audit log name them. */
export interface AlarmActor {
  readonly userId: string;
  readonly email: string;
  readonly customerId?: string | null;
}

/** What the alarm engine asks for: create, or update the uncleared alarm of that type. */
export interface RaiseRequest {
  readonly originatorId: string;
  readonly type: string;
  readonly severity: AlarmSeverity;
  /** Data ts of the reading that raised it (start of a new alarm). */
  readonly ts: number;
  /** New details, or undefined to keep an existing alarm's details (§1.3). */
  readonly details?: unknown;
  readonly propagate?: boolean;
  readonly propagateToOwner?: boolean;
  readonly propagateToTenant?: boolean;
  readonly propagateRelationTypes?: readonly string[] | null;
}

/**
 * Writes inside one transaction. Everything a callback writes commits together, and the alarm
 * events it caused go on the bus (and to `submit`) only after the commit.
 */
export interface AlarmTx {
  /** The uncleared alarm of this type on the device (§2.3), if any. */
  active(originatorId: string, type: string): Alarm | undefined;
  /**
   * Creates the alarm or updates the uncleared one: `endTs` = now, severity, details. A lower
   * severity than the current one never downgrades when `noDowngrade` is set (§1.9 step 3).
   */
  raise(req: RaiseRequest, opts?: { noDowngrade?: boolean }): AlarmEvent | undefined;
  /** Clears an uncleared alarm (`clearTs` = now); undefined when it was already cleared. */
  clear(alarmId: string, details?: unknown): AlarmEvent | undefined;
}

/** Alarm events of savepoints that wait for the outer commit (`AlarmService.deferEvents`). */
export type DeferredAlarmEvents = readonly unknown[];

interface Pending {
  readonly event: AlarmEvent;
  /** Caused by a device-profile rule (an `ALARM` message), not by a user. */
  readonly byRule: boolean;
  /** Not posted to `submit`: a rule node made it and sends its own output on. */
  readonly quiet?: boolean;
}

const idRef = z.looseObject({ id: z.uuid() });
const alarmBody = z.looseObject({
  id: idRef.nullable().optional(),
  type: z.string().trim().min(1, 'Alarm type should be specified!').max(255),
  originator: z.looseObject({
    entityType: z.literal('DEVICE', { message: 'only DEVICE originators are supported' }),
    id: z.uuid(),
  }),
  severity: z.enum(ALARM_SEVERITIES),
  startTs: z.number().int().nonnegative().nullable().optional(),
  endTs: z.number().int().nonnegative().nullable().optional(),
  details: z.unknown().optional(),
  acknowledged: z.boolean().nullable().optional(),
  cleared: z.boolean().nullable().optional(),
  assigneeId: idRef.nullable().optional(),
  propagate: z.boolean().nullable().optional(),
  propagateToOwner: z.boolean().nullable().optional(),
  propagateToTenant: z.boolean().nullable().optional(),
  propagateRelationTypes: z.array(z.string()).nullable().optional(),
});

const commentBody = z.looseObject({
  id: idRef.nullable().optional(),
  comment: z.looseObject({ text: z.string().trim().min(1, 'Comment text should be specified!') }),
});

function validate<T extends z.ZodType>(schema: T, body: unknown, what: string): z.infer<T> {
  const r = schema.safeParse(body);
  if (!r.success) {
    const issue = r.error.issues[0];
    const path = issue.path.length ? `${issue.path.join('.')}: ` : '';
    throw new ValidationError(`Invalid ${what}: ${path}${issue.message}`);
  }
  return r.data;
}

/** The message type a pipeline receives for each alarm action (platform.md §7.1). */
const MSG_TYPE: Record<AlarmAction, string> = {
  CREATED: 'ALARM',
  SEVERITY_UPDATED: 'ALARM',
  UPDATED: 'ALARM',
  CLEARED: 'ALARM_CLEAR',
  ACKNOWLEDGED: 'ALARM_ACK',
  DELETED: 'ALARM_DELETE',
  ASSIGNED: 'ALARM_ASSIGNED',
  UNASSIGNED: 'ALARM_UNASSIGNED',
};
/** Metadata flag of ThingsBoard's ALARM messages (§1.9). */
const FLAG: Partial<Record<AlarmAction, string>> = {
  CREATED: 'isNewAlarm',
  SEVERITY_UPDATED: 'isSeverityUpdated',
  UPDATED: 'isExistingAlarm',
  CLEARED: 'isClearedAlarm',
};

/** The propagation flags of an alarm as its columns. */
function propagationColumns(p: {
  propagate?: boolean | null;
  propagateToOwner?: boolean | null;
  propagateToTenant?: boolean | null;
  propagateRelationTypes?: readonly string[] | null;
}) {
  return {
    propagate: p.propagate ? 1 : 0,
    propagate_to_owner: p.propagateToOwner ? 1 : 0,
    propagate_to_tenant: p.propagateToTenant ? 1 : 0,
    propagate_relation_types: p.propagateRelationTypes
      ? JSON.stringify(p.propagateRelationTypes)
      : null,
  };
}

export function toAlarm(r: AlarmRow): Alarm {
  const acknowledged = r.acknowledged === 1;
  const cleared = r.cleared === 1;
  return {
    id: { entityType: 'ALARM', id: r.id },
    createdTime: r.created_time,
    tenantId: { entityType: 'TENANT', id: r.tenant_id },
    customerId: { entityType: 'CUSTOMER', id: r.customer_id ?? NULL_UUID },
    type: r.type,
    name: r.type,
    originator: { entityType: 'DEVICE', id: r.originator_id },
    severity: r.severity,
    acknowledged,
    cleared,
    status: statusOf(acknowledged, cleared),
    startTs: r.start_ts,
    endTs: r.end_ts,
    ackTs: r.ack_ts,
    clearTs: r.clear_ts,
    assignTs: r.assign_ts,
    assigneeId: r.assignee_id ? { entityType: 'USER', id: r.assignee_id } : null,
    details: r.details === null ? null : JSON.parse(r.details),
    propagate: r.propagate === 1,
    propagateToOwner: r.propagate_to_owner === 1,
    propagateToTenant: r.propagate_to_tenant === 1,
    propagateRelationTypes:
      r.propagate_relation_types === null ? null : JSON.parse(r.propagate_relation_types),
  };
}

function toInfo(r: AlarmInfoRow): AlarmInfo {
  return {
    ...toAlarm(r),
    originatorName: r.originator_name,
    originatorLabel: r.originator_label,
    assignee:
      r.assignee_id && r.assignee_email
        ? {
            id: { entityType: 'USER', id: r.assignee_id },
            firstName: r.assignee_first_name,
            lastName: r.assignee_last_name,
            email: r.assignee_email,
          }
        : null,
  };
}

function toComment(r: CommentRow) {
  return {
    id: { entityType: 'ALARM_COMMENT', id: r.id },
    createdTime: r.created_time,
    alarmId: { entityType: 'ALARM', id: r.alarm_id },
    userId: r.user_id ? { entityType: 'USER', id: r.user_id } : null,
    type: r.type,
    comment: JSON.parse(r.comment) as unknown,
    name: r.id,
    email: r.email ?? null,
    firstName: r.first_name ?? null,
    lastName: r.last_name ?? null,
  };
}
export type AlarmComment = ReturnType<typeof toComment>;

/**
 * Alarms (platform.md §2): the entity, its lifecycle (ack, clear, assign, comments) and queries.
 * Every change commits first; then one `alarm` event per change goes on the bus and one
 * `GatewayMsg` to `submit` (ALARM, ALARM_ACK, ALARM_CLEAR, ...).
 */
export class AlarmService {
  readonly #store: AlarmStore;
  readonly #tx: (fn: () => unknown) => unknown;
  /** Events of the transaction running now; emitted after it commits. */
  #pending: Pending[] | undefined;
  /** Set by `deferEvents`: where committed savepoints' events wait for the outer commit. */
  #deferred: Pending[] | undefined;
  #commentsTrimmed = 0;
  #trimLogged = false;
  #quiet = false;

  constructor(private readonly deps: AlarmServiceDeps) {
    this.#store = new AlarmStore(deps.db);
    this.#tx = deps.db.transaction((fn: () => unknown) => fn());
  }

  #now(): number {
    return this.deps.now?.() ?? Date.now();
  }

  get stats(): { commentsTrimmed: number } {
    return { commentsTrimmed: this.#commentsTrimmed };
  }

  /** A user's operation on an alarm, in the audit log (inside the operation's transaction). */
  #audit(
    actionType: ActionType,
    row: Pick<AlarmRow, 'id' | 'type'>,
    actor: AlarmActor,
    actionData?: Record<string, unknown>,
  ): void {
    this.deps.audit?.record({
      actionType,
      entityId: { entityType: 'ALARM', id: row.id },
      entityName: row.type,
      user: { id: actor.userId, name: actor.email, customerId: actor.customerId ?? null },
      actionData: actionData ?? null,
    });
  }

  /** A new comment: the alarm keeps its newest `maxCommentsPerAlarm` (STYLE §12). */
  #insertComment(row: CommentRow): void {
    this.#store.insertComment(row);
    const trimmed = this.#store.trimComments(row.alarm_id, this.deps.maxCommentsPerAlarm ?? 1000);
    if (trimmed === 0) return;
    this.#commentsTrimmed += trimmed;
    if (!this.#trimLogged) {
      this.#trimLogged = true;
      this.deps.log.warn(
        { alarmId: row.alarm_id, max: this.deps.maxCommentsPerAlarm ?? 1000 },
        'alarm comments at their bound: the oldest are deleted (counted in edge_alarm_comments_trimmed_total)',
      );
    }
  }

  /** Uncleared alarms of every severity (0 where there is none), for /metrics. */
  activeBySeverity(): Record<AlarmSeverity, number> {
    const counts = Object.fromEntries(ALARM_SEVERITIES.map((s) => [s, 0])) as Record<
      AlarmSeverity,
      number
    >;
    for (const { severity, n } of this.#store.activeBySeverity()) counts[severity] = n;
    return counts;
  }

  /**
   * Runs `fn` in one transaction with the alarm writes of `tx` and any other writes it makes
   * (rule state); emits the resulting events after the commit. Nested calls join the outer one.
   */
  transact<T>(fn: (tx: AlarmTx) => T, opts: { quiet?: boolean } = {}): T {
    if (this.#pending) return fn(this.#txApi);
    const pending: Pending[] = [];
    this.#pending = pending;
    this.#quiet = opts.quiet ?? false;
    let result: T;
    try {
      result = this.#tx(() => fn(this.#txApi)) as T;
    } finally {
      this.#pending = undefined;
      this.#quiet = false;
    }
    if (this.#deferred) this.#deferred.push(...pending);
    else for (const p of pending) this.#publish(p);
    return result;
  }

  /**
   * Runs `fn` inside a transaction the caller already holds (a telemetry or attribute commit).
   * Each `transact` call made within is a savepoint of that transaction: if it throws, its writes
   * and its events are rolled back alone. The events of those that succeed are returned instead of
   * emitted: the caller hands them to `publish` once its own transaction has committed, or drops
   * them if it rolled back.
   */
  deferEvents(fn: () => void): DeferredAlarmEvents {
    const outer = this.#deferred;
    const events: Pending[] = [];
    this.#deferred = events;
    try {
      fn();
    } finally {
      this.#deferred = outer;
    }
    return events;
  }

  /** Emits events that `deferEvents` kept (bus, then `submit`), after their commit. */
  publish(events: DeferredAlarmEvents): void {
    for (const p of events as Pending[]) this.#publish(p);
  }

  readonly #txApi: AlarmTx = {
    active: (originatorId, type) => {
      const row = this.#store.active(originatorId, type);
      return row && toAlarm(row);
    },
    raise: (req, opts) => this.#raise(req, opts?.noDowngrade ?? false),
    clear: (alarmId, details) => {
      const row = this.#store.get(alarmId);
      if (!row || row.cleared === 1) return undefined;
      return this.#clearRow(row, details);
    },
  };

  #record(action: AlarmAction, row: AlarmRow, byRule = false): AlarmEvent {
    const event: AlarmEvent = { action, alarm: toAlarm(row) };
    this.#pending?.push({ event, byRule, quiet: this.#quiet });
    this.deps.inTransaction?.(event);
    return event;
  }

  #publish(p: Pending): void {
    const { alarm, action } = p.event;
    this.deps.bus.emit('alarm', p.event);
    const submit = this.deps.submit;
    if (!submit || p.quiet) return;
    const flag = FLAG[action];
    try {
      submit({
        id: randomUUID(),
        // §1.9: a rule's clear is an ALARM message flagged isClearedAlarm; a user's, ALARM_CLEAR.
        type: p.byRule ? 'ALARM' : MSG_TYPE[action],
        originator: alarm.originator,
        customerId: alarm.customerId.id === NULL_UUID ? null : alarm.customerId.id,
        metadata: flag ? { [flag]: 'true' } : {},
        data: alarm,
        ts: this.#now(),
      });
    } catch (err) {
      this.deps.log.error({ err, alarmId: alarm.id.id }, 'alarm message not submitted');
    }
  }

  #raise(req: RaiseRequest, noDowngrade: boolean): AlarmEvent | undefined {
    const now = this.#now();
    const existing = this.#store.active(req.originatorId, req.type);
    const details = req.details === undefined ? undefined : JSON.stringify(req.details);
    const flags = propagationColumns(req);
    if (existing) {
      const lower =
        ALARM_SEVERITIES.indexOf(req.severity) > ALARM_SEVERITIES.indexOf(existing.severity);
      if (noDowngrade && lower) return undefined;
      const row: AlarmRow = {
        ...existing,
        ...flags,
        severity: req.severity,
        end_ts: Math.max(existing.end_ts, now),
        details: details ?? existing.details,
      };
      this.#store.update(row);
      return this.#record(
        row.severity === existing.severity ? 'UPDATED' : 'SEVERITY_UPDATED',
        row,
        true,
      );
    }
    const device = this.deps.device(req.originatorId);
    // §1.9: the data ts, or now when it is 0 or in the future.
    const start = req.ts > 0 && req.ts <= now ? req.ts : now;
    const row: AlarmRow = {
      id: randomUUID(),
      created_time: now,
      tenant_id: this.deps.tenants.id,
      customer_id: device.customerId,
      type: req.type,
      originator_type: 'DEVICE',
      originator_id: device.id,
      severity: req.severity,
      acknowledged: 0,
      cleared: 0,
      start_ts: start,
      end_ts: start,
      ack_ts: 0,
      clear_ts: 0,
      assign_ts: 0,
      assignee_id: null,
      details: details ?? '{}',
      ...flags,
    };
    this.#store.insert(row);
    return this.#record('CREATED', row, true);
  }

  #clearRow(row: AlarmRow, details?: unknown, actor?: AlarmActor): AlarmEvent {
    const now = this.#now();
    const next: AlarmRow = {
      ...row,
      cleared: 1,
      clear_ts: now,
      details: details === undefined ? row.details : JSON.stringify(details),
    };
    this.#store.update(next);
    this.#systemComment(next, `Alarm was cleared by ${this.#who(actor)}`, 'CLEAR', actor);
    if (actor) this.#audit('ALARM_CLEAR', next, actor);
    return this.#record('CLEARED', next, actor === undefined);
  }

  #who(actor: AlarmActor | undefined): string {
    if (!actor) return 'the device profile rule';
    const u = this.deps.user(actor.userId);
    const name = [u?.firstName, u?.lastName].filter(Boolean).join(' ');
    return `user ${name || actor.email}`;
  }

  /** `row` is the alarm as changed (written in the same transaction). */
  #systemComment(row: AlarmRow, text: string, subtype: string, actor?: AlarmActor): void {
    this.#insertComment({
      id: randomUUID(),
      alarm_id: row.id,
      created_time: this.#now(),
      user_id: null,
      type: 'SYSTEM',
      comment: JSON.stringify({ text, subtype, userId: actor?.userId ?? null }),
    });
    this.deps.onComment?.({ alarm: toAlarm(row), text, user: actor, updated: false, system: true });
  }

  #row(id: string): AlarmRow {
    const row = this.#store.get(id);
    if (!row) throw new NotFoundError(`Alarm with id [${id}] is not found`);
    return row;
  }

  /** The uncleared alarm of this type on the device (§2.3), if any. */
  activeAlarm(originatorId: string, type: string): Alarm | undefined {
    const row = this.#store.active(originatorId, type);
    return row && toAlarm(row);
  }

  /** The alarm's originator device: what authorization decides from. */
  originatorOf(id: string): string {
    return this.#row(id).originator_id;
  }

  get(id: string): Alarm {
    return toAlarm(this.#row(id));
  }

  info(id: string): AlarmInfo {
    const row = this.#store.info(id);
    if (!row) throw new NotFoundError(`Alarm with id [${id}] is not found`);
    return toInfo(row);
  }

  /**
   * `POST /api/alarm`: creates (no id; an uncleared alarm of the same type on the device is
   * updated instead, §2.3) or updates an alarm; `acknowledged`/`cleared` true acknowledge or
   * clear it.
   */
  save(body: unknown, actor: AlarmActor): Alarm {
    const input = validate(alarmBody, body, 'alarm');
    return this.transact((tx) => {
      let row: AlarmRow;
      if (input.id) {
        const existing = this.#row(input.id.id);
        if (existing.originator_id !== input.originator.id || existing.type !== input.type)
          throw new ValidationError('Alarm originator and type can not be changed');
        row = {
          ...existing,
          severity: input.severity,
          start_ts: input.startTs ?? existing.start_ts,
          end_ts: input.endTs ?? existing.end_ts,
          details: input.details === undefined ? existing.details : JSON.stringify(input.details),
          ...propagationColumns(input),
        };
        this.#store.update(row);
        this.#record(row.severity === existing.severity ? 'UPDATED' : 'SEVERITY_UPDATED', row);
      } else {
        const event = tx.raise({
          originatorId: input.originator.id.toLowerCase(),
          type: input.type,
          severity: input.severity,
          ts: input.startTs ?? 0,
          details: input.details ?? undefined,
          propagate: input.propagate ?? false,
          propagateToOwner: input.propagateToOwner ?? false,
          propagateToTenant: input.propagateToTenant ?? false,
          propagateRelationTypes: input.propagateRelationTypes ?? null,
        });
        row = this.#row((event as AlarmEvent).alarm.id.id);
        if (input.endTs) {
          row = { ...row, end_ts: input.endTs };
          this.#store.update(row);
        }
      }
      this.#audit(input.id ? 'UPDATED' : 'ADDED', row, actor, { severity: row.severity });
      if (input.acknowledged && row.acknowledged === 0) row = this.#ackRow(row, actor);
      if (input.cleared && row.cleared === 0) this.#clearRow(row, undefined, actor);
      return toAlarm(this.#row(row.id));
    });
  }

  #ackRow(row: AlarmRow, actor: AlarmActor): AlarmRow {
    const next: AlarmRow = { ...row, acknowledged: 1, ack_ts: this.#now() };
    this.#store.update(next);
    this.#systemComment(next, `Alarm was acknowledged by ${this.#who(actor)}`, 'ACK', actor);
    this.#record('ACKNOWLEDGED', next);
    this.#audit('ALARM_ACK', next, actor);
    return next;
  }

  /** §2.2: ACTIVE_UNACK → ACTIVE_ACK, CLEARED_UNACK → CLEARED_ACK; a repeat is 400. */
  ack(id: string, actor: AlarmActor): AlarmInfo {
    this.transact(() => {
      const row = this.#row(id);
      if (row.acknowledged === 1) throw new ValidationError('Alarm was already acknowledged!');
      this.#ackRow(row, actor);
    });
    return this.info(id);
  }

  /** §2.2: an uncleared alarm becomes cleared; a repeat is 400. */
  clear(id: string, actor: AlarmActor): AlarmInfo {
    this.transact(() => {
      const row = this.#row(id);
      if (row.cleared === 1) throw new ValidationError('Alarm was already cleared!');
      this.#clearRow(row, undefined, actor);
    });
    return this.info(id);
  }

  assign(id: string, userId: string, actor: AlarmActor): AlarmInfo {
    if (!this.deps.user(userId)) throw new NotFoundError(`User with id [${userId}] is not found`);
    this.transact(() => {
      const row = this.#row(id);
      if (row.assignee_id === userId)
        throw new ValidationError('Alarm was already assigned to this user!');
      const next: AlarmRow = { ...row, assignee_id: userId, assign_ts: this.#now() };
      this.#store.update(next);
      const u = this.deps.user(userId);
      this.#systemComment(
        next,
        `Alarm was assigned by ${this.#who(actor)} to user ${u?.email}`,
        'ASSIGN',
        actor,
      );
      this.#record('ASSIGNED', next);
      this.#audit('ALARM_ASSIGNED', next, actor, { assigneeId: userId });
    });
    return this.info(id);
  }

  unassign(id: string, actor: AlarmActor): AlarmInfo {
    this.transact(() => {
      const row = this.#row(id);
      if (row.assignee_id === null) throw new ValidationError('Alarm was already unassigned!');
      const next: AlarmRow = { ...row, assignee_id: null, assign_ts: this.#now() };
      this.#store.update(next);
      this.#systemComment(next, `Alarm was unassigned by ${this.#who(actor)}`, 'UNASSIGN', actor);
      this.#record('UNASSIGNED', next);
      this.#audit('ALARM_UNASSIGNED', next, actor);
    });
    return this.info(id);
  }

  delete(id: string, actor?: AlarmActor): void {
    this.transact(() => {
      const row = this.#row(id);
      this.#store.delete(id);
      this.#record('DELETED', row);
      if (actor) this.#audit('DELETED', row, actor);
    });
  }

  list(f: AlarmFilter, q: PageQuery<AlarmSort>): PageData<AlarmInfo> {
    const { rows, total } = this.#store.list(f, q);
    return pageData(rows.map(toInfo), total, q);
  }

  highestSeverity(f: AlarmFilter): AlarmSeverity | undefined {
    return this.#store.highestSeverity(f);
  }

  types(f: AlarmFilter, q: PageQuery): PageData<{ tenantId: unknown; type: string }> {
    const { rows, total } = this.#store.types(f, q);
    const tenantId = { entityType: 'TENANT', id: this.deps.tenants.id };
    return pageData(
      rows.map((type) => ({ tenantId, type })),
      total,
      q,
    );
  }

  /** `POST /api/alarm/{id}/comment`: adds a user comment, or edits one (with `id`). */
  saveComment(alarmId: string, body: unknown, actor: AlarmActor): AlarmComment {
    const alarm = this.#row(alarmId);
    const input = validate(commentBody, body, 'alarm comment');
    if (input.id) {
      const existing = this.#store.getComment(input.id.id);
      if (!existing || existing.alarm_id !== alarmId)
        throw new NotFoundError(`Alarm comment with id [${input.id.id}] is not found`);
      if (existing.type === 'SYSTEM' || existing.user_id !== actor.userId)
        throw new ValidationError('Only the author may edit a comment');
      const comment = { ...input.comment, edited: true, editedOn: this.#now() };
      this.transact(() => {
        this.#store.updateComment(existing.id, JSON.stringify(comment));
        this.#audit('UPDATED_COMMENT', alarm, actor, { comment: existing.id });
        this.deps.onComment?.({
          alarm: toAlarm(alarm),
          text: input.comment.text,
          user: actor,
          updated: true,
        });
      });
      return toComment(this.#store.getComment(existing.id) as CommentRow);
    }
    const id = randomUUID();
    this.transact(() => {
      this.#insertComment({
        id,
        alarm_id: alarmId,
        created_time: this.#now(),
        user_id: actor.userId,
        type: 'OTHER',
        comment: JSON.stringify(input.comment),
      });
      this.#audit('ADDED_COMMENT', alarm, actor, { comment: id });
      this.deps.onComment?.({
        alarm: toAlarm(alarm),
        text: input.comment.text,
        user: actor,
        updated: false,
      });
    });
    return toComment(this.#store.getComment(id) as CommentRow);
  }

  comments(alarmId: string, q: PageQuery): PageData<AlarmComment> {
    this.#row(alarmId);
    const { rows, total } = this.#store.comments(alarmId, q.pageSize, q.page * q.pageSize);
    const ordered = q.sortOrder === 'DESC' ? rows.reverse() : rows;
    return pageData(ordered.map(toComment), total, q);
  }

  deleteComment(alarmId: string, commentId: string, actor: AlarmActor): void {
    const existing = this.#store.getComment(commentId);
    if (!existing || existing.alarm_id !== alarmId)
      throw new NotFoundError(`Alarm comment with id [${commentId}] is not found`);
    if (existing.type === 'SYSTEM' || existing.user_id !== actor.userId)
      throw new ValidationError('Only the author may delete a comment');
    const alarm = this.#row(alarmId);
    this.transact(() => {
      this.#store.deleteComment(commentId);
      this.#audit('DELETED_COMMENT', alarm, actor, { comment: commentId });
    });
  }

  count(): number {
    return this.#store.count();
  }

  countByStatus(): Record<string, number> {
    return this.#store.countByStatus();
  }

  /**
   * Retention (issue 13 item 11): removes alarms cleared before `clearedBefore`, then the oldest
   * cleared ones while more than `maxCount` alarms exist. Returns how many went; each is a
   * DELETED event after the commit.
   */
  purge(clearedBefore: number, maxCount: number, batch = 1000): { aged: number; capped: number } {
    let aged = 0;
    let capped = 0;
    for (;;) {
      const n = this.transact(() => {
        const rows = this.#store.purgeClearedBefore(clearedBefore, batch);
        for (const r of rows) this.#record('DELETED', r);
        return rows.length;
      });
      aged += n;
      if (n < batch) break;
    }
    for (;;) {
      const excess = Math.min(batch, this.#store.count() - maxCount);
      if (excess <= 0) break;
      const n = this.transact(() => {
        const rows = this.#store.purgeOldestCleared(excess);
        for (const r of rows) this.#record('DELETED', r);
        return rows.length;
      });
      capped += n;
      if (n === 0) break;
    }
    return { aged, capped };
  }
}
