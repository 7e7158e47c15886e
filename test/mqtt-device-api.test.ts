import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { connect as tcpConnect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import mqttPacket from 'mqtt-packet';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { closed, mqttConnect, nextMessage } from './helpers/mqtt.js';

describe('device API over MQTT', () => {
  let t: TestGateway;
  let admin: string;
  let dev: { id: string; token: string };
  let c: MqttClient;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    dev = await createDevice(t, 'mqtt-api-device', 'MQTT_API_TOKEN');
    c = await mqttConnect(t.gw.ports.mqtt, { username: dev.token, clientId: 'mqtt-api' });
  });
  after(async () => {
    await c.endAsync();
    await t.close();
  });

  async function latest(keys: string) {
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${dev.id}/values/timeseries?keys=${keys}&useStrictDataTypes=true`,
      {
        token: admin,
      },
    );
    return (await res.json()) as Record<string, Array<{ ts: number; value: unknown }>>;
  }

  it('stores telemetry before the PUBACK of a QoS 1 publish, in every accepted form', async () => {
    await c.publishAsync('v1/devices/me/telemetry', '{"temperature":21.5,"count":3}', { qos: 1 });
    // The PUBACK came after the commit: the values are readable at once.
    const now = await latest('temperature,count');
    assert.equal(now.temperature[0].value, 21.5);
    assert.equal(now.count[0].value, 3);
    await c.publishAsync(
      'v1/devices/me/telemetry',
      '[{"ts":1700000000000,"values":{"hist":1}},{"ts":1700000001000,"values":{"hist":2}}]',
      {
        qos: 1,
      },
    );
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${dev.id}/values/timeseries?keys=hist&startTs=1700000000000&endTs=1700000002000&orderBy=ASC`,
      { token: admin },
    );
    const hist = (await res.json()) as { hist: Array<{ ts: number; value: string }> };
    assert.deepEqual(
      hist.hist.map((p) => [p.ts, p.value]),
      [
        [1700000000000, '1'],
        [1700000001000, '2'],
      ],
    );
  });

  it('publishes client attributes and answers attribute requests on the response topic', async () => {
    await c.publishAsync('v1/devices/me/attributes', '{"firmware":"1.2.0","model":"X1"}', {
      qos: 1,
    });
    await t.api(`/api/plugins/telemetry/DEVICE/${dev.id}/attributes/SHARED_SCOPE`, {
      body: { interval: 30 },
      token: admin,
    });
    await c.subscribeAsync('v1/devices/me/attributes/response/+', { qos: 1 });
    const answer = nextMessage(c, 'v1/devices/me/attributes/response/7');
    await c.publishAsync(
      'v1/devices/me/attributes/request/7',
      '{"clientKeys":"firmware","sharedKeys":"interval"}',
      { qos: 1 },
    );
    assert.deepEqual(JSON.parse((await answer).payload.toString()), {
      client: { firmware: '1.2.0' },
      shared: { interval: 30 },
    });
    const all = nextMessage(c, 'v1/devices/me/attributes/response/8');
    await c.publishAsync('v1/devices/me/attributes/request/8', '{}', { qos: 1 });
    assert.deepEqual(JSON.parse((await all).payload.toString()), {
      client: { firmware: '1.2.0', model: 'X1' },
      shared: { interval: 30 },
    });
  });

  it('pushes shared attribute changes and deletes made through REST to the subscribed device', async () => {
    await c.subscribeAsync('v1/devices/me/attributes', { qos: 1 });
    const update = nextMessage(c, 'v1/devices/me/attributes');
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${dev.id}/attributes/SHARED_SCOPE`, {
      body: { setpoint: 42.5 },
      token: admin,
    });
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse((await update).payload.toString()), { setpoint: 42.5 });
    const deleted = nextMessage(c, 'v1/devices/me/attributes');
    await t.api(`/api/plugins/telemetry/DEVICE/${dev.id}/SHARED_SCOPE?keys=setpoint`, {
      method: 'DELETE',
      token: admin,
    });
    assert.deepEqual(JSON.parse((await deleted).payload.toString()), { deleted: ['setpoint'] });
  });

  it('delivers server-side RPC and returns the device reply to the REST caller', async () => {
    await c.subscribeAsync('v1/devices/me/rpc/request/+', { qos: 1 });
    const request = nextMessage(c, /^v1\/devices\/me\/rpc\/request\/\d+$/);
    const call = t.api(`/api/rpc/twoway/${dev.id}`, {
      body: { method: 'setGpio', params: { pin: 4 }, timeout: 5000 },
      token: admin,
    });
    const req = await request;
    assert.deepEqual(JSON.parse(req.payload.toString()), { method: 'setGpio', params: { pin: 4 } });
    const id = req.topic.split('/').pop();
    await c.publishAsync(`v1/devices/me/rpc/response/${id}`, '{"pin":4,"value":1}', { qos: 1 });
    const res = await call;
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { pin: 4, value: 1 });
  });

  it('answers client-side RPC: getCurrentTime through the core, getSessionLimits in the transport', async () => {
    await c.subscribeAsync('v1/devices/me/rpc/response/+', { qos: 1 });
    const time = nextMessage(c, 'v1/devices/me/rpc/response/11');
    const before = Date.now();
    await c.publishAsync(
      'v1/devices/me/rpc/request/11',
      '{"method":"getCurrentTime","params":{}}',
      { qos: 1 },
    );
    const ts = Number((await time).payload.toString());
    assert.ok(ts >= before && ts <= Date.now() + 1000);
    const limits = nextMessage(c, 'v1/devices/me/rpc/response/12');
    await c.publishAsync(
      'v1/devices/me/rpc/request/12',
      '{"method":"getSessionLimits","params":{"timeout":5000}}',
      { qos: 1 },
    );
    const body = JSON.parse((await limits).payload.toString()) as {
      maxPayloadSize: number;
      maxInflightMessages: number;
    };
    assert.equal(body.maxPayloadSize, 65536);
    assert.equal(body.maxInflightMessages, 100);
  });

  it('registers a claim from the device', async () => {
    await c.publishAsync('v1/devices/me/claim', '{"secretKey":"abc","durationMs":60000}', {
      qos: 1,
    });
    const pending = t.gw.services.claims.pending(dev.id);
    assert.ok(pending);
    assert.ok(pending.expirationTime > Date.now() + 50_000);
  });

  it('closes an MQTT 3.1.1 connection on an invalid payload and stores nothing of it', async () => {
    const d = await createDevice(t, 'mqtt-bad-payload');
    const bad = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'bad-v3' });
    const gone = closed(bad);
    bad.publish('v1/devices/me/telemetry', '{"broken":', { qos: 1 });
    await gone;
    bad.end(true);
    assert.deepEqual(t.gw.services.telemetry.keys(d.id), []);
  });

  it('answers QoS 1 publishes on the wire with one PUBACK each, in order, after the commit', async () => {
    const d = await createDevice(t, 'mqtt-wire-acks');
    for (const protocolVersion of [4, 5] as const) {
      const sock = tcpConnect(t.gw.ports.mqtt, '127.0.0.1');
      await once(sock, 'connect');
      const received: Buffer[] = [];
      sock.on('data', (b: Buffer) => received.push(b));
      const packets = [
        mqttPacket.generate(
          {
            cmd: 'connect',
            protocolId: 'MQTT',
            protocolVersion,
            clientId: `wire-${protocolVersion}`,
            clean: true,
            keepalive: 30,
            username: d.token,
          },
          { protocolVersion },
        ),
        // Three publishes in one write: ids 7, 300 and 65535 (both bytes of the id matter).
        ...[7, 300, 65535].map((messageId, i) =>
          mqttPacket.generate(
            {
              cmd: 'publish',
              topic: 'v1/devices/me/telemetry',
              payload: `{"wire${protocolVersion}":${i}}`,
              qos: 1,
              dup: false,
              retain: false,
              messageId,
            },
            { protocolVersion },
          ),
        ),
      ];
      sock.write(Buffer.concat(packets));
      // CONNACK (4 bytes on 3.1.1; 3.1.1 form + properties on 5), then 3 × 4-byte PUBACKs.
      await waitFor(() => {
        const all = Buffer.concat(received);
        return all.length >= all[1] + 2 + 12;
      });
      await new Promise((r) => setTimeout(r, 100));
      const all = Buffer.concat(received);
      const acks = all.subarray(all[1] + 2);
      assert.equal(all[0], 0x20, 'CONNACK first');
      assert.deepEqual(
        [...acks],
        [0x40, 2, 0, 7, 0x40, 2, 1, 44, 0x40, 2, 255, 255],
        `protocol ${protocolVersion}: exactly one PUBACK per publish, ids in order`,
      );
      const stored = t.gw.services.telemetry.query(d.id, {
        mode: 'latest',
        keys: [`wire${protocolVersion}`],
        strict: true,
      });
      assert.equal(stored[`wire${protocolVersion}`][0].value, 2);
      sock.destroy();
    }
  });

  it('answers an invalid payload on MQTT 5 with PUBACK 0x99 and keeps the connection', async () => {
    const d = await createDevice(t, 'mqtt5-bad-payload');
    const v5 = await mqttConnect(t.gw.ports.mqtt, {
      username: d.token,
      clientId: 'bad-v5',
      protocolVersion: 5,
    });
    try {
      await assert.rejects(
        v5.publishAsync('v1/devices/me/telemetry', '[1,2]', { qos: 1 }),
        (err: Error & { code?: number }) => {
          assert.equal(err.code, 0x99);
          return true;
        },
      );
      assert.ok(v5.connected);
      await v5.publishAsync('v1/devices/me/telemetry', '{"ok":1}', { qos: 1 });
      assert.deepEqual(t.gw.services.telemetry.keys(d.id), ['ok']);
    } finally {
      await v5.endAsync();
    }
  });

  it('provisions a device over a "provision" session', async () => {
    const profile = await t.api('/api/deviceProfile', {
      body: {
        name: 'mqtt-provisioned',
        profileData: {
          provisionConfiguration: {
            type: 'ALLOW_CREATE_NEW_DEVICES',
            provisionDeviceKey: 'mqtt-key',
            provisionDeviceSecret: 'mqtt-secret',
          },
        },
      },
      token: admin,
    });
    assert.equal(profile.status, 200, await profile.clone().text());
    const p = await mqttConnect(t.gw.ports.mqtt, { username: 'provision', clientId: 'prov' });
    try {
      await p.subscribeAsync('/provision/response', { qos: 1 });
      const response = nextMessage(p, '/provision/response');
      await p.publishAsync(
        '/provision/request',
        JSON.stringify({
          deviceName: 'born-over-mqtt',
          provisionDeviceKey: 'mqtt-key',
          provisionDeviceSecret: 'mqtt-secret',
        }),
        { qos: 1 },
      );
      const body = JSON.parse((await response).payload.toString()) as {
        status: string;
        credentialsType: string;
        credentialsValue: string;
      };
      assert.equal(body.status, 'SUCCESS');
      assert.equal(body.credentialsType, 'ACCESS_TOKEN');
      const born = await mqttConnect(t.gw.ports.mqtt, {
        username: body.credentialsValue,
        clientId: 'born',
      });
      await born.endAsync();
    } finally {
      await p.endAsync();
    }
  });

  it("serves firmware in chunks over MQTT, even to the SDKs' wildcard subscription", async () => {
    const image = Buffer.alloc(5000);
    for (let i = 0; i < image.length; i++) image[i] = (i * 7) % 251;
    const created = await t.api('/api/otaPackage', {
      body: { title: 'fw-mqtt', version: '2.0', type: 'FIRMWARE' },
      token: admin,
    });
    const pkg = (await created.json()) as { id: { id: string } };
    const sha = createHash('sha256').update(image).digest('hex');
    const up = await fetch(
      `${t.baseUrl}/api/otaPackage/${pkg.id.id}?checksumAlgorithm=SHA256&checksum=${sha}`,
      {
        method: 'POST',
        headers: {
          'X-Authorization': `Bearer ${admin}`,
          'content-type': 'application/octet-stream',
        },
        body: image,
      },
    );
    assert.equal(up.status, 200, await up.clone().text());
    const d = await createDevice(t, 'mqtt-fw-device');
    const fwClient = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'fw' });
    try {
      await fwClient.subscribeAsync('v2/fw/response/+', { qos: 1 });
      const device = (await (
        await t.api(`/api/device/${d.id}`, { token: admin })
      ).json()) as Record<string, unknown>;
      const assign = await t.api('/api/device', {
        body: { ...device, firmwareId: pkg.id },
        token: admin,
      });
      assert.equal(assign.status, 200, await assign.clone().text());
      const parts: Buffer[] = [];
      for (let chunk = 0; ; chunk++) {
        const next = nextMessage(fwClient, `v2/fw/response/1/chunk/${chunk}`);
        await fwClient.publishAsync(`v2/fw/request/1/chunk/${chunk}`, chunk === 0 ? '2048' : '', {
          qos: 1,
        });
        const { payload } = await next;
        if (payload.length === 0) break;
        parts.push(payload);
      }
      assert.deepEqual(
        parts.map((p) => p.length),
        [2048, 2048, 904],
      );
      assert.equal(createHash('sha256').update(Buffer.concat(parts)).digest('hex'), sha);
    } finally {
      await fwClient.endAsync();
    }
  });

  it('ends the subscriptions of a device when its connection closes', async () => {
    const d = await createDevice(t, 'mqtt-leaver');
    const leaver = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'leaver' });
    await leaver.subscribeAsync('v1/devices/me/attributes', { qos: 1 });
    await leaver.subscribeAsync('v1/devices/me/rpc/request/+', { qos: 1 });
    const counts = () =>
      t.gw.services.attributes.counts.subscribers + t.gw.services.rpc.counts.subscribers;
    const withLeaver = counts();
    leaver.end(true);
    await waitFor(() => counts() === withLeaver - 2, 5000, 'subscriptions to be released');
  });
});
