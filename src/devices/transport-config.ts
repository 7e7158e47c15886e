/**
 * A device profile's transport configuration (`profileData.transportConfiguration`, issue 21,
 * transport-profiles.md §1): ThingsBoard's JSON shapes `DEFAULT`, `MQTT` (custom topic filters,
 * JSON or PROTOBUF payloads, Sparkplug B) and `COAP`, validated on save and compiled once into
 * `TransportSettings` (topic matchers, protobuf types) that the transports read per message.
 */

import type * as protobufTypes from 'protobufjs';
import { z } from 'zod';
import { ValidationError } from '../errors.js';
import {
  type AttributesDecoder,
  compileAttributesDecoder,
  compileTelemetryDecoder,
  type TelemetryDecoder,
} from './proto-points.js';
import { protobuf } from './protobuf-lib.js';

export const TRANSPORT_TYPES = ['DEFAULT', 'MQTT', 'COAP'] as const;
export type TransportType = (typeof TRANSPORT_TYPES)[number];

export const DEFAULT_TOPICS = {
  telemetry: 'v1/devices/me/telemetry',
  attributes: 'v1/devices/me/attributes',
} as const;

// ---- Built-in schemas (transport-profiles.md §1.5), used where a profile leaves one empty ----

export const DEFAULT_RPC_REQUEST_SCHEMA = `syntax ="proto3";
package rpc;

message RpcRequestMsg {
  optional string method = 1;
  optional int32 requestId = 2;
  optional string params = 3;
}`;

export const DEFAULT_RPC_RESPONSE_SCHEMA = `syntax ="proto3";
package rpc;

message RpcResponseMsg {
  optional string payload = 1;
}`;

const PREFIX = '[Transport Configuration]';

function invalid(problem: string): ValidationError {
  return new ValidationError(`${PREFIX} ${problem}`);
}

// ---- JSON shapes --------------------------------------------------------------------------------

const text = z.string().max(65_536);
const jsonPayload = z.object({ transportPayloadType: z.literal('JSON') }).passthrough();
const protobufPayload = z
  .object({
    transportPayloadType: z.literal('PROTOBUF'),
    deviceTelemetryProtoSchema: text.nullish(),
    deviceAttributesProtoSchema: text.nullish(),
    deviceRpcRequestProtoSchema: text.nullish(),
    deviceRpcResponseProtoSchema: text.nullish(),
    enableCompatibilityWithJsonPayloadFormat: z.boolean().nullish(),
    useJsonPayloadFormatForDefaultDownlinkTopics: z.boolean().nullish(),
  })
  .passthrough();
const payloadType = z.discriminatedUnion('transportPayloadType', [jsonPayload, protobufPayload]);
type PayloadTypeJson = z.infer<typeof payloadType>;

const topic = z.string().max(1024).nullish();
const mqttConfig = z
  .object({
    type: z.literal('MQTT'),
    deviceTelemetryTopic: topic,
    deviceAttributesTopic: topic,
    deviceAttributesSubscribeTopic: topic,
    transportPayloadTypeConfiguration: payloadType.nullish(),
    sparkplug: z.boolean().nullish(),
    sparkplugAttributesMetricNames: z.array(z.string().max(255)).max(1000).nullish(),
    sendAckOnValidationException: z.boolean().nullish(),
  })
  .passthrough();
const coapConfig = z
  .object({
    type: z.literal('COAP'),
    coapDeviceTypeConfiguration: z
      .object({
        coapDeviceType: z.enum(['DEFAULT', 'EFENTO']),
        transportPayloadTypeConfiguration: payloadType.nullish(),
      })
      .passthrough()
      .nullish(),
    clientSettings: z.record(z.string(), z.unknown()).nullish(),
  })
  .passthrough();
const defaultConfig = z.object({ type: z.literal('DEFAULT') }).passthrough();

export const transportConfigurationSchema = z.discriminatedUnion('type', [
  defaultConfig,
  mqttConfig,
  coapConfig,
]);
export type TransportConfigurationJson = z.infer<typeof transportConfigurationSchema>;

// ---- Compiled settings -------------------------------------------------------------------------

/** An MQTT topic filter compiled to a matcher (transport-profiles.md §2.1). */
export interface TopicFilter {
  readonly filter: string;
  matches(topic: string): boolean;
}

/** The protobuf types of a PROTOBUF profile: each schema's root (its last top-level message). */
export interface ProtoTypes {
  readonly telemetry: protobufTypes.Type;
  readonly attributes: protobufTypes.Type;
  readonly rpcRequest: protobufTypes.Type;
  readonly rpcResponse: protobufTypes.Type;
}

export type PayloadSettings =
  | { readonly kind: 'JSON' }
  | {
      readonly kind: 'PROTOBUF';
      readonly types: ProtoTypes;
      /** The telemetry schema compiled into typed points (no JSON text in between). */
      readonly telemetryDecoder: TelemetryDecoder;
      /** The attributes schema compiled into typed client attributes (no JSON text either). */
      readonly attributesDecoder: AttributesDecoder;
      /** Uplinks on profile-format topics fall back to JSON when the schema does not fit. */
      readonly jsonCompatible: boolean;
      /** With `jsonCompatible`: downlinks on the v1 topics stay JSON. */
      readonly jsonOnDefaultDownlinks: boolean;
    };

/** What a transport needs of a profile, compiled once per profile version. */
export interface TransportSettings {
  readonly type: TransportType;
  /** MQTT profile topics; the defaults for other profiles. */
  readonly telemetryTopic: TopicFilter;
  readonly attributesTopic: TopicFilter;
  readonly attributesSubscribeTopic: TopicFilter;
  /** True when the telemetry or attribute filter is not the default topic. */
  readonly customTopics: boolean;
  readonly payload: PayloadSettings;
  /** MQTT: a bad payload gets PUBACK 0x99 and the session stays (device-api.md §11). */
  readonly sendAckOnValidationException: boolean;
  readonly sparkplug: boolean;
  /** Sparkplug metrics stored as attributes: exact names, or prefixes (`Properties/*`). */
  readonly sparkplugAttributesMetricNames: readonly string[];
}

const DEFAULT_FILTERS = {
  telemetry: topicFilter(DEFAULT_TOPICS.telemetry),
  attributes: topicFilter(DEFAULT_TOPICS.attributes),
};

export const DEFAULT_TRANSPORT_SETTINGS: TransportSettings = Object.freeze<TransportSettings>({
  type: 'DEFAULT',
  telemetryTopic: DEFAULT_FILTERS.telemetry,
  attributesTopic: DEFAULT_FILTERS.attributes,
  attributesSubscribeTopic: DEFAULT_FILTERS.attributes,
  customTopics: false,
  payload: { kind: 'JSON' },
  sendAckOnValidationException: false,
  sparkplug: false,
  sparkplugAttributesMetricNames: [],
});

/**
 * Validates a profile's `transportConfiguration` for its `transportType` and compiles it. Throws
 * a ValidationError (`[Transport Configuration] ...`, ThingsBoard's prefix) naming the problem.
 * `undefined`/null configuration means `{type: transportType}`.
 */
export function compileTransportConfiguration(
  raw: unknown,
  transportType: TransportType,
): { readonly json: TransportConfigurationJson; readonly settings: TransportSettings } {
  const given = raw ?? { type: transportType };
  const parsed = transportConfigurationSchema.safeParse(given);
  if (!parsed.success) {
    const problems = parsed.error.issues.map(
      (i) => `transportConfiguration${i.path.length ? `.${i.path.join('.')}` : ''}: ${i.message}`,
    );
    throw invalid(problems.join('; '));
  }
  const json = parsed.data;
  if (json.type !== transportType) {
    throw invalid(
      `Device profile transport type ${transportType} doesn't match the transport type ${json.type} of its transport configuration!`,
    );
  }
  return { json, settings: settingsOf(json) };
}

function settingsOf(json: TransportConfigurationJson): TransportSettings {
  if (json.type === 'DEFAULT') return DEFAULT_TRANSPORT_SETTINGS;
  if (json.type === 'COAP') {
    const device = json.coapDeviceTypeConfiguration;
    if (device?.coapDeviceType === 'EFENTO')
      throw invalid('coapDeviceType EFENTO is not supported by this gateway');
    return {
      ...DEFAULT_TRANSPORT_SETTINGS,
      type: 'COAP',
      // §3: the compatibility flags do not apply to CoAP.
      payload: payloadSettings(device?.transportPayloadTypeConfiguration, false),
    };
  }
  const telemetry = mqttTopic(json.deviceTelemetryTopic, DEFAULT_TOPICS.telemetry, 'telemetry');
  const attributes = mqttTopic(json.deviceAttributesTopic, DEFAULT_TOPICS.attributes, 'attributes');
  const subscribe = mqttTopic(
    json.deviceAttributesSubscribeTopic,
    DEFAULT_TOPICS.attributes,
    'attributes subscribe',
  );
  if (telemetry === attributes) throw invalid('telemetry and attributes topic filters must differ');
  return {
    type: 'MQTT',
    telemetryTopic: topicFilter(telemetry),
    attributesTopic: topicFilter(attributes),
    attributesSubscribeTopic: topicFilter(subscribe),
    customTopics:
      telemetry !== DEFAULT_TOPICS.telemetry || attributes !== DEFAULT_TOPICS.attributes,
    payload: payloadSettings(json.transportPayloadTypeConfiguration, true),
    sendAckOnValidationException: json.sendAckOnValidationException === true,
    sparkplug: json.sparkplug === true,
    sparkplugAttributesMetricNames: json.sparkplugAttributesMetricNames ?? [],
  };
}

/** A topic filter as ThingsBoard allows it (blank → the default); throws naming the problem. */
function mqttTopic(value: string | null | undefined, fallback: string, what: string): string {
  const t = value?.trim() ? value : fallback;
  const problem = filterProblem(t);
  if (problem) throw invalid(`invalid ${what} topic filter '${t}': ${problem}`);
  return t;
}

function filterProblem(filter: string): string | undefined {
  if (filter.includes('{{') || /[<>]/.test(filter)) return 'must not contain {{, < or >';
  if (filter.includes('\u0000')) return 'must not contain NUL';
  const levels = filter.split('/');
  for (let i = 0; i < levels.length; i++) {
    const level = levels[i];
    // MQTT 3.1.1 §4.7.1.2/§4.7.1.3: '#' is the last level on its own, '+' a whole level.
    if (level.includes('#') && (level !== '#' || i !== levels.length - 1))
      return "'#' must be the last level, alone";
    if (level.includes('+') && level !== '+') return "'+' must be a whole level";
  }
  if (filter.startsWith('$')) return "must not start with '$'";
  return undefined;
}

/** Compiles an MQTT filter: `+` one non-empty level, `/#` the parent and everything below. */
export function topicFilter(filter: string): TopicFilter {
  if (filter === '#') return { filter, matches: () => true };
  if (!filter.includes('+') && !filter.includes('#'))
    return { filter, matches: (t) => t === filter };
  const levels = filter.split('/');
  let pattern = '';
  for (let i = 0; i < levels.length; i++) {
    const level = levels[i];
    if (level === '#') {
      pattern += '(?:$|/.*)';
      break;
    }
    if (i > 0) pattern += '/';
    pattern += level === '+' ? '[^/]+' : level.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  }
  // '#' after a '/': the separator belongs to the optional part (`a/#` matches `a`).
  const re = new RegExp(`^${pattern}$`);
  return { filter, matches: (t) => re.test(t) };
}

// ---- Protobuf schemas (transport-profiles.md §1.4) ---------------------------------------------

function payloadSettings(json: PayloadTypeJson | null | undefined, mqtt: boolean): PayloadSettings {
  if (!json || json.transportPayloadType === 'JSON') return { kind: 'JSON' };
  const telemetry = compileSchema(json.deviceTelemetryProtoSchema, 'telemetry');
  const attributes = compileSchema(json.deviceAttributesProtoSchema, 'attributes');
  const rpcRequest = compileSchema(
    json.deviceRpcRequestProtoSchema?.trim()
      ? json.deviceRpcRequestProtoSchema
      : DEFAULT_RPC_REQUEST_SCHEMA,
    'rpc request',
  );
  const rpcResponse = compileSchema(
    json.deviceRpcResponseProtoSchema?.trim()
      ? json.deviceRpcResponseProtoSchema
      : DEFAULT_RPC_RESPONSE_SCHEMA,
    'rpc response',
  );
  checkTelemetryRoot(telemetry);
  checkRpcRequestRoot(rpcRequest);
  const compat = mqtt && json.enableCompatibilityWithJsonPayloadFormat === true;
  return {
    kind: 'PROTOBUF',
    types: { telemetry, attributes, rpcRequest, rpcResponse },
    telemetryDecoder: compileTelemetryDecoder(telemetry),
    attributesDecoder: compileAttributesDecoder(attributes),
    jsonCompatible: compat,
    jsonOnDefaultDownlinks: compat && json.useJsonPayloadFormatForDefaultDownlinkTopics === true,
  };
}

/** Drops comments, so that the syntax check sees only declarations. */
function stripComments(src: string): string {
  return src.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/\/\/[^\n]*/g, ' ');
}

/**
 * Parses one schema with protobufjs and applies ThingsBoard's rules; returns its root type, the
 * last top-level message.
 */
function compileSchema(source: string | null | undefined, what: string): protobufTypes.Type {
  const label = `${what} proto schema`;
  if (!source?.trim()) throw invalid(`${label} is required`);
  if (!/^\s*syntax\s*=\s*["']proto3["']\s*;/m.test(stripComments(source)))
    throw invalid(`${label}: only syntax = "proto3" is supported`);
  // Outside the try: a library not loaded first is a bug, not a schema problem.
  const lib = protobuf();
  let parsed: protobufTypes.IParserResult;
  try {
    parsed = lib.parse(source, { keepCase: false, alternateCommentMode: true });
  } catch (err) {
    throw new ValidationError(
      `${PREFIX} failed to parse ${label} due to: ${(err as Error).message}`,
      { cause: err },
    );
  }
  if (parsed.imports?.length || parsed.weakImports?.length)
    throw invalid(`${label}: import statements are not supported`);
  const root = parsed.root;
  if (root.options && Object.keys(root.options).length > 0)
    throw invalid(`${label}: schema options are not supported`);
  const ns = parsed.package ? root.lookup(parsed.package) : root;
  if (!(ns instanceof protobuf().Namespace)) throw invalid(`${label}: package not found`);
  if (parsed.package && ns.options && Object.keys(ns.options).length > 0)
    throw invalid(`${label}: schema options are not supported`);
  const messages: protobufTypes.Type[] = [];
  for (const item of ns.nestedArray) {
    if (item instanceof protobuf().Type) messages.push(item);
    else if (item instanceof protobuf().Field) throw invalid(`${label}: extend is not supported`);
    else if (item instanceof protobuf().Enum) checkEnum(item, label);
  }
  if (messages.length === 0) throw invalid(`${label}: at least one message is required`);
  for (const m of messages) checkMessage(m, label);
  try {
    root.resolveAll();
  } catch (err) {
    throw new ValidationError(
      `${PREFIX} failed to parse ${label} due to: ${(err as Error).message}`,
      { cause: err },
    );
  }
  return messages[messages.length - 1];
}

function checkEnum(e: protobufTypes.Enum, label: string): void {
  if (e.options && Object.keys(e.options).length > 0)
    throw invalid(`${label}: enum ${e.name} must not have options`);
}

function checkMessage(m: protobufTypes.Type, label: string): void {
  const where = `${label}: message ${m.name}`;
  if ((m as { group?: boolean }).group)
    throw invalid(`${where} is a group; groups are not supported`);
  if (m.options && Object.keys(m.options).length > 0)
    throw invalid(`${where} must not have options`);
  if (m.extensions?.length) throw invalid(`${where} must not declare extensions`);
  if (m.reserved?.length) throw invalid(`${where} must not declare reserved fields`);
  for (const f of m.fieldsArray) {
    if (f.required) throw invalid(`${where}: field ${f.name} must not be required`);
    if (f.options && 'default' in f.options)
      throw invalid(`${where}: field ${f.name} must not have a default value`);
  }
  for (const item of m.nestedArray) {
    if (item instanceof protobuf().Type) checkMessage(item, label);
    else if (item instanceof protobuf().Enum) checkEnum(item, label);
    else if (item instanceof protobuf().Field) throw invalid(`${label}: extend is not supported`);
  }
}

/** §1.4: at least one field; the `ts` + `values` form needs `optional int64 ts` and a message. */
function checkTelemetryRoot(t: protobufTypes.Type): void {
  const fields = t.fieldsArray;
  if (fields.length === 0)
    throw invalid(`telemetry proto schema: message ${t.name} must have at least one field`);
  const ts = t.fields.ts;
  const values = t.fields.values;
  if (fields.length === 2 && ts && values) {
    if (!values.resolvedType || !(values.resolvedType instanceof protobuf().Type))
      throw invalid(`telemetry proto schema: field 'values' of ${t.name} must be a message`);
    if (ts.type !== 'int64' || ts.options?.proto3_optional !== true)
      throw invalid(`telemetry proto schema: field 'ts' of ${t.name} must be 'optional int64'`);
  }
}

/** §1.4: exactly `method` (string), `requestId` (int32) and `params`, none repeated. */
function checkRpcRequestRoot(t: protobufTypes.Type): void {
  const fields = t.fieldsArray;
  const ok =
    fields.length === 3 &&
    fields.every((f) => !f.repeated) &&
    t.fields.method?.type === 'string' &&
    t.fields.requestId?.type === 'int32' &&
    t.fields.params !== undefined;
  if (!ok) {
    throw invalid(
      `rpc request proto schema: message ${t.name} must have exactly the fields 'method' (string), 'requestId' (int32) and 'params'`,
    );
  }
}
