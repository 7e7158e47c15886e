import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UpstreamStatus } from '../src/upstream/upstream-service.js';
import { FakeCloud } from './helpers/cloud.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';

const CLOUD_TOKEN = 'edge-gateway-limits';

async function status(t: TestGateway): Promise<UpstreamStatus> {
  const res = await t.api('/api/upstream/status', { token: await t.adminToken() });
  assert.equal(res.status, 200);
  return (await res.json()) as UpstreamStatus;
}

describe("upstream: the cloud's session limits (getSessionLimits)", () => {
  it('drains a backlog in publishes no larger than maxPayloadSize, no faster than the rate limit', async () => {
    // 40 messages per second (ThingsBoard's "40:1"): the gateway paces at 90 % of it, 36/s.
    const cloud = new FakeCloud({
      token: CLOUD_TOKEN,
      sessionLimits: {
        maxPayloadSize: 400,
        maxInflightMessages: 2,
        rateLimits: { messages: '40:1' },
      },
    });
    await cloud.start();
    await cloud.stop(); // down while the backlog builds; its port is kept
    const t = await startGateway({ config: { upstream: { url: cloud.url, token: CLOUD_TOKEN } } });
    try {
      const dev = await createDevice(t, 'Paced 1');
      const c = await mqttConnect(t.gw.ports.mqtt, { username: dev.token, clientId: 'paced-1' });
      // More than one publish of the gateway's own 64 KiB limit: without the cloud's limits it
      // would go at once, in one publish.
      const N = 800;
      for (let i = 1; i <= N; i += 100) {
        const batch: Array<Promise<unknown>> = [];
        for (let n = i; n < i + 100; n++) {
          const body = JSON.stringify({
            ts: 1700000200000 + n,
            values: { n, text: 'x'.repeat(40) },
          });
          batch.push(c.publishAsync('v1/devices/me/telemetry', body, { qos: 1 }));
        }
        await Promise.all(batch);
      }
      await c.endAsync();
      assert.equal((await status(t)).backlog, N);
      await cloud.start();
      await waitFor(async () => (await status(t)).backlog === 0, 60_000, 'the backlog drained');
      const publishes = cloud.messages.filter((m) => m.topic === 'v1/gateway/telemetry');
      // Every reading once, in order ...
      assert.deepEqual(
        cloud.telemetry('Paced 1').map((p) => p.values.n),
        Array.from({ length: N }, (_, i) => i + 1),
      );
      // ... in publishes within the cloud's payload limit (a few readings each) ...
      for (const p of publishes) assert.ok(p.bytes <= 400, `a publish of ${p.bytes} bytes`);
      assert.ok(publishes.length >= N / 6, `${publishes.length} publishes`);
      // ... no faster than 36 per second: a loaded machine can only make it slower.
      const ms = (publishes.at(-1)?.at ?? 0) - (publishes[0]?.at ?? 0);
      const least = ((publishes.length - 1) / 36) * 1000 * 0.9;
      assert.ok(ms >= least, `${publishes.length} publishes in ${ms} ms (≥ ${least})`);
    } finally {
      await t.close();
      await cloud.stop();
    }
  });
});
