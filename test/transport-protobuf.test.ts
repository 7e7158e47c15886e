/**
 * Issue 21 part 2: a PROTOBUF device profile with ThingsBoard's example schemas, over MQTT and
 * CoAP (real sockets). Payloads are built and read with protobufjs from the schemas below: the
 * profile's own, and ThingsBoard's fixed transport messages written out in its format.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import protobuf from 'protobufjs';
import { createProfiledDevice, latest } from './helpers/alarms.js';
import { coapObserve, coapRequest } from './helpers/coap.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect, nextMessage } from './helpers/mqtt.js';

// ThingsBoard's UI default schemas (transport-profiles.md §1.5).
const TELEMETRY_SCHEMA = `syntax ="proto3";
package telemetry;

message SensorDataReading {
  optional double temperature = 1;
  optional double humidity = 2;
  InnerObject innerObject = 3;
  message InnerObject {
    optional string key1 = 1;
    optional bool key2 = 2;
    optional double key3 = 3;
    optional int32 key4 = 4;
    optional string key5 = 5;
  }
}`;
const ATTRIBUTES_SCHEMA = `syntax ="proto3";
package attributes;

message SensorConfiguration {
  optional string firmwareVersion = 1;
  optional string serialNumber = 2;
}`;
const RPC_REQUEST_SCHEMA = `syntax ="proto3";
package rpc;

message RpcRequestMsg {
  optional string method = 1;
  optional int32 requestId = 2;
  optional string params = 3;
}`;
const RPC_RESPONSE_SCHEMA = `syntax ="proto3";
package rpc;

message RpcResponseMsg {
  optional string payload = 1;
}`;
// ThingsBoard's transport messages, as a device's firmware declares them.
const TRANSPORT_SCHEMA = `syntax = "proto3";
package transport;
enum KeyValueType { BOOLEAN_V = 0; LONG_V = 1; DOUBLE_V = 2; STRING_V = 3; JSON_V = 4; }
message KeyValueProto { string key = 1; KeyValueType type = 2; bool bool_v = 3; int64 long_v = 4;
  double double_v = 5; string string_v = 6; string json_v = 7; }
message TsKvProto { int64 ts = 1; KeyValueProto kv = 2; }
message AttributesRequest { string clientKeys = 1; string sharedKeys = 2; }
message GetAttributeResponseMsg { int32 requestId = 1; repeated TsKvProto clientAttributeList = 2;
  repeated TsKvProto sharedAttributeList = 3; }
message AttributeUpdateNotificationMsg { repeated TsKvProto sharedUpdated = 1; repeated string sharedDeleted = 2; }
message RpcRequest { string method = 1; string params = 2; }
message ToServerRpcResponseMsg { int32 requestId = 1; string payload = 2; string error = 3; }
message ClaimDevice { string secretKey = 1; int64 durationMs = 2; }
enum CredentialsType { ACCESS_TOKEN = 0; X509_CERTIFICATE = 1; MQTT_BASIC = 2; LWM2M_CREDENTIALS = 3; }
message ValidateDeviceTokenRequestMsg { string token = 1; }
message ValidateBasicMqttCredRequestMsg { string clientId = 1; string userName = 2; string password = 3; }
message CredentialsDataProto { ValidateDeviceTokenRequestMsg validateDeviceTokenRequestMsg = 1;
  ValidateBasicMqttCredRequestMsg validateBasicMqttCredRequestMsg = 3; }
message ProvisionDeviceCredentialsMsg { string provisionDeviceKey = 1; string provisionDeviceSecret = 2; }
message ProvisionDeviceRequestMsg { string deviceName = 1; CredentialsType credentialsType = 2;
  ProvisionDeviceCredentialsMsg provisionDeviceCredentialsMsg = 3; CredentialsDataProto credentialsDataProto = 4; }
enum ResponseStatus { UNKNOWN = 0; SUCCESS = 1; NOT_FOUND = 2; FAILURE = 3; }
message ProvisionDeviceResponseMsg { ResponseStatus status = 1; CredentialsType credentialsType = 2;
  string credentialsValue = 3; }`;

const type = (schema: string, name: string) => protobuf.parse(schema).root.lookupType(name);
const Reading = type(TELEMETRY_SCHEMA, 'telemetry.SensorDataReading');
const Config = type(ATTRIBUTES_SCHEMA, 'attributes.SensorConfiguration');
const RpcRequestMsg = type(RPC_REQUEST_SCHEMA, 'rpc.RpcRequestMsg');
const RpcResponseMsg = type(RPC_RESPONSE_SCHEMA, 'rpc.RpcResponseMsg');
const transport = protobuf.parse(TRANSPORT_SCHEMA).root;
const AttributesRequest = transport.lookupType('transport.AttributesRequest');
const AttributeResponse = transport.lookupType('transport.GetAttributeResponseMsg');
const AttributeUpdate = transport.lookupType('transport.AttributeUpdateNotificationMsg');
const ClientRpcRequest = transport.lookupType('transport.RpcRequest');
const ClientRpcResponse = transport.lookupType('transport.ToServerRpcResponseMsg');
const ClaimDevice = transport.lookupType('transport.ClaimDevice');
const ProvisionRequest = transport.lookupType('transport.ProvisionDeviceRequestMsg');
const ProvisionResponse = transport.lookupType('transport.ProvisionDeviceResponseMsg');

function bytes(t: protobuf.Type, value: Record<string, unknown>): Buffer {
  return Buffer.from(t.encode(t.fromObject(value)).finish());
}
function read(t: protobuf.Type, payload: Buffer): Record<string, unknown> {
  return t.toObject(t.decode(payload), { longs: String, enums: String, defaults: false });
}
/** A decoded TsKvProto list as `{key: value}`. */
function kvs(list: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { kv } of list as Array<{ kv: Record<string, unknown> }>) {
    out[kv.key as string] = kv.stringV ?? kv.doubleV ?? kv.longV ?? kv.boolV ?? kv.jsonV;
  }
  return out;
}

function payloadConfig(extra: Record<string, unknown> = {}) {
  return {
    transportPayloadType: 'PROTOBUF',
    deviceTelemetryProtoSchema: TELEMETRY_SCHEMA,
    deviceAttributesProtoSchema: ATTRIBUTES_SCHEMA,
    deviceRpcRequestProtoSchema: RPC_REQUEST_SCHEMA,
    deviceRpcResponseProtoSchema: RPC_RESPONSE_SCHEMA,
    ...extra,
  };
}

/** An MQTT profile with the example schemas (and `extra` payload settings). */
function mqttProtoProfile(name: string, extra: Record<string, unknown> = {}) {
  return {
    name,
    transportType: 'MQTT',
    profileData: {
      transportConfiguration: {
        type: 'MQTT',
        transportPayloadTypeConfiguration: payloadConfig(extra),
      },
    },
  };
}

/** A CoAP profile with the example schemas. */
function coapProtoProfile(name: string) {
  return {
    name,
    transportType: 'COAP',
    profileData: {
      transportConfiguration: {
        type: 'COAP',
        coapDeviceTypeConfiguration: {
          coapDeviceType: 'DEFAULT',
          transportPayloadTypeConfiguration: payloadConfig(),
        },
      },
    },
  };
}

/** Saves a profile as the admin; its id. */
async function saveProfile(t: TestGateway, admin: string, body: unknown): Promise<string> {
  const res = await t.api('/api/deviceProfile', { token: admin, body });
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as { id: { id: string } }).id.id;
}

const READING = {
  temperature: 42,
  humidity: 60.5,
  innerObject: { key1: 'abc', key2: true, key3: 1.5, key4: 7, key5: 'z' },
};

describe('PROTOBUF device profiles', () => {
  let t: TestGateway;
  let admin: string;
  let mqttProfile: string;
  let coapProfile: string;
  let compatProfile: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    mqttProfile = await saveProfile(t, admin, mqttProtoProfile('proto-mqtt'));
    compatProfile = await saveProfile(
      t,
      admin,
      mqttProtoProfile('proto-compat', {
        enableCompatibilityWithJsonPayloadFormat: true,
        useJsonPayloadFormatForDefaultDownlinkTopics: true,
      }),
    );
    coapProfile = await saveProfile(t, admin, coapProtoProfile('proto-coap'));
    await saveProfile(t, admin, {
      name: 'proto-provisioned',
      profileData: {
        provisionConfiguration: {
          type: 'ALLOW_CREATE_NEW_DEVICES',
          provisionDeviceKey: 'proto-key',
          provisionDeviceSecret: 'proto-secret',
        },
      },
    });
  });
  after(() => t.close());

  const values = async (deviceId: string, keys: string) => {
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${deviceId}/values/timeseries?keys=${keys}&useStrictDataTypes=true`,
      { token: admin },
    );
    const body = (await res.json()) as Record<string, Array<{ value: unknown }>>;
    return Object.fromEntries(Object.entries(body).map(([k, v]) => [k, v[0]?.value]));
  };
  const clientAttributes = async (deviceId: string) => {
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${deviceId}/values/attributes/CLIENT_SCOPE`,
      { token: admin },
    );
    const list = (await res.json()) as Array<{ key: string; value: unknown }>;
    return Object.fromEntries(list.map((a) => [a.key, a.value]));
  };
  const setShared = async (deviceId: string, body: unknown) => {
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${deviceId}/SHARED_SCOPE`, {
      token: admin,
      body,
    });
    assert.equal(res.status, 200);
  };

  it('MQTT: telemetry, attributes, attribute request, shared update, two-way RPC, client RPC', async () => {
    const d = await createProfiledDevice(t, 'proto-mqtt-1', mqttProfile);
    await setShared(d.id, { targetTemp: 21.5 });
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    try {
      await c.publishAsync('v1/devices/me/telemetry', bytes(Reading, READING), { qos: 1 });
      assert.equal(await latest(t, d.id, 'temperature'), 42);
      const stored = await values(d.id, 'temperature,humidity,innerObject');
      assert.equal(stored.humidity, 60.5);
      assert.deepEqual(stored.innerObject, READING.innerObject);
      // Short topic, profile format.
      await c.publishAsync('v2/t', bytes(Reading, { temperature: 43.25 }), { qos: 1 });
      assert.equal(await latest(t, d.id, 'temperature'), 43.25);

      await c.publishAsync(
        'v1/devices/me/attributes',
        bytes(Config, { firmwareVersion: '1.2.3', serialNumber: 'SN-9' }),
        { qos: 1 },
      );
      await waitFor(async () => (await clientAttributes(d.id)).serialNumber === 'SN-9');
      // A numeric-looking string is cast, as from JSON (device-api §1.2); short topic this time.
      await c.publishAsync('v2/a', bytes(Config, { serialNumber: '1024' }), { qos: 1 });
      await waitFor(async () => (await clientAttributes(d.id)).serialNumber === 1024);
      assert.equal((await clientAttributes(d.id)).firmwareVersion, '1.2.3');

      await c.subscribeAsync('v1/devices/me/attributes/response/+', { qos: 1 });
      const response = nextMessage(c, 'v1/devices/me/attributes/response/3');
      await c.publishAsync(
        'v1/devices/me/attributes/request/3',
        bytes(AttributesRequest, { clientKeys: 'firmwareVersion', sharedKeys: 'targetTemp' }),
        { qos: 1 },
      );
      const attrs = read(AttributeResponse, (await response).payload);
      assert.equal(attrs.requestId, 3);
      assert.deepEqual(kvs(attrs.clientAttributeList), { firmwareVersion: '1.2.3' });
      assert.deepEqual(kvs(attrs.sharedAttributeList), { targetTemp: 21.5 });

      await c.subscribeAsync('v1/devices/me/attributes', { qos: 1 });
      const update = nextMessage(c, 'v1/devices/me/attributes');
      await setShared(d.id, { mode: 'eco' });
      assert.deepEqual(kvs(read(AttributeUpdate, (await update).payload).sharedUpdated), {
        mode: 'eco',
      });

      await c.subscribeAsync('v1/devices/me/rpc/request/+', { qos: 1 });
      const request = nextMessage(c, /^v1\/devices\/me\/rpc\/request\/\d+$/);
      const call = t.api(`/api/rpc/twoway/${d.id}`, {
        token: admin,
        body: { method: 'setMode', params: { mode: 'eco' }, timeout: 10_000 },
      });
      const req = await request;
      const msg = read(RpcRequestMsg, req.payload);
      assert.equal(msg.method, 'setMode');
      assert.deepEqual(JSON.parse(msg.params as string), { mode: 'eco' });
      const id = req.topic.split('/').pop();
      assert.equal(String(msg.requestId), id);
      await c.publishAsync(
        `v1/devices/me/rpc/response/${id}`,
        bytes(RpcResponseMsg, { payload: '{"done":true}' }),
        { qos: 1 },
      );
      const res = await call;
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { payload: '{"done":true}' });

      await c.subscribeAsync('v1/devices/me/rpc/response/+', { qos: 1 });
      const limits = nextMessage(c, 'v1/devices/me/rpc/response/9');
      await c.publishAsync(
        'v1/devices/me/rpc/request/9',
        bytes(ClientRpcRequest, { method: 'getSessionLimits', params: '{}' }),
        { qos: 1 },
      );
      const answer = read(ClientRpcResponse, (await limits).payload);
      assert.equal(answer.requestId, 9);
      assert.equal(JSON.parse(answer.payload as string).maxPayloadSize, 65536);
    } finally {
      await c.endAsync();
    }
  });

  it('MQTT: /j and /p short topics force the format', async () => {
    const d = await createProfiledDevice(t, 'proto-mqtt-2', mqttProfile);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    try {
      await c.publishAsync('v2/t/j', '{"temperature":12.5}', { qos: 1 });
      assert.equal(await latest(t, d.id, 'temperature'), 12.5);
      await c.publishAsync('v2/t/p', bytes(Reading, { temperature: 13.5 }), { qos: 1 });
      assert.equal(await latest(t, d.id, 'temperature'), 13.5);
      await c.subscribeAsync('v2/a/res/j/+', { qos: 1 });
      const json = nextMessage(c, 'v2/a/res/j/4');
      await c.publishAsync('v2/a/req/j/4', '{"sharedKeys":"none"}', { qos: 1 });
      assert.deepEqual(JSON.parse((await json).payload.toString()), {});
    } finally {
      await c.endAsync();
    }
  });

  it('a payload that does not fit the schema closes a 3.1.1 session and stores nothing', async () => {
    const d = await createProfiledDevice(t, 'proto-mqtt-3', mqttProfile);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    const gone = new Promise<void>((resolve) => c.once('close', () => resolve()));
    c.publish('v1/devices/me/telemetry', '{"temperature":1}', { qos: 1 });
    await gone;
    c.end(true);
    assert.equal((await latest(t, d.id, 'temperature')) ?? null, null);
  });

  it('JSON compatibility mode: JSON uplinks accepted, v1 downlinks in JSON', async () => {
    const d = await createProfiledDevice(t, 'proto-compat-1', compatProfile);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    try {
      await c.publishAsync('v1/devices/me/telemetry', '{"temperature":30.5}', { qos: 1 });
      assert.equal(await latest(t, d.id, 'temperature'), 30.5);
      await c.publishAsync('v1/devices/me/telemetry', bytes(Reading, { temperature: 31.5 }), {
        qos: 1,
      });
      assert.equal(await latest(t, d.id, 'temperature'), 31.5);
      await c.subscribeAsync('v1/devices/me/attributes', { qos: 1 });
      await c.subscribeAsync('v2/a', { qos: 1 });
      const v1 = nextMessage(c, 'v1/devices/me/attributes');
      const v2 = nextMessage(c, 'v2/a');
      await setShared(d.id, { level: 3 });
      assert.deepEqual(JSON.parse((await v1).payload.toString()), { level: 3 });
      assert.deepEqual(kvs(read(AttributeUpdate, (await v2).payload).sharedUpdated), {
        level: '3',
      });
    } finally {
      await c.endAsync();
    }
  });

  it('CoAP: telemetry, attributes, attribute request, shared update, two-way RPC', async () => {
    const d = await createProfiledDevice(t, 'proto-coap-1', coapProfile);
    const port = t.gw.ports.coap;
    const base = `/api/v1/${d.token}`;
    await setShared(d.id, { targetTemp: 19.5 });
    // Observations first: their deregistrations are answered while the plain requests run.
    const shared = await coapObserve({ port, pathname: `${base}/attributes` });
    try {
      const first = await shared.next();
      assert.deepEqual(kvs(read(AttributeUpdate, first.payload).sharedUpdated), {
        targetTemp: 19.5,
      });
      const next = shared.next();
      await setShared(d.id, { targetTemp: 20.5 });
      assert.deepEqual(kvs(read(AttributeUpdate, (await next).payload).sharedUpdated), {
        targetTemp: 20.5,
      });
    } finally {
      shared.close();
    }

    const rpc = await coapObserve({ port, pathname: `${base}/rpc` });
    try {
      assert.equal(rpc.replies[0].code, '2.03');
      const call = t.api(`/api/rpc/twoway/${d.id}`, {
        token: admin,
        body: { method: 'reboot', params: 'now', timeout: 10_000 },
      });
      let note = await rpc.next();
      while (note.payload.length === 0) note = await rpc.next();
      const msg = read(RpcRequestMsg, note.payload);
      assert.equal(msg.method, 'reboot');
      assert.equal(msg.params, 'now');
      const replied = await coapRequest({
        port,
        method: 'POST',
        pathname: `${base}/rpc/${msg.requestId}`,
        payload: bytes(RpcResponseMsg, { payload: 'rebooting' }),
      });
      assert.equal(replied.code, '2.01');
      const res = await call;
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { payload: 'rebooting' });
    } finally {
      rpc.close();
    }
    const tel = await coapRequest({
      port,
      method: 'POST',
      pathname: `${base}/telemetry`,
      payload: bytes(Reading, READING),
    });
    assert.equal(tel.code, '2.01');
    assert.equal(await latest(t, d.id, 'temperature'), 42);
    const bad = await coapRequest({
      port,
      method: 'POST',
      pathname: `${base}/telemetry`,
      payload: '{"temperature":1}',
    });
    assert.equal(bad.code, '4.00');

    const attr = await coapRequest({
      port,
      method: 'POST',
      pathname: `${base}/attributes`,
      payload: bytes(Config, { firmwareVersion: '2.0.0' }),
    });
    assert.equal(attr.code, '2.01');
    const got = await coapRequest({
      port,
      pathname: `${base}/attributes`,
      query: 'clientKeys=firmwareVersion&sharedKeys=targetTemp',
    });
    assert.equal(got.code, '2.05');
    const attrs = read(AttributeResponse, got.payload);
    assert.deepEqual(kvs(attrs.clientAttributeList), { firmwareVersion: '2.0.0' });
    assert.deepEqual(kvs(attrs.sharedAttributeList), { targetTemp: 20.5 });
  });

  // Claiming and provisioning (transport-profiles.md §3).

  /** The pending claim has `secretKey` and expires `durationMs` after it was sent (`start`). */
  const assertClaim = (deviceId: string, secretKey: string, durationMs: number, start: number) => {
    const claim = t.gw.services.claims.pending(deviceId);
    assert.equal(claim?.secretKey, secretKey);
    assert.ok(claim.expirationTime >= start + durationMs, 'expires after the duration');
    assert.ok(claim.expirationTime <= Date.now() + durationMs, 'expires after the duration');
  };

  /** A new device of `profileId` publishes `payload` on the claim topic; its id. */
  const claimOverMqtt = async (name: string, profileId: string, payload: Buffer | string) => {
    const d = await createProfiledDevice(t, name, profileId);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    try {
      await c.publishAsync('v1/devices/me/claim', payload, { qos: 1 });
    } finally {
      await c.endAsync();
    }
    return d.id;
  };

  it('MQTT: a ClaimDevice message on a PROTOBUF profile, JSON in compatibility mode', async () => {
    const start = Date.now();
    const claim = bytes(ClaimDevice, { secretKey: 'proto-secret', durationMs: 60_000 });
    assertClaim(
      await claimOverMqtt('proto-claim-mqtt', mqttProfile, claim),
      'proto-secret',
      60_000,
      start,
    );
    // Unset fields (an empty message): secret "" and the default duration (24 h), as from JSON.
    const empty = await claimOverMqtt('proto-claim-empty', mqttProfile, Buffer.alloc(0));
    assertClaim(empty, '', 86_400_000, start);
    const json = JSON.stringify({ secretKey: 'json-secret', durationMs: 120_000 });
    const compat = await claimOverMqtt('proto-claim-compat', compatProfile, json);
    assertClaim(compat, 'json-secret', 120_000, start);
  });

  it('CoAP: client-side RPC in Protobuf (RpcRequest / ToServerRpcResponseMsg)', async () => {
    const d = await createProfiledDevice(t, 'proto-coap-client-rpc', coapProfile);
    const res = await coapRequest({
      port: t.gw.ports.coap,
      method: 'POST',
      pathname: `/api/v1/${d.token}/rpc`,
      payload: bytes(ClientRpcRequest, { method: 'getCurrentTime', params: '{}' }),
    });
    assert.equal(res.code, '2.05');
    assert.equal(res.format, 'application/octet-stream');
    // Answered by the default root chain's getCurrentTime.
    const answer = read(ClientRpcResponse, res.payload);
    assert.ok(Math.abs(Number(answer.payload) - Date.now()) < 60_000, JSON.stringify(answer));
  });

  it('CoAP: a ClaimDevice message on a PROTOBUF profile', async () => {
    const d = await createProfiledDevice(t, 'proto-claim-coap', coapProfile);
    const start = Date.now();
    const res = await coapRequest({
      port: t.gw.ports.coap,
      method: 'POST',
      pathname: `/api/v1/${d.token}/claim`,
      payload: bytes(ClaimDevice, { secretKey: 'coap-secret', durationMs: 30_000 }),
    });
    assert.equal(res.code, '2.01');
    assertClaim(d.id, 'coap-secret', 30_000, start);
  });

  /** A ProvisionDeviceResponseMsg with its defaults (ACCESS_TOKEN is 0, so unset on the wire). */
  const provisionAnswer = (payload: Buffer) =>
    ProvisionResponse.toObject(ProvisionResponse.decode(payload), {
      enums: String,
      defaults: true,
    });

  const provisionBytes = (deviceName: string, secret: string, extra = {}) =>
    bytes(ProvisionRequest, {
      deviceName,
      provisionDeviceCredentialsMsg: {
        provisionDeviceKey: 'proto-key',
        provisionDeviceSecret: secret,
      },
      ...extra,
    });

  /** One provisioning request on its own `provision` connection; the decoded answer. */
  const provisionOverMqtt = async (payload: Buffer) => {
    const p = await mqttConnect(t.gw.ports.mqtt, { username: 'provision' });
    try {
      await p.subscribeAsync('/provision/response', { qos: 1 });
      const response = nextMessage(p, '/provision/response');
      await p.publishAsync('/provision/request', payload, { qos: 1 });
      return provisionAnswer((await response).payload);
    } finally {
      await p.endAsync();
    }
  };

  it('MQTT: a ProvisionDeviceRequestMsg is answered with a ProvisionDeviceResponseMsg', async () => {
    const token = await provisionOverMqtt(provisionBytes('proto-born-mqtt', 'proto-secret'));
    assert.equal(token.status, 'SUCCESS');
    assert.equal(token.credentialsType, 'ACCESS_TOKEN');
    const born = await mqttConnect(t.gw.ports.mqtt, {
      username: token.credentialsValue as string,
    });
    await born.endAsync();

    // MQTT_BASIC credentials chosen by the device come back as their JSON text.
    const basic = await provisionOverMqtt(
      provisionBytes('proto-born-basic', 'proto-secret', {
        credentialsType: 'MQTT_BASIC',
        credentialsDataProto: {
          validateBasicMqttCredRequestMsg: {
            clientId: 'proto-client',
            userName: 'proto-user',
            password: 'proto-pass',
          },
        },
      }),
    );
    assert.equal(basic.status, 'SUCCESS');
    assert.equal(basic.credentialsType, 'MQTT_BASIC');
    assert.deepEqual(JSON.parse(basic.credentialsValue as string), {
      clientId: 'proto-client',
      userName: 'proto-user',
      password: 'proto-pass',
    });
    const viaBasic = await mqttConnect(t.gw.ports.mqtt, {
      clientId: 'proto-client',
      username: 'proto-user',
      password: 'proto-pass',
    });
    await viaBasic.endAsync();

    const refused = await provisionOverMqtt(provisionBytes('proto-never', 'wrong-secret'));
    assert.equal(refused.status, 'NOT_FOUND');
    assert.equal(refused.credentialsValue, '');
  });

  it('CoAP: a ProvisionDeviceRequestMsg is answered in Protobuf (2.01, or 4.00 when refused)', async () => {
    const port = t.gw.ports.coap;
    const post = (pathname: string, payload: Buffer | string) =>
      coapRequest({ port, method: 'POST', pathname, payload });
    const ok = await post('/api/v1/provision', provisionBytes('proto-born-coap', 'proto-secret'));
    assert.equal(ok.code, '2.01');
    assert.equal(ok.format, 'application/octet-stream');
    const body = provisionAnswer(ok.payload);
    assert.equal(body.status, 'SUCCESS');
    const telemetry = await post(
      `/api/v1/${body.credentialsValue as string}/telemetry`,
      '{"born":1}',
    );
    assert.equal(telemetry.code, '2.01');

    const refused = await post('/api/v1/provision', provisionBytes('proto-never-coap', 'x'));
    assert.equal(refused.code, '4.00');
    assert.equal(provisionAnswer(refused.payload).status, 'NOT_FOUND');
    // JSON is still answered in JSON.
    const json = await post(
      '/api/v1/provision',
      JSON.stringify({ provisionDeviceKey: 'proto-key', provisionDeviceSecret: 'x' }),
    );
    assert.equal(json.code, '4.00');
    assert.equal(json.format, 'application/json');
    assert.equal(JSON.parse(json.text).status, 'NOT_FOUND');
  });
});
