import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CHECKSUM_ALGORITHMS, checksum } from './checksum.js';

const text = (s: string) => Buffer.from(s);

describe('checksum', () => {
  it('matches published vectors for every algorithm, printed as ThingsBoard does', () => {
    const fox = text('The quick brown fox jumps over the lazy dog');
    assert.equal(checksum('MD5', fox), '9e107d9d372bb6826bd81d3542a419d6');
    assert.equal(
      checksum('SHA256', text('abc')),
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
    assert.equal(
      checksum('SHA384', text('abc')),
      'cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7',
    );
    assert.equal(checksum('SHA512', text('abc')).slice(0, 16), 'ddaf35a193617aba');
    // device-api.md §14.39: Guava prints CRC32 0xCBF43926 little-endian.
    assert.equal(checksum('CRC32', text('123456789')), '2639f4cb');
    // MurmurHash3 x86_32 seed 0 of "hello" is 0x248bfa47; Guava's HashCode bytes are little-endian.
    assert.equal(checksum('MURMUR3_32', text('hello')), '47fa8b24');
    assert.equal(checksum('MURMUR3_32', text('')), '00000000');
    // Guava's Murmur3_128 test vector.
    assert.equal(checksum('MURMUR3_128', fox), '6c1b07bc7bbc4be347939ac4a93c437a');
    assert.equal(checksum('MURMUR3_128', text('')), '0'.repeat(32));
  });

  it('covers every tail length of the murmur block loops', () => {
    const data = Buffer.from(Array.from({ length: 40 }, (_, i) => i * 7));
    const seen32 = new Set<string>();
    const seen128 = new Set<string>();
    for (let n = 0; n <= data.length; n++) {
      seen32.add(checksum('MURMUR3_32', data.subarray(0, n)));
      seen128.add(checksum('MURMUR3_128', data.subarray(0, n)));
    }
    assert.equal(seen32.size, data.length + 1);
    assert.equal(seen128.size, data.length + 1);
    for (const h of seen128) assert.match(h, /^[0-9a-f]{32}$/);
  });

  it('lists ThingsBoard algorithm names', () => {
    assert.deepEqual(
      [...CHECKSUM_ALGORITHMS],
      ['MD5', 'SHA256', 'SHA384', 'SHA512', 'CRC32', 'MURMUR3_32', 'MURMUR3_128'],
    );
  });
});
