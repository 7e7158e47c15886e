import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { AttributeScope } from '../attributes/types.js';
import { entityId } from '../common/entity.js';
import { validate } from '../common/validate.js';
import { wallParts } from '../common/wall-clock.js';
import type { Db } from '../db/open.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import type { GatewayMsg, MessageProcessor } from '../messages/types.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { MAX_EVENTS, Scheduler } from './scheduler.js';

const entityRef = z.object({
  entityType: z.enum(['DEVICE', 'ENTITY_GROUP']),
  id: z.uuid('must be a UUID'),
});

/** TIMER units (ThingsBoard PE's `timeUnit`), in milliseconds. */
const TIME_UNITS = { SECONDS: 1000, MINUTES: 60_000, HOURS: 3_600_000 } as const;

const repeatBody = z
  .looseObject({
    type: z.enum(['DAILY', 'WEEKLY', 'MONTHLY', 'YEARLY', 'TIMER']),
    /** Last time a run may happen (ms since the epoch); 0 or absent: never ends. */
    endsOn: z.number().int().nonnegative().nullable().optional(),
    /** WEEKLY: days of the week, 0 = Sunday. */
    repeatOn: z.array(z.number().int().min(0).max(6)).optional(),
    /** TIMER: every `repeatInterval` `timeUnit`s from `startTime`. */
    repeatInterval: z.number().int().positive().max(1_000_000).nullable().optional(),
    timeUnit: z.enum(['SECONDS', 'MINUTES', 'HOURS']).nullable().optional(),
  })
  .refine((r) => r.type !== 'TIMER' || (r.repeatInterval && r.timeUnit), {
    message: 'a TIMER repeat needs repeatInterval and timeUnit (SECONDS, MINUTES or HOURS)',
  });

const scheduleBody = z.looseObject({
  timezone: z.string().min(1).optional(),
  startTime: z.number().int().nonnegative().optional(),
  /** Our extension: a plain cron expression (node-cron; an optional seconds field first). */
  cron: z.string().min(1).optional(),
  repeat: repeatBody.nullable().optional(),
});

const eventBody = z.looseObject({
  id: z.object({ id: z.uuid() }).nullable().optional(),
  name: z.string().trim().min(1, 'Scheduler event name should be specified!').max(255),
  type: z.string().trim().min(1).max(255),
  schedule: scheduleBody,
  configuration: z.looseObject({
    originatorId: entityRef,
    msgType: z.string().min(1),
    msgBody: z.unknown().optional(),
    metadata: z.record(z.string(), z.string()).optional(),
  }),
  enabled: z.boolean().optional(),
  additionalInfo: z.unknown().optional(),
  version: z.number().int().nullable().optional(),
});

type EventInput = z.infer<typeof eventBody>;

interface EventRow {
  id: string;
  tenant_id: string;
  name: string;
  type: string;
  schedule: string;
  configuration: string;
  additional_info: string | null;
  enabled: number;
  created_time: number;
  version: number;
}

export interface SchedulerEventServiceDeps {
  readonly db: Db;
  readonly tenants: TenantService;
  readonly scheduler: Scheduler;
  readonly log: Logger;
  /** Saves attributes of a device (shared ones are pushed to subscribed devices). */
  readonly saveAttributes: (
    deviceId: string,
    scope: AttributeScope,
    values: Record<string, unknown>,
  ) => Promise<void>;
  /** Sends a one-way RPC to a device (queued until it connects or the RPC expires). */
  readonly sendRpc: (deviceId: string, body: unknown) => Promise<unknown>;
  /** The device ids of a DEVICE group. */
  readonly groupDevices: (groupId: string) => string[];
  /** The root rule chain (any other message type). */
  readonly processor: MessageProcessor;
  /** The clock the runs are checked against (tests control it); default Date.now. */
  readonly now?: () => number;
}

/** Hour, minute, second and day of `ts` as a wall clock in `timezone`. */
function wallClock(ts: number, timezone: string | undefined) {
  const p = wallParts(ts, timezone);
  return { s: p.second, m: p.minute, h: p.hour, d: p.day, mo: p.month };
}

/** The cron expression of a schedule, and whether it runs once. */
export function cronOf(schedule: EventInput['schedule']): { expression: string; once: boolean } {
  if (schedule.cron) return { expression: schedule.cron, once: false };
  if (schedule.startTime === undefined)
    throw new ValidationError('Invalid scheduler event: schedule needs cron or startTime');
  const { s, m, h, d, mo } = wallClock(schedule.startTime, schedule.timezone);
  const repeat = schedule.repeat;
  const every = (expression: string) => ({ expression, once: false });
  switch (repeat?.type) {
    case undefined:
      return { expression: `${s} ${m} ${h} ${d} ${mo} *`, once: true };
    case 'DAILY':
      return every(`${s} ${m} ${h} * * *`);
    case 'WEEKLY':
      return every(
        `${s} ${m} ${h} * * ${repeat.repeatOn?.length ? repeat.repeatOn.join(',') : '*'}`,
      );
    // A day the month lacks (the 31st in April) has no run that month, as cron has it.
    case 'MONTHLY':
      return every(`${s} ${m} ${h} ${d} * *`);
    case 'YEARLY':
      return every(`${s} ${m} ${h} ${d} ${mo} *`);
    // Cron ticks once per unit at startTime's offset; isDue keeps every repeatInterval-th tick.
    case 'TIMER':
      if (repeat.timeUnit === 'SECONDS') return every('* * * * * *');
      if (repeat.timeUnit === 'MINUTES') return every(`${s} * * * * *`);
      return every(`${s} ${m} * * * *`);
  }
}

/**
 * Whether a tick of the cron job at `now` runs the event: `run`, `skip` (before startTime, or a
 * TIMER tick between intervals) or `ended` (past `repeat.endsOn`: the job is cancelled).
 * A tick may come late on a busy machine; TIMER rounds to the nearest unit.
 */
export function isDue(schedule: EventInput['schedule'], now: number): 'run' | 'skip' | 'ended' {
  const repeat = schedule.repeat;
  if (repeat?.endsOn && now > repeat.endsOn) return 'ended';
  if (schedule.cron || schedule.startTime === undefined) return 'run';
  const start = Math.floor(schedule.startTime / 1000) * 1000;
  if (now < start - 500) return 'skip';
  if (repeat?.type !== 'TIMER' || !repeat.timeUnit || !repeat.repeatInterval) return 'run';
  const ticks = Math.round((now - start) / TIME_UNITS[repeat.timeUnit]);
  return ticks % repeat.repeatInterval === 0 ? 'run' : 'skip';
}

/**
 * The job an event's schedule arms at `now`: its cron expression and whether it runs once; or
 * undefined when nothing is left to run (a one-time event whose time has passed, a repeat past
 * `endsOn`).
 */
export function armingOf(
  schedule: EventInput['schedule'],
  now: number,
): { expression: string; once: boolean } | undefined {
  const plan = cronOf(schedule);
  if (plan.once && (schedule.startTime ?? 0) <= now) return undefined;
  if (isDue(schedule, now) === 'ended') return undefined;
  return plan;
}

/** At most this many runs are previewed at once. */
export const MAX_PREVIEW_RUNS = 100;
/** Matcher steps one preview may take (bounds its CPU; a preview stops short of it). */
const MAX_PREVIEW_STEPS = 10_000;

const previewBody = z.looseObject({
  schedule: scheduleBody,
  count: z.number().int().min(1).max(MAX_PREVIEW_RUNS).default(5),
  /** From when (ms since the epoch); default the gateway's clock now. */
  from: z.number().int().nonnegative().optional(),
});

/**
 * The next `count` runs (ms) of `schedule` after `from`, as its armed job makes them: the job's
 * cron ticks (the scheduler host's matcher) that `isDue` lets run, ending after a one-time run or
 * at `endsOn`. Nothing is armed.
 */
export function nextRuns(schedule: EventInput['schedule'], from: number, count: number): number[] {
  const plan = armingOf(schedule, from);
  if (!plan) return [];
  const next = Scheduler.matcher(plan.expression, schedule.timezone);
  const start =
    schedule.cron || schedule.startTime === undefined
      ? undefined
      : Math.floor(schedule.startTime / 1000) * 1000;
  const repeat = schedule.repeat;
  const period =
    start !== undefined && repeat?.type === 'TIMER' && repeat.timeUnit && repeat.repeatInterval
      ? TIME_UNITS[repeat.timeUnit] * repeat.repeatInterval
      : undefined;
  // isDue skips the ticks before startTime: begin with the one at it.
  let cursor = start === undefined ? from : Math.max(from, start - 1000);
  const runs: number[] = [];
  for (let step = 0; runs.length < count && step < MAX_PREVIEW_STEPS; step++) {
    if (period !== undefined && start !== undefined) {
      // isDue skips a timer's ticks between intervals: go to the one of the next interval.
      const k = cursor < start ? 0 : Math.floor((cursor - start) / period) + 1;
      cursor = Math.max(cursor, start + k * period - 1000);
    }
    const tick = next(cursor);
    if (tick === undefined) break;
    const due = isDue(schedule, tick);
    if (due === 'ended') break;
    if (due === 'run') {
      runs.push(tick);
      if (plan.once) break;
    }
    cursor = tick;
  }
  return runs;
}

/**
 * User schedules in ThingsBoard PE's scheduler-event shape (issue 14 §11): on each run, an
 * attribute update (`POST_ATTRIBUTES_REQUEST`, metadata `scope` SHARED_SCOPE or SERVER_SCOPE), a
 * one-way RPC (`RPC_CALL_FROM_SERVER_TO_DEVICE`, body `{"method","params"}`), or any other message
 * posted to the root rule chain; for a device or for every device of a DEVICE group. Runs are not
 * replayed after downtime; a one-time event whose time has passed does not run.
 */
export class SchedulerEventService {
  readonly #byId;
  readonly #all;
  readonly #insert;
  readonly #update;
  readonly #delete;
  readonly #count;
  #refused = 0;

  constructor(private readonly deps: SchedulerEventServiceDeps) {
    const { db } = deps;
    this.#byId = db.prepare<[string], EventRow>('SELECT * FROM scheduler_event WHERE id = ?');
    this.#all = db.prepare<[], EventRow>('SELECT * FROM scheduler_event ORDER BY created_time, id');
    this.#insert = db.prepare<[EventRow]>(
      `INSERT INTO scheduler_event (id, tenant_id, name, type, schedule, configuration,
         additional_info, enabled, created_time, version)
       VALUES (@id, @tenant_id, @name, @type, @schedule, @configuration, @additional_info,
         @enabled, @created_time, @version)`,
    );
    this.#update = db.prepare<[Omit<EventRow, 'tenant_id' | 'created_time' | 'version'>]>(
      `UPDATE scheduler_event SET name = @name, type = @type, schedule = @schedule,
         configuration = @configuration, additional_info = @additional_info, enabled = @enabled,
         version = version + 1 WHERE id = @id`,
    );
    this.#delete = db.prepare<[string]>('DELETE FROM scheduler_event WHERE id = ?');
    this.#count = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM scheduler_event');
  }

  /** Arms every stored event. */
  start(): void {
    for (const row of this.#all.all()) {
      try {
        this.#arm(row);
      } catch (err) {
        this.deps.log.error({ err, eventId: row.id }, 'scheduler event could not be armed');
      }
    }
  }

  save(body: unknown): ReturnType<typeof toEvent> {
    const input = validate(eventBody, body, 'scheduler event');
    Scheduler.checkTimezone(input.schedule.timezone);
    const { expression } = cronOf(input.schedule);
    Scheduler.check(expression, input.schedule.timezone);
    const fields = {
      name: input.name,
      type: input.type,
      schedule: JSON.stringify(input.schedule),
      configuration: JSON.stringify(input.configuration),
      additional_info:
        input.additionalInfo === undefined ? null : JSON.stringify(input.additionalInfo),
      enabled: input.enabled === false ? 0 : 1,
    };
    let id: string;
    if (input.id) {
      id = input.id.id.toLowerCase();
      const row = this.#row(id);
      if (typeof input.version === 'number' && input.version !== row.version)
        throw new ConflictError(
          `Scheduler event was already changed by someone else (version ${row.version}, request has ${input.version})`,
        );
      this.#update.run({ id, ...fields });
    } else {
      if ((this.#count.get()?.n ?? 0) >= MAX_EVENTS) {
        this.#refused++;
        throw new ConflictError(`At most ${MAX_EVENTS} scheduler events can be stored`);
      }
      id = randomUUID();
      this.#insert.run({
        id,
        tenant_id: this.deps.tenants.id,
        ...fields,
        created_time: Date.now(),
        version: 1,
      });
    }
    const row = this.#row(id);
    this.#arm(row);
    return toEvent(row);
  }

  /**
   * `POST /api/scheduler/nextRuns` (ours): the next runs of a schedule that need not be saved
   * (`{schedule, count?, from?}`), computed as its armed job would run; nothing is armed.
   */
  preview(body: unknown): { expression: string; timezone: string | null; runs: number[] } {
    const input = validate(previewBody, body, 'schedule preview');
    const { schedule } = input;
    Scheduler.checkTimezone(schedule.timezone);
    const { expression } = cronOf(schedule);
    Scheduler.check(expression, schedule.timezone);
    return {
      expression,
      timezone: schedule.timezone ?? null,
      runs: nextRuns(schedule, input.from ?? this.#now(), input.count),
    };
  }

  /** Saves refused at the MAX_EVENTS bound since start (`/metrics`). */
  get refused(): number {
    return this.#refused;
  }

  get(id: string): ReturnType<typeof toEvent> {
    return toEvent(this.#row(id));
  }

  list(): Array<ReturnType<typeof toEvent>> {
    return this.#all.all().map(toEvent);
  }

  delete(id: string): void {
    this.#row(id);
    this.deps.scheduler.cancel(id);
    this.#delete.run(id);
  }

  #row(id: string): EventRow {
    const row = this.#byId.get(id);
    if (!row) throw new NotFoundError(`Scheduler event with id [${id}] is not found`);
    return row;
  }

  #arm(row: EventRow): void {
    this.deps.scheduler.cancel(row.id);
    if (row.enabled !== 1) return;
    const schedule = JSON.parse(row.schedule) as EventInput['schedule'];
    const plan = armingOf(schedule, this.#now());
    if (!plan) return;
    const { expression, once } = plan;
    this.deps.scheduler.schedule(row.id, expression, schedule.timezone, () => {
      this.tick(row.id, schedule, once);
    });
  }

  /** One tick of an event's cron job (public for tests with a controlled clock). */
  tick(id: string, schedule: EventInput['schedule'], once = false): void {
    const due = isDue(schedule, this.#now());
    // A one-time event's cron job has no year: a tick a year early is skipped, not the end.
    if (due === 'ended' || (once && due === 'run')) this.deps.scheduler.cancel(id);
    if (due !== 'run') return;
    const row = this.#byId.get(id);
    if (row) this.#run(row);
  }

  #now(): number {
    return (this.deps.now ?? Date.now)();
  }

  #run(row: EventRow): void {
    const config = JSON.parse(row.configuration) as EventInput['configuration'];
    const { originatorId } = config;
    const devices =
      originatorId.entityType === 'ENTITY_GROUP'
        ? this.deps.groupDevices(originatorId.id)
        : [originatorId.id];
    const metadata = config.metadata ?? {};
    const body = config.msgBody ?? {};
    this.deps.log.debug({ eventId: row.id, devices: devices.length }, 'scheduler event runs');
    for (const deviceId of devices) {
      const failed = (err: unknown) =>
        this.deps.log.warn({ err, eventId: row.id, deviceId }, 'scheduler event action failed');
      if (config.msgType === 'POST_ATTRIBUTES_REQUEST') {
        const scope = (metadata.scope ?? 'SERVER_SCOPE') as AttributeScope;
        if (scope !== 'SHARED_SCOPE' && scope !== 'SERVER_SCOPE') {
          failed(new Error(`attribute scope ${scope} cannot be set by a schedule`));
          continue;
        }
        this.deps.saveAttributes(deviceId, scope, body as Record<string, unknown>).catch(failed);
      } else if (config.msgType === 'RPC_CALL_FROM_SERVER_TO_DEVICE') {
        this.deps.sendRpc(deviceId, body).catch(failed);
      } else {
        const msg: GatewayMsg = {
          id: randomUUID(),
          type: config.msgType,
          originator: { entityType: 'DEVICE', id: deviceId },
          metadata: { ...metadata, schedulerEventId: row.id },
          data: body,
          ts: Date.now(),
        };
        this.deps.processor.process(msg);
      }
    }
  }
}

function toEvent(row: EventRow) {
  return {
    id: entityId('SCHEDULER_EVENT', row.id),
    createdTime: row.created_time,
    tenantId: entityId('TENANT', row.tenant_id),
    name: row.name,
    type: row.type,
    schedule: JSON.parse(row.schedule) as unknown,
    configuration: JSON.parse(row.configuration) as unknown,
    enabled: row.enabled === 1,
    additionalInfo:
      row.additional_info === null ? null : (JSON.parse(row.additional_info) as unknown),
    version: row.version,
  };
}
