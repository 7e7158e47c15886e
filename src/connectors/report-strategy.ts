import { z } from 'zod';

/**
 * The IoT Gateway's `reportStrategy` (connectors reference §6): which readings are sent on.
 * Precedence: the key's entry, then the slave, then the connector file; none means every value
 * (ON_RECEIVED). ON_CHANGE sends a value that differs from the last one; ON_REPORT_PERIOD sends
 * the first value, then re-sends the newest every `reportPeriod` with the current time;
 * ON_CHANGE_OR_REPORT_PERIOD does both; DISABLED turns the filter off. A key not updated for
 * `ttl` seconds is forgotten (its next value counts as a first one). `aggregationFunction` is
 * accepted and not applied, as in the IoT Gateway.
 */
export const REPORT_TYPES = [
  'ON_RECEIVED',
  'ON_CHANGE',
  'ON_REPORT_PERIOD',
  'ON_CHANGE_OR_REPORT_PERIOD',
  'DISABLED',
] as const;
export type ReportType = (typeof REPORT_TYPES)[number];

export interface ReportStrategy {
  readonly type: ReportType;
  readonly periodMs: number;
  readonly ttlMs: number;
}

const DEFAULT_PERIOD_MS = 10_000;
const DEFAULT_TTL_S = 86_400;

export const reportStrategySchema = z
  .looseObject({
    type: z
      .string()
      .transform((s) => s.toUpperCase())
      .pipe(z.enum(REPORT_TYPES, { error: `must be one of ${REPORT_TYPES.join(', ')}` })),
    reportPeriod: z.number().int().min(100, 'must be at least 100 (ms)').optional(),
    ttl: z.number().int().min(1, 'must be at least 1 (s)').optional(),
    aggregationFunction: z
      .enum(['NONE', 'SUM', 'COUNT', 'MIN', 'MAX', 'AVERAGE'], {
        error: 'must be NONE, SUM, COUNT, MIN, MAX or AVERAGE',
      })
      .optional(),
  })
  .transform(
    (r): ReportStrategy => ({
      type: r.type,
      periodMs: r.reportPeriod ?? DEFAULT_PERIOD_MS,
      ttlMs: (r.ttl ?? DEFAULT_TTL_S) * 1000,
    }),
  );

/** Whether a strategy re-sends on a period (the connector then runs a timer). */
export function periodic(s: ReportStrategy | undefined): boolean {
  return s?.type === 'ON_REPORT_PERIOD' || s?.type === 'ON_CHANGE_OR_REPORT_PERIOD';
}

interface Cached {
  value: unknown;
  /** When a value last came in (TTL), and when the key was last sent (period). */
  updated: number;
  sent: number;
  readonly strategy: ReportStrategy;
}

export type ReportKind = 'telemetry' | 'attributes';

/**
 * One device's filter. Bounded by the device's configured keys: only keys with a strategy that
 * needs a memory are cached, and a key is cached once.
 */
export class ReportFilter {
  readonly #cache = new Map<string, Cached>();

  /** The values of one reading that are sent now; the others are only remembered. */
  apply(
    kind: ReportKind,
    values: Readonly<Record<string, unknown>>,
    strategyOf: (key: string) => ReportStrategy | undefined,
    now: number,
  ): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(values)) {
      const s = strategyOf(key);
      if (!s || s.type === 'ON_RECEIVED' || s.type === 'DISABLED') {
        out[key] = value;
        continue;
      }
      const id = `${kind}\u0000${key}`;
      let c = this.#cache.get(id);
      if (c && now - c.updated > c.strategy.ttlMs) c = undefined;
      const first = c === undefined;
      const changed = first || !same(c?.value, value);
      const send = first || (changed && s.type !== 'ON_REPORT_PERIOD');
      if (!c) {
        c = { value, updated: now, sent: now, strategy: s };
        this.#cache.set(id, c);
      }
      c.value = value;
      c.updated = now;
      if (send) {
        c.sent = now;
        out[key] = value;
      }
    }
    return out;
  }

  /** Periodic re-sends due at `now`: the newest value of each key whose period has passed. */
  due(now: number): Record<ReportKind, Record<string, unknown>> {
    const out: Record<ReportKind, Record<string, unknown>> = { telemetry: {}, attributes: {} };
    for (const [id, c] of this.#cache) {
      if (now - c.updated > c.strategy.ttlMs) {
        this.#cache.delete(id);
        continue;
      }
      if (!periodic(c.strategy) || now - c.sent < c.strategy.periodMs) continue;
      c.sent = now;
      const [kind, key] = id.split('\u0000') as [ReportKind, string];
      out[kind][key] = c.value;
    }
    return out;
  }
}

function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'object' && typeof b === 'object' && a !== null && b !== null)
    return JSON.stringify(a) === JSON.stringify(b);
  return false;
}
