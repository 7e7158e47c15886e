import { ValidationError } from '../errors.js';
import type { Aggregation, StoredValue } from './telemetry-store.js';

/** Most aggregation buckets one query may ask for. */
export const MAX_BUCKETS = 100_000;
/** Most raw points per key one query returns. */
export const MAX_LIMIT = 100_000;

export type TimeseriesQuery =
  | { readonly mode: 'latest'; readonly keys?: readonly string[]; readonly strict: boolean }
  | {
      readonly mode: 'history';
      readonly keys?: readonly string[];
      readonly startTs: number;
      readonly endTs: number;
      readonly agg: Aggregation | 'NONE';
      readonly interval: number;
      readonly limit: number;
      readonly orderBy: 'ASC' | 'DESC';
      readonly strict: boolean;
    };

export interface DeleteQuery {
  readonly keys: readonly string[];
  readonly startTs: number;
  readonly endTs: number;
  readonly deleteLatest: boolean;
  readonly rewriteLatest: boolean;
}

type Params = Readonly<Record<string, string | undefined>>;

const AGGS = ['NONE', 'AVG', 'MIN', 'MAX', 'SUM', 'COUNT'] as const;

/** Splits ThingsBoard's comma-separated `keys`; undefined when absent (= all keys). */
export function parseKeys(raw: string | undefined): string[] | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const keys = raw
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k !== '');
  return keys.length > 0 ? [...new Set(keys)] : undefined;
}

/**
 * Parses the parameters of `GET .../values/timeseries` (platform.md §3.8). Without `startTs`
 * and `endTs` it asks for the latest values. Every problem is reported in one 400 message.
 */
export function parseTimeseriesQuery(p: Params): TimeseriesQuery {
  const problems: string[] = [];
  const keys = parseKeys(p.keys);
  const strict = parseBool(p, 'useStrictDataTypes', false, problems);
  if (p.startTs === undefined && p.endTs === undefined) {
    if (problems.length > 0) throw new ValidationError(problems.join('; '));
    return { mode: 'latest', keys, strict };
  }
  const startTs = int(p, 'startTs', undefined, 0, problems);
  const endTs = int(p, 'endTs', undefined, 0, problems);
  if (problems.length === 0 && endTs < startTs) problems.push('endTs must not be before startTs');
  const aggRaw = (p.agg ?? 'NONE').toUpperCase();
  if (!(AGGS as readonly string[]).includes(aggRaw)) {
    problems.push(`agg must be one of ${AGGS.join(', ')}`);
  }
  const agg = aggRaw as Aggregation | 'NONE';
  const interval = int(p, 'interval', 0, 0, problems);
  const limit = int(p, 'limit', 100, 1, problems);
  if (limit > MAX_LIMIT) problems.push(`limit must be at most ${MAX_LIMIT}`);
  const orderBy = (p.orderBy ?? 'DESC').toUpperCase();
  if (orderBy !== 'ASC' && orderBy !== 'DESC') problems.push('orderBy must be ASC or DESC');
  const intervalType = (p.intervalType ?? 'MILLISECONDS').toUpperCase();
  if (intervalType !== 'MILLISECONDS') {
    problems.push(`intervalType ${p.intervalType} is not supported (only MILLISECONDS)`);
  }
  if (agg !== 'NONE' && problems.length === 0) {
    if (interval < 1) problems.push("interval must be at least 1 ms when agg isn't NONE");
    else if (Math.ceil(Math.max(1, endTs - startTs) / interval) > MAX_BUCKETS) {
      problems.push(`interval is too small: more than ${MAX_BUCKETS} buckets`);
    }
  }
  if (problems.length > 0) throw new ValidationError(problems.join('; '));
  return {
    mode: 'history',
    keys,
    startTs,
    endTs,
    agg,
    interval,
    limit,
    orderBy: orderBy as 'ASC' | 'DESC',
    strict,
  };
}

/** Parses `DELETE .../timeseries/delete` parameters. */
export function parseDeleteQuery(p: Params): DeleteQuery {
  const problems: string[] = [];
  const keys = parseKeys(p.keys);
  if (!keys) problems.push('keys is required');
  const all = parseBool(p, 'deleteAllDataForKeys', false, problems);
  const deleteLatest = parseBool(p, 'deleteLatest', true, problems);
  const rewriteLatest = parseBool(p, 'rewriteLatestIfDeleted', false, problems);
  let startTs = 0;
  let endTs = Number.MAX_SAFE_INTEGER;
  if (!all) {
    if (p.startTs === undefined || p.endTs === undefined) {
      problems.push('startTs and endTs are required unless deleteAllDataForKeys=true');
    } else {
      startTs = int(p, 'startTs', undefined, 0, problems);
      endTs = int(p, 'endTs', undefined, 0, problems);
    }
  }
  if (problems.length > 0) throw new ValidationError(problems.join('; '));
  return { keys: keys ?? [], startTs, endTs, deleteLatest, rewriteLatest };
}

function int(
  p: Params,
  name: string,
  dflt: number | undefined,
  min: number,
  problems: string[],
): number {
  const raw = p[name];
  if (raw === undefined || raw === '') {
    if (dflt === undefined) problems.push(`${name} is required`);
    return dflt ?? 0;
  }
  const n = Number(raw);
  if (!/^-?\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min) {
    problems.push(`${name} must be an integer${min === 0 ? ' >= 0' : ` >= ${min}`}, got '${raw}'`);
    return dflt ?? 0;
  }
  return n;
}

function parseBool(p: Params, name: string, dflt: boolean, problems: string[]): boolean {
  const raw = p[name];
  if (raw === undefined || raw === '') return dflt;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  problems.push(`${name} must be true or false`);
  return dflt;
}

export interface TsKvOut {
  readonly ts: number;
  readonly value: unknown;
}

/**
 * A value as the REST API returns it: ThingsBoard renders every value as a string unless
 * `useStrictDataTypes=true` (doubles as Java prints them: `21.0`, `1.0E7`); JSON values are
 * their text, or the parsed JSON in strict mode.
 */
export function formatValue(v: StoredValue, strict: boolean): unknown {
  switch (v.kind) {
    case 'double':
      return strict ? v.value : javaDouble(v.value as number);
    case 'long':
      return strict ? (typeof v.value === 'bigint' ? Number(v.value) : v.value) : String(v.value);
    case 'bool':
      return strict ? v.value : String(v.value);
    case 'string':
      return v.value;
    case 'json':
      return strict ? JSON.parse(v.value as string) : v.value;
  }
}

/** Java's `Double.toString`, which ThingsBoard uses to render doubles as strings. */
export function javaDouble(d: number): string {
  if (Number.isNaN(d)) return 'NaN';
  if (!Number.isFinite(d)) return d > 0 ? 'Infinity' : '-Infinity';
  if (d === 0) return Object.is(d, -0) ? '-0.0' : '0.0';
  const abs = Math.abs(d);
  if (abs >= 1e-3 && abs < 1e7) {
    const s = String(d);
    return s.includes('.') ? s : `${s}.0`;
  }
  const [mantissa, exp] = d.toExponential().split('e');
  const m = mantissa.includes('.') ? mantissa : `${mantissa}.0`;
  return `${m}E${exp.startsWith('+') ? exp.slice(1) : exp}`;
}
