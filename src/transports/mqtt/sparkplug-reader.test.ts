import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { get as sparkplugCodec } from 'sparkplug-payload';
import { ValidationError } from '../../errors.js';
import { readSparkplugPayload } from './sparkplug-reader.js';

// Payloads encoded by Eclipse Tahu's library, not by our code.
const tahu = sparkplugCodec('spBv1.0');
if (!tahu) throw new Error('no spBv1.0 codec');
type Metrics = NonNullable<Parameters<typeof tahu.encodePayload>[0]['metrics']>;
const encode = (p: Parameters<typeof tahu.encodePayload>[0]) => Buffer.from(tahu.encodePayload(p));

describe('readSparkplugPayload (issue 21)', () => {
  it("reads what Tahu's encoder writes: timestamps, seq, names, aliases and every scalar type", () => {
    const metrics = [
      { name: 'i8', type: 'Int8', value: -5 },
      { name: 'i32', type: 'Int32', value: -70000, alias: 3, timestamp: 1234 },
      { name: 'i64', type: 'Int64', value: 1_234_567_890_123 },
      { name: 'neg', type: 'Int64', value: -5 },
      { name: 'u32', type: 'UInt32', value: 4_000_000_000 },
      { name: 'f', type: 'Float', value: 1.5 },
      { name: 'd', type: 'Double', value: 21.123456 },
      { name: 'b', type: 'Boolean', value: true },
      { name: 's', type: 'String', value: 'héllo' },
      { name: 'bytes', type: 'Bytes', value: new Uint8Array([1, 255]) },
      { name: 'n', type: 'Int32', value: null, isNull: true },
    ] as unknown as Metrics;
    const p = readSparkplugPayload(encode({ timestamp: 1_700_000_000_000, seq: 7, metrics }));
    assert.equal(p.timestamp, 1_700_000_000_000);
    assert.equal(p.seq, 7);
    const byName = new Map(p.metrics.map((m) => [m.name, m]));
    assert.equal(byName.get('i8')?.datatype, 1);
    assert.equal((byName.get('i8')?.value as number) | 0, -5);
    assert.equal(byName.get('i32')?.alias, 3);
    assert.equal(byName.get('i32')?.timestamp, 1234);
    assert.equal((byName.get('i32')?.value as number) | 0, -70000);
    assert.equal(byName.get('i64')?.value, 1_234_567_890_123);
    // A negative Int64 is a 10-byte varint: read exactly, as the unsigned 64-bit pattern.
    assert.equal(byName.get('neg')?.value, 2n ** 64n - 5n);
    assert.equal(byName.get('u32')?.value, 4_000_000_000);
    assert.equal(byName.get('f')?.value, 1.5);
    assert.equal(byName.get('d')?.value, 21.123456);
    assert.equal(byName.get('d')?.datatype, 10);
    assert.equal(byName.get('b')?.value, true);
    assert.equal(byName.get('s')?.value, 'héllo');
    const bytes = byName.get('bytes');
    assert.ok(bytes, 'the bytes metric is read');
    assert.deepEqual([...(bytes.value as Uint8Array)], [1, 255]);
    assert.equal(byName.get('n')?.isNull, true);
  });

  it('reads alias-only metrics and skips fields it does not keep', () => {
    const p = readSparkplugPayload(
      encode({
        timestamp: 5,
        uuid: 'abc',
        metrics: [{ alias: 12, type: 'Double', value: 2.5 }] as unknown as Metrics,
      }),
    );
    assert.equal(p.metrics.length, 1);
    assert.equal(p.metrics[0].name, undefined);
    assert.equal(p.metrics[0].alias, 12);
    assert.equal(p.metrics[0].value, 2.5);
  });

  it('refuses a truncated payload or a wrong wire type with a ValidationError', () => {
    const whole = encode({ timestamp: 5, metrics: [{ name: 'x', type: 'Double', value: 1 }] });
    assert.throws(() => readSparkplugPayload(whole.subarray(0, whole.length - 3)), ValidationError);
    // Field 2 (metrics) as a varint.
    assert.throws(() => readSparkplugPayload(Buffer.from([0x10, 0x01])), ValidationError);
    assert.deepEqual(readSparkplugPayload(Buffer.alloc(0)).metrics, []);
  });
});
