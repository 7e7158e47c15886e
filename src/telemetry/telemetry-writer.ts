import type { Logger } from 'pino';
import { UnavailableError } from '../errors.js';
import type { TsEntry } from './telemetry-parser.js';
import type { TelemetryStore, WriteItem } from './telemetry-store.js';

/** Points of one device that were committed together. */
export interface CommittedItem extends WriteItem {
  readonly deviceId: string;
  /** A device uplink (`TelemetryService.ingestPoints`), not a server-side write. */
  readonly uplink?: boolean;
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
  /** The open range is sealed into blocks at least this often (default 600,000 ms) ... */
  readonly flushIntervalMs?: number;
  /** ... or once a series holds this many open points (default 3,600) ... */
  readonly blockPoints?: number;
  /** ... or once this many points are open in all (default 200,000: memory). */
  readonly openMaxPoints?: number;
  /** Points sealed per turn of the event loop (default 20,000: a short pause for commits). */
  readonly sealSlicePoints?: number;
  /**
   * Runs inside each commit's transaction, after the points, with the items kept (arrival
   * order). Rows it writes (an outbox) commit with the points or not at all; if it throws, the
   * batch is rolled back and every caller rejected. Keep it short and synchronous: every
   * acknowledgement of the batch waits for it.
   */
  readonly inCommit?: (items: readonly CommittedItem[]) => void;
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
  #sealTimer: NodeJS.Timeout | undefined;
  #sealImmediate: NodeJS.Immediate | undefined;
  /** Points still to seal in the current round of slices. */
  #sealLeft = 0;
  #stopped = false;
  #batches = 0;
  #points = 0;
  /** The devices of the last batch, and those of them queued again since. */
  #lastRids = new Set<number>();
  readonly #returned = new Set<number>();

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
  write(rid: number, deviceId: string, points: readonly TsEntry[], uplink = false): Promise<void> {
    if (this.#stopped) return Promise.reject(new UnavailableError('Telemetry writer is stopped'));
    if (points.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ rid, deviceId, points, uplink, resolve, reject });
      this.#queued += points.length;
      if (this.#lastRids.has(rid)) this.#returned.add(rid);
      if (this.#queued >= this.#deps.maxBatchPoints || this.#callersBack()) this.#scheduleNow();
      else this.#schedule();
    });
  }

  /** Commits everything queued now, in batches. */
  flush(): void {
    this.#clearTimers();
    while (this.#queue.length > 0) this.#commitBatch();
  }

  /** Commits what is queued, seals the open range, and refuses further writes. Safe to call twice. */
  stop(): void {
    this.#stopped = true;
    this.flush();
    this.#clearSealTimers();
    try {
      this.#deps.store.settle();
    } catch (err) {
      // The points stay in the log, which the next start reads.
      this.#deps.log.error({ err }, 'telemetry seal failed');
    }
  }

  /**
   * Callers that wait for their acknowledgement before they send again (HTTP requests, MQTT
   * clients with a window of publishes in flight) are all back once most devices of the last
   * batch are queued again: lingering longer would only slow them down, so the batch goes now.
   * Devices that report on their own clock (a plant floor) are not back so soon: their batch
   * lingers, and a commit holds many of them.
   */
  #callersBack(): boolean {
    return this.#lastRids.size > 0 && this.#returned.size * 10 >= this.#lastRids.size * 9;
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
      dropped = this.#deps.store.write(batch, this.#deps.inCommit).dropped;
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
    this.#lastRids = new Set(batch.map((j) => j.rid));
    this.#returned.clear();
    for (const job of this.#queue) if (this.#lastRids.has(job.rid)) this.#returned.add(job.rid);
    this.#scheduleSeal();
    for (const job of batch) job.resolve();
    try {
      this.#deps.onCommit?.(dropped.size > 0 ? batch.filter((j) => !dropped.has(j.rid)) : batch);
    } catch (err) {
      this.#deps.log.error({ err }, 'telemetry commit listener failed');
    }
  }

  /**
   * Sealing the open range into compressed blocks is rare and large: after `flushIntervalMs`, or
   * once a series holds `blockPoints` open points or the open range `openMaxPoints`. A round seals
   * everything open at its start, in slices of `sealSlicePoints` (oldest series first), one
   * transaction per turn of the event loop, so commits keep running between slices.
   */
  #scheduleSeal(): void {
    if (this.#sealImmediate) return;
    const { store } = this.#deps;
    const open = store.stagedPoints;
    if (open === 0) return;
    if (
      open >= (this.#deps.openMaxPoints ?? 200_000) ||
      store.largestOpenSeries >= (this.#deps.blockPoints ?? 3_600)
    ) {
      this.#startRound();
      return;
    }
    if (this.#sealTimer) return;
    const age = performance.now() - (store.openSince ?? performance.now());
    const wait = Math.max(0, (this.#deps.flushIntervalMs ?? 600_000) - age);
    this.#sealTimer = setTimeout(() => {
      this.#sealTimer = undefined;
      this.#startRound();
    }, wait);
    this.#sealTimer.unref();
  }

  #startRound(): void {
    if (this.#sealTimer) clearTimeout(this.#sealTimer);
    this.#sealTimer = undefined;
    this.#sealLeft = this.#deps.store.stagedPoints;
    this.#sealImmediate ??= setImmediate(() => this.#sealSlice());
  }

  #sealSlice(): void {
    this.#sealImmediate = undefined;
    const { store } = this.#deps;
    const before = store.stagedPoints;
    try {
      store.settle(this.#deps.sealSlicePoints ?? 20_000);
    } catch (err) {
      // The points stay in the log (and open): the next commit schedules another round.
      this.#deps.log.error({ err, open: store.stagedPoints }, 'telemetry seal failed');
      this.#sealLeft = 0;
      return;
    }
    this.#sealLeft -= before - store.stagedPoints;
    if (this.#stopped) return;
    if (this.#sealLeft > 0 && store.stagedPoints > 0) {
      this.#sealImmediate = setImmediate(() => this.#sealSlice());
    } else this.#scheduleSeal();
  }

  #clearSealTimers(): void {
    if (this.#sealTimer) clearTimeout(this.#sealTimer);
    if (this.#sealImmediate) clearImmediate(this.#sealImmediate);
    this.#sealTimer = undefined;
    this.#sealImmediate = undefined;
  }
}
