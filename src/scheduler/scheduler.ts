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

export class Scheduler {
  readonly #jobs = new Map<string, ScheduledTask>();
  #stopped = false;

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
    if (this.#jobs.size >= MAX_JOBS)
      throw new ValidationError(`At most ${MAX_JOBS} scheduled jobs can run at once`);
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
    this.#jobs.set(key, task);
  }

  cancel(key: string): void {
    const task = this.#jobs.get(key);
    if (!task) return;
    void task.destroy();
    this.#jobs.delete(key);
  }

  get size(): number {
    return this.#jobs.size;
  }

  stop(): void {
    this.#stopped = true;
    for (const key of [...this.#jobs.keys()]) this.cancel(key);
  }
}
