/**
 * The gateway's cron host (node-cron): jobs registered under a key, each with a cron expression
 * (seconds field allowed) and a time zone. A job only calls back; what it does is its owner's.
 * Runs missed while the gateway was down are not replayed (node-cron schedules from now).
 */
import cron, { type ScheduledTask } from 'node-cron';
import type { Logger } from 'pino';
import { ValidationError } from '../errors.js';

/** At most this many jobs at once (user schedules plus the gateway's own). */
export const MAX_JOBS = 1000;

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

export class Scheduler {
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
