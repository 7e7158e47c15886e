import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import type { UpstreamStatus } from '../src/upstream/upstream-service.js';
import { FakeCloud } from './helpers/cloud.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';

const CLOUD_TOKEN = 'edge-gateway-sessions';

async function status(t: TestGateway): Promise<UpstreamStatus> {
  const res = await t.api('/api/upstream/status', { token: await t.adminToken() });
  assert.equal(res.status, 200);
  return (await res.json()) as UpstreamStatus;
}

/** The topics of the cloud messages about one device (from `from` on), in order. */
function topicsOf(cloud: FakeCloud, device: string, from = 0): string[] {
  return cloud.messages
    .slice(from)
    .filter((m) => {
      const body = m.body as Record<string, unknown>;
      return (
        body?.device === device || (body !== null && typeof body === 'object' && device in body)
      );
    })
    .map((m) => m.topic);
}

/**
 * The cloud goes down; the device sends a reading (`{"v": ts}`) and ends its MQTT session, and
 * the gateway saves that end (its activity). Returns where the cloud's messages stood.
 */
async function lastReadingInOutage(
  cloud: FakeCloud,
  t: TestGateway,
  client: MqttClient,
  deviceId: string,
  ts: number,
): Promise<number> {
  await cloud.stop();
  await waitFor(async () => !(await status(t)).connected, 10_000, 'the link to go down');
  const mark = cloud.messages.length;
  await client.publishAsync('v1/devices/me/telemetry', JSON.stringify({ ts, values: { v: ts } }), {
    qos: 1,
  });
  await client.endAsync();
  const admin = await t.adminToken();
  await waitFor(
    async () => {
      const res = await t.api(
        `/api/plugins/telemetry/DEVICE/${deviceId}/values/attributes/SERVER_SCOPE?keys=lastDisconnectTime`,
        { token: admin },
      );
      const body = (await res.json()) as Array<{ key: string; value: number }>;
      return body.some((a) => a.key === 'lastDisconnectTime' && a.value > 0);
    },
    10_000,
    'the session end saved',
  );
  return mark;
}

async function postHttp(t: TestGateway, token: string, body: unknown): Promise<void> {
  const res = await fetch(`${t.baseUrl}/api/v1/${token}/telemetry`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
}

/** A cloud and a gateway connected to it, stopped after `test` whatever happens. */
async function withCloud(
  test: (cloud: FakeCloud, start: (dataDir?: string) => Promise<TestGateway>) => Promise<void>,
): Promise<void> {
  const cloud = new FakeCloud({ token: CLOUD_TOKEN });
  await cloud.start();
  let t: TestGateway | undefined;
  try {
    await test(cloud, async (dataDir) => {
      await t?.close(false);
      t = await startGateway({
        dataDir,
        config: { upstream: { url: cloud.url, token: CLOUD_TOKEN } },
      });
      return t;
    });
  } finally {
    await t?.close();
    await cloud.stop();
  }
}

describe('upstream: device sessions across an outage (a real broker as the cloud)', () => {
  it('announces on reconnect only the devices whose session is live, and disconnects one that ended during the outage after its data', () =>
    withCloud(async (cloud, start) => {
      const gw = await start();
      const live = await createDevice(gw, 'Live A');
      const gone = await createDevice(gw, 'Gone B');
      const ended = await createDevice(gw, 'Ended C');
      const http = await createDevice(gw, 'Http D');
      await waitFor(async () => (await status(gw)).connected, 20_000, 'the upstream link');
      const a = await mqttConnect(gw.gw.ports.mqtt, { username: live.token, clientId: 'live-a' });
      const b = await mqttConnect(gw.gw.ports.mqtt, { username: gone.token, clientId: 'gone-b' });
      const c = await mqttConnect(gw.gw.ports.mqtt, { username: ended.token, clientId: 'ended-c' });
      await postHttp(gw, http.token, { ts: 1700000040000, values: { v: 0 } });
      await c.endAsync();
      await waitFor(
        () => topicsOf(cloud, 'Ended C').includes('v1/gateway/disconnect'),
        10_000,
        'the disconnect of Ended C',
      );
      await waitFor(async () => (await status(gw)).backlog === 0, 10_000, 'the reading of Http D');

      const mark = await lastReadingInOutage(cloud, gw, b, gone.id, 1700000041000);
      assert.equal((await status(gw)).backlog, 1);

      await cloud.start();
      await waitFor(
        () => topicsOf(cloud, 'Gone B', mark).includes('v1/gateway/disconnect'),
        30_000,
        'the disconnect of Gone B after the link came back',
      );
      await waitFor(async () => (await status(gw)).backlog === 0, 10_000, 'the backlog sent');
      // A live MQTT session and an HTTP device (no lasting session) are connected again ...
      assert.deepEqual(topicsOf(cloud, 'Live A', mark), ['v1/gateway/connect']);
      assert.deepEqual(topicsOf(cloud, 'Http D', mark), ['v1/gateway/connect']);
      // ... a session that had ended before the outage is not ...
      assert.deepEqual(topicsOf(cloud, 'Ended C', mark), []);
      // ... and one that ended during it goes up connected with its reading, then disconnected.
      assert.deepEqual(topicsOf(cloud, 'Gone B', mark), [
        'v1/gateway/connect',
        'v1/gateway/telemetry',
        'v1/gateway/disconnect',
      ]);
      assert.deepEqual(cloud.telemetry('Gone B'), [
        { ts: 1700000041000, values: { v: 1700000041000 } },
      ]);
      await a.endAsync();
    }));

  it('disconnects after its data a device whose session ended before a restart during the outage', () =>
    withCloud(async (cloud, start) => {
      const gw = await start();
      const gone = await createDevice(gw, 'Gone E');
      await createDevice(gw, 'Http F');
      await waitFor(async () => (await status(gw)).connected, 20_000, 'the upstream link');
      const e = await mqttConnect(gw.gw.ports.mqtt, { username: gone.token, clientId: 'gone-e' });
      await waitFor(
        () => topicsOf(cloud, 'Gone E').includes('v1/gateway/connect'),
        10_000,
        'Gone E connected in the cloud',
      );

      const mark = await lastReadingInOutage(cloud, gw, e, gone.id, 1700000042000);
      const again = await start(gw.dataDir);
      assert.equal((await status(again)).backlog, 1);

      await cloud.start();
      await waitFor(
        () => topicsOf(cloud, 'Gone E', mark).includes('v1/gateway/disconnect'),
        30_000,
        'the disconnect of Gone E after the restart',
      );
      assert.deepEqual(topicsOf(cloud, 'Gone E', mark), [
        'v1/gateway/connect',
        'v1/gateway/telemetry',
        'v1/gateway/disconnect',
      ]);
      assert.deepEqual(topicsOf(cloud, 'Http F', mark), ['v1/gateway/connect']);
      await waitFor(async () => (await status(again)).backlog === 0, 10_000, 'the backlog sent');
    }));
});
