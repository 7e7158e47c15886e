/**
 * Value typing of device data (reference device-api.md §1.2, which applies to telemetry and to
 * attributes alike) and JSON output that keeps those types: a DOUBLE `42.0` prints as `42.0`,
 * a LONG beyond 2^53 keeps all its digits.
 *
 * @NOTE: `JSON.parse` loses the difference between `42` and `42.0`, so the top-level members of
 * a payload are typed from their source text. Nested objects and arrays are stored as JSON.
 */

import {
  JsonNumber,
  type JsonText,
  MAX_JSON_DEPTH,
  parseJsonText,
  stringifyJsonText,
} from '../common/json-text.js';
import {
  NUMERIC_STRING_RE,
  type TypedValue,
  typeNumber,
  type ValueKind,
} from '../common/value-typing.js';
import { ValidationError } from '../errors.js';
import type { KvType, KvValue } from './types.js';

/** A JSON number literal, leading zeros allowed (a cast numeric string like `"0123"`). */
const NUMBER_LITERAL_RE = /^-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

const KV_TYPE: Record<ValueKind, KvType> = {
  bool: 'BOOLEAN',
  long: 'LONG',
  double: 'DOUBLE',
  string: 'STRING',
  json: 'JSON',
};

export interface TypingOptions {
  /** Cast numeric-looking strings to LONG/DOUBLE (`transport.json.type_cast_enabled`, default on). */
  readonly cast: boolean;
}

/** A value typed by common/value-typing, as an attribute value. */
export function kvValueOf(typed: TypedValue): KvValue {
  return { type: KV_TYPE[typed.kind], value: typed.value };
}

/** Types a JSON number literal (its source text) by the rules of §1.2 (common/value-typing). */
export function typeNumberLiteral(text: string, key = ''): KvValue {
  if (!NUMBER_LITERAL_RE.test(text)) throw new ValidationError(`Not a number: ${text}`);
  return kvValueOf(typeNumber(text, key));
}

function typeString(s: string, opts: TypingOptions): KvValue {
  if (opts.cast && NUMERIC_STRING_RE.test(s)) {
    const typed = typeNumberLiteral(s);
    // A number too big or too precise stays the string it was sent as.
    return typed.type === 'STRING' ? { type: 'STRING', value: s } : typed;
  }
  return { type: 'STRING', value: s };
}

/**
 * Types a JavaScript value (a programmatic save, e.g. OTA setting `fw_version`). Strings are not
 * cast unless asked; integers become LONG, other numbers DOUBLE; `null`/`undefined` give
 * undefined (the key is dropped).
 */
export function typeJsValue(
  value: unknown,
  opts: TypingOptions = { cast: false },
): KvValue | undefined {
  switch (typeof value) {
    case 'undefined':
      return undefined;
    case 'boolean':
      return { type: 'BOOLEAN', value };
    case 'bigint':
      return typeNumberLiteral(value.toString());
    case 'number':
      if (!Number.isFinite(value)) throw new ValidationError(`Not a finite number: ${value}`);
      if (Number.isSafeInteger(value)) return { type: 'LONG', value };
      if (Number.isInteger(value)) return typeJsValue(BigInt(value));
      return { type: 'DOUBLE', value };
    case 'string':
      return typeString(value, opts);
    case 'object':
      if (value === null) return undefined;
      return { type: 'JSON', value };
    default:
      throw new ValidationError(`Unsupported value type: ${typeof value}`);
  }
}

/**
 * Parses a JSON object payload into typed members, keeping number literals as written.
 * `null` members are dropped (§1.2, device-API path); a later duplicate key wins, as in
 * `JSON.parse`. Throws ValidationError for malformed JSON or a non-object.
 */
export function parseTypedObject(text: string, opts: TypingOptions): Map<string, KvValue> {
  const parsed = parseJsonText(text, MAX_JSON_DEPTH);
  if (
    typeof parsed !== 'object' ||
    parsed === null ||
    Array.isArray(parsed) ||
    parsed instanceof JsonNumber
  ) {
    throw new ValidationError('Body must be a JSON object');
  }
  const out = new Map<string, KvValue>();
  for (const [key, value] of Object.entries(parsed)) {
    const typed = typeParsed(key, value, opts);
    if (typed) out.set(key, typed);
  }
  return out;
}

/**
 * One member of an attribute object given as its JSON text (a decoder that printed only that
 * member), typed as `parseTypedObject` types it inside the object (strings cast).
 */
export function typeJsonMember(key: string, text: string): KvValue {
  const typed = typeParsed(key, parseJsonText(text, MAX_JSON_DEPTH - 1), { cast: true });
  if (!typed) throw new ValidationError(`Attribute '${key}' has no value`);
  return typed;
}

function typeParsed(key: string, value: JsonText, opts: TypingOptions): KvValue | undefined {
  if (value instanceof JsonNumber) return typeNumberLiteral(value.raw, key);
  if (value !== null && typeof value === 'object') {
    return { type: 'JSON', value: JSON.parse(stringifyJsonText(value)) as unknown };
  }
  return typeJsValue(value, opts);
}

/** Writes one typed value as JSON text: DOUBLE keeps a fraction, LONG keeps every digit. */
export function writeKvValue(kv: KvValue): string {
  switch (kv.type) {
    case 'LONG':
      return String(kv.value);
    case 'DOUBLE': {
      const s = String(kv.value);
      return /[.eE]/.test(s) ? s : `${s}.0`;
    }
    default:
      return JSON.stringify(kv.value);
  }
}

/** Writes `{"k":v,...}` from typed values. */
export function writeKvObject(entries: Iterable<readonly [string, KvValue]>): string {
  const parts: string[] = [];
  for (const [key, kv] of entries) parts.push(`${JSON.stringify(key)}:${writeKvValue(kv)}`);
  return `{${parts.join(',')}}`;
}
