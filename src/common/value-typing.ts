import { ValidationError } from '../errors.js';

/**
 * Value typing of device data, ThingsBoard's rules (device-api.md §1.2), for telemetry and
 * attributes alike. Numbers are typed by their literal text (see json-text.ts), so `42.0` stays
 * a DOUBLE and a 19-digit integer keeps every digit.
 */

/** Stored value types, as ThingsBoard's `DataType` (BOOLEAN, LONG, DOUBLE, STRING, JSON). */
export type ValueKind = 'bool' | 'long' | 'double' | 'string' | 'json';

/** A typed value; `long` is a number, or a bigint beyond 2^53. */
export interface TypedValue {
  readonly kind: ValueKind;
  readonly value: boolean | number | bigint | string;
}

const INT64_MAX = 9223372036854775807n;
const INT64_MIN = -9223372036854775808n;
/** TB's `NumberUtils.isParsable`: plain decimals only, no exponent, no hex, no trailing dot. */
export const NUMERIC_STRING_RE = /^-?(?:\d+(?:\.\d+)?|\.\d+)$/;
const DECIMAL_RE = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

/** §1.2 `transport.json.max_string_value_length`: a longer string value is refused. */
export function checkValueLength(key: string, length: number, max: number): void {
  if (length > max) {
    throw new ValidationError(
      `String value length [${length}] for key [${key}] is greater than maximum allowed [${max}]`,
    );
  }
}

const SHORT_INTEGER_RE = /^-?\d{1,15}$/;
const PLAIN_DECIMAL_RE = /^-?\d+\.\d{1,16}$/;

/**
 * Types a number by its literal text as ThingsBoard's JsonConverter does (device-api.md §1.2):
 * a literal with '.' and no exponent is DOUBLE; an integral value (`1E2`) is LONG when it fits
 * int64; a plain integer literal beyond int64 is STRING of its digits, and a plain decimal with
 * more than 16 decimals STRING of its text.
 *
 * A literal with an exponent that is not a LONG is a DOUBLE (issue 20: "fits a long -> long, else
 * double"). ThingsBoard would store `1e65000` as a STRING of 65,001 digits, so that 55 KB of
 * payload grew the data directory by 830 MB; here a value beyond the double range is refused
 * with a ValidationError naming the key, and one below it becomes 0 (as a double does). Stored
 * text is never longer than the literal that was sent.
 */
export function typeNumber(
  raw: string,
  key: string,
  maxValueLength = Number.POSITIVE_INFINITY,
): TypedValue {
  // The common literals, typed without the general path's BigInt: a short integer is a LONG, a
  // plain decimal a DOUBLE (a zero of either without its sign, as below).
  if (SHORT_INTEGER_RE.test(raw)) return { kind: 'long', value: Number(raw) || 0 };
  if (PLAIN_DECIMAL_RE.test(raw)) return { kind: 'double', value: Number(raw) || 0 };
  const m = DECIMAL_RE.exec(raw);
  if (!m) return { kind: 'string', value: raw };
  const [, sign, intPart, fracPart = '', expPart] = m;
  const exp = expPart === undefined ? 0 : Number(expPart);
  const scale = fracPart.length - exp;
  const simpleDouble = raw.includes('.') && expPart === undefined;
  const digits = (intPart + fracPart).replace(/^0+/, '');
  if (digits === '')
    return simpleDouble ? { kind: 'double', value: 0 } : { kind: 'long', value: 0 };
  const trailingZeros = digits.length - digits.replace(/0+$/, '').length;
  const integral = scale - trailingZeros <= 0;
  if (expPart !== undefined && !(integral && digits.length - scale <= 19)) {
    return typeDouble(raw, key);
  }
  if (simpleDouble || !integral) {
    if (scale <= 16) return { kind: 'double', value: Number(raw) };
    const plain = plainDecimal(sign, digits, scale);
    checkValueLength(key, plain.length, maxValueLength);
    return { kind: 'string', value: plain };
  }
  // Integral: the value is digits * 10^-scale with scale <= trailing zeros.
  const intLength = digits.length - scale;
  if (intLength > 19) {
    checkValueLength(key, intLength + 1, maxValueLength);
    return { kind: 'string', value: plainDecimal(sign, digits, scale) };
  }
  const abs =
    scale >= 0
      ? BigInt(digits.slice(0, digits.length - scale))
      : BigInt(digits) * 10n ** BigInt(-scale);
  const big = sign === '-' ? -abs : abs;
  if (big > INT64_MAX || big < INT64_MIN) {
    return expPart === undefined ? { kind: 'string', value: big.toString() } : typeDouble(raw, key);
  }
  const n = Number(big);
  return { kind: 'long', value: Number.isSafeInteger(n) ? n : big };
}

/**
 * A binary floating-point value (a Protobuf `double`/`float` field, a Sparkplug Double metric)
 * typed as ThingsBoard types it after printing it with a fraction (`40.0`, protobuf-java
 * JsonFormat): an integral value is a DOUBLE, any other typed by its shortest text. Not finite:
 * the text `NaN`/`Infinity` as a STRING (JsonFormat prints them quoted).
 */
export function typeBinaryDouble(
  n: number,
  key: string,
  maxValueLength = Number.POSITIVE_INFINITY,
): TypedValue {
  if (!Number.isFinite(n)) return { kind: 'string', value: String(n) };
  const abs = Math.abs(n);
  // Integral, or at least 1 (the shortest text has at most 17 digits, one or more of them before
  // the point, so at most 16 decimals and no exponent below 1e21): a plain DOUBLE, no text needed.
  if (abs < 1e21 && (abs >= 1 || Number.isInteger(n))) return { kind: 'double', value: n || 0 };
  return typeNumber(String(n), key, maxValueLength);
}

/**
 * A string value of device data (device-api.md §1.2): a numeric-looking string is cast
 * (`transport.json.type_cast_enabled`), any other is a STRING within the length bound.
 */
export function typeText(s: string, key: string, maxValueLength: number): TypedValue {
  if (NUMERIC_STRING_RE.test(s)) return typeNumber(s, key, maxValueLength);
  checkValueLength(key, s.length, maxValueLength);
  return { kind: 'string', value: s };
}

/** An exponent literal as a DOUBLE; one beyond the double range is refused, naming the key. */
function typeDouble(raw: string, key: string): TypedValue {
  const value = Number(raw);
  if (!Number.isFinite(value)) {
    const shown = raw.length > 24 ? `${raw.slice(0, 24)}…` : raw;
    throw new ValidationError(`Value of key [${key}] is out of the double range: ${shown}`);
  }
  return { kind: 'double', value: value || 0 };
}

/** BigDecimal.toPlainString of `digits * 10^-scale` (digits without leading zeros). */
function plainDecimal(sign: string, digits: string, scale: number): string {
  const s = sign === '-' ? '-' : '';
  if (scale <= 0) return s + digits + '0'.repeat(-scale);
  if (digits.length > scale) {
    return `${s}${digits.slice(0, digits.length - scale)}.${digits.slice(digits.length - scale)}`;
  }
  return `${s}0.${'0'.repeat(scale - digits.length)}${digits}`;
}

/** Default per-request bound on stored bytes (`--max-request-stored-bytes`). */
export const DEFAULT_MAX_REQUEST_STORED_BYTES = 1024 * 1024;

/**
 * Bytes one typed value takes in storage, as the per-request bound counts them: its key and text
 * values as UTF-8, 8 per number, 1 per boolean.
 */
export function storedBytes(key: string, kind: ValueKind, value: unknown): number {
  let size = Buffer.byteLength(key);
  if (kind === 'string' || kind === 'json') {
    size += typeof value === 'string' ? Buffer.byteLength(value) : 0;
  } else size += kind === 'bool' ? 1 : 8;
  return size;
}

/**
 * The per-request bound on stored bytes (issue 20): one request may not store more than `max`
 * bytes of keys and values, however small its payload was. Refused as a whole, nothing stored.
 */
export function checkStoredBytes(what: string, total: number, max: number): void {
  if (total > max) {
    throw new ValidationError(
      `${what} would store more than ${max} bytes of keys and values in one request`,
    );
  }
}
