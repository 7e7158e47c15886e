import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import protobuf from 'protobufjs';
import { parseTypedObject } from '../attributes/kv-value.js';
import { ValidationError } from '../errors.js';
import { parseTelemetryText, TELEMETRY_LIMITS } from '../telemetry/telemetry-parser.js';
import { compileAttributesDecoder, compileTelemetryDecoder, messageJson } from './proto-points.js';
import { loadProtobuf } from './protobuf-lib.js';

// Schemas are compiled with protobufjs, which the gateway loads before it compiles any.
before(() => loadProtobuf());

const NOW = 1_700_000_000_000;

/** The last top-level message of a schema, as profiles use it. */
function rootOf(schema: string): protobuf.Type {
  const root = protobuf.parse(schema).root;
  const types: protobuf.Type[] = [];
  const walk = (ns: protobuf.NamespaceBase) => {
    for (const o of ns.nestedArray) {
      if (o instanceof protobuf.Type && o.parent === ns) types.push(o);
      else if (o instanceof protobuf.Namespace) walk(o);
    }
  };
  walk(root);
  const type = types.at(-1);
  if (!type) throw new Error('no message');
  return type;
}

/**
 * The typed points must equal what the JSON path stores for the same message: JsonFormat text
 * read by the JSON converter (transport-profiles.md §2.2).
 */
function same(schema: string, value: Record<string, unknown>): void {
  const type = rootOf(schema);
  const bytes = type.encode(type.fromObject(value)).finish();
  const viaJson = parseTelemetryText(messageJson(type, type.decode(bytes)), NOW);
  const direct = compileTelemetryDecoder(type)(bytes).points(NOW, TELEMETRY_LIMITS);
  assert.deepEqual(direct, viaJson, JSON.stringify(value));
}

/**
 * The typed attributes must equal what the JSON path stores: JsonFormat text typed by
 * `parseTypedObject` with strings cast (device-api.md §2.1).
 */
function sameAttributes(schema: string, value: Record<string, unknown>): void {
  const type = rootOf(schema);
  const bytes = type.encode(type.fromObject(value)).finish();
  const viaJson = parseTypedObject(messageJson(type, type.decode(bytes)), { cast: true });
  const direct = compileAttributesDecoder(type)(bytes);
  assert.deepEqual([...direct], [...viaJson], JSON.stringify(value));
}

const TB_DEFAULT = `syntax = "proto3"; package telemetry;
message SensorDataReading { optional double temperature = 1; optional double humidity = 2;
  InnerObject innerObject = 3;
  message InnerObject { optional string key1 = 1; optional bool key2 = 2; optional double key3 = 3;
    optional int32 key4 = 4; optional string key5 = 5; } }`;

const TS_VALUES = `syntax = "proto3";
message PostTelemetry { optional int64 ts = 1; Values values = 2;
  message Values { optional double t = 1; optional int32 n = 2; optional bool on = 3; } }`;

const SCALARS = `syntax = "proto3";
enum Mode { OFF = 0; ON = 1; }
message All { double d = 1; float f = 2; int64 i64 = 3; uint64 u64 = 4; sint32 s32 = 5;
  string s = 6; bytes b = 7; Mode mode = 8; bool flag = 9; repeated int32 list = 10;
  map<string, double> m = 11; oneof choice { string text = 12; int32 number = 13; } }`;

/** A value for every field of SCALARS. */
const EVERY_KIND = {
  d: 1e-7,
  f: 0.1,
  i64: '9007199254740993',
  u64: '18446744073709551615',
  s32: -12,
  s: '123.5',
  b: Buffer.from([0xd7, 0x6d, 0xf8]),
  mode: 1,
  flag: true,
  list: [1, 2],
  m: { a: 1, b: 2.5 },
  number: 4,
};

/**
 * SCALARS messages: unset, every kind, non-finite and huge doubles, an unknown enum number, bytes
 * whose base64 looks numeric, and 64-bit integers at and past the safe range (numbers up to
 * 2^53 - 1, digits beyond).
 */
const SCALAR_CASES: Array<Record<string, unknown>> = [
  {},
  EVERY_KIND,
  { d: Number.NaN, s: 'text', text: '', i64: '-5', mode: 7, d2: 1 },
  { d: 1.5e21, f: -0 },
  { d: 40, b: Buffer.from('1234', 'base64') },
  ...['9007199254740991', '-9007199254740991', '9007199254740992', '-9007199254740993'].map(
    (i64) => ({ i64, u64: i64.replace('-', '') }),
  ),
];

describe('compileTelemetryDecoder (issue 21): the same points as the JSON path', () => {
  it("types ThingsBoard's default schema, nested messages as JSON", () => {
    same(TB_DEFAULT, { temperature: 42, humidity: 60.5 });
    same(TB_DEFAULT, {
      temperature: 21.123456789012344,
      innerObject: { key1: 'v', key2: true, key3: 1.5, key4: 7, key5: '12' },
    });
    same(TB_DEFAULT, {});
  });

  it('reads the device timestamp form, and `values` at the server time without `ts`', () => {
    same(TS_VALUES, { ts: 1_600_000_000_000, values: { t: 40, n: 3, on: false } });
    same(TS_VALUES, { ts: 5, values: { t: 0.1 } });
    same(TS_VALUES, { values: { t: 2.5 } });
    same(TS_VALUES, { ts: 7 });
  });

  it('types every scalar kind, defaults included, as the printed JSON does', () => {
    for (const value of SCALAR_CASES) same(SCALARS, value);
  });

  it('refuses a `ts` past the safe integers or below zero, as the JSON converter does', () => {
    const type = rootOf(TS_VALUES);
    for (const ts of ['9007199254740992', '-1']) {
      const bytes = type.encode(type.fromObject({ ts, values: { t: 1 } })).finish();
      assert.throws(
        () => compileTelemetryDecoder(type)(bytes).points(NOW, TELEMETRY_LIMITS),
        (err: Error) => err instanceof ValidationError && err.message.includes(`got "${ts}"`),
        ts,
      );
      assert.throws(
        () => parseTelemetryText(messageJson(type, type.decode(bytes)), NOW),
        (err: Error) => err instanceof ValidationError && err.message.includes(`got "${ts}"`),
      );
    }
    same(TS_VALUES, { ts: '9007199254740991', values: { t: 1 } });
  });

  it('leaves `values` that is not a message to the JSON converter', () => {
    const schema = `syntax = "proto3"; message P { optional int64 ts = 1; map<string, int32> values = 2; }`;
    same(schema, { ts: 10, values: { a: 1 } });
    const list = rootOf(
      `syntax = "proto3"; message P { int64 ts = 1; repeated int32 values = 2; }`,
    );
    const bytes = list.encode(list.fromObject({ ts: 3, values: [1] })).finish();
    assert.throws(
      () => compileTelemetryDecoder(list)(bytes).points(NOW, TELEMETRY_LIMITS),
      (err: Error) =>
        err instanceof ValidationError && /'values' must be a JSON object/.test(err.message),
    );
  });

  it('applies the payload limits', () => {
    const type = rootOf(TS_VALUES);
    const bytes = type
      .encode(type.fromObject({ ts: 1, values: { t: 1, n: 2, on: true } }))
      .finish();
    const limits = { ...TELEMETRY_LIMITS, maxPoints: 2 };
    assert.throws(
      () => compileTelemetryDecoder(type)(bytes).points(NOW, limits),
      /more than 2 data points/,
    );
  });
});

describe('compileAttributesDecoder (issue 21): the same client attributes as the JSON path', () => {
  it("types ThingsBoard's default attributes schema and nested messages as JSON", () => {
    const TB_ATTRIBUTES = `syntax ="proto3"; package attributes;
message SensorConfiguration { optional string firmwareVersion = 1; optional string serialNumber = 2; }`;
    sameAttributes(TB_ATTRIBUTES, { firmwareVersion: '1.0.3', serialNumber: 'SN-001' });
    // Numeric-looking strings are cast, as the JSON path casts them.
    sameAttributes(TB_ATTRIBUTES, { firmwareVersion: '42', serialNumber: '0012.50' });
    sameAttributes(TB_ATTRIBUTES, {});
    sameAttributes(TB_DEFAULT, {
      temperature: 21.123456789012344,
      innerObject: { key1: 'v', key2: true, key3: 1.5, key4: 7, key5: '12' },
    });
  });

  it('types every scalar kind, defaults included, as the printed JSON does', () => {
    for (const value of SCALAR_CASES) sameAttributes(SCALARS, value);
  });
});
