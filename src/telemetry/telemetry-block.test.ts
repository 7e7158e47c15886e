import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeBlock, decodeLogRecord, encodeBlock, encodeLogRecord } from './telemetry-block.js';
import type { StoredValue } from './telemetry-store.js';

const T0 = 1_700_000_000_000;

/** Equal ts, kind and value, where -0 differs from 0 and NaN equals NaN (Object.is). */
function assertSame(actual: readonly StoredValue[], expected: readonly StoredValue[]): void {
  assert.equal(actual.length, expected.length);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i];
    const e = expected[i];
    assert.equal(a.ts, e.ts, `ts of point ${i}`);
    assert.equal(a.kind, e.kind, `kind of point ${i}`);
    assert.ok(
      Object.is(a.value, e.value) || a.value === e.value,
      `value of point ${i}: ${String(a.value).slice(0, 40)} != ${String(e.value).slice(0, 40)}`,
    );
  }
}

/** A deterministic pseudo-random sequence (xorshift), so sizes are the same on every run. */
function random(seed: number): () => number {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

describe('block encoding', () => {
  it('round-trips doubles bit for bit: NaN, ±Infinity, -0, subnormals, extremes', () => {
    const specials = [
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      -0,
      0,
      5e-324,
      -5e-324,
      Number.MAX_VALUE,
      -Number.MAX_VALUE,
      Number.MIN_VALUE,
      1,
      1,
      1.0000000000000002,
      21.37,
      -21.37,
      1e300,
      2 ** 53 + 2,
    ];
    const points = specials.map((value, i) => ({
      ts: T0 + i * 1000,
      kind: 'double' as const,
      value,
    }));
    assertSame(decodeBlock(encodeBlock(points)), points);
  });

  it('round-trips longs, 64-bit ones beyond 2^53 included', () => {
    const values: Array<number | bigint> = [
      0,
      1,
      -1,
      Number.MAX_SAFE_INTEGER,
      Number.MIN_SAFE_INTEGER,
      2n ** 53n + 1n,
      9223372036854775807n,
      -9223372036854775808n,
      42,
      -(2n ** 60n),
      7,
    ];
    const points = values.map((value, i) => ({ ts: T0 + i, kind: 'long' as const, value }));
    assertSame(decodeBlock(encodeBlock(points)), points);
  });

  it('round-trips booleans, long strings, Unicode and JSON, repeated texts stored once', () => {
    const long = 'x'.repeat(65_536);
    const points: StoredValue[] = [
      { ts: T0, kind: 'bool', value: true },
      { ts: T0 + 1, kind: 'bool', value: false },
      { ts: T0 + 2, kind: 'string', value: long },
      { ts: T0 + 3, kind: 'string', value: '' },
      { ts: T0 + 4, kind: 'string', value: 'é 😀 \u0000 end' },
      { ts: T0 + 5, kind: 'json', value: '{"a":[1,2.50,{"b":null}]}' },
      { ts: T0 + 6, kind: 'string', value: long },
      { ts: T0 + 7, kind: 'json', value: '{"a":[1,2.50,{"b":null}]}' },
      { ts: T0 + 8, kind: 'string', value: long },
    ];
    const block = encodeBlock(points);
    assertSame(decodeBlock(block), points);
    assert.ok(
      block.length < long.length + 100,
      `the long string is stored once: ${block.length} bytes`,
    );
  });

  it('round-trips a series whose value kind changes from point to point', () => {
    const kinds = ['double', 'long', 'bool', 'string', 'json'] as const;
    const values = [1.5, 7, true, 'seven', '[7]'];
    const points: StoredValue[] = Array.from({ length: 50 }, (_, i) => ({
      ts: T0 + i * 10,
      kind: kinds[i % 5],
      value: values[i % 5],
    }));
    assertSame(decodeBlock(encodeBlock(points)), points);
  });

  it('round-trips irregular timestamps: jitter, gaps of years, ts 0 and one point', () => {
    const next = random(7);
    const ts = [
      0,
      1,
      2,
      1000,
      1001,
      5_000_000,
      5_000_999,
      5_001_000,
      T0,
      T0 + 1,
      T0 + 86_400_000 * 365 * 30,
    ];
    let t = T0 + 86_400_000 * 365 * 31;
    for (let i = 0; i < 500; i++) {
      t += 1000 + Math.floor((next() - 0.5) * 600);
      ts.push(t);
    }
    const points = ts.map((x, i) => ({ ts: x, kind: 'long' as const, value: i }));
    assertSame(decodeBlock(encodeBlock(points)), points);
    const one = [{ ts: 123, kind: 'double' as const, value: -0 }];
    assertSame(decodeBlock(encodeBlock(one)), one);
  });

  it('takes at most 8 bytes a point for regular 1 Hz, slowly changing readings', () => {
    const next = random(42);
    let v = 21.5;
    const points = Array.from({ length: 3600 }, (_, i) => {
      v = Math.round((v + (next() - 0.5) * 0.1) * 100) / 100;
      return { ts: T0 + i * 1000, kind: 'double' as const, value: v };
    });
    const block = encodeBlock(points);
    assertSame(decodeBlock(block), points);
    assert.ok(
      block.length / points.length <= 8,
      `${(block.length / points.length).toFixed(2)} B/point`,
    );
  });

  it('refuses an empty block and a block of an unknown version', () => {
    assert.throws(() => encodeBlock([]), /empty/);
    const block = encodeBlock([{ ts: 1, kind: 'long', value: 1 }]);
    block[0] = 99;
    assert.throws(() => decodeBlock(block), /version 99/);
  });
});

describe('log records', () => {
  it('round-trip every value kind, in arrival order, ts before the first included', () => {
    const points = [
      { keyId: 1, ts: T0, kind: 'double' as const, value: Number.NaN },
      { keyId: 2, ts: T0 - 5000, kind: 'double' as const, value: -0 },
      { keyId: 3, ts: T0, kind: 'long' as const, value: 9223372036854775807n },
      { keyId: 3, ts: T0 + 1, kind: 'long' as const, value: -42 },
      { keyId: 300, ts: T0, kind: 'bool' as const, value: false },
      { keyId: 4, ts: T0, kind: 'bool' as const, value: true },
      { keyId: 5, ts: T0, kind: 'string' as const, value: 'y'.repeat(70_000) },
      { keyId: 6, ts: T0, kind: 'json' as const, value: '{"a":1.0}' },
      { keyId: 1, ts: T0, kind: 'double' as const, value: Number.NEGATIVE_INFINITY },
    ];
    const back = decodeLogRecord(encodeLogRecord(points));
    assert.equal(back.length, points.length);
    points.forEach((p, i) => {
      assert.equal(back[i].keyId, p.keyId);
      assert.equal(back[i].ts, p.ts);
      assert.equal(back[i].kind, p.kind);
      assert.ok(Object.is(back[i].value, p.value) || back[i].value === p.value, `point ${i}`);
    });
  });

  it('a message of 3 numeric keys with few decimals takes about 20 bytes', () => {
    const rec = encodeLogRecord([
      { keyId: 1, ts: T0, kind: 'double', value: 21.37 },
      { keyId: 2, ts: T0, kind: 'double', value: 45.2 },
      { keyId: 3, ts: T0, kind: 'long', value: 1013 },
    ]);
    assert.ok(rec.length <= 22, `${rec.length} bytes`);
  });

  it('doubles keep their exact bits, in decimal form when it gives them back, else in 8 bytes', () => {
    const values = [
      0,
      1,
      -1,
      21.53,
      -273.15,
      0.1,
      0.30000000000000004,
      1e-7,
      123456.789012,
      1234567.1234567,
      2 ** 48,
      2 ** 48 + 0.5,
      2 ** 53 + 2,
      -(2 ** 60),
      1e300,
      5e-324,
      Number.MAX_VALUE,
      Number.MIN_VALUE,
      -0,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      9.999999,
      0.000001,
      1 / 3,
    ];
    for (let i = 0; i < 2000; i++) {
      const scale = 10 ** (i % 8);
      values.push(Math.round((Math.random() - 0.5) * 1e6 * scale) / scale);
    }
    const points = values.map((value, i) => ({
      keyId: 1,
      ts: T0 + i,
      kind: 'double' as const,
      value,
    }));
    const back = decodeLogRecord(encodeLogRecord(points));
    for (const [i, v] of values.entries()) {
      assert.ok(Object.is(back[i].value, v), `${v} read as ${back[i].value}`);
    }
    // A reading with two decimals takes 1 byte of kind and 2-3 of mantissa, not 1 + 8.
    const one = (value: number) =>
      encodeLogRecord([{ keyId: 1, ts: T0, kind: 'double', value }]).length;
    assert.ok(one(21.53) <= one(1 / 3) - 5, `${one(21.53)} against ${one(1 / 3)}`);
  });
});
