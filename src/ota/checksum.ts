import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';

/** ThingsBoard's `ChecksumAlgorithm` values (device-api.md §7.1). */
export const CHECKSUM_ALGORITHMS = [
  'MD5',
  'SHA256',
  'SHA384',
  'SHA512',
  'CRC32',
  'MURMUR3_32',
  'MURMUR3_128',
] as const;
export type ChecksumAlgorithm = (typeof CHECKSUM_ALGORITHMS)[number];

const NODE_HASH: Partial<Record<ChecksumAlgorithm, string>> = {
  MD5: 'md5',
  SHA256: 'sha256',
  SHA384: 'sha384',
  SHA512: 'sha512',
};

/**
 * Lowercase hex checksum as ThingsBoard prints it: the bytes of Guava's `HashCode`. For CRC32 and
 * MURMUR3_* those bytes are little-endian (CRC32 `0xCBF43926` prints as `2639f4cb`). MD5/SHA* come
 * from node:crypto, CRC32 from node:zlib, MURMUR3_32/128 (seed 0, x86_32 and x64_128 variants,
 * as Guava's `murmur3_32_fixed`/`murmur3_128`) are implemented here.
 */
export function checksum(algorithm: ChecksumAlgorithm, data: Uint8Array): string {
  const nodeName = NODE_HASH[algorithm];
  if (nodeName) return createHash(nodeName).update(data).digest('hex');
  if (algorithm === 'CRC32') return le32Hex(crc32(data));
  if (algorithm === 'MURMUR3_32') return le32Hex(murmur3x86_32(data));
  return murmur3x64_128Hex(data);
}

function le32Hex(n: number): string {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b.toString('hex');
}

function rotl32(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function fmix32(h: number): number {
  let x = h;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** MurmurHash3 x86_32 with seed 0. */
export function murmur3x86_32(data: Uint8Array): number {
  const c1 = 0xcc9e2d51;
  const c2 = 0x1b873593;
  const len = data.length;
  const blocks = len - (len % 4);
  let h = 0;
  for (let i = 0; i < blocks; i += 4) {
    let k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24);
    k = Math.imul(rotl32(Math.imul(k, c1), 15), c2);
    h ^= k;
    h = (Math.imul(rotl32(h, 13), 5) + 0xe6546b64) | 0;
  }
  let k = 0;
  const rem = len - blocks;
  if (rem >= 3) k ^= data[blocks + 2] << 16;
  if (rem >= 2) k ^= data[blocks + 1] << 8;
  if (rem >= 1) {
    k ^= data[blocks];
    h ^= Math.imul(rotl32(Math.imul(k, c1), 15), c2);
  }
  return fmix32(h ^ len);
}

const M64 = (1n << 64n) - 1n;
const C1_64 = 0x87c37b91114253d5n;
const C2_64 = 0x4cf5ad432745937fn;

function rotl64(x: bigint, r: bigint): bigint {
  return ((x << r) | (x >> (64n - r))) & M64;
}

function fmix64(k: bigint): bigint {
  let x = k;
  x ^= x >> 33n;
  x = (x * 0xff51afd7ed558ccdn) & M64;
  x ^= x >> 33n;
  x = (x * 0xc4ceb9fe1a85ec53n) & M64;
  x ^= x >> 33n;
  return x;
}

/**
 * MurmurHash3 x64_128 with seed 0, printed as Guava does (h1 then h2, each little-endian).
 * @NOTE: BigInt arithmetic: fine for firmware-sized files, slow (seconds) for tens of MiB.
 */
export function murmur3x64_128Hex(data: Uint8Array): string {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const len = data.length;
  const blocks = len - (len % 16);
  let h1 = 0n;
  let h2 = 0n;
  for (let i = 0; i < blocks; i += 16) {
    let k1 = view.getBigUint64(i, true);
    let k2 = view.getBigUint64(i + 8, true);
    k1 = (rotl64((k1 * C1_64) & M64, 31n) * C2_64) & M64;
    h1 ^= k1;
    h1 = (((rotl64(h1, 27n) + h2) & M64) * 5n + 0x52dce729n) & M64;
    k2 = (rotl64((k2 * C2_64) & M64, 33n) * C1_64) & M64;
    h2 ^= k2;
    h2 = (((rotl64(h2, 31n) + h1) & M64) * 5n + 0x38495ab5n) & M64;
  }
  const rem = len - blocks;
  let k1 = 0n;
  let k2 = 0n;
  for (let j = rem - 1; j >= 8; j--) k2 = (k2 << 8n) | BigInt(data[blocks + j]);
  for (let j = Math.min(rem, 8) - 1; j >= 0; j--) k1 = (k1 << 8n) | BigInt(data[blocks + j]);
  if (rem > 8) h2 ^= (rotl64((k2 * C2_64) & M64, 33n) * C1_64) & M64;
  if (rem > 0) h1 ^= (rotl64((k1 * C1_64) & M64, 31n) * C2_64) & M64;
  const n = BigInt(len);
  h1 ^= n;
  h2 ^= n;
  h1 = (h1 + h2) & M64;
  h2 = (h2 + h1) & M64;
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 = (h1 + h2) & M64;
  h2 = (h2 + h1) & M64;
  const out = Buffer.alloc(16);
  out.writeBigUInt64LE(h1, 0);
  out.writeBigUInt64LE(h2, 8);
  return out.toString('hex');
}
