import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { FakeCloud } from './helpers/cloud.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

const CLOUD_TOKEN = 'settings-cloud-token';

async function get<T>(t: TestGateway, path: string): Promise<T> {
  const res = await t.api(path, { token: await t.adminToken() });
  assert.equal(res.status, 200);
  return (await res.json()) as T;
}

const status = (t: TestGateway) =>
  get<{ enabled: boolean; connected: boolean; url: string; backlog: number }>(
    t,
    '/api/upstream/status',
  );

describe('upstream settings over REST (saved in the database, applied without a restart)', () => {
  let cloud: FakeCloud;
  let t: TestGateway;

  before(async () => {
    cloud = new FakeCloud({ token: CLOUD_TOKEN });
    await cloud.start();
    // Upstream off in the config: it is turned on over REST.
    t = await startGateway({ config: { upstream: { maxBacklog: 5000 } } });
  });
  after(async () => {
    await t?.close();
    if (t) await rm(t.dataDir, { recursive: true, force: true });
    await cloud?.stop();
  });

  it('turns upstream on at once, never echoes the token, and queues telemetry from then on', async () => {
    assert.equal((await status(t)).enabled, false);
    const token = await t.adminToken();
    const res = await t.api('/api/upstream/settings', {
      token,
      body: { url: cloud.url, token: CLOUD_TOKEN, maxInFlight: 8 },
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(body.url, cloud.url);
    assert.equal(body.token, true);
    assert.equal(body.password, false);
    assert.equal(body.maxInFlight, 8);
    assert.equal(body.maxBacklog, 5000);
    assert.equal(body.saved, true);
    assert.ok(!JSON.stringify(body).includes(CLOUD_TOKEN), 'the token is not given back');
    await waitFor(async () => (await status(t)).connected, 20_000, 'the link after saving');

    const pump = await createDevice(t, 'Settings Pump');
    const dev = await mqttConnect(t.gw.ports.mqtt, { username: pump.token, clientId: 'sp' });
    try {
      await dev.publishAsync('v1/devices/me/telemetry', '{"ts":1700000000000,"values":{"a":1}}', {
        qos: 1,
      });
      await waitFor(
        () => cloud.telemetry('Settings Pump').length === 1,
        10_000,
        'telemetry sent after upstream was turned on',
      );
    } finally {
      await dev.endAsync();
    }
    const settings = await get<Record<string, unknown>>(t, '/api/upstream/settings');
    assert.equal(settings.token, true);
    assert.ok(!JSON.stringify(settings).includes(CLOUD_TOKEN));
  });

  it('refuses bad settings with 400 naming the problem and keeps the ones in effect', async () => {
    const token = await t.adminToken();
    const cases: Array<[unknown, RegExp]> = [
      [{ url: 'http://cloud:80' }, /mqtt:\/\/host:port/],
      [{ maxInFlight: 0 }, /maxInFlight/],
      [{ mqttVersion: '4' }, /mqttVersion/],
      [{ caFile: '/nonexistent/ca.pem' }, /caFile/],
      [{ certFile: '/etc/hostname' }, /certFile and keyFile/],
      [{ urll: 'mqtt://x:1' }, /urll/],
    ];
    for (const [body, message] of cases) {
      const res = await t.api('/api/upstream/settings', { token, body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(((await res.json()) as { message: string }).message, message);
    }
    const s = await status(t);
    assert.equal(s.url, cloud.url);
    assert.equal(s.connected, true);
  });

  it('is for the tenant administrator only', async () => {
    const customerId = await createCustomer(t, 'Settings Customer');
    const userId = await createUser(t, 'settings-user@test.local', customerId);
    const userToken = await activateUser(t, userId, 'customer-password-1');
    for (const [method, body] of [
      ['GET', undefined],
      ['POST', { url: '' }],
      ['DELETE', undefined],
    ] as const) {
      const res = await t.api('/api/upstream/settings', { method, body, token: userToken });
      assert.equal(res.status, 403, method);
    }
    assert.equal((await t.api('/api/upstream/settings')).status, 401);
    assert.equal((await status(t)).enabled, true);
  });

  it('keeps saved settings across a restart; DELETE goes back to the config at once', async () => {
    const dataDir = t.dataDir;
    await t.close(false);
    t = await startGateway({ dataDir, config: { upstream: { maxBacklog: 5000 } } });
    await waitFor(async () => (await status(t)).connected, 20_000, 'the link after a restart');
    const res = await t.api('/api/upstream/settings', {
      method: 'DELETE',
      token: await t.adminToken(),
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(body.url, '');
    assert.equal(body.saved, false);
    const s = await status(t);
    assert.equal(s.enabled, false);
    assert.equal(s.connected, false);
  });
});

describe('upstream settings applied while publishes are in flight', () => {
  it('sends the publishes the old link had in flight again on the new one, in order, none lost', async () => {
    const old = new FakeCloud({ token: CLOUD_TOKEN });
    const next = new FakeCloud({ token: CLOUD_TOKEN });
    await old.start();
    await next.start();
    const t = await startGateway({ config: { upstream: { url: old.url, token: CLOUD_TOKEN } } });
    try {
      await waitFor(async () => (await status(t)).connected, 20_000, 'the first link');
      const meter = await createDevice(t, 'Switch Meter');
      const dev = await mqttConnect(t.gw.ports.mqtt, { username: meter.token, clientId: 'sm' });
      // The old cloud answers nothing from now on: what the gateway sends stays in flight.
      old.hold();
      const send = async (from: number, to: number) => {
        for (let i = from; i <= to; i++) {
          const body = JSON.stringify({ ts: 1700000100000 + i, values: { i } });
          await dev.publishAsync('v1/devices/me/telemetry', body, { qos: 1 });
        }
      };
      await send(1, 3);
      await waitFor(
        async () => old.heldCount > 0 && (await status(t)).backlog === 3,
        10_000,
        'readings in flight to the old cloud',
      );
      const res = await t.api('/api/upstream/settings', {
        token: await t.adminToken(),
        body: { url: next.url },
      });
      assert.equal(res.status, 200);
      await send(4, 5);
      await waitFor(
        () => next.telemetry('Switch Meter').length >= 5,
        20_000,
        'every reading on the new link',
      );
      await waitFor(async () => (await status(t)).backlog === 0, 10_000, 'the backlog sent');
      // Each reading once, in order, on the new link; the old cloud recorded none.
      assert.deepEqual(
        next.telemetry('Switch Meter').map((p) => p.values.i),
        [1, 2, 3, 4, 5],
      );
      assert.deepEqual(old.telemetry('Switch Meter'), []);
      await dev.endAsync();
    } finally {
      await t.close();
      await rm(t.dataDir, { recursive: true, force: true });
      old.release();
      await old.stop();
      await next.stop();
    }
  });
});
