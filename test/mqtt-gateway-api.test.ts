import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { closed, mqttConnect, nextMessage } from './helpers/mqtt.js';

interface RestDevice {
  id: { id: string };
  name: string;
  type: string;
  additionalInfo: Record<string, unknown> | null;
}

/** Every message the client receives on `topic` from now on, parsed. */
function collect(client: MqttClient, topic: string): unknown[] {
  const seen: unknown[] = [];
  client.on('message', (t, payload) => {
    if (t === topic) seen.push(JSON.parse(payload.toString()));
  });
  return seen;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('gateway API over MQTT', () => {
  let t: TestGateway;
  let admin: string;
  let gateway: { id: string; token: string };
  let gw: MqttClient;
  let childA: RestDevice;
  let childB: RestDevice;

  /** Creates a device flagged as a gateway through REST; returns its id and access token. */
  async function createGatewayDevice(name: string): Promise<{ id: string; token: string }> {
    const res = await t.api('/api/device', {
      body: { name, additionalInfo: { gateway: true } },
      token: admin,
    });
    assert.equal(res.status, 200, await res.clone().text());
    const device = (await res.json()) as RestDevice;
    const creds = await t.api(`/api/device/${device.id.id}/credentials`, { token: admin });
    const { credentialsId } = (await creds.json()) as { credentialsId: string };
    return { id: device.id.id, token: credentialsId };
  }

  async function byName(name: string): Promise<RestDevice | undefined> {
    const res = await t.api(`/api/tenant/devices?deviceName=${encodeURIComponent(name)}`, {
      token: admin,
    });
    if (res.status === 404) return undefined;
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as RestDevice;
  }

  async function timeseries(id: string, query: string) {
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${id}/values/timeseries?${query}`, {
      token: admin,
    });
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as Record<string, Array<{ ts: number; value: unknown }>>;
  }

  async function setShared(id: string, body: unknown) {
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${id}/attributes/SHARED_SCOPE`, {
      body,
      token: admin,
    });
    assert.equal(res.status, 200, await res.clone().text());
  }

  const subscriberCount = () =>
    t.gw.services.attributes.counts.subscribers + t.gw.services.rpc.counts.subscribers;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    gateway = await createGatewayDevice('plc-bridge');
    gw = await mqttConnect(t.gw.ports.mqtt, { username: gateway.token, clientId: 'plc-bridge' });
    const granted = await gw.subscribeAsync({
      'v1/gateway/attributes': { qos: 1 },
      'v1/gateway/rpc': { qos: 1 },
      'v1/gateway/attributes/response': { qos: 1 },
    });
    assert.deepEqual(
      granted.map((g) => g.qos),
      [1, 1, 1],
    );
  });
  after(async () => {
    await gw.endAsync();
    await t.close();
  });

  it('connects two child devices, creating them on first sight, visible over REST', async () => {
    assert.equal(await byName('Thermostat A'), undefined);
    assert.equal(await byName('Hygrometer B'), undefined);
    await gw.publishAsync('v1/gateway/connect', '{"device":"Thermostat A","type":"thermostat"}', {
      qos: 1,
    });
    await gw.publishAsync('v1/gateway/connect', '{"device":"Hygrometer B"}', { qos: 1 });
    const a = await byName('Thermostat A');
    const b = await byName('Hygrometer B');
    assert.ok(a && b);
    childA = a;
    childB = b;
    assert.equal(childA.type, 'thermostat');
    // Without a type the child gets the default profile, as the gateway device did.
    const gatewayDevice = (await (
      await t.api(`/api/device/${gateway.id}`, { token: admin })
    ).json()) as RestDevice;
    assert.equal(childB.type, gatewayDevice.type);
    assert.equal(childA.additionalInfo?.lastConnectedGateway, gateway.id);
    // Connecting again finds the same device rather than creating another one.
    await gw.publishAsync('v1/gateway/connect', '{"device":"Thermostat A"}', { qos: 1 });
    assert.equal((await byName('Thermostat A'))?.id.id, childA.id.id);
    const list = await t.api('/api/tenant/devices?pageSize=100&page=0', { token: admin });
    const names = ((await list.json()) as { data: RestDevice[] }).data.map((d) => d.name);
    assert.equal(names.filter((n) => n === 'Thermostat A').length, 1);
  });

  it('stores telemetry of both children from one publish before the PUBACK', async () => {
    await gw.publishAsync(
      'v1/gateway/telemetry',
      JSON.stringify({
        'Thermostat A': [
          { ts: 1700000000000, values: { temperature: 21.5 } },
          {
            humidity: 40,
            metadata: { connector: 'modbus', receivedTs: 1, publishedTs: 2 },
          },
        ],
        'Hygrometer B': [{ ts: 1700000000500, values: { humidity: 55, ok: true } }],
      }),
      { qos: 1 },
    );
    // No waiting: the PUBACK came after every device's data was committed.
    const a = await timeseries(childA.id.id, 'keys=temperature,humidity&useStrictDataTypes=true');
    assert.deepEqual(a.temperature, [{ ts: 1700000000000, value: 21.5 }]);
    assert.equal(a.humidity[0].value, 40);
    const b = await timeseries(childB.id.id, 'keys=humidity,ok&useStrictDataTypes=true');
    assert.deepEqual(b.humidity, [{ ts: 1700000000500, value: 55 }]);
    assert.deepEqual(b.ok, [{ ts: 1700000000500, value: true }]);
    // The gateway's metadata is removed before storage.
    assert.deepEqual(t.gw.services.telemetry.keys(childA.id.id).sort(), [
      'humidity',
      'temperature',
    ]);
    // Number literals keep their type: 19.0 is a DOUBLE.
    await gw.publishAsync('v1/gateway/telemetry', '{"Hygrometer B":[{"dew":19.0}]}', { qos: 1 });
    const dew = await timeseries(childB.id.id, 'keys=dew');
    assert.equal(dew.dew[0].value, '19.0');
  });

  it('auto-connects a child that is first named in a telemetry publish', async () => {
    assert.equal(await byName('Meter C'), undefined);
    await gw.publishAsync('v1/gateway/telemetry', '{"Meter C":[{"kwh":12}]}', { qos: 1 });
    const c = await byName('Meter C');
    assert.ok(c);
    assert.equal(c.additionalInfo?.lastConnectedGateway, gateway.id);
    const v = await timeseries(c.id.id, 'keys=kwh&useStrictDataTypes=true');
    assert.equal(v.kwh[0].value, 12);
  });

  it('stores client attributes of several children', async () => {
    await gw.publishAsync(
      'v1/gateway/attributes',
      '{"Thermostat A":{"model":"T-100","firmware":"1.2.0","gain":42.0},"Hygrometer B":{"model":"H-7"}}',
      { qos: 1 },
    );
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${childA.id.id}/values/attributes/CLIENT_SCOPE`,
      { token: admin },
    );
    const attrs = (await res.json()) as Array<{ key: string; value: unknown }>;
    assert.deepEqual(Object.fromEntries(attrs.map((kv) => [kv.key, kv.value])), {
      model: 'T-100',
      firmware: '1.2.0',
      gain: 42,
    });
    const b = t.gw.services.attributes.get(childB.id.id, 'CLIENT_SCOPE');
    assert.deepEqual(
      b.map((kv) => [kv.key, kv.value]),
      [['model', 'H-7']],
    );
    // Client attributes are not in the shared scope.
    assert.deepEqual(t.gw.services.attributes.get(childA.id.id, 'SHARED_SCOPE'), []);
  });

  it('answers attribute requests: one key, several keys, nothing found', async () => {
    const one = nextMessage(gw, 'v1/gateway/attributes/response');
    await gw.publishAsync(
      'v1/gateway/attributes/request',
      '{"id":1,"device":"Thermostat A","client":true,"key":"model"}',
      { qos: 1 },
    );
    assert.deepEqual(JSON.parse((await one).payload.toString()), {
      id: 1,
      device: 'Thermostat A',
      value: 'T-100',
    });

    const several = nextMessage(gw, 'v1/gateway/attributes/response');
    await gw.publishAsync(
      'v1/gateway/attributes/request',
      '{"id":2,"device":"Thermostat A","client":true,"keys":["model","gain","missing"]}',
      { qos: 1 },
    );
    const text = (await several).payload.toString();
    assert.deepEqual(JSON.parse(text), {
      id: 2,
      device: 'Thermostat A',
      values: { model: 'T-100', gain: 42 },
    });
    assert.match(text, /"gain":42\.0/, 'a DOUBLE keeps its fraction');

    const none = nextMessage(gw, 'v1/gateway/attributes/response');
    await gw.publishAsync(
      'v1/gateway/attributes/request',
      '{"id":3,"device":"Thermostat A","client":false,"key":"model"}',
      { qos: 1 },
    );
    // `model` is a client attribute: the shared scope has nothing of that name.
    assert.deepEqual(JSON.parse((await none).payload.toString()), {
      id: 3,
      device: 'Thermostat A',
    });

    await setShared(childB.id.id, { interval: 30 });
    const shared = nextMessage(gw, 'v1/gateway/attributes/response');
    await gw.publishAsync(
      'v1/gateway/attributes/request',
      '{"id":4,"device":"Hygrometer B","client":false,"keys":["interval"]}',
      { qos: 1 },
    );
    assert.deepEqual(JSON.parse((await shared).payload.toString()), {
      id: 4,
      device: 'Hygrometer B',
      values: { interval: 30 },
    });
  });

  it('pushes shared attribute changes and deletes of a child on v1/gateway/attributes', async () => {
    const update = nextMessage(gw, 'v1/gateway/attributes');
    await setShared(childA.id.id, { setpoint: 22.5, mode: 'eco' });
    assert.deepEqual(JSON.parse((await update).payload.toString()), {
      device: 'Thermostat A',
      data: { setpoint: 22.5, mode: 'eco' },
    });
    const deleted = nextMessage(gw, 'v1/gateway/attributes');
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${childA.id.id}/SHARED_SCOPE?keys=setpoint`,
      { method: 'DELETE', token: admin },
    );
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(JSON.parse((await deleted).payload.toString()), {
      device: 'Thermostat A',
      data: { deleted: ['setpoint'] },
    });
  });

  it('delivers a server-side RPC on v1/gateway/rpc and returns the reply to the REST caller', async () => {
    const request = nextMessage(gw, 'v1/gateway/rpc');
    const call = t.api(`/api/rpc/twoway/${childB.id.id}`, {
      body: { method: 'toggle', params: { pin: 1 }, timeout: 5000 },
      token: admin,
    });
    const msg = JSON.parse((await request).payload.toString()) as {
      device: string;
      data: { id: number; method: string; params: unknown };
    };
    assert.equal(msg.device, 'Hygrometer B');
    assert.deepEqual(msg.data, { id: msg.data.id, method: 'toggle', params: { pin: 1 } });
    assert.equal(typeof msg.data.id, 'number');
    await gw.publishAsync(
      'v1/gateway/rpc',
      JSON.stringify({ device: 'Hygrometer B', id: msg.data.id, data: { success: true } }),
      { qos: 1 },
    );
    const res = await call;
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(await res.json(), { success: true });
  });

  it('stops pushes to a child after v1/gateway/disconnect and resumes them on connect', async () => {
    const pushes = collect(gw, 'v1/gateway/attributes');
    const before = subscriberCount();
    await gw.publishAsync('v1/gateway/disconnect', '{"device":"Thermostat A"}', { qos: 1 });
    assert.equal(subscriberCount(), before - 2);
    await setShared(childA.id.id, { mode: 'off' });
    // A one-way RPC to a disconnected child waits: it is not sent on v1/gateway/rpc.
    const rpcs = collect(gw, 'v1/gateway/rpc');
    const oneway = t.api(`/api/rpc/oneway/${childA.id.id}`, {
      body: { method: 'reboot', params: {}, timeout: 5000 },
      token: admin,
    });
    await sleep(300);
    assert.deepEqual(pushes, []);
    assert.deepEqual(rpcs, []);

    // Connecting again subscribes again: the pending RPC is sent at once, new changes follow.
    await gw.publishAsync('v1/gateway/connect', '{"device":"Thermostat A"}', { qos: 1 });
    await waitFor(() => rpcs.length === 1, 5000, 'the pending rpc');
    assert.deepEqual(
      (rpcs[0] as { device: string; data: { method: string } }).device,
      'Thermostat A',
    );
    assert.equal((await oneway).status, 200);
    await setShared(childA.id.id, { mode: 'heat' });
    await waitFor(() => pushes.length === 1, 5000, 'the shared attribute push');
    assert.deepEqual(pushes, [{ device: 'Thermostat A', data: { mode: 'heat' } }]);
  });

  it('registers claims of several children', async () => {
    await gw.publishAsync(
      'v1/gateway/claim',
      '{"Thermostat A":{"secretKey":"s3cret","durationMs":60000},"Hygrometer B":{}}',
      { qos: 1 },
    );
    const a = t.gw.services.claims.pending(childA.id.id);
    assert.ok(a);
    assert.equal(a.secretKey, 's3cret');
    assert.ok(a.expirationTime > Date.now() + 50_000 && a.expirationTime <= Date.now() + 60_000);
    const b = t.gw.services.claims.pending(childB.id.id);
    assert.ok(b);
    assert.equal(b.secretKey, '');
  });

  it('refuses the gateway API to a device not flagged as gateway', async () => {
    const plain = await createDevice(t, 'not-a-gateway');
    const c = await mqttConnect(t.gw.ports.mqtt, { username: plain.token, clientId: 'plain' });
    try {
      for (const filter of [
        'v1/gateway/attributes',
        'v1/gateway/rpc',
        'v1/gateway/attributes/response',
      ]) {
        await assert.rejects(c.subscribeAsync(filter, { qos: 1 }), /Subscribe error/, filter);
      }
      await c.publishAsync('v1/gateway/connect', '{"device":"Ghost"}', { qos: 1 });
      await c.publishAsync('v1/gateway/telemetry', '{"Ghost":[{"x":1}]}', { qos: 1 });
      await c.publishAsync('v1/gateway/attributes', '{"Ghost":{"a":1}}', { qos: 1 });
      assert.equal(await byName('Ghost'), undefined);
      assert.deepEqual(t.gw.services.telemetry.keys(plain.id), []);
      assert.ok(c.connected);
    } finally {
      await c.endAsync();
    }
  });

  it('closes an MQTT 3.1.1 gateway connection on an invalid payload and stores none of it', async () => {
    const other = await createGatewayDevice('bridge-v3');
    const c = await mqttConnect(t.gw.ports.mqtt, { username: other.token, clientId: 'bridge-v3' });
    const gone = closed(c);
    // The first device's data is valid, the second's is not: nothing at all is stored.
    c.publish('v1/gateway/telemetry', '{"Thermostat A":[{"poison":1}],"Hygrometer B":[5]}', {
      qos: 1,
    });
    await gone;
    c.end(true);
    // A later commit through the other connection: any earlier write is committed by then.
    await gw.publishAsync('v1/gateway/telemetry', '{"Thermostat A":[{"later":1}]}', { qos: 1 });
    const keys = t.gw.services.telemetry.keys(childA.id.id);
    assert.ok(keys.includes('later'));
    assert.ok(!keys.includes('poison'));
    // A value that is not an array is refused the same way.
    const again = await mqttConnect(t.gw.ports.mqtt, {
      username: other.token,
      clientId: 'bridge-v3',
    });
    const goneAgain = closed(again);
    again.publish('v1/gateway/telemetry', '{"Thermostat A":[{"poison":1}],"Hygrometer B":{}}', {
      qos: 1,
    });
    await goneAgain;
    again.end(true);
    await gw.publishAsync('v1/gateway/telemetry', '{"Thermostat A":[{"later":2}]}', { qos: 1 });
    assert.ok(!t.gw.services.telemetry.keys(childA.id.id).includes('poison'));
  });

  it('answers invalid gateway payloads on MQTT 5 with PUBACK 0x99 and keeps the connection', async () => {
    const other = await createGatewayDevice('bridge-v5');
    const c = await mqttConnect(t.gw.ports.mqtt, {
      username: other.token,
      clientId: 'bridge-v5',
      protocolVersion: 5,
    });
    const invalid: Array<[string, string]> = [
      ['v1/gateway/telemetry', '{"broken":'],
      ['v1/gateway/telemetry', '[{"Thermostat A":[]}]'],
      ['v1/gateway/telemetry', '{}'],
      ['v1/gateway/telemetry', '{"Thermostat A":[1,2]}'],
      ['v1/gateway/telemetry', '{"Thermostat A":[{"ts":1,"values":5}]}'],
      ['v1/gateway/attributes', '{"Thermostat A":[1]}'],
      ['v1/gateway/connect', '{"type":"x"}'],
      ['v1/gateway/connect', '{"device":""}'],
      ['v1/gateway/connect', '{"device":" padded "}'],
      ['v1/gateway/connect', '{"device":"Typed","type":5}'],
      ['v1/gateway/disconnect', ''],
      ['v1/gateway/attributes/request', '{"id":5,"device":"Thermostat A","key":"model"}'],
      ['v1/gateway/attributes/request', '{"id":5,"device":"Thermostat A","client":true}'],
      ['v1/gateway/attributes/request', '{"device":"Thermostat A","client":true,"key":"a"}'],
      ['v1/gateway/rpc', '{"device":"Thermostat A","id":0}'],
      ['v1/gateway/rpc', '{"device":"Thermostat A","id":"x","data":1}'],
      ['v1/gateway/claim', '{"Thermostat A":"secret"}'],
    ];
    try {
      for (const [topic, payload] of invalid) {
        await assert.rejects(
          c.publishAsync(topic, payload, { qos: 1 }),
          (err: Error & { code?: number }) => {
            assert.equal(err.code, 0x99, `${topic} ${payload}`);
            return true;
          },
          `${topic} ${payload}`,
        );
      }
      assert.ok(c.connected);
      assert.equal(await byName('Typed'), undefined);
      assert.equal(await byName('padded'), undefined);
      // An unknown gateway topic is acknowledged and dropped.
      await c.publishAsync('v1/gateway/xyz', 'anything', { qos: 1 });
      await c.publishAsync('v1/gateway/telemetry', '{"Thermostat A":[{"after":1}]}', { qos: 1 });
      assert.ok(t.gw.services.telemetry.keys(childA.id.id).includes('after'));
    } finally {
      await c.endAsync();
    }
  });

  it('ends every child subscription when the gateway connection is lost', async () => {
    const other = await createGatewayDevice('bridge-leaver');
    const c = await mqttConnect(t.gw.ports.mqtt, {
      username: other.token,
      clientId: 'bridge-leaver',
    });
    const before = subscriberCount();
    await c.publishAsync('v1/gateway/connect', '{"device":"Leaver 1"}', { qos: 1 });
    await c.publishAsync('v1/gateway/connect', '{"device":"Leaver 2"}', { qos: 1 });
    assert.equal(subscriberCount(), before + 4);
    c.end(true);
    await waitFor(() => subscriberCount() === before, 5000, 'child subscriptions to be released');
  });
});
