/**
 * Issue 21: device-profile transport configuration over real sockets: ThingsBoard's shapes
 * validated on save, custom MQTT topic filters reaching the one way in (stored, alarm raised),
 * and a profile change closing the sessions of its devices.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { alarmsOf, createProfiledDevice, latest, numeric, rule } from './helpers/alarms.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { closed, mqttConnect, nextMessage } from './helpers/mqtt.js';

const BOILER_ALARM = {
  id: 'hot',
  alarmType: 'Boiler Overheat',
  createRules: { CRITICAL: rule([numeric('temperature', 'GREATER', 90)]) },
  clearRule: null,
  propagate: false,
  propagateToOwner: false,
  propagateToTenant: false,
  propagateRelationTypes: null,
};

function mqttProfile(name: string, transport: Record<string, unknown>, alarms: unknown[] = []) {
  return {
    name,
    type: 'DEFAULT',
    transportType: 'MQTT',
    profileData: { alarms, transportConfiguration: { type: 'MQTT', ...transport } },
  };
}

describe('device-profile transport configuration', () => {
  let t: TestGateway;
  let admin: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  async function save(body: unknown): Promise<Response> {
    return await t.api('/api/deviceProfile', { token: admin, body });
  }

  async function saved(body: unknown): Promise<{ id: { id: string }; [k: string]: unknown }> {
    const res = await save(body);
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as { id: { id: string } };
  }

  it('stores ThingsBoard shapes and refuses bad ones with a 400 naming the problem', async () => {
    const mqtt = await saved(
      mqttProfile('mqtt-shape', {
        deviceTelemetryTopic: 'sensors/+/data',
        deviceAttributesTopic: 'sensors/+/attrs',
        deviceAttributesSubscribeTopic: 'sensors/+/shared',
        sendAckOnValidationException: true,
        transportPayloadTypeConfiguration: { transportPayloadType: 'JSON' },
      }),
    );
    const data = mqtt.profileData as { transportConfiguration: Record<string, unknown> };
    assert.equal(mqtt.transportType, 'MQTT');
    assert.equal(data.transportConfiguration.deviceTelemetryTopic, 'sensors/+/data');
    assert.equal(data.transportConfiguration.sendAckOnValidationException, true);
    const coap = await saved({
      name: 'coap-shape',
      transportType: 'COAP',
      profileData: {
        transportConfiguration: {
          type: 'COAP',
          coapDeviceTypeConfiguration: {
            coapDeviceType: 'DEFAULT',
            transportPayloadTypeConfiguration: { transportPayloadType: 'JSON' },
          },
          clientSettings: { powerMode: 'DRX' },
        },
      },
    });
    assert.equal(coap.transportType, 'COAP');

    const refusals: Array<[unknown, RegExp]> = [
      [mqttProfile('bad-hash', { deviceTelemetryTopic: 'a/#/b' }), /telemetry topic filter.*'#'/],
      [mqttProfile('bad-plus', { deviceAttributesTopic: 'a/b+/c' }), /attributes topic filter/],
      [
        mqttProfile('same', { deviceTelemetryTopic: 'x/y', deviceAttributesTopic: 'x/y' }),
        /must differ/,
      ],
      [
        {
          name: 'mismatch',
          transportType: 'COAP',
          profileData: { transportConfiguration: { type: 'MQTT' } },
        },
        /doesn't match/,
      ],
      [
        mqttProfile('bad-type', {
          transportPayloadTypeConfiguration: { transportPayloadType: 'XML' },
        }),
        /transportPayloadType/,
      ],
      [
        mqttProfile('proto-broken', {
          transportPayloadTypeConfiguration: {
            transportPayloadType: 'PROTOBUF',
            deviceTelemetryProtoSchema: 'syntax = "proto3"; message T { double t = 1 }',
            deviceAttributesProtoSchema: 'syntax = "proto3"; message A { string v = 1; }',
          },
        }),
        /failed to parse telemetry proto schema/,
      ],
      [
        // Efento sensors' own CoAP protocol is not built: refused rather than served as DEFAULT.
        {
          name: 'efento',
          transportType: 'COAP',
          profileData: {
            transportConfiguration: {
              type: 'COAP',
              coapDeviceTypeConfiguration: { coapDeviceType: 'EFENTO' },
            },
          },
        },
        /coapDeviceType EFENTO is not supported/,
      ],
    ];
    for (const [body, problem] of refusals) {
      const res = await save(body);
      assert.equal(res.status, 400, JSON.stringify(body));
      const { message } = (await res.json()) as { message: string };
      assert.match(message, /^\[Transport Configuration\]/);
      assert.match(message, problem);
    }
  });

  it('a device publishing to sensors/boiler1/data under sensors/+/data is stored and raises its alarm', async () => {
    const profile = await saved(
      mqttProfile(
        'boilers',
        { deviceTelemetryTopic: 'sensors/+/data', deviceAttributesTopic: 'sensors/+/attributes' },
        [BOILER_ALARM],
      ),
    );
    const d = await createProfiledDevice(t, 'boiler1', profile.id.id);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    try {
      await c.publishAsync('sensors/boiler1/data', '{"temperature":95}', { qos: 1 });
      await c.publishAsync('sensors/boiler1/attributes', '{"model":"B-7"}', { qos: 1 });
      assert.equal(await latest(t, d.id, 'temperature'), 95);
      const [alarm] = await waitFor(async () => {
        const list = await alarmsOf(t, d.id);
        return list.length > 0 ? list : undefined;
      });
      assert.equal(alarm.type, 'Boiler Overheat');
      assert.equal(alarm.severity, 'CRITICAL');
      const attrs = await t.api(
        `/api/plugins/telemetry/DEVICE/${d.id}/values/attributes/CLIENT_SCOPE?keys=model`,
        { token: admin },
      );
      assert.deepEqual(
        ((await attrs.json()) as Array<{ value: unknown }>).map((a) => a.value),
        ['B-7'],
      );
      // The default telemetry topic no longer matches: acknowledged and dropped (§2.1).
      await c.publishAsync('v1/devices/me/telemetry', '{"dropped":1}', { qos: 1 });
      assert.equal((await latest(t, d.id, 'dropped')) ?? null, null);
      // Custom topics are counted by what they carry, not as `other`.
      const metrics = await (await t.api('/metrics', { token: admin })).text();
      assert.match(
        metrics,
        /edge_ingest_messages_total\{transport="mqtt",type="telemetry"\} [1-9]/,
      );
      assert.match(
        metrics,
        /edge_ingest_messages_total\{transport="mqtt",type="attributes"\} [1-9]/,
      );
      assert.doesNotMatch(metrics, /type="other"/);
    } finally {
      await c.endAsync();
    }
  });

  it('shared updates reach a subscription matching deviceAttributesSubscribeTopic', async () => {
    const profile = await saved(
      mqttProfile('shared-sub', { deviceAttributesSubscribeTopic: 'plant/+/config' }),
    );
    const d = await createProfiledDevice(t, 'pump1', profile.id.id);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    try {
      const granted = await c.subscribeAsync('plant/pump1/config', { qos: 1 });
      assert.equal(granted[0].qos, 1);
      const update = nextMessage(c, 'v1/devices/me/attributes');
      const res = await t.api(`/api/plugins/telemetry/DEVICE/${d.id}/SHARED_SCOPE`, {
        token: admin,
        body: { speed: 3 },
      });
      assert.equal(res.status, 200);
      assert.deepEqual(JSON.parse((await update).payload.toString()), { speed: 3 });
    } finally {
      await c.endAsync();
    }
  });

  it('a changed transport configuration closes the sessions of the profile; other changes do not', async () => {
    const body = mqttProfile('switching', { deviceTelemetryTopic: 'old/+/t' });
    const profile = await saved(body);
    const d = await createProfiledDevice(t, 'switcher', profile.id.id);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, protocolVersion: 5 });
    const gone = closed(c, 10_000);
    try {
      // Same transport configuration, new description: the session stays.
      await saved({ ...body, id: profile.id, description: 'same transport' });
      await c.publishAsync('old/switcher/t', '{"v":1}', { qos: 1 });
      assert.equal(await latest(t, d.id, 'v'), 1);
      const disconnect = new Promise<number | undefined>((resolve) =>
        c.once('disconnect', (p) => resolve(p.reasonCode)),
      );
      await saved({
        ...mqttProfile('switching', { deviceTelemetryTopic: 'new/+/t' }),
        id: profile.id,
      });
      assert.equal(await disconnect, 0x98);
      await gone;
    } finally {
      c.end(true);
    }
    const again = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    try {
      await again.publishAsync('new/switcher/t', '{"v":2}', { qos: 1 });
      assert.equal(await latest(t, d.id, 'v'), 2);
    } finally {
      await again.endAsync();
    }
  });

  it('a device moved to another profile is disconnected and reconnects under its rules', async () => {
    const from = await saved(mqttProfile('move-from', { deviceTelemetryTopic: 'from/+/t' }));
    const to = await saved(mqttProfile('move-to', { deviceTelemetryTopic: 'to/+/t' }));
    const d = await createProfiledDevice(t, 'mover', from.id.id);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, protocolVersion: 5 });
    try {
      const disconnect = new Promise<number | undefined>((resolve) =>
        c.once('disconnect', (p) => resolve(p.reasonCode)),
      );
      const device = (await (await t.api(`/api/device/${d.id}`, { token: admin })).json()) as {
        deviceProfileId: unknown;
      };
      device.deviceProfileId = { entityType: 'DEVICE_PROFILE', id: to.id.id };
      assert.equal((await t.api('/api/device', { token: admin, body: device })).status, 200);
      assert.equal(await disconnect, 0x98);
    } finally {
      c.end(true);
    }
    const again = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    try {
      await again.publishAsync('to/mover/t', '{"moved":1}', { qos: 1 });
      assert.equal(await latest(t, d.id, 'moved'), 1);
    } finally {
      await again.endAsync();
    }
  });

  it('sendAckOnValidationException keeps a 3.1.1 session after a bad payload; nothing stored', async () => {
    const profile = await saved(mqttProfile('lenient', { sendAckOnValidationException: true }));
    const d = await createProfiledDevice(t, 'lenient-1', profile.id.id);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    try {
      await c.publishAsync('v1/devices/me/telemetry', '{"bad":', { qos: 1 });
      await c.publishAsync('v1/devices/me/telemetry', '{"good":1}', { qos: 1 });
      assert.equal(await latest(t, d.id, 'good'), 1);
      assert.equal((await latest(t, d.id, 'bad')) ?? null, null);
      assert.ok(c.connected);
    } finally {
      await c.endAsync();
    }
  });

  it('refuses a transport type change while devices use the profile', async () => {
    const profile = await saved(mqttProfile('in-use', {}));
    await createProfiledDevice(t, 'user-of-in-use', profile.id.id);
    const res = await save({ name: 'in-use', id: profile.id, transportType: 'COAP' });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { message: string }).message, /transport type/);
  });
});
