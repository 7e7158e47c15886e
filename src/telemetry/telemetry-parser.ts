import {
  JsonNumber,
  type JsonText,
  MAX_JSON_DEPTH,
  parseJsonNative,
  parseJsonTextExact,
  stringifyJsonText,
} from '../common/json-text.js';
import {
  checkStoredBytes,
  checkValueLength,
  DEFAULT_MAX_REQUEST_STORED_BYTES,
  storedBytes,
  type TypedValue,
  typeNumber,
  typeText,
  type ValueKind,
} from '../common/value-typing.js';
import { ValidationError } from '../errors.js';

/** Stored value types, as ThingsBoard's `DataType` (BOOLEAN, LONG, DOUBLE, STRING, JSON). */
export type TsKind = ValueKind;

/**
 * One data point after typing. `long` is a number, or a bigint beyond 2^53; `json` is the
 * serialized JSON text, stored and returned as one item.
 */
export interface TsEntry {
  readonly key: string;
  readonly ts: number;
  readonly kind: TsKind;
  readonly value: boolean | number | bigint | string;
}

/** A stored point as JSON: JSON values parsed, a LONG beyond 2^53 as the nearest number. */
export function entryValue(p: TsEntry): unknown {
  if (p.kind === 'json') return JSON.parse(p.value as string) as unknown;
  return typeof p.value === 'bigint' ? Number(p.value) : p.value;
}

/** Limits of one telemetry payload. A payload over any of them is refused as a whole. */
export interface TelemetryLimits {
  /** Longest key, in characters. */
  readonly maxKeyLength: number;
  /** Deepest nesting of objects/arrays in the whole payload (top level = 1). */
  readonly maxDepth: number;
  /** Most data points in one payload. */
  readonly maxPoints: number;
  /** Longest string value or serialized JSON value, in characters. */
  readonly maxValueLength: number;
  /** Largest payload text, in bytes. */
  readonly maxPayloadBytes: number;
  /** Most bytes of keys and values one payload may store (common/value-typing `storedBytes`). */
  readonly maxStoredBytes: number;
}

export const TELEMETRY_LIMITS: TelemetryLimits = Object.freeze({
  maxKeyLength: 255,
  maxDepth: MAX_JSON_DEPTH,
  maxPoints: 50_000,
  maxValueLength: 65_536,
  maxPayloadBytes: 4 * 1024 * 1024,
  maxStoredBytes: DEFAULT_MAX_REQUEST_STORED_BYTES,
});

type Typed = TypedValue;

/** Parses payload text (device transports) into points; see `parseTelemetry`. */
export function parseTelemetryText(
  text: string | Uint8Array,
  now: number,
  limits: TelemetryLimits = TELEMETRY_LIMITS,
): TsEntry[] {
  checkPayloadBytes(typeof text === 'string' ? Buffer.byteLength(text) : text.byteLength, limits);
  const str =
    typeof text === 'string'
      ? text
      : Buffer.from(text.buffer, text.byteOffset, text.byteLength).toString('utf8');
  // Numbers of a native parse are typed from `String(n)`, as their literals are (json-text.ts).
  let parsed = parseJsonNative(str, limits.maxDepth);
  if (parsed === undefined) {
    if (str.trim() === '') throw new ValidationError('Telemetry payload is empty');
    parsed = parseJsonTextExact(str, limits.maxDepth);
  }
  return parseTelemetry(parsed, now, limits);
}

function checkPayloadBytes(size: number, limits: TelemetryLimits): void {
  if (size > limits.maxPayloadBytes) {
    throw new ValidationError(
      `Telemetry payload is ${size} bytes, more than the limit of ${limits.maxPayloadBytes}`,
    );
  }
}

/**
 * Turns a telemetry payload in one of ThingsBoard's four forms (device-api.md §1.1) into typed
 * points: an object, an array of objects, `{"ts","values"}`, or an array of those (mixed with
 * plain objects). Plain objects get `now`. Values are typed per §1.2; `null` drops the key.
 * Throws a ValidationError naming the first problem; nothing is returned for a bad payload.
 */
export function parseTelemetry(
  payload: unknown,
  now: number,
  limits: TelemetryLimits = TELEMETRY_LIMITS,
): TsEntry[] {
  const out = new PointCollector(limits);
  const addValues = (values: Record<string, unknown>, ts: number, depth: number) => {
    for (const key of Object.keys(values)) {
      const v = values[key];
      out.checkKey(key);
      if (v === null || v === undefined) continue;
      out.add(key, ts, typeValue(key, v, depth + 1, limits));
    }
  };
  const addElement = (el: Record<string, unknown>, depth: number) => {
    // device-api.md §1.1: "has a timestamp" means both keys are present; others are ignored.
    if ('ts' in el && 'values' in el) {
      const ts = parseTs(el.ts);
      const values = el.values;
      if (!isPlainObject(values)) {
        throw new ValidationError(
          `Telemetry 'values' must be a JSON object, got ${describe(values)}`,
        );
      }
      addValues(values, ts, depth + 1);
    } else {
      addValues(el, now, depth);
    }
  };
  if (Array.isArray(payload)) {
    payload.forEach((el, i) => {
      if (!isPlainObject(el)) {
        throw new ValidationError(
          `Can't parse value: telemetry array element ${i} must be a JSON object, got ${describe(el)}`,
        );
      }
      addElement(el, 2);
    });
  } else if (isPlainObject(payload)) {
    addElement(payload, 1);
  } else {
    throw new ValidationError(
      `Can't parse value: telemetry must be a JSON object or array, got ${describe(payload)}`,
    );
  }
  return out.points;
}

/**
 * The points of one payload under its limits (key length, point count, stored bytes): every
 * telemetry decoder adds through one of these, so a limit is checked in one place.
 */
export class PointCollector {
  readonly points: TsEntry[] = [];
  #stored = 0;

  constructor(readonly limits: TelemetryLimits) {}

  /** A key must be non-empty and within the length bound, even when its value is null. */
  checkKey(key: string): void {
    if (key.length === 0) throw new ValidationError('Telemetry key must not be empty');
    if (key.length > this.limits.maxKeyLength) {
      throw new ValidationError(
        `Telemetry key '${key.slice(0, 32)}…' is ${key.length} characters, longer than ${this.limits.maxKeyLength}`,
      );
    }
  }

  add(key: string, ts: number, t: TypedValue): void {
    if (this.points.length >= this.limits.maxPoints) {
      throw new ValidationError(
        `Telemetry payload has more than ${this.limits.maxPoints} data points`,
      );
    }
    this.#stored += storedBytes(key, t.kind, t.value);
    checkStoredBytes('Telemetry payload', this.#stored, this.limits.maxStoredBytes);
    this.points.push({ key, ts, kind: t.kind, value: t.value });
  }
}

/**
 * A telemetry payload a transport decoded itself (Protobuf, Sparkplug B: issue 21): typed into
 * points at ingest, straight from the decoded message, without JSON text in between.
 * `toPoints` gets the server time (for points without their own) and the payload limits.
 */
export class DecodedTelemetry {
  constructor(
    /** The size of the binary payload, bounded as a text payload is. */
    readonly bytes: number,
    readonly toPoints: (now: number, out: PointCollector) => void,
  ) {}

  points(now: number, limits: TelemetryLimits): TsEntry[] {
    checkPayloadBytes(this.bytes, limits);
    const out = new PointCollector(limits);
    this.toPoints(now, out);
    return out.points;
  }
}

/** A `ts` member as device-api.md §1.1 reads it: non-negative integer epoch milliseconds. */
export function parseTs(raw: unknown): number {
  let ts: number | undefined;
  if (raw instanceof JsonNumber) ts = Number(raw.raw);
  else if (typeof raw === 'number') ts = raw;
  else if (typeof raw === 'string' && /^\d+$/.test(raw)) ts = Number(raw);
  if (ts === undefined || !Number.isSafeInteger(ts) || ts < 0) {
    const shown = raw instanceof JsonNumber ? raw.raw : JSON.stringify(raw);
    throw new ValidationError(
      `Telemetry 'ts' must be a non-negative integer (epoch milliseconds), got ${shown}`,
    );
  }
  return ts;
}

/** A parsed JSON value typed as a telemetry value (§1.2); `depth` = its nesting level. */
export function typeValue(key: string, v: unknown, depth: number, limits: TelemetryLimits): Typed {
  if (typeof v === 'boolean') return { kind: 'bool', value: v };
  if (v instanceof JsonNumber) return typeNumber(v.raw, key, limits.maxValueLength);
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new ValidationError(`Telemetry value of '${key}' is not finite`);
    return typeNumber(String(v), key, limits.maxValueLength);
  }
  if (typeof v === 'bigint') return typeNumber(v.toString(), key, limits.maxValueLength);
  // device-api.md §1.2: numeric-looking strings are cast (transport.json.type_cast_enabled).
  if (typeof v === 'string') return typeText(v, key, limits.maxValueLength);
  if (typeof v === 'object' && v !== null) {
    checkDepth(v, depth, limits);
    const text = stringifyJsonText(v);
    checkLength(key, text.length, limits);
    return { kind: 'json', value: text };
  }
  throw new ValidationError(`Telemetry value of '${key}' has an unsupported type ${typeof v}`);
}

function checkLength(key: string, length: number, limits: TelemetryLimits): void {
  checkValueLength(key, length, limits.maxValueLength);
}

function checkDepth(v: unknown, depth: number, limits: TelemetryLimits): void {
  if (depth > limits.maxDepth) throw depthError(limits);
  if (v instanceof JsonNumber || v === null || typeof v !== 'object') return;
  for (const x of Array.isArray(v) ? v : Object.values(v)) checkDepth(x, depth + 1, limits);
}

function depthError(limits: TelemetryLimits): ValidationError {
  return new ValidationError(`Telemetry payload nesting is deeper than ${limits.maxDepth} levels`);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof JsonNumber);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (v instanceof JsonNumber) return `the number ${v.raw}`;
  if (typeof v === 'number') return `the number ${v}`;
  if (typeof v === 'object') return 'an object';
  if (v === undefined) return 'nothing';
  return `${typeof v} ${JSON.stringify(v).slice(0, 40)}`;
}

export type { JsonText };
