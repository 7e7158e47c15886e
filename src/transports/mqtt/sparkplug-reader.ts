/**
 * A reader of Sparkplug B payloads (issue 21): the Eclipse Tahu `Payload` schema
 * (transport-profiles.md §4.7), read straight from the Protobuf wire format into plain metrics.
 * Only what the gateway stores is kept (timestamps, seq, and each metric's name, alias,
 * timestamp, datatype, null flag and scalar value); the rest (metadata, properties, data sets,
 * templates, uuid, body) is skipped by its wire type. Encoding stays with Tahu's library: the
 * gateway encodes only the rare NCMD/DCMD, while every NDATA goes through here.
 */

import { ValidationError } from '../../errors.js';

/** One metric as it came; `value` by its oneof field (`int_value`: a number, 32 bits). */
export interface SparkplugMetric {
  name: string | undefined;
  alias: number | bigint | undefined;
  timestamp: number | bigint | undefined;
  datatype: number;
  isNull: boolean;
  /** The oneof field that carried the value (10 int, 11 long, 12 float, ... 16 bytes), or 0. */
  valueField: number;
  value: number | bigint | boolean | string | Uint8Array | undefined;
}

export interface SparkplugPayload {
  timestamp: number | bigint | undefined;
  seq: number | bigint | undefined;
  metrics: SparkplugMetric[];
}

/** Field numbers of the oneof `value` of Metric (transport-profiles.md §4.7). */
export const VALUE_FIELD = {
  int: 10,
  long: 11,
  float: 12,
  double: 13,
  boolean: 14,
  string: 15,
  bytes: 16,
} as const;

const TWO_POW_32 = 2 ** 32;

// Wire types (0 varint, 1 64-bit, 2 length-delimited, 5 32-bit) of the fields read.
const PAYLOAD_WIRE: Readonly<Record<number, number>> = { 1: 0, 2: 2, 3: 0, 4: 2, 5: 2 };
const METRIC_WIRE: Readonly<Record<number, number>> = {
  1: 2,
  2: 0,
  3: 0,
  4: 0,
  5: 0,
  6: 0,
  7: 0,
  10: 0,
  11: 0,
  12: 5,
  13: 1,
  14: 0,
  15: 2,
  16: 2,
};

/** A cursor over one payload; every read checks the bounds. */
class Reader {
  pos = 0;
  /** Where the message being read ends (a metric's end while it is read). */
  end: number;
  constructor(readonly buf: Buffer) {
    this.end = buf.length;
  }

  /** An unsigned varint: a number below 2^53, a bigint above. */
  varint(): number | bigint {
    const { buf } = this;
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 7; i++) {
      if (this.pos >= this.end) throw truncated();
      const b = buf[this.pos++];
      result += (b & 0x7f) * mul;
      if (b < 0x80) return result;
      mul *= 128;
    }
    // Beyond 49 bits: the rest exactly.
    let big = BigInt(result);
    let shift = 49n;
    for (let i = 7; i < 10; i++) {
      if (this.pos >= this.end) throw truncated();
      const b = buf[this.pos++];
      big |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) {
        big = BigInt.asUintN(64, big);
        return big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
      }
      shift += 7n;
    }
    throw new ValidationError('sparkplug: varint longer than 10 bytes');
  }

  /** A varint as an unsigned 32-bit number (Protobuf `uint32`: higher bits dropped). */
  uint32(): number {
    const v = this.varint();
    return typeof v === 'number' ? v % TWO_POW_32 : Number(BigInt.asUintN(32, v));
  }

  fixed32(): number {
    this.#need(4);
    const v = this.buf.readFloatLE(this.pos);
    this.pos += 4;
    return v;
  }

  fixed64(): number {
    this.#need(8);
    const v = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return v;
  }

  /** The bounds of a length-delimited field; the cursor moves past it. */
  delimited(): [number, number] {
    const len = this.varint();
    if (typeof len !== 'number' || this.pos + len > this.end) throw truncated();
    const start = this.pos;
    this.pos += len;
    return [start, this.pos];
  }

  skip(wireType: number): void {
    switch (wireType) {
      case 0:
        this.varint();
        return;
      case 1:
        this.#need(8);
        this.pos += 8;
        return;
      case 2:
        this.delimited();
        return;
      case 5:
        this.#need(4);
        this.pos += 4;
        return;
      default:
        throw new ValidationError(`sparkplug: unsupported wire type ${wireType}`);
    }
  }

  #need(n: number): void {
    if (this.pos + n > this.end) throw truncated();
  }
}

function truncated(): ValidationError {
  return new ValidationError('sparkplug: payload is truncated');
}

/** Reads a Sparkplug B payload; ValidationError when it is not one. */
export function readSparkplugPayload(buf: Buffer): SparkplugPayload {
  const r = new Reader(buf);
  const out: SparkplugPayload = { timestamp: undefined, seq: undefined, metrics: [] };
  while (r.pos < r.end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wire = tag & 7;
    const expected = PAYLOAD_WIRE[field];
    if (expected !== undefined && expected !== wire) badWire(field);
    if (field === 1) out.timestamp = r.varint();
    else if (field === 2) {
      const [start, end] = r.delimited();
      r.pos = start;
      r.end = end;
      out.metrics.push(readMetric(r));
      r.end = buf.length;
    } else if (field === 3) out.seq = r.varint();
    else r.skip(wire);
  }
  return out;
}

function readMetric(r: Reader): SparkplugMetric {
  const m: SparkplugMetric = {
    name: undefined,
    alias: undefined,
    timestamp: undefined,
    datatype: 0,
    isNull: false,
    valueField: 0,
    value: undefined,
  };
  while (r.pos < r.end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wire = tag & 7;
    const expected = METRIC_WIRE[field];
    if (expected !== undefined && expected !== wire) badWire(field);
    switch (field) {
      case 1: {
        const [s, e] = r.delimited();
        m.name = r.buf.toString('utf8', s, e);
        break;
      }
      case 2:
        m.alias = r.varint();
        break;
      case 3:
        m.timestamp = r.varint();
        break;
      case 4:
        m.datatype = r.uint32();
        break;
      case 7:
        m.isNull = r.varint() !== 0;
        break;
      case VALUE_FIELD.int:
        m.valueField = field;
        m.value = r.uint32();
        break;
      case VALUE_FIELD.long:
        m.valueField = field;
        m.value = r.varint();
        break;
      case VALUE_FIELD.float:
        m.valueField = field;
        m.value = r.fixed32();
        break;
      case VALUE_FIELD.double:
        m.valueField = field;
        m.value = r.fixed64();
        break;
      case VALUE_FIELD.boolean:
        m.valueField = field;
        m.value = r.varint() !== 0;
        break;
      case VALUE_FIELD.string: {
        const [s, e] = r.delimited();
        m.valueField = field;
        m.value = r.buf.toString('utf8', s, e);
        break;
      }
      case VALUE_FIELD.bytes: {
        const [s, e] = r.delimited();
        m.valueField = field;
        m.value = r.buf.subarray(s, e);
        break;
      }
      default:
        r.skip(wire);
    }
  }
  return m;
}

function badWire(field: number): never {
  throw new ValidationError(`sparkplug: field ${field} has the wrong wire type`);
}
