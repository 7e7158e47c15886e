import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import type { UpstreamStatus } from '../src/upstream/upstream-service.js';
import { createProfile, createProfiledDevice, numeric, rule } from './helpers/alarms.js';
import { FakeCloud } from './helpers/cloud.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect, nextMessage } from './helpers/mqtt.js';
import { adminPost } from './helpers/notify.js';

const CLOUD_TOKEN = 'edge-gateway-in-the-cloud';

async function status(t: TestGateway): Promise<UpstreamStatus> {
  const res = await t.api('/api/upstream/status', { token: await t.adminToken() });
  assert.equal(res.status, 200);
  return (await res.json()) as UpstreamStatus;
}

describe('upstream sync to a cloud ThingsBoard (gateway API, a real broker as the cloud)', () => {
  let cloud: FakeCloud;
  let t: TestGateway;
  let pump: { id: string; token: string };
  let dev: MqttClient;
  const events: string[] = [];

  before(async () => {
    cloud = new FakeCloud({
      token: CLOUD_TOKEN,
      attributes: (req) => ({ id: req.id, device: req.device, values: { mode: 'from-cloud' } }),
    });
    await cloud.start();
    t = await startGateway({ config: { upstream: { url: cloud.url, token: CLOUD_TOKEN } } });
    t.gw.bus.on('test', 'upstream.connected', () => events.push('up'));
    t.gw.bus.on('test', 'upstream.disconnected', () => events.push('down'));
    await waitFor(async () => (await status(t)).connected, 20_000, 'the upstream link');
    pump = await createDevice(t, 'Pump 1');
    dev = await mqttConnect(t.gw.ports.mqtt, { username: pump.token, clientId: 'pump-1' });
  });
  after(async () => {
    await dev?.endAsync();
    await t?.close();
    await cloud?.stop();
  });

  it('announces the device and sends its telemetry with each point timestamp, and its attributes', async () => {
    await waitFor(
      () =>
        cloud.on('v1/gateway/connect').some((b) => (b as { device: string }).device === 'Pump 1'),
      10_000,
      'v1/gateway/connect of Pump 1',
    );
    assert.deepEqual(
      cloud.on('v1/gateway/connect').find((b) => (b as { device: string }).device === 'Pump 1'),
      { device: 'Pump 1', type: 'Default' },
    );
    await dev.publishAsync('v1/devices/me/telemetry', '{"ts":1700000000000,"values":{"t":1.5}}', {
      qos: 1,
    });
    await dev.publishAsync(
      'v1/devices/me/telemetry',
      '[{"ts":1700000001000,"values":{"t":2,"on":true}},{"ts":1700000002000,"values":{"t":3,"s":"x"}}]',
      { qos: 1 },
    );
    await dev.publishAsync('v1/devices/me/attributes', '{"fw":"1.2.0","slots":4}', { qos: 1 });
    await waitFor(() => cloud.telemetry('Pump 1').length >= 3, 10_000, 'telemetry in the cloud');
    assert.deepEqual(cloud.telemetry('Pump 1'), [
      { ts: 1700000000000, values: { t: 1.5 } },
      { ts: 1700000001000, values: { t: 2, on: true } },
      { ts: 1700000002000, values: { t: 3, s: 'x' } },
    ]);
    await waitFor(() => cloud.on('v1/gateway/attributes').length > 0, 10_000, 'attributes');
    assert.deepEqual(cloud.on('v1/gateway/attributes'), [{ 'Pump 1': { fw: '1.2.0', slots: 4 } }]);
    const s = await waitFor(async () => {
      const st = await status(t);
      return st.backlog === 0 && st.sentTotal === 3 ? st : undefined;
    }, 10_000);
    assert.equal(s.enabled, true);
    assert.equal(s.url, cloud.url);
    assert.equal(s.droppedTotal, 0);
    assert.equal(s.rejectedTotal, 0);
    assert.equal(s.oldestBacklogTs, null);
    assert.ok((s.lastConnectedTs ?? 0) > 0);
    assert.deepEqual(events, ['up']);
    const health = (await (await t.api('/healthz')).json()) as { upstream: UpstreamStatus };
    assert.equal(health.upstream.connected, true);
    assert.equal(health.upstream.backlog, 0);
  });

  it('writes a shared-attribute update and delete from the cloud to the device (its MQTT session gets them)', async () => {
    await dev.subscribeAsync('v1/devices/me/attributes', { qos: 1 });
    const update = nextMessage(dev, 'v1/devices/me/attributes');
    await cloud.send('v1/gateway/attributes', { device: 'Pump 1', data: { target: 42.5 } });
    assert.deepEqual(JSON.parse((await update).payload.toString()), { target: 42.5 });
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${pump.id}/values/attributes/SHARED_SCOPE?keys=target`,
      { token: await t.adminToken() },
    );
    assert.equal(((await res.json()) as Array<{ value: unknown }>)[0].value, 42.5);
    const deleted = nextMessage(dev, 'v1/devices/me/attributes');
    await cloud.send('v1/gateway/attributes', { device: 'Pump 1', data: { deleted: ['target'] } });
    assert.deepEqual(JSON.parse((await deleted).payload.toString()), { deleted: ['target'] });
    // Shared attributes from the cloud are not pushed back up.
    assert.deepEqual(cloud.on('v1/gateway/attributes').length, 1);
  });

  it('delivers a cloud RPC to an MQTT device and sends its reply back', async () => {
    await dev.subscribeAsync('v1/devices/me/rpc/request/+', { qos: 1 });
    const request = nextMessage(dev, /^v1\/devices\/me\/rpc\/request\/\d+$/);
    await cloud.send('v1/gateway/rpc', {
      device: 'Pump 1',
      data: { id: 7, method: 'setValve', params: { open: true } },
    });
    const req = await request;
    assert.deepEqual(JSON.parse(req.payload.toString()), {
      method: 'setValve',
      params: { open: true },
    });
    const localId = req.topic.split('/').pop();
    await dev.publishAsync(`v1/devices/me/rpc/response/${localId}`, '{"valve":"open"}', { qos: 1 });
    await waitFor(() => cloud.on('v1/gateway/rpc').length > 0, 10_000, 'the RPC reply');
    assert.deepEqual(cloud.on('v1/gateway/rpc'), [
      { device: 'Pump 1', id: 7, data: { valve: 'open' } },
    ]);
  });

  it('delivers a cloud RPC to an HTTP long-polling device and sends its reply back', async () => {
    const meter = await createDevice(t, 'Meter 2');
    await waitFor(
      () =>
        cloud.on('v1/gateway/connect').some((b) => (b as { device: string }).device === 'Meter 2'),
      10_000,
    );
    const poll = fetch(`${t.baseUrl}/api/v1/${meter.token}/rpc?timeout=30000`);
    // The long poll is registered before the cloud asks (the request waits for it otherwise).
    await new Promise((r) => setTimeout(r, 200));
    await cloud.send('v1/gateway/rpc', {
      device: 'Meter 2',
      data: { id: 3, method: 'read', params: { register: 40001 } },
    });
    const res = await poll;
    assert.equal(res.status, 200);
    const body = (await res.json()) as { id: number; method: string; params: unknown };
    assert.equal(body.method, 'read');
    assert.deepEqual(body.params, { register: 40001 });
    const reply = await fetch(`${t.baseUrl}/api/v1/${meter.token}/rpc/${body.id}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"value":1234}',
    });
    assert.equal(reply.status, 200);
    await waitFor(
      () => cloud.on('v1/gateway/rpc').some((b) => (b as { device: string }).device === 'Meter 2'),
      10_000,
    );
    assert.deepEqual(
      cloud.on('v1/gateway/rpc').find((b) => (b as { device: string }).device === 'Meter 2'),
      { device: 'Meter 2', id: 3, data: { value: 1234 } },
    );
  });

  it('sends device claims as v1/gateway/claim with the fields the device gave', async () => {
    await dev.publishAsync('v1/devices/me/claim', '{"secretKey":"abc","durationMs":60000}', {
      qos: 1,
    });
    // Over HTTP, no body: the cloud's defaults apply.
    const meter = await createDevice(t, 'Claimer 4');
    const res = await fetch(`${t.baseUrl}/api/v1/${meter.token}/claim`, { method: 'POST' });
    assert.equal(res.status, 200);
    // One publish may carry both (a device once per publish).
    const claims = () => Object.assign({}, ...cloud.on('v1/gateway/claim'));
    await waitFor(() => Object.keys(claims()).length >= 2, 10_000, 'the claims');
    assert.deepEqual(claims(), {
      'Pump 1': { secretKey: 'abc', durationMs: 60000 },
      'Claimer 4': {},
    });
  });

  it('disconnects a device in the cloud when its MQTT session ends, after its data; HTTP devices stay connected', async () => {
    const device = await createDevice(t, 'Session 5');
    const forDevice = () =>
      cloud.messages
        .filter((m) => JSON.stringify(m.body).includes('Session 5'))
        .map((m) => m.topic);
    const session = await mqttConnect(t.gw.ports.mqtt, { username: device.token, clientId: 's5' });
    await session.publishAsync('v1/devices/me/telemetry', '{"ts":1700000020000,"values":{"v":1}}', {
      qos: 1,
    });
    await session.endAsync();
    await waitFor(
      () => forDevice().includes('v1/gateway/disconnect'),
      10_000,
      'the disconnect of Session 5',
    );
    const seen = forDevice();
    // Its reading went up before its disconnect.
    assert.ok(
      seen.indexOf('v1/gateway/telemetry') < seen.indexOf('v1/gateway/disconnect'),
      `${seen}`,
    );
    assert.deepEqual(cloud.on('v1/gateway/disconnect').at(-1), { device: 'Session 5' });
    // A new session connects it again.
    const again = await mqttConnect(t.gw.ports.mqtt, { username: device.token, clientId: 's5' });
    await waitFor(
      () =>
        forDevice().lastIndexOf('v1/gateway/connect') >
        forDevice().indexOf('v1/gateway/disconnect'),
      10_000,
      'Session 5 connected again',
    );
    await again.endAsync();
    // The HTTP long-polling device of the RPC test is never disconnected.
    assert.ok(
      !cloud
        .on('v1/gateway/disconnect')
        .some((b) => (b as { device: string }).device === 'Meter 2'),
    );
  });

  it('requests the shared attributes of its devices on connect and applies what the cloud has', async () => {
    const admin = await t.adminToken();
    await t.api(`/api/plugins/telemetry/DEVICE/${pump.id}/attributes/SHARED_SCOPE`, {
      body: { mode: 'local' },
      token: admin,
    });
    // A device with no shared attribute yet, whose profile's alarm rule reads `limit`.
    const profileId = await createProfile(t, 'Boilers', [
      {
        id: 'hot',
        alarmType: 'Hot',
        createRules: {
          MAJOR: rule([
            numeric('temperature', 'GREATER', null, {
              dynamicValue: { sourceType: 'CURRENT_DEVICE', sourceAttribute: 'limit' },
            }),
          ]),
        },
      },
    ]);
    await createProfiledDevice(t, 'Boiler 6', profileId);
    await cloud.stop();
    await waitFor(() => events.includes('down'), 10_000, 'the link to go down');
    const before = cloud.on('v1/gateway/attributes/request').length;
    const update = nextMessage(dev, 'v1/devices/me/attributes', 30_000);
    await cloud.start();
    await waitFor(async () => (await status(t)).connected, 30_000, 'the link to come back');
    const requests = cloud.on('v1/gateway/attributes/request').slice(before);
    assert.deepEqual(
      requests.find((r) => (r as { device: string }).device === 'Pump 1'),
      {
        id: (requests.find((r) => (r as { device: string }).device === 'Pump 1') as { id: number })
          .id,
        device: 'Pump 1',
        client: false,
        keys: ['mode'],
      },
    );
    // Its profile's key (and `mode`, which the cloud's answer to its first request gave it).
    const boiler = requests.find((r) => (r as { device: string }).device === 'Boiler 6') as {
      keys: string[];
    };
    assert.deepEqual(boiler.keys.sort(), ['limit', 'mode']);
    assert.deepEqual(JSON.parse((await update).payload.toString()), { mode: 'from-cloud' });
    assert.deepEqual(events, ['up', 'down', 'up']);
  });

  it('keeps a device whose upstreamEnabled server attribute is false local', async () => {
    const admin = await t.adminToken();
    const quiet = await createDevice(t, 'Quiet 3');
    await t.api(`/api/plugins/telemetry/DEVICE/${quiet.id}/attributes/SERVER_SCOPE`, {
      body: { upstreamEnabled: false },
      token: admin,
    });
    const sentBefore = (await status(t)).sentTotal;
    for (const [token, v] of [
      [quiet.token, 1],
      [pump.token, 2],
    ] as const) {
      const res = await fetch(`${t.baseUrl}/api/v1/${token}/telemetry`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ts: 1700000009000, values: { q: v } }),
      });
      assert.equal(res.status, 200);
    }
    await waitFor(async () => (await status(t)).sentTotal === sentBefore + 1, 10_000);
    assert.deepEqual(cloud.telemetry('Quiet 3'), []);
    assert.deepEqual(cloud.telemetry('Pump 1').at(-1), { ts: 1700000009000, values: { q: 2 } });
  });

  it('pushes what reaches the push-to-cloud node: a chain that transforms first sends only the transformed message', async () => {
    const P = 'org.thingsboard.rule.engine.';
    const chain = await adminPost(t, '/api/ruleChain/import', {
      ruleChain: { name: 'Scaled to cloud', type: 'CORE', root: false, debugMode: false },
      metadata: {
        firstNodeIndex: 0,
        nodes: [
          {
            type: `${P}transform.TbTransformMsgNode`,
            name: 'scale',
            configuration: {
              scriptLang: 'JS',
              jsScript:
                'msg.scaled = msg.v * 10; return {msg: msg, metadata: metadata, msgType: msgType};',
            },
          },
          {
            type: `${P}edge.TbMsgPushToCloudNode`,
            name: 'to cloud',
            configuration: { scope: 'SERVER_SCOPE' },
          },
        ],
        connections: [{ fromIndex: 0, toIndex: 1, type: 'Success' }],
        ruleChainConnections: null,
      },
    });
    const profile = await adminPost(t, '/api/deviceProfile', {
      name: 'Scaled',
      type: 'DEFAULT',
      defaultRuleChainId: { entityType: 'RULE_CHAIN', id: chain.id.id },
      profileData: {},
    });
    const device = await adminPost(t, '/api/device', {
      name: 'Scaled 7',
      deviceProfileId: { entityType: 'DEVICE_PROFILE', id: profile.id.id },
    });
    const creds = await t.api(`/api/device/${device.id.id}/credentials`, {
      token: await t.adminToken(),
    });
    const token = ((await creds.json()) as { credentialsId: string }).credentialsId;
    const res = await fetch(`${t.baseUrl}/api/v1/${token}/telemetry`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ts: 1700000050000, values: { v: 2 } }),
    });
    assert.equal(res.status, 200);
    await waitFor(() => cloud.telemetry('Scaled 7').length > 0, 10_000, 'the pushed message');
    await waitFor(async () => (await status(t)).backlog === 0, 10_000, 'the backlog sent');
    // Not the device's own message as well: the commit did not queue it (a node on the way to
    // the push node changes it).
    assert.deepEqual(cloud.telemetry('Scaled 7'), [
      { ts: 1700000050000, values: { v: 2, scaled: 20 } },
    ]);
  });

  it('answers a cloud RPC for a device it does not have with an error on v1/gateway/rpc', async () => {
    await cloud.send('v1/gateway/rpc', {
      device: 'Nobody 9',
      data: { id: 11, method: 'ping', params: {} },
    });
    const reply = () =>
      cloud.on('v1/gateway/rpc').find((b) => (b as { device: string }).device === 'Nobody 9');
    await waitFor(reply, 10_000, 'the error reply');
    assert.deepEqual(reply(), {
      device: 'Nobody 9',
      id: 11,
      data: { error: 'Device Nobody 9 is not found' },
    });
  });
});

describe('upstream outbox bound', () => {
  it('keeps the newest EDGE_UPSTREAM_MAX_BACKLOG messages while the cloud is down, counts the rest as dropped, and does not grow', async () => {
    // Nothing listens on port 1 of loopback: the cloud is down for the whole test.
    const t = await startGateway({
      config: {
        upstream: { url: 'mqtt://127.0.0.1:1', token: CLOUD_TOKEN, maxBacklog: 1000 },
        telemetry: { maxPoints: 1000 },
      },
    });
    try {
      const dev = await createDevice(t, 'Counter');
      const c = await mqttConnect(t.gw.ports.mqtt, { username: dev.token, clientId: 'counter' });
      const send = async (from: number, to: number) => {
        for (let i = from; i <= to; i += 100) {
          const batch: Array<Promise<unknown>> = [];
          for (let n = i; n < i + 100 && n <= to; n++) {
            const body = JSON.stringify({ ts: 1700000000000 + n, values: { n } });
            batch.push(c.publishAsync('v1/devices/me/telemetry', body, { qos: 1 }));
          }
          await Promise.all(batch);
        }
      };
      const outboxPages = () =>
        (
          t.gw.db
            .prepare("SELECT count(*) AS n FROM dbstat WHERE name = 'upstream_outbox'")
            .get() as { n: number }
        ).n;
      await send(1, 2000);
      const s2000 = await status(t);
      assert.equal(s2000.backlog, 1000);
      assert.equal(s2000.droppedTotal, 1000);
      const pagesAt2000 = outboxPages();
      const fileAt2000 = t.gw.db.pragma('page_count', { simple: true }) as number;
      await send(2001, 5000);
      await c.endAsync();
      const s = await status(t);
      assert.equal(s.connected, false);
      assert.ok(s.lastError, 'the refused connection is reported');
      assert.equal(s.backlog, 1000);
      assert.equal(s.droppedTotal, 4000);
      assert.equal(s.sentTotal, 0);
      assert.equal(s.oldestBacklogTs, 1700000004001);
      const kept = t.gw.services.upstream.outbox
        .read(0, 2000)
        .map((r) => (JSON.parse(r.data) as Array<{ values: { n: number } }>)[0].values.n);
      assert.deepEqual(
        kept,
        Array.from({ length: 1000 }, (_, i) => 4001 + i),
      );
      // The outbox reuses its pages: 3,000 more messages at the bound take no more of them,
      // and the file keeps its size (telemetry is bounded to 1,000 points too).
      assert.ok(outboxPages() <= pagesAt2000 + 2, `${outboxPages()} pages vs ${pagesAt2000}`);
      const fileAt5000 = t.gw.db.pragma('page_count', { simple: true }) as number;
      assert.ok(fileAt5000 <= fileAt2000 * 1.1 + 5, `${fileAt5000} pages vs ${fileAt2000}`);
    } finally {
      await t.close();
    }
  });
});
