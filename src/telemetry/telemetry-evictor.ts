import type { Logger } from 'pino';
import { CHUNK_MS, type TelemetryStore } from './telemetry-store.js';

export interface TelemetryEvictorDeps {
  readonly store: TelemetryStore;
  readonly log: Logger;
  /** Ring-buffer bound on all stored points. */
  readonly maxPoints: number;
  /** Ring-buffer bound on the bytes stored (blocks and log, as `TelemetryStore.totalBytes`). */
  readonly maxBytes?: number;
  /** Bound per device; 0 = none. */
  readonly maxPointsPerDevice: number;
  /** Age limit in days; 0 = none. */
  readonly ttlDays: number;
  /** Most points deleted in one transaction. */
  readonly stepPoints?: number;
  /** Longest run of steps in one turn of the event loop. */
  readonly sliceMs?: number;
  /** How often the age limit is checked (default 60 s); 0: by the caller (`kick`). */
  readonly ttlCheckMs?: number;
  readonly now?: () => number;
}

const DAY_MS = 86_400_000;

/**
 * Keeps the stored points within their bounds, off the hot path: each step deletes at most
 * `stepPoints` points in its own short transaction, and steps run on `setImmediate`, between
 * writer batches, never inside one. Deleted pages go to SQLite's free list and are reused by
 * new points, so the file stops growing without VACUUM. Latest values are never touched.
 *
 * Once over a bound, eviction goes a little below it (`slack`, 0.1% of the bound) so that it
 * does not run after every batch.
 */
/** The bounds the retention settings change at run time (docs/telemetry.md). */
export type TelemetryBounds = Pick<
  TelemetryEvictorDeps,
  'maxPoints' | 'maxPointsPerDevice' | 'ttlDays'
>;

export class TelemetryEvictor {
  #deps: TelemetryEvictorDeps;
  readonly #step: number;
  readonly #sliceMs: number;
  #immediate: NodeJS.Immediate | undefined;
  #interval: NodeJS.Timeout | undefined;
  #running = false;
  #evicted = 0;

  constructor(deps: TelemetryEvictorDeps) {
    this.#deps = deps;
    this.#step = deps.stepPoints ?? 5000;
    this.#sliceMs = deps.sliceMs ?? 250;
  }

  get evicted(): number {
    return this.#evicted;
  }

  start(): void {
    this.#running = true;
    this.#armTtl();
    this.kick();
  }

  /** New bounds, applied from the next step (points over a lowered bound are evicted at once). */
  setBounds(bounds: TelemetryBounds): void {
    this.#deps = { ...this.#deps, ...bounds };
    if (this.#running) this.#armTtl();
    this.kick();
  }

  #armTtl(): void {
    const wanted = this.#deps.ttlDays > 0 && this.#deps.ttlCheckMs !== 0;
    if (wanted && !this.#interval) {
      this.#interval = setInterval(() => this.kick(), this.#deps.ttlCheckMs ?? 60_000);
      this.#interval.unref();
    } else if (!wanted && this.#interval) {
      clearInterval(this.#interval);
      this.#interval = undefined;
    }
  }

  stop(): void {
    this.#running = false;
    if (this.#immediate) clearImmediate(this.#immediate);
    if (this.#interval) clearInterval(this.#interval);
    this.#immediate = undefined;
    this.#interval = undefined;
  }

  /** Schedules eviction steps if a bound is exceeded. Cheap: called after every commit. */
  kick(): void {
    if (!this.#running || this.#immediate || !this.#needed()) return;
    this.#immediate = setImmediate(() => this.#run());
  }

  /** Runs steps until every bound holds. For tests, benchmarks and start-up. */
  runUntilDone(): number {
    // Open points are sealed first: eviction then sees every point.
    this.#deps.store.settle();
    let total = 0;
    for (;;) {
      const n = this.step();
      if (n === 0) return total;
      total += n;
    }
  }

  /** One eviction step; returns the number of points deleted (0 = nothing to do). */
  step(): number {
    const { store, maxPoints, maxPointsPerDevice, ttlDays } = this.#deps;
    let n = 0;
    if (ttlDays > 0) {
      // Whole chunks that ended before the age limit.
      const cutoff = this.#now() - ttlDays * DAY_MS;
      const oldest = store.oldestChunk();
      if (oldest !== undefined && (oldest + 1) * CHUNK_MS <= cutoff) {
        n = store.evictChunk(oldest, this.#step);
      }
    }
    if (n === 0 && store.totalPoints > maxPoints) {
      const oldest = this.#oldest();
      const need = store.totalPoints - maxPoints + slack(maxPoints);
      if (oldest !== undefined) n = store.evictChunk(oldest, Math.min(need, this.#step));
    }
    const maxBytes = this.#deps.maxBytes ?? 0;
    if (n === 0 && maxBytes > 0 && store.totalBytes > maxBytes) {
      // The excess in points at the average size of a stored point: whole blocks, oldest first.
      const perPoint = store.totalBytes / Math.max(1, store.totalPoints);
      const need = Math.ceil((store.totalBytes - maxBytes + slack(maxBytes)) / perPoint);
      const oldest = this.#oldest();
      if (oldest !== undefined) n = store.evictChunk(oldest, Math.min(need, this.#step));
    }
    if (n === 0 && maxPointsPerDevice > 0) {
      for (const rid of store.devicesOver(maxPointsPerDevice)) {
        const oldest = this.#oldest(rid);
        const need = store.devicePoints(rid) - maxPointsPerDevice + slack(maxPointsPerDevice);
        if (oldest !== undefined) n = store.evictChunk(oldest, Math.min(need, this.#step), rid);
        if (n > 0) break;
      }
    }
    this.#evicted += n;
    return n;
  }

  /**
   * One turn of the event loop: steps (each its own transaction) until the bounds hold or the
   * time slice is used up. Under sustained ingest the excess after a commit is at most one
   * writer batch, so eviction keeps pace with the writer and the file stops growing.
   */
  #run(): void {
    this.#immediate = undefined;
    if (!this.#running) return;
    const started = performance.now();
    let n = 0;
    try {
      for (;;) {
        const k = this.step();
        n += k;
        if (k === 0 || performance.now() - started >= this.#sliceMs) break;
      }
    } catch (err) {
      this.#deps.log.error({ err }, 'telemetry eviction failed');
      return;
    }
    if (n > 0) {
      this.#deps.log.debug({ evicted: n, stored: this.#deps.store.totalPoints }, 'evicted');
      this.kick();
    }
  }

  /**
   * The oldest chunk with sealed points (of one device or of all). Eviction drops sealed blocks;
   * only when none is left are the open points sealed (a bound smaller than the open range).
   */
  #oldest(rid?: number): number | undefined {
    const { store } = this.#deps;
    const oldest = store.oldestChunk(rid);
    if (oldest !== undefined || store.stagedPoints === 0) return oldest;
    store.settle();
    return store.oldestChunk(rid);
  }

  #needed(): boolean {
    const { store, maxPoints, maxPointsPerDevice, ttlDays } = this.#deps;
    if (store.totalPoints > maxPoints) return true;
    if ((this.#deps.maxBytes ?? 0) > 0 && store.totalBytes > (this.#deps.maxBytes ?? 0))
      return true;
    if (maxPointsPerDevice > 0 && store.devicesOver(maxPointsPerDevice).length > 0) return true;
    if (ttlDays > 0) {
      const oldest = store.oldestChunk();
      return oldest !== undefined && (oldest + 1) * CHUNK_MS <= this.#now() - ttlDays * DAY_MS;
    }
    return false;
  }

  #now(): number {
    return this.#deps.now?.() ?? Date.now();
  }
}

function slack(bound: number): number {
  return Math.floor(bound / 1000);
}
