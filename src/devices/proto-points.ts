/**
 * A PROTOBUF profile's telemetry and attribute schemas compiled into typed values (issue 21): a
 * decoded message becomes the points (or client attributes) ThingsBoard stores for it, as if it
 * had been printed with protobuf-java's JsonFormat and read by the JSON converter
 * (transport-profiles.md §2.2), but without the JSON text in between. The JSON printer is here
 * too: RPC replies still go as text, and nested values are typed from their printed JSON.
 */

import type * as protobufTypes from 'protobufjs';
import {
  kvValueOf,
  typeJsonMember,
  typeJsValue,
  typeNumberLiteral,
} from '../attributes/kv-value.js';
import type { KvValue } from '../attributes/types.js';
import { parseJsonNative, parseJsonTextExact } from '../common/json-text.js';
import { type TypedValue, typeBinaryDouble, typeNumber, typeText } from '../common/value-typing.js';
import {
  DecodedTelemetry,
  type PointCollector,
  parseTelemetry,
  parseTs,
  typeValue,
} from '../telemetry/telemetry-parser.js';
import { protobuf } from './protobuf-lib.js';

const LONG_TYPES = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);

/** A decoded message of the compiled type, typed into points. */
export type TelemetryDecoder = (payload: Uint8Array) => DecodedTelemetry;

/** A decoded message of the attributes type, typed as client attributes (§1.2, strings cast). */
export type AttributesDecoder = (payload: Uint8Array) => Map<string, KvValue>;

/** How one field of a message becomes a value: its printed presence and its typing. */
interface FieldPlan {
  readonly field: protobufTypes.Field;
  readonly key: string;
  /** JsonFormat prints it only when set (optional, message and oneof fields). */
  readonly presence: boolean;
  /** The typed point value; `depth` is the nesting level a JSON value starts at. */
  readonly type: (v: unknown, depth: number, limits: PointCollector['limits']) => TypedValue;
  /** The typed attribute value, as `parseTypedObject` types the printed member. */
  readonly attribute: (v: unknown) => KvValue;
}

/** Cast numeric-looking strings, as the device API does for attributes. */
const CAST = { cast: true } as const;

/**
 * Compiles the telemetry root type once per profile: a decoder of payloads into points. A
 * message with `ts` and `values` both printed is the device-timestamp form (device-api §1.1):
 * the members of `values` at `ts`; any other message is its own members at the server time.
 */
export function compileTelemetryDecoder(type: protobufTypes.Type): TelemetryDecoder {
  const fields = type.fieldsArray.map(planOf);
  const ts = fields.find((f) => f.key === 'ts');
  const values = fields.find((f) => f.key === 'values');
  const inner =
    values?.field.resolvedType instanceof protobuf().Type && !values.field.repeated
      ? values.field.resolvedType.fieldsArray.map(planOf)
      : undefined;
  return (payload) => {
    const m = type.decode(payload) as unknown as Record<string, unknown>;
    return new DecodedTelemetry(payload.byteLength, (now, out) => {
      if (ts && values && printed(ts, m) !== undefined && printed(values, m) !== undefined) {
        if (!inner) {
          // `values` is not a message (a map, a list, a scalar): the JSON converter decides.
          const text = messageJson(type, m);
          const parsed =
            parseJsonNative(text, out.limits.maxDepth) ??
            parseJsonTextExact(text, out.limits.maxDepth);
          for (const p of parseTelemetry(parsed, now, out.limits)) out.add(p.key, p.ts, p);
          return;
        }
        const at = parseTs(tsValue(ts.field, printed(ts, m)));
        typeMembers(inner, printed(values, m) as Record<string, unknown>, at, 3, out);
        return;
      }
      typeMembers(fields, m, now, 2, out);
    });
  };
}

/**
 * Compiles the attributes root type once per profile: a decoder of payloads into the client
 * attributes the JSON path stores for the printed message (`parseTypedObject`, strings cast).
 */
export function compileAttributesDecoder(type: protobufTypes.Type): AttributesDecoder {
  const fields = type.fieldsArray.map(planOf);
  return (payload) => {
    const m = type.decode(payload) as unknown as Record<string, unknown>;
    const out = new Map<string, KvValue>();
    for (const plan of fields) {
      const v = printed(plan, m);
      if (v !== undefined) out.set(plan.key, plan.attribute(v));
    }
    return out;
  };
}

function typeMembers(
  plans: readonly FieldPlan[],
  m: Record<string, unknown>,
  ts: number,
  depth: number,
  out: PointCollector,
): void {
  for (const plan of plans) {
    const v = printed(plan, m);
    if (v === undefined) continue;
    out.checkKey(plan.key);
    out.add(plan.key, ts, plan.type(v, depth, out.limits));
  }
}

/** A field's value as JsonFormat prints it (default when unset and without presence), or undefined. */
function printed(plan: FieldPlan, m: Record<string, unknown>): unknown {
  const name = plan.field.name;
  const v = Object.hasOwn(m, name) ? m[name] : undefined;
  if (v !== null && v !== undefined) return v;
  if (plan.presence) return undefined;
  if (plan.field.map) return {};
  if (plan.field.repeated) return [];
  return plan.field.typeDefault;
}

/** `ts` as the JSON converter reads its printed form (64-bit integers print as strings). */
function tsValue(f: protobufTypes.Field, v: unknown): unknown {
  if (LONG_TYPES.has(f.type)) {
    // A safe non-negative integer is that number (its printed digits would parse back to it);
    // any other value goes as its digits, so that the error names it as the JSON path does.
    const n = safeLong(v);
    return n !== undefined && n >= 0 ? n : String(v);
  }
  const rt = f.resolvedType;
  if (rt instanceof protobuf().Enum) return rt.valuesById[v as number] ?? v;
  return v;
}

function planOf(f: protobufTypes.Field): FieldPlan {
  f.resolve();
  const rt = f.resolvedType;
  const key = f.name;
  const presence =
    rt instanceof protobuf().Type || f.partOf !== null || f.options?.proto3_optional === true;
  const plan = (type: FieldPlan['type'], attribute: FieldPlan['attribute']): FieldPlan => ({
    field: f,
    key,
    presence: presence && !f.repeated && !f.map,
    type,
    attribute,
  });
  if (f.map || f.repeated || rt instanceof protobuf().Type) {
    // A nested value is stored as one JSON value: typed from its printed text, as before.
    return plan(
      (v, depth, limits) => {
        const text = valueText(f, v);
        const parsed =
          parseJsonNative(text, limits.maxDepth) ?? parseJsonTextExact(text, limits.maxDepth);
        return typeValue(key, parsed, depth, limits);
      },
      (v) => typeJsonMember(key, valueText(f, v)),
    );
  }
  if (rt instanceof protobuf().Enum) {
    return plan(
      (v, _d, limits) => {
        const name = rt.valuesById[v as number];
        return name === undefined
          ? typeNumber(String(v), key, limits.maxValueLength)
          : typeText(name, key, limits.maxValueLength);
      },
      (v) => {
        const name = rt.valuesById[v as number];
        return name === undefined
          ? typeNumberLiteral(String(v), key)
          : (typeJsValue(name, CAST) as KvValue);
      },
    );
  }
  switch (f.type) {
    case 'double':
    case 'float':
      return plan(
        (v, _d, limits) => typeBinaryDouble(v as number, key, limits.maxValueLength),
        (v) => kvValueOf(typeBinaryDouble(v as number, key)),
      );
    case 'bool':
      return plan(
        (v) => ({ kind: 'bool', value: v as boolean }),
        (v) => ({ type: 'BOOLEAN', value: v as boolean }),
      );
    case 'string':
      return plan(
        (v, _d, limits) => typeText(v as string, key, limits.maxValueLength),
        (v) => typeJsValue(v as string, CAST) as KvValue,
      );
    case 'bytes': {
      const base64 = (v: unknown) => Buffer.from(v as Uint8Array).toString('base64');
      return plan(
        (v, _d, limits) => typeText(base64(v), key, limits.maxValueLength),
        (v) => typeJsValue(base64(v), CAST) as KvValue,
      );
    }
    default:
      // Integers: 64-bit ones print as strings, 32-bit ones as numbers; both type as LONG. A
      // safe integer is stored as it is; only a larger 64-bit one goes through its digits.
      if (!LONG_TYPES.has(f.type)) {
        return plan(
          (v) => ({ kind: 'long', value: v as number }),
          (v) => ({ type: 'LONG', value: v as number }),
        );
      }
      return plan(
        (v, _d, limits) => {
          const n = safeLong(v);
          return n === undefined
            ? typeNumber(String(v), key, limits.maxValueLength)
            : { kind: 'long', value: n };
        },
        (v) => {
          const n = safeLong(v);
          return n === undefined
            ? (typeJsValue(String(v), CAST) as KvValue)
            : { type: 'LONG', value: n };
        },
      );
  }
}

/**
 * A decoded 64-bit integer (protobufjs: a Long, or a number when the value fits) as a number
 * when it is a safe integer; undefined when only its digits are exact.
 */
function safeLong(v: unknown): number | undefined {
  const n = typeof v === 'number' ? v : (v as { toNumber(): number }).toNumber();
  return Number.isSafeInteger(n) ? n : undefined;
}

/** One field's value as JsonFormat prints it (maps, repeated and messages included). */
function valueText(f: protobufTypes.Field, v: unknown): string {
  if (f.map) {
    const entries = Object.entries(v as Record<string, unknown>);
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${valueJson(f, x)}`).join(',')}}`;
  }
  if (f.repeated) return `[${(v as unknown[]).map((x) => valueJson(f, x)).join(',')}]`;
  return valueJson(f, v);
}

// ---- Decoded message → JSON text (protobuf-java JsonFormat with default values, §2.2) ---------

/**
 * A decoded message as ThingsBoard prints it: lowerCamelCase names, 64-bit integers as strings,
 * doubles with a fraction (`40.0`, so the core types them DOUBLE), bytes as base64, enums by
 * name; scalars without presence appear with their default, unset optional, message and oneof
 * fields are left out.
 */
export function messageJson(type: protobufTypes.Type, message: object): string {
  const m = message as Record<string, unknown>;
  const parts: string[] = [];
  for (const f of type.fieldsArray) {
    const present = Object.hasOwn(m, f.name) && m[f.name] !== null && m[f.name] !== undefined;
    const name = JSON.stringify(f.name);
    if (f.map) {
      parts.push(`${name}:${valueText(f, present ? m[f.name] : {})}`);
    } else if (f.repeated) {
      parts.push(`${name}:${valueText(f, present ? m[f.name] : [])}`);
    } else if (
      f.resolvedType instanceof protobuf().Type ||
      f.partOf !== null ||
      f.options?.proto3_optional === true
    ) {
      if (present) parts.push(`${name}:${valueJson(f, m[f.name])}`);
    } else {
      parts.push(`${name}:${valueJson(f, present ? m[f.name] : f.typeDefault)}`);
    }
  }
  return `{${parts.join(',')}}`;
}

function valueJson(f: protobufTypes.Field, v: unknown): string {
  const rt = f.resolvedType;
  if (rt instanceof protobuf().Type) return messageJson(rt, v as object);
  if (rt instanceof protobuf().Enum) return JSON.stringify(rt.valuesById[v as number] ?? v);
  if (f.type === 'double' || f.type === 'float') {
    const n = v as number;
    if (!Number.isFinite(n)) return JSON.stringify(String(n));
    return Number.isInteger(n) && Math.abs(n) < 1e21 ? `${n}.0` : String(n);
  }
  if (LONG_TYPES.has(f.type)) return `"${String(v)}"`;
  if (f.type === 'bytes') return JSON.stringify(Buffer.from(v as Uint8Array).toString('base64'));
  return JSON.stringify(v);
}
