import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ValidationError } from '../errors.js';
import {
  parseTypedObject,
  typeJsValue,
  typeNumberLiteral,
  writeKvObject,
  writeKvValue,
} from './kv-value.js';

describe('value typing (reference device-api.md §1.2, §14.4)', () => {
  it('types number literals by their text', () => {
    const cases: Array<[string, string, unknown]> = [
      ['42', 'LONG', 42],
      ['-7', 'LONG', -7],
      ['42.0', 'DOUBLE', 42],
      ['-3.5', 'DOUBLE', -3.5],
      ['1E2', 'LONG', 100],
      ['1.5E1', 'LONG', 15],
      ['1.5e-1', 'DOUBLE', 0.15],
      ['12345678901234567890', 'STRING', '12345678901234567890'],
      ['9223372036854775807', 'LONG', 9223372036854775807n],
      ['-9223372036854775808', 'LONG', -9223372036854775808n],
      ['9223372036854775808', 'STRING', '9223372036854775808'],
      ['0.12345678901234567', 'STRING', '0.12345678901234567'],
      ['0.1234567890123456', 'DOUBLE', 0.1234567890123456],
      // Issue 20: an exponent literal that is not a LONG is a DOUBLE (was the plain text).
      ['1.2345678901234567E-1', 'DOUBLE', 0.12345678901234566],
    ];
    for (const [text, type, value] of cases) {
      assert.deepEqual(typeNumberLiteral(text), { type, value }, text);
    }
    assert.throws(() => typeNumberLiteral('abc'), ValidationError);
  });

  it('casts plain decimal strings only when asked, never exponent or hex strings', () => {
    const cast = { cast: true };
    assert.deepEqual(typeJsValue('42', cast), { type: 'LONG', value: 42 });
    assert.deepEqual(typeJsValue('0123', cast), { type: 'LONG', value: 123 });
    assert.deepEqual(typeJsValue('-3.5', cast), { type: 'DOUBLE', value: -3.5 });
    assert.deepEqual(typeJsValue('1e5', cast), { type: 'STRING', value: '1e5' });
    assert.deepEqual(typeJsValue('0x10', cast), { type: 'STRING', value: '0x10' });
    assert.deepEqual(typeJsValue('true', cast), { type: 'STRING', value: 'true' });
    assert.deepEqual(typeJsValue('12345678901234567890', cast), {
      type: 'STRING',
      value: '12345678901234567890',
    });
    assert.deepEqual(typeJsValue('42'), { type: 'STRING', value: '42' });
    assert.deepEqual(typeJsValue('1.0'), { type: 'STRING', value: '1.0' });
  });

  it('types JavaScript values for programmatic saves', () => {
    assert.deepEqual(typeJsValue(7), { type: 'LONG', value: 7 });
    assert.deepEqual(typeJsValue(7.5), { type: 'DOUBLE', value: 7.5 });
    assert.deepEqual(typeJsValue(true), { type: 'BOOLEAN', value: true });
    assert.deepEqual(typeJsValue({ a: [1] }), { type: 'JSON', value: { a: [1] } });
    assert.deepEqual(typeJsValue(2n ** 62n), { type: 'LONG', value: 2n ** 62n });
    assert.deepEqual(typeJsValue(1e20), { type: 'STRING', value: '100000000000000000000' });
    assert.equal(typeJsValue(null), undefined);
    assert.equal(typeJsValue(undefined), undefined);
    assert.throws(() => typeJsValue(Number.NaN), ValidationError);
  });

  it('parses an object payload keeping literals, dropping nulls, last duplicate wins', () => {
    const text = ' { "a" : 1.0 , "b":[1,{"c":"}"}], "n": null, "s":"x\\"y", "a2": 2, "a2": 3.0 } ';
    const parsed = parseTypedObject(text, { cast: true });
    assert.deepEqual(Object.fromEntries(parsed), {
      a: { type: 'DOUBLE', value: 1 },
      b: { type: 'JSON', value: [1, { c: '}' }] },
      s: { type: 'STRING', value: 'x"y' },
      a2: { type: 'DOUBLE', value: 3 },
    });
    assert.equal(parseTypedObject('{}', { cast: true }).size, 0);
    for (const bad of ['[1]', '1', 'null', '"x"', '{"a":', '{a:1}']) {
      assert.throws(() => parseTypedObject(bad, { cast: true }), ValidationError, bad);
    }
  });

  it('writes values with their types', () => {
    assert.equal(writeKvValue({ type: 'DOUBLE', value: 42 }), '42.0');
    assert.equal(writeKvValue({ type: 'DOUBLE', value: 1.5 }), '1.5');
    assert.equal(writeKvValue({ type: 'DOUBLE', value: 1e300 }), '1e+300');
    assert.equal(writeKvValue({ type: 'LONG', value: 2n ** 62n }), '4611686018427387904');
    assert.equal(writeKvValue({ type: 'STRING', value: '42' }), '"42"');
    assert.equal(
      writeKvObject([
        ['x', { type: 'LONG', value: 1 }],
        ['y', { type: 'JSON', value: { z: true } }],
      ]),
      '{"x":1,"y":{"z":true}}',
    );
  });
});
