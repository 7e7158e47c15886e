/**
 * The gateway's cron host (node-cron): jobs registered under a key, each with a cron expression
 * (seconds field allowed) and a time zone. A job only calls back; what it does is its owner's.
 * Runs missed while the gateway was down are not replayed (node-cron schedules from now).
 *
 * Wall-clock jumps (issue 20 drill: a Pi without RTC before and after NTP). node-cron arms one
 * timer for the next matching wall time; after the clock goes back it keeps waiting for that stale
 * time (an every-second job stops for as long as the jump), and after a jump forward it walks the
 * skipped slots one by one. So a watch compares the wall clock with the monotonic one and, on a
 * jump of more than `JUMP_MS`, re-arms every job from the new time. A slot a job has already run
 * (a daily 10:30 seen again after the clock went back) is not run again within one period of
 * real time after that run.
 */
import { performance } from 'node:perf_hooks';
import cron, { type ScheduledTask } from 'node-cron';
import type { Logger } from 'pino';
import { ValidationError } from '../errors.js';

/** At most this many scheduler events (user schedules) are stored, each one job when armed. */
export const MAX_EVENTS = 1000;
/** Room for the gateway's own periodic jobs (`gateway.*`) besides the user schedules. */
export const GATEWAY_JOBS = 16;
/** At most this many jobs at once (user schedules plus the gateway's own). */
export const MAX_JOBS = MAX_EVENTS + GATEWAY_JOBS;
/** A change of the wall clock against the monotonic one larger than this re-arms every job. */
export const JUMP_MS = 2000;

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

/** node-cron's matcher of one expression in one time zone. */
interface TimeMatcher {
  getNextMatch(date: Date): Date;
}

interface Job {
  task: ScheduledTask | undefined;
  readonly expression: string;
  readonly timezone: string | undefined;
  /** The wall time of the slot last run, and the monotonic time it ran. */
  lastSlot: number;
  lastRunMono: number;
}

export interface SchedulerDeps {
  readonly log: Logger;
  /** How often the clock watch looks (ms); default 5,000. */
  readonly watchMs?: number;
}

export class Scheduler implements PeriodicJobs {
  readonly #jobs = new Map<string, Job>();
  #stopped = false;
  #refused = 0;
  #watch: NodeJS.Timeout | undefined;
  #offset = 0;

  constructor(private readonly deps: SchedulerDeps) {}

  /** Checks an expression and a time zone; throws ValidationError naming the problem. */
  static check(expression: string, timezone?: string): void {
    if (!cron.validate(expression))
      throw new ValidationError(`Invalid cron expression: ${expression}`);
    Scheduler.checkTimezone(timezone);
  }

  /** Checks a time zone (IANA name); throws ValidationError naming it. */
  static checkTimezone(timezone: string | undefined): void {
    if (timezone === undefined) return;
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    } catch {
      throw new ValidationError(`Invalid time zone: ${timezone}`);
    }
  }

  /**
   * The time matcher an armed job of `expression` in `timezone` waits on (node-cron's own), without
   * arming one: `next(after)` is the first matching second strictly after `after` (ms), or
   * undefined when none comes within node-cron's search range. Previews use it, so what they show
   * is what the armed job does (a wall time skipped by a DST change does not run; one repeated
   * runs once, at its later instant).
   */
  static matcher(expression: string, timezone?: string): (after: number) => number | undefined {
    Scheduler.check(expression, timezone);
    let task: ScheduledTask;
    try {
      task = cron.createTask(expression, () => {}, { timezone });
    } catch (err) {
      throw new ValidationError(
        `Invalid cron expression: ${expression} (${(err as Error).message})`,
      );
    }
    // node-cron 4 keeps the matcher a task waits on as `timeMatcher` (not in its types); the
    // task is never started, and destroying it only unregisters it.
    const matcher = (task as unknown as { timeMatcher?: TimeMatcher }).timeMatcher;
    void task.destroy();
    if (typeof matcher?.getNextMatch !== 'function')
      throw new Error(
        'node-cron has no timeMatcher.getNextMatch (see package.json for the version)',
      );
    return (after) => {
      try {
        return matcher.getNextMatch(new Date(after)).getTime();
      } catch {
        return undefined;
      }
    };
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
    const job: Job = {
      task: undefined,
      expression,
      timezone,
      lastSlot: Number.NEGATIVE_INFINITY,
      lastRunMono: Number.NEGATIVE_INFINITY,
    };
    const task = cron.schedule(
      expression,
      (ctx) => {
        const slot = ctx.date.getTime();
        const mono = performance.now();
        if (slot <= job.lastSlot) {
          const period = (job.task?.getNextRun()?.getTime() ?? slot) - slot;
          if (mono - job.lastRunMono < period) {
            this.deps.log.debug({ job: key, slot }, 'slot already run before the clock went back');
            return;
          }
        }
        job.lastSlot = slot;
        job.lastRunMono = mono;
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
    job.task = task;
    this.#jobs.set(key, job);
    this.#watchClock();
  }

  /** Starts the clock watch with the first job. */
  #watchClock(): void {
    if (this.#watch) return;
    this.#offset = Date.now() - performance.now();
    this.#watch = setInterval(() => {
      const offset = Date.now() - performance.now();
      const jump = offset - this.#offset;
      this.#offset = offset;
      if (Math.abs(jump) <= JUMP_MS) return;
      this.deps.log.warn(
        { jumpMs: Math.round(jump), jobs: this.#jobs.size },
        'wall clock jumped; scheduled jobs re-armed from the new time',
      );
      for (const job of this.#jobs.values()) {
        void job.task?.stop();
        void job.task?.start();
      }
    }, this.deps.watchMs ?? 5000);
    this.#watch.unref();
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
    void job.task?.destroy();
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
        nextRun: job.task?.getNextRun()?.getTime() ?? null,
      }));
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#watch);
    this.#watch = undefined;
    for (const key of [...this.#jobs.keys()]) this.cancel(key);
  }
}
