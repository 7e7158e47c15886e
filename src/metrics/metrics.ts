import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Labels of one sample of a gauge: `{ transport: 'mqtt' }`. */
export type Labels = Readonly<Record<string, string>>;

/**
 * A gauge whose value is read when Prometheus scrapes: a number, or one value per label set.
 * Subsystems that arrive later (rule-chain queues, alarms, outboxes) register theirs with
 * `Metrics.gauge` from the composition root; the metric name starts with `edge_`.
 */
export interface GaugeSpec {
  readonly name: string;
  readonly help: string;
  readonly labelNames?: readonly string[];
  /** A counter kept elsewhere (a running total) rather than a level; default gauge. */
  readonly type?: 'gauge' | 'counter';
  readonly collect: () => number | ReadonlyArray<readonly [Labels, number]>;
}

/** Counts a device message that the core accepted, by transport and message type. */
export type IngestMeter = (transport: string, type: string) => void;

/**
 * The gateway's Prometheus metrics: one `Registry` per gateway (never prom-client's global
 * one), built in the composition root. Counters are incremented on the hot paths; everything
 * else is a gauge read at scrape time, so an idle gateway does no work for its metrics.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly #ingest: Counter<'transport' | 'type'>;
  readonly #commitSeconds: Histogram;
  readonly #commitFailures: Counter;
  #loop: ReturnType<typeof monitorEventLoopDelay> | undefined;

  constructor() {
    const registers = [this.registry];
    this.#ingest = new Counter({
      name: 'edge_ingest_messages_total',
      help: 'Device messages accepted, by transport and message type',
      labelNames: ['transport', 'type'],
      registers,
    });
    this.#commitSeconds = new Histogram({
      name: 'edge_telemetry_commit_seconds',
      help: 'Duration of one telemetry group commit (one SQLite transaction)',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    });
    this.#commitFailures = new Counter({
      name: 'edge_telemetry_commit_failures_total',
      help: 'Telemetry group commits that failed (their points were refused)',
      registers,
    });
    this.gauge({
      name: 'process_resident_memory_bytes',
      help: 'Resident memory size in bytes',
      collect: () => process.memoryUsage.rss(),
    });
    this.gauge({
      name: 'nodejs_heap_size_used_bytes',
      help: 'V8 heap in use, in bytes',
      collect: () => process.memoryUsage().heapUsed,
    });
    this.gauge({
      name: 'nodejs_heap_size_total_bytes',
      help: 'V8 heap reserved, in bytes',
      collect: () => process.memoryUsage().heapTotal,
    });
    this.gauge({
      name: 'nodejs_eventloop_lag_seconds',
      help: 'Event-loop delay since the previous scrape: mean, p99 and max',
      labelNames: ['stat'],
      collect: () => {
        const h = this.#loop;
        if (!h || h.count === 0) return [];
        const out: Array<[Labels, number]> = [
          [{ stat: 'mean' }, h.mean / 1e9],
          [{ stat: 'p99' }, h.percentile(99) / 1e9],
          [{ stat: 'max' }, h.max / 1e9],
        ];
        h.reset();
        return out;
      },
    });
  }

  /** Starts sampling the event-loop delay (a libuv timer every 20 ms). */
  start(): void {
    if (this.#loop) return;
    this.#loop = monitorEventLoopDelay({ resolution: 20 });
    this.#loop.enable();
  }

  stop(): void {
    this.#loop?.disable();
    this.#loop = undefined;
  }

  readonly ingest: IngestMeter = (transport, type) => {
    this.#ingest.inc({ transport, type });
  };

  /** One telemetry commit: its duration, or that it failed. */
  readonly commit = (ms: number, ok: boolean): void => {
    if (ok) this.#commitSeconds.observe(ms / 1000);
    else this.#commitFailures.inc();
  };

  /** Registers a gauge (or a counter kept elsewhere) read at scrape time (see GaugeSpec). */
  gauge(spec: GaugeSpec): void {
    if (spec.type === 'counter') {
      new Counter({
        name: spec.name,
        help: spec.help,
        labelNames: [...(spec.labelNames ?? [])],
        registers: [this.registry],
        collect() {
          const v = spec.collect();
          this.reset();
          if (typeof v === 'number') this.inc(v);
          else for (const [labels, value] of v) this.inc(labels, value);
        },
      });
      return;
    }
    new Gauge({
      name: spec.name,
      help: spec.help,
      labelNames: [...(spec.labelNames ?? [])],
      registers: [this.registry],
      collect() {
        const v = spec.collect();
        if (typeof v === 'number') {
          this.set(v);
          return;
        }
        // Label sets that went away (a closed listener) must not linger.
        this.reset();
        for (const [labels, value] of v) this.set(labels, value);
      },
    });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The Prometheus text exposition of every metric. */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}
