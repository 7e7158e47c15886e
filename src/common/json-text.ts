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
 * Parses `text` with `JSON.parse` when that keeps every number as typed by its literal, and
 * checks the nesting as the exact parser does; returns `undefined` when the exact parser must run
 * instead: invalid JSON, nesting deeper than `maxDepth`, or a number `JSON.parse` could change.
 * Those are, outside strings, a literal with an exponent, a fraction ending in 0 (`42.0` would
 * type as a LONG, `1.50` inside a JSON value would lose its 0) and a run of 16 digits and dots
 * (rounding). Numbers come back as JS numbers: `String(n)` types as their literal does.
 *
 * Most device payloads (`{"temperature":21.5,"humidity":40}`) take this path: one scan and the
 * native parser, several times faster than the exact one.
 */
export function parseJsonNative(text: string, maxDepth: number): unknown {
  let depth = 0;
  let run = 0; // digits and dots in a row
  let fraction = false; // in the digits after a number's '.'
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c >= 48 && c <= 57) || c === 46) {
      if (++run >= 16) return undefined;
      if (c === 46) fraction = true;
      continue;
    }
    if (run > 0) {
      // The end of a run of digits: `2e3`, `1.50`.
      if (c === 101 || c === 69) return undefined;
      if (fraction && text.charCodeAt(i - 1) === 48) return undefined;
      run = 0;
      fraction = false;
    }
    if (c === 34) {
      // A string: skip to its closing quote, escapes included.
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 92) i++;
        else if (d === 34) break;
      }
    } else if (c === 123 || c === 91) {
      if (++depth > maxDepth) return undefined;
    } else if (c === 125 || c === 93) depth--;
  }
  if (fraction && text.charCodeAt(text.length - 1) === 48) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // Invalid: the exact parser says where.
    return undefined;
  }
}

/**
 * Parses strict JSON (RFC 8259) and keeps number literals as text. `maxDepth` bounds the nesting
 * of objects and arrays so that a hostile payload cannot exhaust the stack. Payloads that
 * `parseJsonNative` takes are parsed natively and their numbers wrapped from `String(n)`;
 * everything else, and every error message, comes from the exact parser.
 */
export function parseJsonText(text: string, maxDepth: number): JsonText {
  const native = parseJsonNative(text, maxDepth);
  return native === undefined ? parseJsonTextExact(text, maxDepth) : wrapNumbers(native);
}

/** Wraps the numbers of a `parseJsonNative` result in place. */
function wrapNumbers(v: unknown): JsonText {
  if (typeof v === 'number') return new JsonNumber(String(v));
  if (typeof v !== 'object' || v === null) return v as JsonText;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = wrapNumbers(v[i]);
    return v;
  }
  // An own `__proto__` key (JSON.parse makes it a plain property) is assigned as a plain property.
  const obj = v as Record<string, unknown>;
  for (const key of Object.keys(obj)) obj[key] = wrapNumbers(obj[key]);
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
