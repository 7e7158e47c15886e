/**
 * protobufjs is loaded on first use (src/devices/protobuf-lib.ts): a device of a JSON profile that
 * subscribes to the `/p` v2 shared-attribute filter gets its updates in ThingsBoard's
 * AttributeUpdateNotificationMsg, the subscription being the first Protobuf use. Its own file:
 * the library is loaded once per process.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import protobuf from 'protobufjs';
import { protobufLoaded } from '../src/devices/protobuf-lib.js';
import { createPlainMqttProfile, createProfiledDevice } from './helpers/alarms.js';
import { startGateway, type TestGateway } from './helpers/gateway.js';
import { mqttConnect, nextMessage } from './helpers/mqtt.js';

const AttributeUpdate = protobuf
  .parse(`syntax = "proto3";
package transport;
enum KeyValueType { BOOLEAN_V = 0; LONG_V = 1; DOUBLE_V = 2; STRING_V = 3; JSON_V = 4; }
message KeyValueProto { string key = 1; KeyValueType type = 2; bool bool_v = 3; int64 long_v = 4;
  double double_v = 5; string string_v = 6; string json_v = 7; }
message TsKvProto { int64 ts = 1; KeyValueProto kv = 2; }
message AttributeUpdateNotificationMsg { repeated TsKvProto sharedUpdated = 1;
  repeated string sharedDeleted = 2; }`)
  .root.lookupType('transport.AttributeUpdateNotificationMsg');

describe('protobufjs loaded by the first /p subscription of a JSON-profile device', () => {
  let t: TestGateway;
  let admin: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  it('MQTT: v2/a/p gets shared attribute updates as AttributeUpdateNotificationMsg', async () => {
    const profileId = (await createPlainMqttProfile(t, 'plain JSON, proto updates')).id.id;
    const device = await createProfiledDevice(t, 'json-device-proto-updates', profileId);

    const c = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
    try {
      assert.equal(protobufLoaded(), false, 'not loaded before a Protobuf subscription');
      const granted = await c.subscribeAsync('v2/a/p', { qos: 1 });
      assert.equal(granted[0]?.qos, 1);
      assert.equal(protobufLoaded(), true);
      const update = nextMessage(c, 'v2/a/p');
      const shared = await t.api(
        `/api/plugins/telemetry/DEVICE/${device.id}/attributes/SHARED_SCOPE`,
        { token: admin, body: { setpoint: 'high' } },
      );
      assert.equal(shared.status, 200);
      const m = AttributeUpdate.toObject(AttributeUpdate.decode((await update).payload), {
        enums: String,
      }) as { sharedUpdated?: Array<{ kv: { key: string; stringV: string } }> };
      assert.deepEqual(
        m.sharedUpdated?.map(({ kv }) => [kv.key, kv.stringV]),
        [['setpoint', 'high']],
      );
    } finally {
      await c.endAsync();
    }
  });
});
