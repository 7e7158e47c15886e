/**
 * protobufjs is loaded on first use (src/devices/protobuf-lib.ts): a device of a JSON profile may
 * still speak Protobuf on the `/p` v2 topics, in ThingsBoard's fixed transport messages; the
 * first such message loads the library and is answered as before. Its own file: the library is
 * loaded once per process.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import protobuf from 'protobufjs';
import { protobufLoaded } from '../src/devices/protobuf-lib.js';
import { createPlainMqttProfile, createProfiledDevice } from './helpers/alarms.js';
import { startGateway, type TestGateway } from './helpers/gateway.js';
import { mqttConnect, nextMessage } from './helpers/mqtt.js';

const transport = protobuf.parse(`syntax = "proto3";
package transport;
enum KeyValueType { BOOLEAN_V = 0; LONG_V = 1; DOUBLE_V = 2; STRING_V = 3; JSON_V = 4; }
message KeyValueProto { string key = 1; KeyValueType type = 2; bool bool_v = 3; int64 long_v = 4;
  double double_v = 5; string string_v = 6; string json_v = 7; }
message TsKvProto { int64 ts = 1; KeyValueProto kv = 2; }
message AttributesRequest { string clientKeys = 1; string sharedKeys = 2; }
message GetAttributeResponseMsg { int32 requestId = 1; repeated TsKvProto clientAttributeList = 2;
  repeated TsKvProto sharedAttributeList = 3; }`).root;
const AttributesRequest = transport.lookupType('transport.AttributesRequest');
const AttributeResponse = transport.lookupType('transport.GetAttributeResponseMsg');

const bytes = (t: protobuf.Type, value: Record<string, unknown>) =>
  Buffer.from(t.encode(t.fromObject(value)).finish());

describe('protobufjs loaded by the first Protobuf message of a JSON-profile device', () => {
  let t: TestGateway;
  let admin: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  it('MQTT: an AttributesRequest on v2/a/req/p/ is answered with a GetAttributeResponseMsg', async () => {
    const profileId = (await createPlainMqttProfile(t, 'plain JSON')).id.id;
    const device = await createProfiledDevice(t, 'json-device-speaking-proto', profileId);
    const shared = await t.api(
      `/api/plugins/telemetry/DEVICE/${device.id}/attributes/SHARED_SCOPE`,
      { token: admin, body: { mode: 'auto' } },
    );
    assert.equal(shared.status, 200);

    const c = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
    try {
      await c.subscribeAsync('v2/a/res/p/+', { qos: 1 });
      assert.equal(protobufLoaded(), false, 'not loaded before a Protobuf message');
      const answer = nextMessage(c, 'v2/a/res/p/7');
      await c.publishAsync('v2/a/req/p/7', bytes(AttributesRequest, { sharedKeys: 'mode' }), {
        qos: 1,
      });
      const m = AttributeResponse.toObject(AttributeResponse.decode((await answer).payload), {
        enums: String,
      }) as { sharedAttributeList?: Array<{ kv: { key: string; stringV: string } }> };
      assert.deepEqual(
        m.sharedAttributeList?.map(({ kv }) => [kv.key, kv.stringV]),
        [['mode', 'auto']],
      );
      assert.equal(protobufLoaded(), true);
    } finally {
      await c.endAsync();
    }
  });
});
