import { ValidationError } from '../errors.js';

/**
 * A JSON number kept as its literal text. `JSON.parse` turns `42.0` into `42` and rounds big
 * integers; ThingsBoard types values by their literal (`42.0` is a DOUBLE, `12345678901234567890`
 * a STRING), so device payloads are parsed with this small parser instead.
 */
export class JsonNumber {
  constructor(readonly raw: string) {}
  toJSON(): number {
    return Number(this.raw);
  }
}

/** A parsed JSON value whose numbers are `JsonNumber`s. */
export type JsonText =
  | null
  | boolean
  | string
  | JsonNumber
  | JsonText[]
  | { [key: string]: JsonText };

/** Default nesting limit of device payloads (objects and arrays, top level = 1). */
export const MAX_JSON_DEPTH = 16;

const NUMBER_RE = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/**
 * A number literal whose text `String(JSON.parse(...))` may not give back in a form that types
 * the same: an exponent, a fraction ending in 0 (`42.0`), or a run of 16 digits and dots
 * (rounding). It may also match inside a string: then the exact parser runs, which is only
 * slower. The lookbehind starts the last test only at the start of a run, which keeps the scan
 * linear (a third of the time of `(?:\d\.?){16}` on a typical payload).
 */
const INEXACT_NUMBER_RE = /\d[eE]|\d\.\d*0(?!\d)|(?<![\d.])[\d.]{16}/;

/** Thrown by `wrapNumbers` for nesting over the limit; the exact parser then reports it. */
const TOO_DEEP = Symbol('too deep');

/**
 * Parses strict JSON (RFC 8259) and keeps number literals as text. `maxDepth` bounds the nesting
 * of objects and arrays so that a hostile payload cannot exhaust the stack.
 *
 * Most device payloads hold no number that `JSON.parse` could change (`21.5`, `42`): those are
 * parsed natively (4-5 times faster) and their numbers wrapped from `String(n)`, which types
 * the same. Everything else, and every error message, comes from the exact parser.
 */
export function parseJsonText(text: string, maxDepth: number): JsonText {
  if (!INEXACT_NUMBER_RE.test(text)) {
    try {
      return wrapNumbers(JSON.parse(text), 0, maxDepth);
    } catch {
      // Invalid, or too deep: the exact parser says where.
    }
  }
  return parseJsonTextExact(text, maxDepth);
}

/** Wraps the numbers of a `JSON.parse` result in place, checking the nesting as the exact parser does. */
function wrapNumbers(v: unknown, depth: number, maxDepth: number): JsonText {
  if (typeof v === 'number') return new JsonNumber(String(v));
  if (typeof v !== 'object' || v === null) return v as JsonText;
  if (depth >= maxDepth) throw TOO_DEEP;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = wrapNumbers(v[i], depth + 1, maxDepth);
    return v;
  }
  // An own `__proto__` key (JSON.parse makes it a plain property) is assigned as a plain property.
  const obj = v as Record<string, unknown>;
  for (const key of Object.keys(obj)) obj[key] = wrapNumbers(obj[key], depth + 1, maxDepth);
  return obj as JsonText;
}

/** The exact parser: every number literal kept as its text. Exported for tests. */
export function parseJsonTextExact(text: string, maxDepth: number): JsonText {
  let pos = 0;
  const fail = (what: string): never => {
    throw new ValidationError(`Invalid JSON: ${what} at position ${pos}`);
  };
  const ws = () => {
    for (;;) {
      const c = text.charCodeAt(pos);
      if (c === 32 || c === 10 || c === 13 || c === 9) pos++;
      else return;
    }
  };
  const str = (): string => {
    // pos is at the opening quote
    const start = ++pos;
    let out = '';
    let chunk = start;
    for (;;) {
      const c = text.charCodeAt(pos);
      if (Number.isNaN(c)) fail('unterminated string');
      if (c === 34) {
        out += text.slice(chunk, pos);
        pos++;
        return out;
      }
      if (c < 32) fail('control character in string');
      if (c === 92) {
        out += text.slice(chunk, pos);
        const e = text[pos + 1];
        pos += 2;
        switch (e) {
          case '"':
          case '\\':
          case '/':
            out += e;
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'u': {
            const hex = text.slice(pos, pos + 4);
            if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('bad \\u escape');
            out += String.fromCharCode(Number.parseInt(hex, 16));
            pos += 4;
            break;
          }
          default:
            pos -= 2;
            fail('bad escape');
        }
        chunk = pos;
        continue;
      }
      pos++;
    }
  };
  const value = (depth: number): JsonText => {
    ws();
    const c = text[pos];
    if (c === '{') {
      if (depth >= maxDepth) fail(`nesting deeper than ${maxDepth} levels`);
      pos++;
      const obj: { [key: string]: JsonText } = {};
      ws();
      if (text[pos] === '}') {
        pos++;
        return obj;
      }
      for (;;) {
        ws();
        if (text[pos] !== '"') fail('expected a string key');
        const key = str();
        ws();
        if (text[pos] !== ':') fail("expected ':'");
        pos++;
        const v = value(depth + 1);
        // @NOTE: defineProperty so that a "__proto__" key is plain data, never a prototype.
        Object.defineProperty(obj, key, {
          value: v,
          enumerable: true,
          writable: true,
          configurable: true,
        });
        ws();
        if (text[pos] === ',') {
          pos++;
          continue;
        }
        if (text[pos] === '}') {
          pos++;
          return obj;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      if (depth >= maxDepth) fail(`nesting deeper than ${maxDepth} levels`);
      pos++;
      const arr: JsonText[] = [];
      ws();
      if (text[pos] === ']') {
        pos++;
        return arr;
      }
      for (;;) {
        arr.push(value(depth + 1));
        ws();
        if (text[pos] === ',') {
          pos++;
          continue;
        }
        if (text[pos] === ']') {
          pos++;
          return arr;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c === '"') return str();
    if (text.startsWith('true', pos)) {
      pos += 4;
      return true;
    }
    if (text.startsWith('false', pos)) {
      pos += 5;
      return false;
    }
    if (text.startsWith('null', pos)) {
      pos += 4;
      return null;
    }
    NUMBER_RE.lastIndex = pos;
    const m = NUMBER_RE.exec(text);
    if (!m) return fail(c === undefined ? 'unexpected end' : `unexpected character '${c}'`);
    pos += m[0].length;
    return new JsonNumber(m[0]);
  };
  const result = value(0);
  ws();
  if (pos < text.length) fail('unexpected data after the JSON value');
  return result;
}

/** Serializes a parsed value back to JSON, numbers exactly as they were written. */
export function stringifyJsonText(v: unknown): string {
  if (v instanceof JsonNumber) return v.raw;
  if (Array.isArray(v)) return `[${v.map(stringifyJsonText).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const parts: string[] = [];
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined) continue;
      parts.push(`${JSON.stringify(k)}:${stringifyJsonText(x)}`);
    }
    return `{${parts.join(',')}}`;
  }
  if (typeof v === 'bigint') return v.toString();
  return JSON.stringify(v) ?? 'null';
}
