import type { Logger } from 'pino';
import type { AlarmService } from './alarm-service.js';

export interface AlarmRetentionDeps {
  readonly alarms: Pick<AlarmService, 'purge'>;
  readonly log: Logger;
  /** Cleared alarms older than this are removed. */
  readonly maxAgeMs: number;
  /** The most alarms kept; beyond it the oldest cleared ones go first. */
  readonly maxCount: number;
  readonly intervalMs?: number;
  readonly now?: () => number;
}

/**
 * The alarm table's bound (issue 13 item 11): a periodic job removes alarms cleared longer ago
 * than the retention age, then the oldest cleared alarms while the count is above the cap.
 * Uncleared alarms are never removed: there is at most one per device and alarm type. What it
 * removed is counted (`stats`) and logged.
 */
export class AlarmRetention {
  #timer: NodeJS.Timeout | undefined;
  #stats = { runs: 0, aged: 0, capped: 0 };
  #deps: AlarmRetentionDeps;

  constructor(deps: AlarmRetentionDeps) {
    this.#deps = deps;
  }

  /** New bounds from the retention settings; the next hourly pass applies them. */
  setBounds(bounds: Pick<AlarmRetentionDeps, 'maxAgeMs' | 'maxCount'>): void {
    this.#deps = { ...this.#deps, ...bounds };
  }

  get stats(): { runs: number; aged: number; capped: number } {
    return { ...this.#stats };
  }

  start(): void {
    this.#arm(Math.min(60_000, this.#deps.intervalMs ?? 3_600_000));
  }

  stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(delay: number): void {
    this.#timer = setTimeout(() => {
      this.runOnce();
      this.#arm(this.#deps.intervalMs ?? 3_600_000);
    }, delay);
    this.#timer.unref();
  }

  /** One pass; returns what it removed. */
  runOnce(): { aged: number; capped: number } {
    const now = this.#deps.now?.() ?? Date.now();
    try {
      const r = this.#deps.alarms.purge(now - this.#deps.maxAgeMs, this.#deps.maxCount);
      this.#stats.runs++;
      this.#stats.aged += r.aged;
      this.#stats.capped += r.capped;
      if (r.aged + r.capped > 0) this.#deps.log.info(r, 'old alarms removed');
      return r;
    } catch (err) {
      this.#deps.log.error({ err }, 'alarm retention failed');
      return { aged: 0, capped: 0 };
    }
  }
}
