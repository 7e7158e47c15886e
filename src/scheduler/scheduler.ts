/**
 * The gateway's cron host (node-cron): jobs registered under a key, each with a cron expression
 * (seconds field allowed) and a time zone. A job only calls back; what it does is its owner's.
 * Runs missed while the gateway was down are not replayed (node-cron schedules from now).
 */
import cron, { type ScheduledTask } from 'node-cron';
import type { Logger } from 'pino';
import { ValidationError } from '../errors.js';

/** At most this many scheduler events (user schedules) are stored, each one job when armed. */
export const MAX_EVENTS = 1000;
/** Room for the gateway's own periodic jobs (`gateway.*`) besides the user schedules. */
export const GATEWAY_JOBS = 16;
/** At most this many jobs at once (user schedules plus the gateway's own). */
export const MAX_JOBS = MAX_EVENTS + GATEWAY_JOBS;

/** Where a service runs its periodic job: the scheduler host, or a plain timer in unit tests. */
export interface PeriodicJobs {
  every(key: string, intervalMs: number, run: () => void): void;
  cancel(key: string): void;
}

/**
 * The cron expression that runs every `seconds`, when cron can say it exactly (a divisor of a
 * minute, an hour or a day); undefined otherwise.
 */
export function everyExpression(seconds: number): string | undefined {
  if (seconds === 1) return '* * * * * *';
  if (seconds < 60) return 60 % seconds === 0 ? `*/${seconds} * * * * *` : undefined;
  if (seconds % 60 !== 0) return undefined;
  const m = seconds / 60;
  if (m === 1) return '0 * * * * *';
  if (m < 60) return 60 % m === 0 ? `0 */${m} * * * *` : undefined;
  if (m % 60 !== 0) return undefined;
  const h = m / 60;
  if (h === 1) return '0 0 * * * *';
  if (h === 24) return '0 0 0 * * *';
  return h < 24 && 24 % h === 0 ? `0 0 */${h} * * *` : undefined;
}

/** One armed job, as `GET /api/scheduler/jobs` lists it. */
export interface JobInfo {
  readonly key: string;
  readonly expression: string;
  readonly timezone: string | null;
  /** The next run (ms since the epoch), or null when none is planned. */
  readonly nextRun: number | null;
}

interface Job {
  readonly task: ScheduledTask;
  readonly expression: string;
  readonly timezone: string | undefined;
}

export class Scheduler implements PeriodicJobs {
  readonly #jobs = new Map<string, Job>();
  #stopped = false;
  #refused = 0;

  constructor(private readonly deps: { readonly log: Logger }) {}

  /** Checks an expression and a time zone; throws ValidationError naming the problem. */
  static check(expression: string, timezone?: string): void {
    if (!cron.validate(expression))
      throw new ValidationError(`Invalid cron expression: ${expression}`);
    if (timezone !== undefined) {
      try {
        new Intl.DateTimeFormat('en-US', { timeZone: timezone });
      } catch {
        throw new ValidationError(`Invalid time zone: ${timezone}`);
      }
    }
  }

  /** Registers (or replaces) the job `key`. */
  schedule(key: string, expression: string, timezone: string | undefined, run: () => void): void {
    Scheduler.check(expression, timezone);
    this.cancel(key);
    if (this.#stopped) return;
    if (this.#jobs.size >= MAX_JOBS) {
      this.#refused++;
      throw new ValidationError(`At most ${MAX_JOBS} scheduled jobs can run at once`);
    }
    const task = cron.schedule(
      expression,
      () => {
        try {
          run();
        } catch (err) {
          this.deps.log.error({ err, job: key }, 'scheduled job failed');
        }
      },
      {
        timezone,
        name: key,
        noOverlap: true,
        unref: true,
        logger: {
          info: (m) => this.deps.log.debug({ job: key }, m),
          warn: (m) => this.deps.log.debug({ job: key }, m),
          error: (m, err) => this.deps.log.warn({ job: key, err }, String(m)),
          debug: () => {},
        },
      },
    );
    this.#jobs.set(key, { task, expression, timezone });
  }

  /**
   * A periodic job of the gateway, every `intervalMs` rounded to whole seconds (node-cron's
   * resolution; at least 1 s), on the wall clock's multiples of it. An interval cron cannot say
   * exactly (7 s, 90 s) ticks every second and runs on every n-th tick.
   */
  every(key: string, intervalMs: number, run: () => void): void {
    const seconds = Math.max(1, Math.round(intervalMs / 1000));
    const expression = everyExpression(seconds);
    if (expression) {
      this.schedule(key, expression, undefined, run);
      return;
    }
    let tick = 0;
    this.schedule(key, '* * * * * *', undefined, () => {
      if (++tick % seconds === 0) run();
    });
  }

  cancel(key: string): void {
    const job = this.#jobs.get(key);
    if (!job) return;
    void job.task.destroy();
    this.#jobs.delete(key);
  }

  get size(): number {
    return this.#jobs.size;
  }

  /** Jobs refused at MAX_JOBS since start (`/metrics`). */
  get refused(): number {
    return this.#refused;
  }

  /** Every armed job, in key order. */
  jobs(): JobInfo[] {
    return [...this.#jobs.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, job]) => ({
        key,
        expression: job.expression,
        timezone: job.timezone ?? null,
        nextRun: job.task.getNextRun()?.getTime() ?? null,
      }));
  }

  stop(): void {
    this.#stopped = true;
    for (const key of [...this.#jobs.keys()]) this.cancel(key);
  }
}
