import type { Logger } from 'pino';
import { UnavailableError } from '../errors.js';
import type { TsEntry } from './telemetry-parser.js';
import type { TelemetryStore, WriteItem } from './telemetry-store.js';

/** Points of one device that were committed together. */
export interface CommittedItem extends WriteItem {
  readonly deviceId: string;
}

export interface TelemetryWriterDeps {
  readonly store: TelemetryStore;
  readonly log: Logger;
  /** Longest a point waits for its batch (0 = next turn of the event loop). */
  readonly maxWaitMs: number;
  /**
   * How long a batch lingers for more points before its commit, capped by `maxWaitMs`. 0 (the
   * default) commits at the next turn of the event loop: under load a batch is whatever arrived
   * while the previous commit ran, so batches grow with the load and latency stays low.
   */
  readonly lingerMs?: number;
  /** A batch is committed as soon as it holds this many points. */
  readonly maxBatchPoints: number;
  /**
   * Staged points are moved into the time-series table in slices of about this many points
   * (default 5,000: 10-30 ms of work between two commits) ...
   */
  readonly settlePoints?: number;
  /**
   * ... or of this many (default 30,000) while a move holds up so few callers that under 1 % of
   * the acknowledgements wait for one (the batch after a move holds at most 1/100 of it) ...
   */
  readonly settleQuietPoints?: number;
  /** ... or of this many while commits queue up behind the writer (default 100,000) ... */
  readonly settleBulkPoints?: number;
  /** ... and all of them once the oldest has waited this long (default 2,000 ms). */
  readonly settleMaxAgeMs?: number;
  /** Called after each commit with the committed items, in arrival order. */
  readonly onCommit?: (items: readonly CommittedItem[]) => void;
  /** Called after each commit attempt with its duration and outcome (metrics, health). */
  readonly onCommitTiming?: (ms: number, ok: boolean) => void;
}

interface Job extends CommittedItem {
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * Group commit: collects points from every transport and writes them in one transaction per
 * batch. A caller's promise resolves only after the transaction that holds its points has
 * committed, so a transport acknowledges only stored data; if the commit fails, every caller of
 * that batch is rejected. One payload is never split across transactions.
 */
export class TelemetryWriter {
  readonly #deps: TelemetryWriterDeps;
  #queue: Job[] = [];
  /** The last commit failed for a full disk (logged once). */
  #diskFull = false;
  #queued = 0;
  #timer: NodeJS.Timeout | undefined;
  #immediate: NodeJS.Immediate | undefined;
  #settleTimer: NodeJS.Timeout | undefined;
  #settleImmediate: NodeJS.Immediate | undefined;
  #stopped = false;
  #batches = 0;
  #points = 0;
  /** Points of the first batch after a move (the callers a move held up), a decaying maximum. */
  #heldPoints: number | undefined;
  #moved = false;

  constructor(deps: TelemetryWriterDeps) {
    this.#deps = deps;
  }

  /** Points waiting for their commit. */
  get pending(): number {
    return this.#queued;
  }

  get stats(): { batches: number; points: number } {
    return { batches: this.#batches, points: this.#points };
  }

  /** Queues the points of one device; resolves after they are committed. */
  write(rid: number, deviceId: string, points: readonly TsEntry[]): Promise<void> {
    if (this.#stopped) return Promise.reject(new UnavailableError('Telemetry writer is stopped'));
    if (points.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ rid, deviceId, points, resolve, reject });
      this.#queued += points.length;
      if (this.#queued >= this.#deps.maxBatchPoints) this.#scheduleNow();
      else this.#schedule();
    });
  }

  /** Commits everything queued now, in batches. */
  flush(): void {
    this.#clearTimers();
    while (this.#queue.length > 0) this.#commitBatch();
  }

  /** Commits what is queued, moves staged points, and refuses further writes. Safe to call twice. */
  stop(): void {
    this.#stopped = true;
    this.flush();
    this.#settle();
  }

  #schedule(): void {
    if (this.#timer || this.#immediate) return;
    const delay = Math.min(this.#deps.lingerMs ?? 0, this.#deps.maxWaitMs);
    if (delay <= 0) this.#scheduleNow();
    else this.#timer = setTimeout(() => this.#onTimer(), delay);
  }

  #scheduleNow(): void {
    if (this.#immediate) return;
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    this.#immediate = setImmediate(() => this.#onTimer());
  }

  #clearTimers(): void {
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#immediate) clearImmediate(this.#immediate);
    this.#timer = undefined;
    this.#immediate = undefined;
  }

  #onTimer(): void {
    this.#timer = undefined;
    this.#immediate = undefined;
    this.#commitBatch();
    if (this.#queue.length === 0) return;
    if (this.#queued >= this.#deps.maxBatchPoints) this.#scheduleNow();
    else this.#schedule();
  }

  /** Takes jobs up to the batch size (at least one) and commits them in one transaction. */
  #commitBatch(): void {
    if (this.#queue.length === 0) return;
    let take = 0;
    let points = 0;
    while (
      take < this.#queue.length &&
      (take === 0 || points + this.#queue[take].points.length <= this.#deps.maxBatchPoints)
    ) {
      points += this.#queue[take].points.length;
      take++;
    }
    const batch = this.#queue.slice(0, take);
    this.#queue = this.#queue.slice(take);
    this.#queued -= points;
    let dropped: ReadonlySet<number>;
    const started = performance.now();
    try {
      dropped = this.#deps.store.write(batch).dropped;
    } catch (err) {
      this.#deps.onCommitTiming?.(performance.now() - started, false);
      const full = (err as { code?: unknown }).code === 'SQLITE_FULL';
      // A full disk is logged once until a commit succeeds again; the writes are refused (507).
      if (!full)
        this.#deps.log.error({ err, points, jobs: batch.length }, 'telemetry commit failed');
      else if (!this.#diskFull) {
        this.#diskFull = true;
        this.#deps.log.error(
          { err },
          'disk full: telemetry writes are refused until space returns',
        );
      }
      for (const job of batch) job.reject(err);
      return;
    }
    this.#deps.onCommitTiming?.(performance.now() - started, true);
    if (this.#diskFull) {
      this.#diskFull = false;
      this.#deps.log.info('disk has space again: telemetry writes resumed');
    }
    this.#batches++;
    this.#points += points;
    if (this.#moved) {
      this.#moved = false;
      // A decaying maximum: one small batch after a move does not mean small ones.
      this.#heldPoints = Math.max(points, 0.9 * (this.#heldPoints ?? 0));
    }
    this.#scheduleSettle();
    for (const job of batch) job.resolve();
    try {
      this.#deps.onCommit?.(dropped.size > 0 ? batch.filter((j) => !dropped.has(j.rid)) : batch);
    } catch (err) {
      this.#deps.log.error({ err }, 'telemetry commit listener failed');
    }
  }

  /**
   * Moving staged points into the time-series table is the expensive part of a write (one
   * B-tree leaf per series, whatever the number of points), so it runs off the acknowledgement
   * path, between commits, in slices. A move holds up every caller whose points arrive while
   * it runs; they make up the first batch after it:
   * - while commits queue up, slices are large (fewer pages written per point);
   * - while that batch is small (few callers at a time, e.g. 50 HTTP devices with one request
   *   each), slices of 30,000 points are rare enough that under 1 % of the acknowledgements
   *   wait for one (bench:http p99 16-19 ms instead of 38-44);
   * - otherwise (hundreds of MQTT messages in flight: any move holds up many), slices of 5,000
   *   points keep each pause short.
   * A trickle is moved after `settleMaxAgeMs`.
   */
  #scheduleSettle(): void {
    const staged = this.#deps.store.stagedPoints;
    const slice = this.#slice();
    if (staged >= slice) {
      this.#settleImmediate ??= setImmediate(() => this.#settle(slice));
    } else if (staged > 0 && !this.#settleTimer) {
      this.#settleTimer = setTimeout(() => this.#settle(), this.#deps.settleMaxAgeMs ?? 2_000);
      this.#settleTimer.unref();
    }
  }

  #slice(): number {
    if (this.#queued >= this.#deps.maxBatchPoints) return this.#deps.settleBulkPoints ?? 100_000;
    const quiet = this.#deps.settleQuietPoints ?? 30_000;
    if ((this.#heldPoints ?? 0) * 100 <= quiet) return quiet;
    return this.#deps.settlePoints ?? 5_000;
  }

  #settle(maxPoints?: number): void {
    if (this.#settleTimer) clearTimeout(this.#settleTimer);
    if (this.#settleImmediate) clearImmediate(this.#settleImmediate);
    this.#settleTimer = undefined;
    this.#settleImmediate = undefined;
    const staged = this.#deps.store.stagedPoints;
    try {
      this.#deps.store.settle(maxPoints);
    } catch (err) {
      // The points stay staged (and are moved before any read); the next commit retries.
      this.#deps.log.error({ err, staged: this.#deps.store.stagedPoints }, 'telemetry move failed');
      return;
    }
    if (this.#deps.store.stagedPoints < staged) this.#moved = true;
    if (!this.#stopped) this.#scheduleSettle();
  }
}
