import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { GatewayMsg, MessageProcessor } from './types.js';

/**
 * What waits in the queue: a message, or the messages of one uplink built when their turn comes
 * (a telemetry payload becomes one message per timestamp; building them off the acknowledgement
 * path keeps that work after the device's reply).
 */
export type PendingMsg = GatewayMsg | (() => readonly GatewayMsg[]);

export interface MessagePipelineDeps {
  readonly log: Logger;
  /** Most entries waiting; past it the oldest is dropped and counted. */
  readonly capacity: number;
  readonly processor?: MessageProcessor;
  /**
   * Longest a drain holds the event loop (default 20 ms): a turn hands over the entries queued
   * when it began, unless this runs out first, so I/O (acknowledgements) interleaves.
   */
  readonly turnBudgetMs?: number;
  /** Drops and failures are logged at most once per this interval (default 10 s), with counts. */
  readonly logIntervalMs?: number;
  readonly now?: () => number;
}

export interface MessagePipelineStats {
  /** Entries waiting now. */
  readonly queued: number;
  readonly capacity: number;
  /** Entries accepted since start. */
  readonly submitted: number;
  /** Messages handed to the processor. */
  readonly processed: number;
  /** Entries dropped because the queue was full (oldest first). */
  readonly dropped: number;
  /** Messages whose processing threw (or whose building threw). */
  readonly failed: number;
}

/** The default processor until the alarm engine and rule chains plug in: logs at trace level. */
export function loggingProcessor(log: Logger): MessageProcessor {
  return {
    process(msg) {
      if (log.isLevelEnabled('trace')) {
        log.trace(
          { msgType: msg.type, originator: msg.originator, metadata: msg.metadata },
          'message',
        );
      }
    },
  };
}

/**
 * The road from a commit to the one processing entry point (GUIDE: "After commit, every message
 * goes to one processing entry point"): a bounded FIFO drained on a later turn of the event loop,
 * so `submit` costs a push and never delays the acknowledgement it follows. A processor that
 * throws is logged and counted; the committed data it came from is not touched, the gateway goes
 * on. When the queue is full the oldest entry is dropped (STYLE §12) and counted; drops and
 * failures are logged at most once per interval (a burst makes one line, with its count).
 */
export class MessagePipeline {
  readonly #deps: MessagePipelineDeps;
  #processor: MessageProcessor;
  /** A ring buffer of `capacity` slots. */
  readonly #ring: Array<PendingMsg | undefined>;
  #head = 0;
  #size = 0;
  #scheduled: NodeJS.Immediate | undefined;
  #stopped = false;
  #submitted = 0;
  #processed = 0;
  #dropped = 0;
  #failed = 0;
  readonly #dropLog: RateLimitedLog;
  readonly #failLog: RateLimitedLog;

  constructor(deps: MessagePipelineDeps) {
    if (!Number.isInteger(deps.capacity) || deps.capacity < 1) {
      throw new RangeError(`message queue capacity must be a positive integer: ${deps.capacity}`);
    }
    this.#deps = deps;
    this.#processor = deps.processor ?? loggingProcessor(deps.log);
    this.#ring = new Array<PendingMsg | undefined>(deps.capacity);
    const interval = deps.logIntervalMs ?? 10_000;
    const now = deps.now ?? Date.now;
    this.#dropLog = new RateLimitedLog(interval, now);
    this.#failLog = new RateLimitedLog(interval, now);
  }

  /** Plugs in the processing entry point (the alarm engine, then the rule engine). */
  setProcessor(processor: MessageProcessor): void {
    this.#processor = processor;
  }

  get processor(): MessageProcessor {
    return this.#processor;
  }

  /**
   * Queues a message (or a builder of messages) for the processor. Never throws, never waits;
   * returns false when the queue was full and the oldest entry made room for this one.
   */
  submit(entry: PendingMsg): boolean {
    if (this.#stopped) return false;
    const cap = this.#ring.length;
    let room = true;
    if (this.#size === cap) {
      // Drop the oldest: the newest state of a device matters more than a stale one.
      this.#ring[this.#head] = undefined;
      this.#head = (this.#head + 1) % cap;
      this.#size--;
      this.#dropped++;
      const n = this.#dropLog.hit();
      if (n > 0) {
        this.#deps.log.warn(
          { capacity: cap, dropped: n, total: this.#dropped },
          'message queue full: the oldest messages were dropped',
        );
      }
      room = false;
    }
    this.#ring[(this.#head + this.#size) % cap] = entry;
    this.#size++;
    this.#submitted++;
    this.#scheduled ??= setImmediate(() => this.#drain());
    return room;
  }

  stats(): MessagePipelineStats {
    return {
      queued: this.#size,
      capacity: this.#ring.length,
      submitted: this.#submitted,
      processed: this.#processed,
      dropped: this.#dropped,
      failed: this.#failed,
    };
  }

  /** Hands every queued entry to the processor now (stop, tests). */
  flush(): void {
    if (this.#scheduled) clearImmediate(this.#scheduled);
    this.#scheduled = undefined;
    while (this.#size > 0) this.#take(this.#size);
    this.#endBatch();
  }

  /** Processes what is queued, then refuses new entries. Safe to call twice. */
  stop(): void {
    this.flush();
    this.#stopped = true;
  }

  #drain(): void {
    this.#scheduled = undefined;
    // What arrived before this turn, so the drain keeps up with any rate of producers; a slow
    // processor is cut off by the budget, and what it leaves waits for the next turn.
    const deadline = performance.now() + (this.#deps.turnBudgetMs ?? 20);
    let left = this.#size;
    while (left > 0 && this.#size > 0) {
      const n = Math.min(left, 64);
      this.#take(n);
      left -= n;
      if (performance.now() >= deadline) break;
    }
    this.#endBatch();
    if (this.#size > 0) this.#scheduled = setImmediate(() => this.#drain());
  }

  #endBatch(): void {
    try {
      this.#processor.endBatch?.();
    } catch (err) {
      this.#fail(err, undefined);
    }
  }

  #take(max: number): void {
    const cap = this.#ring.length;
    for (let n = 0; n < max && this.#size > 0; n++) {
      const entry = this.#ring[this.#head] as PendingMsg;
      this.#ring[this.#head] = undefined;
      this.#head = (this.#head + 1) % cap;
      this.#size--;
      if (typeof entry === 'function') {
        let msgs: readonly GatewayMsg[];
        try {
          msgs = entry();
        } catch (err) {
          this.#fail(err, undefined);
          continue;
        }
        for (const msg of msgs) this.#process(msg);
      } else {
        this.#process(entry);
      }
    }
  }

  #process(msg: GatewayMsg): void {
    this.#processed++;
    try {
      this.#processor.process(msg);
    } catch (err) {
      this.#fail(err, msg);
    }
  }

  #fail(err: unknown, msg: GatewayMsg | undefined): void {
    this.#failed++;
    // The first failure of an interval is logged with its error; the count is in stats().
    const n = this.#failLog.hit();
    if (n > 0) {
      this.#deps.log.error(
        { err, msgType: msg?.type, originator: msg?.originator, failed: n, total: this.#failed },
        'message processing failed',
      );
    }
  }
}

/**
 * At most one log line per interval: `hit()` answers how many events the line should report
 * (this one and those held back since the last line), or 0 when it is not yet time.
 */
class RateLimitedLog {
  #last = Number.NEGATIVE_INFINITY;
  #held = 0;

  constructor(
    private readonly intervalMs: number,
    private readonly now: () => number,
  ) {}

  hit(): number {
    this.#held++;
    const now = this.now();
    if (now - this.#last < this.intervalMs) return 0;
    this.#last = now;
    const n = this.#held;
    this.#held = 0;
    return n;
  }
}
