import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { typeBinaryDouble, typeNumber } from './value-typing.js';

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
    // Exponent literals (issue 20): a LONG when integral and within int64, else a DOUBLE.
    ['1e15', 'long', 1e15],
    ['1e18', 'long', 1000000000000000000n],
    ['9.223372036854775807e18', 'long', 9223372036854775807n],
    ['1e19', 'double', 1e19],
    ['1e300', 'double', 1e300],
    ['-1.5e300', 'double', -1.5e300],
    ['1.5e-30', 'double', 1.5e-30],
    ['1e-400', 'double', 0],
    ['12345678901234567890e0', 'double', 1.2345678901234567e19],
  ];
  for (const [raw, kind, value] of cases) {
    it(`${raw} is ${kind} ${String(value)}`, () => {
      const t = typeNumber(raw, 'k');
      assert.equal(t.kind, kind);
      assert.ok(Object.is(t.value, value), `value ${String(t.value)}`);
    });
  }

  it('refuses an exponent literal beyond the double range, naming the key', () => {
    for (const raw of ['1e65000', '-1e309', '1.8e308', '1e99999999999999999999']) {
      assert.throws(() => typeNumber(raw, 'b0'), /key \[b0\] is out of the double range/, raw);
    }
    assert.equal(typeNumber('1.7e308', 'k').kind, 'double');
  });
});

describe('typeBinaryDouble', () => {
  it('types a double as its JsonFormat text would be typed (`40.0`, shortest digits otherwise)', () => {
    const viaText = (n: number) =>
      Number.isInteger(n) && Math.abs(n) < 1e21
        ? typeNumber(`${n}.0`, 'k')
        : typeNumber(String(n), 'k');
    const samples = [
      0,
      -0,
      1,
      -1,
      40,
      1.5,
      0.1,
      0.12345678901234566,
      1e-7,
      9.999999999999998,
      1e20,
      1e21,
      1.5e21,
      -2.5e300,
      123456.789,
      2 ** 53 + 2,
    ];
    // Random values of every magnitude, and many around 1 where the digit count is largest.
    let seed = 42;
    const rnd = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let i = 0; i < 20_000; i++) {
      samples.push((rnd() - 0.5) * 10 ** Math.floor(rnd() * 30 - 10));
      samples.push(1 + rnd() * 9);
    }
    for (const n of samples) assert.deepEqual(typeBinaryDouble(n, 'k'), viaText(n), String(n));
    assert.deepEqual(typeBinaryDouble(Number.NaN, 'k'), { kind: 'string', value: 'NaN' });
  });
});
