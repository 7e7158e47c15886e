import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { typeNumber } from './value-typing.js';

describe('typeNumber', () => {
  const cases: Array<[string, string, unknown]> = [
    // Short integers and plain decimals (the common literals).
    ['42', 'long', 42],
    ['-7', 'long', -7],
    ['007', 'long', 7],
    ['-0', 'long', 0],
    ['123456789012345', 'long', 123456789012345],
    ['21.5', 'double', 21.5],
    ['21.50', 'double', 21.5],
    ['42.0', 'double', 42],
    ['-0.0', 'double', 0],
    ['0.1234567890123456', 'double', 0.1234567890123456],
    // The general path.
    ['1234567890123456', 'long', 1234567890123456],
    ['9223372036854775807', 'long', 9223372036854775807n],
    ['9223372036854775808', 'string', '9223372036854775808'],
    ['1e3', 'long', 1000],
    ['1.5e1', 'long', 15],
    ['2.5e-3', 'double', 0.0025],
    ['0.12345678901234567', 'string', '0.12345678901234567'],
    ['+5', 'long', 5],
  ];
  for (const [raw, kind, value] of cases) {
    it(`${raw} is ${kind} ${String(value)}`, () => {
      const t = typeNumber(raw, 'k');
      assert.equal(t.kind, kind);
      assert.ok(Object.is(t.value, value), `value ${String(t.value)}`);
    });
  }
});
