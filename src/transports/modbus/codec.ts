import { JsonNumber } from '../../common/json-text.js';
import {
  type ByteOrder,
  type ModbusTag,
  type ModbusValueType,
  registersOf,
} from '../../connectors/modbus-config.js';

/**
 * Register and coil values to readings and back, with the IoT Gateway's layout (connectors
 * reference §3, §4): each register is high byte first; `byteOrder LITTLE` swaps the two bytes of
 * every register, `wordOrder LITTLE` reverses the order of the registers of a 32/64-bit value.
 *
 * Where the IoT Gateway has known bugs (reference §9), this does not copy them: bits come in
 * address order, and `bit` on a register names its bit 0 (least significant) to 15.
 */

export interface Orders {
  readonly byteOrder: ByteOrder;
  readonly wordOrder: ByteOrder;
}

/**
 * A decoded value. Integers are numbers (bigint beyond 2^53); a floating-point result is a
 * `JsonNumber` whose text keeps a fraction (`21.0`), so that the core stores it as a DOUBLE, as
 * ThingsBoard does with the IoT Gateway's Python floats.
 */
export type ModbusValue = boolean | number | bigint | string | JsonNumber | ModbusValue[];

/** The bytes of a numeric value in big-endian order, from its registers. */
function orderedBytes(regs: readonly number[], count: number, o: Orders): Buffer {
  const words = regs.slice(0, count);
  if (count > 1 && o.wordOrder === 'LITTLE') words.reverse();
  const buf = Buffer.alloc(count * 2);
  words.forEach((w, i) => {
    if (o.byteOrder === 'LITTLE') buf.writeUInt16LE(w & 0xffff, i * 2);
    else buf.writeUInt16BE(w & 0xffff, i * 2);
  });
  return buf;
}

/** The inverse of `orderedBytes`: registers to send for a big-endian byte image. */
function wordsOf(buf: Buffer, o: Orders): number[] {
  const words: number[] = [];
  for (let i = 0; i < buf.length; i += 2) {
    words.push(o.byteOrder === 'LITTLE' ? buf.readUInt16LE(i) : buf.readUInt16BE(i));
  }
  if (words.length > 1 && o.wordOrder === 'LITTLE') words.reverse();
  return words;
}

function double(n: number, round: number): JsonNumber | number {
  if (!Number.isFinite(n)) return n;
  const r = Number(n.toFixed(round));
  const text = String(r);
  return new JsonNumber(/[.eE]/.test(text) ? text : `${text}.0`);
}

function toNumber(v: ModbusValue): number {
  if (v instanceof JsonNumber) return Number(v.raw);
  return Number(v);
}

/** Decodes the registers (function codes 3, 4) read for one tag. */
export function decodeRegisters(regs: readonly number[], tag: ModbusTag, o: Orders): ModbusValue {
  const bytesBE = () => {
    const b = Buffer.alloc(regs.length * 2);
    regs.forEach((w, i) => {
      b.writeUInt16BE(w & 0xffff, i * 2);
    });
    return b;
  };
  let value: ModbusValue;
  switch (tag.type) {
    case 'bits': {
      // Register bits in address order: bit 0 of the first register first.
      const bits: boolean[] = [];
      for (const w of regs) for (let i = 0; i < 16; i++) bits.push(((w >> i) & 1) === 1);
      if (tag.bit !== undefined) return bitValue(bits[tag.bit] ?? false, tag);
      return bits;
    }
    case 'string': {
      const b = bytesBE();
      let end = b.length;
      while (end > 0 && b[end - 1] === 0) end--;
      const text = b.subarray(0, end).toString('utf8');
      return text.includes('\ufffd') ? b.subarray(0, end).toString('hex') : text;
    }
    case 'bytes':
      return bytesBE().toString('hex');
    case '8int':
      value = ((regs[0] >> 8) << 24) >> 24;
      break;
    case '8uint':
      value = (regs[0] >> 8) & 0xff;
      break;
    default:
      value = decodeNumber(orderedBytes(regs, registersOf(tag.type), o), tag.type, tag.round);
  }
  return scale(value, tag);
}

function decodeNumber(b: Buffer, type: ModbusValueType, round: number): ModbusValue {
  switch (type) {
    case '16int':
      return b.readInt16BE(0);
    case '16uint':
      return b.readUInt16BE(0);
    case '16float':
      return double(halfToNumber(b.readUInt16BE(0)), round);
    case '32int':
      return b.readInt32BE(0);
    case '32uint':
      return b.readUInt32BE(0);
    case '32float':
      return double(b.readFloatBE(0), round);
    case '64int':
      return safe(b.readBigInt64BE(0));
    case '64uint':
      return safe(b.readBigUInt64BE(0));
    case '64float':
      return double(b.readDoubleBE(0), round);
    default:
      throw new Error(`not a numeric type: ${type}`);
  }
}

function safe(n: bigint): number | bigint {
  return n <= BigInt(Number.MAX_SAFE_INTEGER) && n >= BigInt(Number.MIN_SAFE_INTEGER)
    ? Number(n)
    : n;
}

/** Reference §3: `divider` (a float division) wins over `multiplier`; registers only. */
function scale(value: ModbusValue, tag: ModbusTag): ModbusValue {
  if (tag.divider !== undefined) return double(toNumber(value) / tag.divider, tag.round);
  if (tag.multiplier !== undefined) {
    const n = toNumber(value) * tag.multiplier;
    return Number.isInteger(tag.multiplier) && !(value instanceof JsonNumber)
      ? n
      : double(n, tag.round);
  }
  return value;
}

function bitValue(b: boolean, tag: ModbusTag): boolean | number {
  return tag.bitTargetType === 'int' ? (b ? 1 : 0) : b;
}

/** Decodes coils or discrete inputs (function codes 1, 2), in address order. */
export function decodeBits(bits: readonly boolean[], tag: ModbusTag): ModbusValue {
  const list = bits.slice(0, tag.objectsCount);
  if (tag.bit !== undefined) return bitValue(list[tag.bit] ?? false, tag);
  if (tag.objectsCount === 1) return bitValue(list[0] ?? false, tag);
  return list.map((b) => bitValue(b, tag));
}

/** IEEE 754 half precision. */
function halfToNumber(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * 2 ** -14 * (frac / 1024);
  if (exp === 31) return frac ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * 2 ** (exp - 15) * (1 + frac / 1024);
}

function numberToHalf(n: number): number {
  const buf = new DataView(new ArrayBuffer(4));
  buf.setFloat32(0, n);
  const x = buf.getUint32(0);
  const sign = (x >>> 16) & 0x8000;
  const exp = ((x >>> 23) & 0xff) - 127 + 15;
  const frac = x & 0x7fffff;
  if (exp <= 0) return sign | Math.round((frac | 0x800000) / 2 ** (14 - exp));
  if (exp >= 31) return sign | 0x7c00;
  return sign | (exp << 10) | Math.round(frac / 8192);
}

/** What a write sends: registers (function codes 6, 16) or coils (5, 15). */
export type WritePayload =
  | { readonly kind: 'registers'; readonly values: readonly number[] }
  | { readonly kind: 'coils'; readonly values: readonly boolean[] };

function toBool(v: unknown): boolean {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number' || typeof v === 'bigint') return Number(v) !== 0;
  if (typeof v === 'string') {
    const s = v.trim().toLowerCase();
    if (s === 'true' || s === 'on') return true;
    if (s === 'false' || s === 'off') return false;
    if (/^-?\d+(\.\d+)?$/.test(s)) return Number(s) !== 0;
  }
  throw new TypeError(`cannot write ${JSON.stringify(v)} to a coil`);
}

function toNumeric(v: unknown): number {
  const n = typeof v === 'string' ? Number(v.trim()) : typeof v === 'boolean' ? Number(v) : v;
  if (typeof n === 'bigint') return Number(n);
  if (typeof n !== 'number' || !Number.isFinite(n) || (typeof v === 'string' && v.trim() === '')) {
    throw new TypeError(`cannot write ${JSON.stringify(v)} as a number`);
  }
  return n;
}

function toBigInt(v: unknown): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'string' && /^-?\d+$/.test(v.trim())) return BigInt(v.trim());
  return BigInt(Math.trunc(toNumeric(v)));
}

/**
 * Encodes a value to write for one tag (reference §4): integers are truncated, floats written as
 * IEEE values, strings zero-padded to `objectsCount` registers, coils from booleans, 0/1 or
 * "true"/"false". Throws TypeError for a value that does not fit the type.
 */
export function encodeValue(value: unknown, tag: ModbusTag, o: Orders): WritePayload {
  if (tag.type === 'bits' || tag.functionCode === 5 || tag.functionCode === 15) {
    if (tag.functionCode === 5 || tag.functionCode === 15) {
      const list = Array.isArray(value) ? value.map(toBool) : [toBool(value)];
      if (tag.functionCode === 15 && list.length === 1 && tag.objectsCount > 1) {
        return { kind: 'coils', values: new Array<boolean>(tag.objectsCount).fill(list[0]) };
      }
      return { kind: 'coils', values: list };
    }
    return { kind: 'registers', values: [toBool(value) ? 1 : 0] };
  }
  let buf: Buffer;
  switch (tag.type) {
    case 'string':
    case 'bytes': {
      buf = Buffer.alloc(tag.objectsCount * 2);
      const src =
        tag.type === 'bytes' ? Buffer.from(String(value), 'hex') : Buffer.from(String(value));
      if (src.length > buf.length) {
        throw new TypeError(`the value is longer than ${buf.length} bytes`);
      }
      src.copy(buf);
      // Strings and bytes are sent as laid out, without reordering (reference §3).
      const words: number[] = [];
      for (let i = 0; i < buf.length; i += 2) words.push(buf.readUInt16BE(i));
      return { kind: 'registers', values: words };
    }
    case '8int':
    case '8uint':
      return { kind: 'registers', values: [(Math.trunc(toNumeric(value)) & 0xff) << 8] };
    case '16int':
    case '16uint': {
      buf = Buffer.alloc(2);
      const n = Math.trunc(toNumeric(value));
      checkRange(n, tag.type === '16int' ? -0x8000 : 0, tag.type === '16int' ? 0x7fff : 0xffff);
      if (tag.type === '16int') buf.writeInt16BE(n);
      else buf.writeUInt16BE(n);
      break;
    }
    case '16float':
      buf = Buffer.alloc(2);
      buf.writeUInt16BE(numberToHalf(toNumeric(value)));
      break;
    case '32int':
    case '32uint': {
      buf = Buffer.alloc(4);
      const n = Math.trunc(toNumeric(value));
      if (tag.type === '32int') {
        checkRange(n, -0x80000000, 0x7fffffff);
        buf.writeInt32BE(n);
      } else {
        checkRange(n, 0, 0xffffffff);
        buf.writeUInt32BE(n);
      }
      break;
    }
    case '32float':
      buf = Buffer.alloc(4);
      buf.writeFloatBE(toNumeric(value));
      break;
    case '64int':
      buf = Buffer.alloc(8);
      buf.writeBigInt64BE(BigInt.asIntN(64, toBigInt(value)));
      break;
    case '64uint':
      buf = Buffer.alloc(8);
      buf.writeBigUInt64BE(BigInt.asUintN(64, toBigInt(value)));
      break;
    case '64float':
      buf = Buffer.alloc(8);
      buf.writeDoubleBE(toNumeric(value));
      break;
    default:
      throw new TypeError(`cannot write type ${tag.type}`);
  }
  return { kind: 'registers', values: wordsOf(buf, o) };
}

function checkRange(n: number, min: number, max: number): void {
  if (n < min || n > max) throw new TypeError(`${n} is out of range ${min}..${max}`);
}
