/**
 * The gateway API's payloads (device-api.md §9) as the outbox stores them: one device's part of
 * `v1/gateway/telemetry` (`[{"ts","values"}]`, every point keeping its own timestamp) or of
 * `v1/gateway/attributes` (`{"key": value}`), as JSON text, and the publishes built from rows.
 */
import type { TypedAttributeKv } from '../attributes/types.js';
import type { TsEntry } from '../telemetry/telemetry-parser.js';
import { KIND, type OutboxRow } from './outbox.js';

/** Committed points of one device as `[{"ts":..,"values":{..}}]`, in order of first appearance. */
export function telemetryJson(points: readonly TsEntry[]): string {
  // The usual payload has one timestamp: no map.
  const first = points[0].ts;
  let single = true;
  for (const p of points) {
    if (p.ts !== first) {
      single = false;
      break;
    }
  }
  if (single) return `[{"ts":${first},"values":{${pairs(points)}}}]`;
  const byTs = new Map<number, TsEntry[]>();
  for (const p of points) {
    const list = byTs.get(p.ts);
    if (list) list.push(p);
    else byTs.set(p.ts, [p]);
  }
  const parts: string[] = [];
  for (const [ts, list] of byTs) parts.push(`{"ts":${ts},"values":{${pairs(list)}}}`);
  return `[${parts.join(',')}]`;
}

function pairs(points: readonly TsEntry[]): string {
  let out = '';
  for (let i = 0; i < points.length; i++) {
    const p = points[i];
    if (i > 0) out += ',';
    out += `${JSON.stringify(p.key)}:${pointValue(p)}`;
  }
  return out;
}

function pointValue(p: TsEntry): string {
  switch (p.kind) {
    case 'json':
      return p.value as string;
    case 'string':
      return JSON.stringify(p.value);
    case 'long':
      // Exact beyond 2^53: ThingsBoard parses a JSON integer literal as a long.
      return String(p.value);
    case 'double':
      return Number.isFinite(p.value as number) ? String(p.value) : 'null';
    default:
      return p.value ? 'true' : 'false';
  }
}

/** Saved attributes as `{"key": value}`. */
export function attributesJson(values: readonly TypedAttributeKv[]): string {
  let out = '';
  for (const kv of values) {
    if (out) out += ',';
    const v =
      typeof kv.value === 'bigint'
        ? String(kv.value)
        : kv.type === 'JSON' && typeof kv.value === 'string'
          ? kv.value
          : JSON.stringify(kv.value);
    out += `${JSON.stringify(kv.key)}:${v}`;
  }
  return `{${out}}`;
}

/**
 * A rule-chain message's telemetry data (`{k:v}` with the metadata `ts`, `{"ts","values"}`, or
 * an array of those) as the gateway API's array; undefined when it is none of them.
 */
export function telemetryFromMsg(data: unknown, ts: number): string | undefined {
  const item = (v: unknown): unknown => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
    const o = v as Record<string, unknown>;
    if ('ts' in o && 'values' in o) return o;
    return { ts, values: o };
  };
  const list = Array.isArray(data) ? data.map(item) : [item(data)];
  if (list.length === 0 || list.some((x) => x === undefined)) return undefined;
  return JSON.stringify(list);
}

/** One publish: its topic, payload, the rows it carries and how many messages they are. */
export interface Publish {
  readonly topic: string;
  readonly payload: string;
  readonly rows: readonly OutboxRow[];
  /** Data points of telemetry (the cloud's `telemetryDataPoints` rate limit; 0 uncounted). */
  readonly points: number;
}

const TOPIC = {
  [KIND.telemetry]: 'v1/gateway/telemetry',
  [KIND.attributes]: 'v1/gateway/attributes',
  [KIND.claim]: 'v1/gateway/claim',
} as const;

/**
 * Packs rows (in `seq` order, every one with a device name) into one publish of the first row's
 * kind: a run of rows of that kind, up to `maxBytes` (always at least one row). Telemetry of a
 * device keeps its rows' order inside the device's array; attributes and claims of a device
 * already in the publish end it (a JSON object holds a device once), so the order holds.
 * Telemetry points are counted only when `countPoints` (a point rate limit paces the sender).
 */
export function pack(rows: readonly OutboxRow[], maxBytes: number, countPoints = false): Publish {
  const kind = rows[0].kind;
  const byDevice = new Map<string, string[]>();
  let bytes = 2;
  let taken = 0;
  let points = 0;
  for (const row of rows) {
    if (row.kind !== kind) break;
    const name = row.name as string;
    const list = byDevice.get(name);
    if (list && kind !== KIND.telemetry) break;
    // Telemetry rows are arrays: their elements join the device's array.
    const part = kind === KIND.telemetry ? row.data.slice(1, -1) : row.data;
    const add = part.length + (list ? 1 : name.length * 1.1 + 6);
    if (taken > 0 && bytes + add > maxBytes) break;
    bytes += add;
    if (list) list.push(part);
    else byDevice.set(name, [part]);
    if (countPoints && kind === KIND.telemetry) points += pointsIn(part);
    taken++;
  }
  const parts: string[] = [];
  for (const [name, list] of byDevice) {
    const body = kind === KIND.telemetry ? `[${list.join(',')}]` : list[0];
    parts.push(`${JSON.stringify(name)}:${body}`);
  }
  return {
    topic: TOPIC[kind],
    payload: `{${parts.join(',')}}`,
    rows: rows.slice(0, taken),
    points,
  };
}

/** Values in `{"ts":..,"values":{..}},..` text, estimated by its top-level pairs (pacing only). */
function pointsIn(part: string): number {
  let n = 0;
  for (let i = 0; i < part.length; i++) if (part.charCodeAt(i) === 58) n++; // ':'
  // Each element has "ts": and "values": besides its values.
  const elements = part.split('"values":').length - 1;
  return Math.max(1, n - 2 * elements);
}
