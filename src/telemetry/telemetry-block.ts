import type { TsKind } from './telemetry-parser.js';
import type { StoredValue, TsScalar } from './telemetry-store.js';

/**
 * The compressed block of a closed range of one series (docs/telemetry.md, "Block format"):
 *
 *   u8 version (1) · varint n · varint kinds-mode · timestamps · values
 *
 * - Timestamps (ms, ascending, unique): the first as a varint, then delta-of-delta bit codes as
 *   in Facebook's Gorilla paper: `0` (same delta), `10`+7 bits, `110`+9 bits, `1110`+12 bits,
 *   `11110`+32 bits, `11111`+64 bits (zigzag); a 1 Hz series costs about 1 bit a point.
 * - Kinds: mode 0..4 = every point has that kind; 5 = one 3-bit kind per point.
 * - Doubles (in point order): Gorilla XOR of the 64-bit patterns: `0` (same value), `10` (the
 *   meaningful bits fit the previous window), `11`+5 bits leading zeros+6 bits length, then the
 *   bits. NaN payloads, ±Infinity and -0 keep their exact bits.
 * - Longs: zigzag varints of the difference to the previous long (BigInt beyond 2^53).
 * - Booleans: one bit each.
 * - Strings and JSON: a dictionary of the distinct texts of the block (varint length + UTF-8),
 *   then one varint index per point: a value repeated in a block is stored once.
 */

const VERSION = 1;
const KINDS: readonly TsKind[] = ['double', 'long', 'bool', 'string', 'json'];
const KIND_CODE: Record<TsKind, number> = { double: 0, long: 1, bool: 2, string: 3, json: 4 };
const MIXED = 5;
const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

export class BitWriter {
  buf = new Uint8Array(256);
  /** Bit position. */
  pos = 0;

  #ensure(bits: number): void {
    const need = ((this.pos + bits + 7) >>> 3) + 8;
    if (need <= this.buf.length) return;
    const next = new Uint8Array(Math.max(need, this.buf.length * 2));
    next.set(this.buf);
    this.buf = next;
  }

  /** Writes the low `n` bits of `v` (n ≤ 32), most significant first, a byte at a time. */
  bits(v: number, n: number): void {
    if (n === 0) return;
    this.#ensure(n);
    let left = n;
    while (left > 0) {
      const free = 8 - (this.pos & 7);
      const take = free < left ? free : left;
      const chunk = (v >>> (left - take)) & ((1 << take) - 1);
      this.buf[this.pos >>> 3] |= chunk << (free - take);
      this.pos += take;
      left -= take;
    }
  }

  bit(b: number): void {
    this.#ensure(1);
    if (b) this.buf[this.pos >>> 3] |= 0x80 >>> (this.pos & 7);
    this.pos++;
  }

  /** Aligns to a byte, then writes an unsigned varint (number up to 2^53). */
  varint(v: number): void {
    this.align();
    this.#ensure(80);
    let x = v;
    while (x >= 0x80) {
      this.buf[this.pos >>> 3] = (x % 0x80) | 0x80;
      this.pos += 8;
      x = Math.floor(x / 0x80);
    }
    this.buf[this.pos >>> 3] = x;
    this.pos += 8;
  }

  bigVarint(v: bigint): void {
    this.align();
    let x = v;
    for (;;) {
      this.#ensure(8);
      if (x < 0x80n) {
        this.buf[this.pos >>> 3] = Number(x);
        this.pos += 8;
        return;
      }
      this.buf[this.pos >>> 3] = Number(x & 0x7fn) | 0x80;
      this.pos += 8;
      x >>= 7n;
    }
  }

  bytes(b: Uint8Array): void {
    this.align();
    this.#ensure(b.length * 8);
    this.buf.set(b, this.pos >>> 3);
    this.pos += b.length * 8;
  }

  align(): void {
    this.pos = (this.pos + 7) & ~7;
  }

  done(): Uint8Array {
    this.align();
    return this.buf.slice(0, this.pos >>> 3);
  }
}

export class BitReader {
  readonly buf: Uint8Array;
  pos = 0;

  constructor(buf: Uint8Array) {
    this.buf = buf;
  }

  /** Reads `n` bits (n ≤ 32), a byte at a time. */
  bits(n: number): number {
    let v = 0;
    let left = n;
    while (left > 0) {
      const byte = this.buf[this.pos >>> 3];
      if (byte === undefined) throw new Error('telemetry block truncated');
      const avail = 8 - (this.pos & 7);
      const take = avail < left ? avail : left;
      v = (v << take) | ((byte >>> (avail - take)) & ((1 << take) - 1));
      this.pos += take;
      left -= take;
    }
    return v >>> 0;
  }

  bit(): number {
    const byte = this.buf[this.pos >>> 3];
    if (byte === undefined) throw new Error('telemetry block truncated');
    const b = (byte >>> (7 - (this.pos & 7))) & 1;
    this.pos++;
    return b;
  }

  varint(): number {
    this.align();
    let v = 0;
    let mul = 1;
    for (;;) {
      const byte = this.buf[this.pos >>> 3];
      if (byte === undefined) throw new Error('telemetry block truncated');
      this.pos += 8;
      v += (byte & 0x7f) * mul;
      if (byte < 0x80) return v;
      mul *= 0x80;
    }
  }

  bigVarint(): bigint {
    this.align();
    let v = 0n;
    let shift = 0n;
    for (;;) {
      const byte = this.buf[this.pos >>> 3];
      if (byte === undefined) throw new Error('telemetry block truncated');
      this.pos += 8;
      v |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return v;
      shift += 7n;
    }
  }

  bytes(n: number): Uint8Array {
    this.align();
    const start = this.pos >>> 3;
    if (start + n > this.buf.length) throw new Error('telemetry block truncated');
    this.pos += n * 8;
    return this.buf.subarray(start, start + n);
  }

  align(): void {
    this.pos = (this.pos + 7) & ~7;
  }
}

const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);
/** Index of the high and low 32-bit words of a double in `u32` (platform byte order). */
const [HI, LO] = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? [1, 0] : [0, 1];

function ctz32(x: number): number {
  return x === 0 ? 32 : 31 - Math.clz32(x & -x);
}

/** Writes `n` (≤ 64) low bits of the 64-bit pattern hi:lo. */
function write64(w: BitWriter, hi: number, lo: number, n: number): void {
  if (n > 32) {
    w.bits(hi, n - 32);
    w.bits(lo, 32);
  } else w.bits(lo, n);
}

function read64(r: BitReader, n: number): [number, number] {
  if (n > 32) {
    const hi = r.bits(n - 32);
    return [hi, r.bits(32)];
  }
  return [0, r.bits(n)];
}

/** Shifts hi:lo left by `s` (0..63). */
function shr64(hi: number, lo: number, s: number): [number, number] {
  if (s === 0) return [hi, lo];
  if (s >= 32) return [0, hi >>> (s - 32)];
  return [hi >>> s, ((lo >>> s) | (hi << (32 - s))) >>> 0];
}

/** A zigzag-encoded 64-bit delta (|d| < 2^53). */
function unzigzag64(r: BitReader): number {
  const [hi, lo] = read64(r, 64);
  const z = hi * 2 ** 32 + lo;
  return z % 2 === 1 ? -(z + 1) / 2 : z / 2;
}

function encodeTimestamps(w: BitWriter, ts: readonly number[]): void {
  w.varint(ts[0]);
  if (ts.length === 1) return;
  let delta = ts[1] - ts[0];
  w.varint(delta);
  for (let i = 2; i < ts.length; i++) {
    const d = ts[i] - ts[i - 1];
    const dod = d - delta;
    delta = d;
    if (dod === 0) w.bit(0);
    else if (dod >= -63 && dod <= 64) {
      w.bits(0b10, 2);
      w.bits(dod + 63, 7);
    } else if (dod >= -255 && dod <= 256) {
      w.bits(0b110, 3);
      w.bits(dod + 255, 9);
    } else if (dod >= -2047 && dod <= 2048) {
      w.bits(0b1110, 4);
      w.bits(dod + 2047, 12);
    } else if (dod >= -2147483647 && dod <= 2147483648) {
      w.bits(0b11110, 5);
      w.bits(dod + 2147483647, 32);
    } else {
      // Zigzag in 64 bits (two words): |dod| < 2^53.
      w.bits(0b11111, 5);
      const z = dod < 0 ? -2 * dod - 1 : 2 * dod;
      write64(w, Math.floor(z / 2 ** 32), z % 2 ** 32, 64);
    }
  }
}

const DOD_READ: ReadonlyArray<(r: BitReader) => number> = [
  () => 0,
  (r) => r.bits(7) - 63,
  (r) => r.bits(9) - 255,
  (r) => r.bits(12) - 2047,
  (r) => r.bits(32) - 2147483647,
  unzigzag64,
];

function decodeTimestamps(r: BitReader, n: number): number[] {
  const ts = new Array<number>(n);
  ts[0] = r.varint();
  if (n === 1) return ts;
  let delta = r.varint();
  ts[1] = ts[0] + delta;
  for (let i = 2; i < n; i++) {
    // The code is a run of 1 bits (at most 5) ended by a 0.
    let ones = 0;
    while (ones < 5 && r.bit() === 1) ones++;
    const dod = DOD_READ[ones](r);
    delta += dod;
    ts[i] = ts[i - 1] + delta;
  }
  return ts;
}

function encodeDoubles(w: BitWriter, values: readonly number[]): void {
  let prevHi = 0;
  let prevLo = 0;
  let lead = -1;
  let len = 0;
  for (let i = 0; i < values.length; i++) {
    f64[0] = values[i];
    const hi = u32[HI];
    const lo = u32[LO];
    if (i === 0) {
      w.bits(hi, 32);
      w.bits(lo, 32);
    } else {
      const xh = (hi ^ prevHi) >>> 0;
      const xl = (lo ^ prevLo) >>> 0;
      if (xh === 0 && xl === 0) w.bit(0);
      else {
        const lz = xh !== 0 ? Math.clz32(xh) : 32 + Math.clz32(xl);
        const tz = xl !== 0 ? ctz32(xl) : 32 + ctz32(xh);
        if (lead >= 0 && lz >= lead && tz >= 64 - lead - len) {
          // The meaningful bits fit the previous window.
          w.bits(0b10, 2);
          const [sh, sl] = shr64(xh, xl, 64 - lead - len);
          write64(w, sh, sl, len);
        } else {
          const l = Math.min(lz, 31);
          const n = 64 - l - tz;
          w.bits(0b11, 2);
          w.bits(l, 5);
          // A length of 64 is written as 0.
          w.bits(n & 63, 6);
          const [sh, sl] = shr64(xh, xl, tz);
          write64(w, sh, sl, n);
          lead = l;
          len = n;
        }
      }
    }
    prevHi = hi;
    prevLo = lo;
  }
}

function decodeDoubles(r: BitReader, n: number): number[] {
  const out = new Array<number>(n);
  let hi = 0;
  let lo = 0;
  let lead = 0;
  let len = 0;
  for (let i = 0; i < n; i++) {
    if (i === 0) {
      hi = r.bits(32);
      lo = r.bits(32);
    } else if (r.bit() === 1) {
      if (r.bit() === 1) {
        lead = r.bits(5);
        len = r.bits(6) || 64;
      }
      // The meaningful bits, shifted back into place (no allocation: this is the hot loop).
      const mh = len > 32 ? r.bits(len - 32) : 0;
      const ml = r.bits(len > 32 ? 32 : len);
      const sh = 64 - lead - len;
      if (sh === 0) {
        hi = (hi ^ mh) >>> 0;
        lo = (lo ^ ml) >>> 0;
      } else if (sh >= 32) {
        hi = (hi ^ (ml << (sh - 32))) >>> 0;
      } else {
        hi = (hi ^ ((mh << sh) | (ml >>> (32 - sh)))) >>> 0;
        lo = (lo ^ (ml << sh)) >>> 0;
      }
    }
    u32[HI] = hi;
    u32[LO] = lo;
    out[i] = f64[0];
  }
  return out;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Encodes the points of one series, ascending by ts with unique ts. Values are as stored:
 * doubles as numbers, longs as numbers or bigints, booleans, strings and JSON text.
 */
export function encodeBlock(points: readonly StoredValue[]): Uint8Array {
  const n = points.length;
  if (n === 0) throw new Error('empty telemetry block');
  const w = new BitWriter();
  w.bits(VERSION, 8);
  w.varint(n);
  const first = points[0].kind;
  const mixed = points.some((p) => p.kind !== first);
  w.varint(mixed ? MIXED : KIND_CODE[first]);
  encodeTimestamps(
    w,
    points.map((p) => p.ts),
  );
  if (mixed) {
    w.align();
    for (const p of points) w.bits(KIND_CODE[p.kind], 3);
  }
  const of = (k: TsKind) => points.filter((p) => p.kind === k).map((p) => p.value);
  const doubles = of('double') as number[];
  if (doubles.length > 0) {
    w.align();
    encodeDoubles(w, doubles);
  }
  const longs = of('long') as Array<number | bigint>;
  if (longs.length > 0) {
    let prev: number | bigint = 0;
    for (const v of longs) {
      if (typeof v === 'number' && typeof prev === 'number' && Number.isSafeInteger(v - prev)) {
        const d = v - prev;
        w.varint(d < 0 ? -2 * d - 1 : 2 * d);
      } else {
        const d = BigInt(v) - BigInt(prev);
        w.bigVarint(d < 0n ? -2n * d - 1n : 2n * d);
      }
      prev = v;
    }
  }
  const bools = of('bool');
  if (bools.length > 0) {
    w.align();
    for (const v of bools) w.bit(v ? 1 : 0);
  }
  const texts = [...of('string'), ...of('json')] as string[];
  if (texts.length > 0) {
    const dict = new Map<string, number>();
    for (const t of texts) if (!dict.has(t)) dict.set(t, dict.size);
    w.varint(dict.size);
    for (const t of dict.keys()) {
      const b = encoder.encode(t);
      w.varint(b.length);
      w.bytes(b);
    }
    for (const t of texts) w.varint(dict.get(t) as number);
  }
  return w.done();
}

/** Decodes a block into its points, ascending by ts. */
export function decodeBlock(buf: Uint8Array): StoredValue[] {
  const r = new BitReader(buf);
  const version = r.bits(8);
  if (version !== VERSION) throw new Error(`unknown telemetry block version ${version}`);
  const n = r.varint();
  const mode = r.varint();
  const ts = decodeTimestamps(r, n);
  const kinds = new Array<TsKind>(n);
  if (mode === MIXED) {
    r.align();
    for (let i = 0; i < n; i++) kinds[i] = KINDS[r.bits(3)];
  } else kinds.fill(KINDS[mode]);
  const tally = [0, 0, 0, 0, 0];
  if (mode === MIXED) for (const k of kinds) tally[KIND_CODE[k]]++;
  else tally[mode] = n;
  const count = (k: TsKind) => tally[KIND_CODE[k]];
  const values = new Array<TsScalar>(n);
  const nd = count('double');
  if (nd > 0) {
    r.align();
    const d = decodeDoubles(r, nd);
    if (nd === n) {
      const out = new Array<StoredValue>(n);
      for (let i = 0; i < n; i++) out[i] = { ts: ts[i], kind: 'double', value: d[i] };
      return out;
    }
    let j = 0;
    for (let i = 0; i < n; i++) if (kinds[i] === 'double') values[i] = d[j++];
  }
  if (count('long') > 0) {
    // Number varints and BigInt varints are the same LEB128: read a number while it is exact.
    let prev: number | bigint = 0;
    for (let i = 0; i < n; i++) {
      if (kinds[i] !== 'long') continue;
      const start = r.pos;
      const z = r.varint();
      let v: number | bigint | undefined;
      if (z <= Number.MAX_SAFE_INTEGER && typeof prev === 'number') {
        v = prev + (z % 2 === 1 ? -(z + 1) / 2 : z / 2);
        if (!Number.isSafeInteger(v)) v = undefined;
      }
      if (v === undefined) {
        r.pos = start;
        const zb = r.bigVarint();
        const big: bigint = BigInt(prev) + (zb & 1n ? -(zb + 1n) / 2n : zb / 2n);
        v = big >= MIN_SAFE && big <= MAX_SAFE ? Number(big) : big;
      }
      values[i] = v;
      prev = v;
    }
  }
  if (count('bool') > 0) {
    r.align();
    for (let i = 0; i < n; i++) if (kinds[i] === 'bool') values[i] = r.bit() === 1;
  }
  if (count('string') + count('json') > 0) {
    const size = r.varint();
    const dict: string[] = [];
    for (let i = 0; i < size; i++) dict.push(decoder.decode(r.bytes(r.varint())));
    // Strings first, then JSON, each in point order (as written).
    for (const k of ['string', 'json'] as const) {
      for (let i = 0; i < n; i++) if (kinds[i] === k) values[i] = dict[r.varint()];
    }
  }
  const out = new Array<StoredValue>(n);
  for (let i = 0; i < n; i++) out[i] = { ts: ts[i], kind: kinds[i], value: values[i] };
  return out;
}

/**
 * One message in the durable log (`ts_log.data`): the points of one device as committed, in
 * arrival order: varint count, varint first ts, then per point varint key id, zigzag varint
 * ts − first ts, a kind byte (0 double, 1 long, 2 false, 3 true, 4 string, 5 JSON, 6..12 a
 * double in decimal form with 0..6 decimals) and the value (8 bytes for a double, a zigzag
 * varint for a long or a decimal's mantissa, varint length + UTF-8 for text).
 */
export interface LogPoint {
  readonly keyId: number;
  readonly ts: number;
  readonly kind: TsKind;
  readonly value: TsScalar;
}

const LOG_KIND = { double: 0, long: 1, string: 4, json: 5 } as const;
/** Kind codes 6..12: a double written as a decimal, mantissa / 10^(code - 6). */
const LOG_DECIMAL = 6;
/** Exact powers of ten (literals, not `**`) for the decimal form of doubles. */
const POW10 = [1, 10, 100, 1000, 10000, 100000, 1000000] as const;

/**
 * The decimal form of a double, when one of up to 6 decimals gives back its exact bits:
 * [scale, mantissa] with mantissa / 10^scale === value; undefined for NaN, ±Infinity, -0, more
 * decimals or a mantissa beyond 2^48. A sensor reading such as 21.53 then takes a 2-3 byte
 * varint instead of 8 bytes.
 */
function decimalOf(value: number): [number, number] | undefined {
  if (!Number.isFinite(value) || Object.is(value, -0)) return undefined;
  for (let scale = 0; scale < POW10.length; scale++) {
    const m = Math.round(value * POW10[scale]);
    if (Math.abs(m) > 2 ** 48) return undefined;
    if (m / POW10[scale] === value) return [scale, m];
  }
  return undefined;
}

export function encodeLogRecord(points: readonly LogPoint[]): Uint8Array {
  const w = new BitWriter();
  const base = points[0].ts;
  w.varint(points.length);
  w.varint(base);
  const dv = new DataView(new ArrayBuffer(8));
  for (const p of points) {
    w.varint(p.keyId);
    const d = p.ts - base;
    w.varint(d < 0 ? -2 * d - 1 : 2 * d);
    switch (p.kind) {
      case 'bool':
        w.varint(p.value ? 3 : 2);
        break;
      case 'double': {
        const dec = decimalOf(p.value as number);
        if (dec) {
          w.varint(LOG_DECIMAL + dec[0]);
          w.varint(dec[1] < 0 ? -2 * dec[1] - 1 : 2 * dec[1]);
          break;
        }
        w.varint(LOG_KIND.double);
        dv.setFloat64(0, p.value as number);
        w.bytes(new Uint8Array(dv.buffer));
        break;
      }
      case 'long': {
        w.varint(LOG_KIND.long);
        const v = p.value as number | bigint;
        if (typeof v === 'number' && Number.isSafeInteger(2 * v))
          w.varint(v < 0 ? -2 * v - 1 : 2 * v);
        else {
          const b = BigInt(v);
          w.bigVarint(b < 0n ? -2n * b - 1n : 2n * b);
        }
        break;
      }
      default: {
        w.varint(LOG_KIND[p.kind]);
        const b = encoder.encode(p.value as string);
        w.varint(b.length);
        w.bytes(b);
      }
    }
  }
  return w.done();
}

export function decodeLogRecord(buf: Uint8Array): LogPoint[] {
  const r = new BitReader(buf);
  const n = r.varint();
  const base = r.varint();
  const out: LogPoint[] = [];
  const dv = new DataView(new ArrayBuffer(8));
  const bytes = new Uint8Array(dv.buffer);
  for (let i = 0; i < n; i++) {
    const keyId = r.varint();
    const z = r.varint();
    const ts = base + (z % 2 === 1 ? -(z + 1) / 2 : z / 2);
    const code = r.varint();
    switch (code) {
      case 0:
        bytes.set(r.bytes(8));
        out.push({ keyId, ts, kind: 'double', value: dv.getFloat64(0) });
        break;
      case 1: {
        const start = r.pos;
        const zl = r.varint();
        let value: number | bigint;
        if (zl <= Number.MAX_SAFE_INTEGER) value = zl % 2 === 1 ? -(zl + 1) / 2 : zl / 2;
        else {
          r.pos = start;
          const zb = r.bigVarint();
          const big = zb & 1n ? -(zb + 1n) / 2n : zb / 2n;
          value = big >= MIN_SAFE && big <= MAX_SAFE ? Number(big) : big;
        }
        out.push({ keyId, ts, kind: 'long', value });
        break;
      }
      case 2:
      case 3:
        out.push({ keyId, ts, kind: 'bool', value: code === 3 });
        break;
      case 4:
      case 5:
        out.push({
          keyId,
          ts,
          kind: code === 4 ? 'string' : 'json',
          value: decoder.decode(r.bytes(r.varint())),
        });
        break;
      default: {
        const scale = code - LOG_DECIMAL;
        if (scale < 0 || scale >= POW10.length) {
          throw new Error(`bad telemetry log record (kind ${code})`);
        }
        const zm = r.varint();
        const m = zm % 2 === 1 ? -(zm + 1) / 2 : zm / 2;
        out.push({ keyId, ts, kind: 'double', value: m / POW10[scale] });
      }
    }
  }
  return out;
}
