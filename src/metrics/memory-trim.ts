import { performance } from 'node:perf_hooks';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Logger } from '../logger.js';

/** What the trimmer reads of V8's heap: committed and live bytes. */
export interface HeapSize {
  /** Bytes V8 holds for its heap (`total_heap_size`), live objects or not. */
  readonly committed: number;
  /** Bytes of objects in it (`used_heap_size`), garbage not yet collected included. */
  readonly used: number;
}

export interface MemoryTrimOptions {
  /**
   * Trim once the heap, or the resident set, has grown this many bytes above what it held after
   * the last trim; 0: never.
   */
  readonly growthBytes: number;
  /** How often the heap and the event loop are looked at. */
  readonly checkMs: number;
  /** The event loop counts as quiet below this share of busy time since the previous check. */
  readonly quietUtilization: number;
  /**
   * A trim waits until the event loop has been quiet this long (every look since under
   * `quietUtilization`); the first one after start needs one quiet look.
   */
  readonly quietMs: number;
  /** At least this long between two trims. */
  readonly minGapMs: number;
}

export const MEMORY_TRIM_DEFAULTS: MemoryTrimOptions = {
  growthBytes: 32 * 1024 * 1024,
  checkMs: 2_000,
  quietUtilization: 0.05,
  quietMs: 30_000,
  minGapMs: 10_000,
};

export interface MemoryTrimDeps {
  readonly log: Logger;
  readonly options?: Partial<MemoryTrimOptions>;
  /** Tests: a controlled heap, event loop, collector and clock; default the process's own. */
  readonly probe?: {
    readonly heap: () => HeapSize;
    /** Share of the time since the previous call the event loop was busy (0-1). */
    readonly utilization: () => number;
    readonly collect: () => void;
    readonly now: () => number;
  };
  /**
   * glibc's `malloc_trim(0)` (the native addon's), run after each collection: the malloc arenas
   * keep what the burst's native allocations (sockets, TLS, SQLite, V8's own) freed; 1 when it gave
   * memory back. Without it only V8's heap is trimmed.
   */
  readonly mallocTrim?: () => number;
  /** Resident set size in bytes, for the log line (default the process's). */
  readonly rss?: () => number;
}

/**
 * Gives the memory of a burst back once the gateway is quiet again.
 *
 * @NOTE: V8 keeps the pages its heap grew into: after 5,000 devices were created over REST and
 * 5,000 MQTT clients connected, the heap held 158 MB committed for 62 MB in use, and the RSS stayed
 * at its peak (352 MB) while the connections sat idle, with forced full collections included (a
 * regular one frees objects, not pages); V8's own memory reducer gave nothing back in the 45 s
 * measured. A last-resort
 * collection (`gc({ flavor: 'last-resort' })`: full collections with V8's reduce-memory flag,
 * which shrinks the young generation to its minimum and hands the freed pages back) brought the
 * same process to 208 MB. It stops the event loop for a few hundred milliseconds, so it runs only
 * after the heap grew by `growthBytes` since the last trim and while the event loop is quiet (a
 * loaded gateway never trims), at most once per `minGapMs` (docs/benchmarks.md, "5,000 idle
 * connections on Node 24").
 *
 * @NOTE: a trim also shrinks V8's young generation to its 1 MiB minimum, and V8 grows it back
 * only as load comes (within seconds at 5,000 msg/s). Trimming after every short lull therefore
 * cost CPU: with loads that paused for a few seconds the gateway trimmed in each pause and ran
 * each burst's start on a small young generation (about 40 against 20 µs per MQTT message). So
 * after the first trim (start-up, one quiet look) a trim waits for `quietMs` of quiet: a box
 * whose load pauses briefly keeps its heap, one that went idle gives it back (docs/benchmarks.md,
 * "The floor, malloc, per-connection heap and the trim by default").
 */
export class MemoryTrim {
  readonly #log: Logger;
  readonly #opts: MemoryTrimOptions;
  readonly #probe: NonNullable<MemoryTrimDeps['probe']>;
  #timer: NodeJS.Timeout | undefined;
  /** Committed heap after the last trim (0 before the first): growth is measured from here. */
  #baseline = 0;
  /**
   * Resident set size after the last trim (before the first: the lowest seen); growth above it
   * counts as the heap's does.
   *
   * @NOTE: a burst also leaves memory outside V8's heap (malloc arenas of sockets, TLS, SQLite),
   * and V8 may shrink its committed heap by itself below the threshold meanwhile. In a 1 GB memory
   * cgroup 5,000 idle MQTT connections left the gateway at 163-174 MB with the committed heap 23.6
   * MiB above its last trim, so no trim ran; the resident size had grown about 72 MiB
   * (docs/benchmarks.md, "5,000 idle MQTT connections: lighter connections, lazy Protobuf, a trim
   * that sees malloc").
   */
  #rssBaseline = Number.POSITIVE_INFINITY;
  #lastTrimAt = Number.NEGATIVE_INFINITY;
  /** When the previous look was taken. */
  #lastLookAt = 0;
  /** Since when every look found the event loop quiet; undefined while it is busy. */
  #quietSince: number | undefined;
  #trims = 0;
  #freedBytes = 0;
  readonly #mallocTrim: (() => number) | undefined;
  readonly #rss: () => number;

  constructor(deps: MemoryTrimDeps) {
    this.#log = deps.log;
    this.#opts = { ...MEMORY_TRIM_DEFAULTS, ...deps.options };
    this.#probe = deps.probe ?? processProbe();
    this.#mallocTrim = deps.mallocTrim;
    this.#rss = deps.rss ?? (() => process.memoryUsage.rss());
  }

  /** Trims done and heap bytes they gave back (for /metrics). */
  get stats(): { trims: number; freedBytes: number } {
    return { trims: this.#trims, freedBytes: this.#freedBytes };
  }

  start(): void {
    if (this.#timer || this.#opts.growthBytes <= 0) return;
    // @NOTE: start-up is a burst too (modules evaluated, migrations, listeners): growth is
    // counted from an empty heap, so the first quiet look after start trims it (bench:idle).
    this.#baseline = 0;
    this.#probe.utilization();
    this.#lastLookAt = this.#probe.now();
    this.#quietSince = undefined;
    this.#timer = setInterval(() => this.check(), this.#opts.checkMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One look (the timer's tick); true when it trimmed. */
  check(): boolean {
    if (this.#opts.growthBytes <= 0) return false;
    const busy = this.#probe.utilization();
    const now = this.#probe.now();
    // This look covers the time since the previous one.
    if (busy >= this.#opts.quietUtilization) this.#quietSince = undefined;
    else this.#quietSince ??= this.#lastLookAt;
    this.#lastLookAt = now;
    const before = this.#probe.heap();
    // A heap that shrank by itself (V8's own memory reducer) is the new baseline.
    if (before.committed < this.#baseline) this.#baseline = before.committed;
    const rssBefore = this.#rss();
    if (rssBefore < this.#rssBaseline) this.#rssBaseline = rssBefore;
    if (
      before.committed - this.#baseline < this.#opts.growthBytes &&
      rssBefore - this.#rssBaseline < this.#opts.growthBytes
    )
      return false;
    if (this.#quietSince === undefined) return false;
    if (this.#trims > 0 && now - this.#quietSince < this.#opts.quietMs) return false;
    if (now - this.#lastTrimAt < this.#opts.minGapMs) return false;
    const t0 = performance.now();
    this.#probe.collect();
    const gave = this.#mallocTrim?.();
    const ms = performance.now() - t0;
    const after = this.#probe.heap();
    this.#lastTrimAt = now;
    this.#baseline = after.committed;
    this.#rssBaseline = this.#rss();
    this.#trims++;
    this.#freedBytes += Math.max(0, before.committed - after.committed);
    // The trim's own pause is not the next check's load.
    this.#probe.utilization();
    this.#log.info(
      {
        committedMb: mb(before.committed),
        usedMb: mb(before.used),
        afterMb: mb(after.committed),
        rssMb: mb(rssBefore),
        rssAfterMb: mb(this.#rssBaseline),
        mallocTrim: gave,
        ms: Math.round(ms),
      },
      'heap trimmed after a burst',
    );
    return true;
  }
}

function mb(bytes: number): number {
  return Math.round(bytes / 104857.6) / 10;
}

/** The process's heap, event loop and V8's collector. */
function processProbe(): NonNullable<MemoryTrimDeps['probe']> {
  let elu = performance.eventLoopUtilization();
  let collector: ((opts: object) => void) | undefined;
  return {
    heap: () => {
      const h = getHeapStatistics();
      return { committed: h.total_heap_size, used: h.used_heap_size };
    },
    utilization: () => {
      const next = performance.eventLoopUtilization();
      const share = performance.eventLoopUtilization(next, elu).utilization;
      elu = next;
      return share;
    },
    collect: () => {
      // @NOTE: V8's collector as a function without --expose-gc on the command line: the flag
      // only installs `gc` in contexts made after it is set, so it reaches this one context and
      // not the gateway's global scope. Made on the first trim, kept after.
      if (!collector) {
        setFlagsFromString('--expose-gc');
        collector = runInNewContext('gc') as (opts: object) => void;
      }
      collector({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    },
    now: () => performance.now(),
  };
}
