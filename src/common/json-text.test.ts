import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ValidationError } from '../errors.js';
import { JsonNumber, parseJsonNative, parseJsonText, parseJsonTextExact } from './json-text.js';
import { typeNumber } from './value-typing.js';

/** Numbers as `[kind, value]` of their typing, so that both parsers can be compared by meaning. */
function typed(v: unknown): unknown {
  if (v instanceof JsonNumber || typeof v === 'number') {
    const t = typeNumber(v instanceof JsonNumber ? v.raw : String(v), 'k');
    return [t.kind, typeof t.value === 'bigint' ? `${t.value}n` : t.value];
  }
  if (Array.isArray(v)) return v.map(typed);
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, typed(x)]));
  }
  return v;
}

function errorOf(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    assert.ok(err instanceof ValidationError, `a ValidationError, not ${err}`);
    return err.message;
  }
  assert.fail('no error');
}

describe('parseJsonText', () => {
  const same = [
    '{"temperature":21.5,"humidity":40,"active":true,"note":null}',
    '{"ts":1763769600000,"values":{"a":-3,"b":-0.25,"c":"x","d":[1,2.5,{"e":false}]}}',
    '[{"ts":1,"values":{"a":1}},{"ts":2,"values":{"a":2.75}}]',
    '{"v":42.0,"w":1.50,"x":1e3,"y":2.5E-3,"z":12345678901234567890}',
    '{"big":9007199254740993,"neg":-9223372036854775808,"long":123456789012345}',
    '{"tiny":0.0000001,"frac":0.1,"zero":-0,"half":0.5,"many":3.14159265358979}',
    '{"near":999999999999999.9,"s":"1.0 and 2e5 in a string"}',
    '{"r":0.99999999999999999,"q":1.0000000000000001,"p":4.2e1,"o":123456789012345}',
    '{"__proto__":{"polluted":1},"constructor":2}',
    '{"a":1,"a":2.5}',
    ' \t\n{ "spaced" : [ 1 , 2 ] }\r\n',
    '"just a string"',
    '7',
    '[]',
  ];
  for (const text of same) {
    it(`types every number as the exact parser does: ${text.slice(0, 50)}`, () => {
      assert.deepEqual(typed(parseJsonText(text, 16)), typed(parseJsonTextExact(text, 16)));
    });
  }

  it('keeps the literal of numbers JSON.parse would change', () => {
    const v = parseJsonText('{"a":42.0,"b":1e3,"c":12345678901234567890}', 16) as Record<
      string,
      JsonNumber
    >;
    assert.deepEqual([v.a.raw, v.b.raw, v.c.raw], ['42.0', '1e3', '12345678901234567890']);
  });

  it('makes a __proto__ key a plain property, never the prototype', () => {
    const v = parseJsonText('{"__proto__":{"polluted":1}}', 16) as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(v), Object.prototype);
    assert.deepEqual(Object.keys(v), ['__proto__']);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  it('reports invalid JSON and nesting as the exact parser does', () => {
    const deep = (n: number) => `${'['.repeat(n)}1${']'.repeat(n)}`;
    assert.deepEqual(parseJsonText(deep(16), 16), parseJsonTextExact(deep(16), 16));
    for (const text of [
      '{"a":1,}',
      '{"a":01}',
      '[1,2',
      '',
      '{"a":"\u0001"}',
      deep(17),
      deep(5000),
    ]) {
      assert.equal(
        errorOf(() => parseJsonText(text, 16)),
        errorOf(() => parseJsonTextExact(text, 16)),
        text.slice(0, 30),
      );
    }
    assert.match(
      errorOf(() => parseJsonText(deep(17), 16)),
      /nesting deeper than 16 levels/,
    );
  });
});

describe('parseJsonNative', () => {
  const deep = (n: number) => `${'['.repeat(n)}1${']'.repeat(n)}`;

  it('parses payloads whose numbers JSON.parse keeps, typing them as their literals', () => {
    for (const text of [
      '{"temperature":21.5,"humidity":40,"active":true,"note":null}',
      '{"ts":1763769600000,"values":{"a":-3,"b":-0.25,"c":"x","d":[1,2.5,{"e":false}]}}',
      '{"zero":-0,"ten":10,"frac":100.05,"long":123456789012345}',
      // Literals inside strings are text: they do not send the payload to the exact parser.
      '{"s":"1.0 and 2e5 and 12345678901234567 in a string","q":"say \\"1.50\\"","a":21.5}',
      '{"brackets":"[[[[[[[[[[[[[[[[[[","a":1}',
      deep(16),
    ]) {
      const native = parseJsonNative(text, 16);
      assert.notEqual(native, undefined, text);
      assert.deepEqual(typed(native), typed(parseJsonTextExact(text, 16)), text);
    }
  });

  it('leaves to the exact parser every number JSON.parse could change, deep nesting and bad JSON', () => {
    for (const text of [
      '{"a":42.0}',
      '{"a":1.50,"b":2}',
      '[1.0]',
      '1.0',
      '{"a":1e3}',
      '{"a":2.5E-3}',
      '{"a":12345678901234567}',
      '{"a":0.12345678901234567}',
      '{"a":{"b":[1,2.00]}}',
      deep(17),
      '{"a":1,}',
      '{"a":"unterminated',
    ]) {
      assert.equal(parseJsonNative(text, 16), undefined, text);
    }
  });
});
