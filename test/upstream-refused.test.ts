import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeCloud } from './helpers/cloud.js';
import { createDevice, startGateway, waitFor } from './helpers/gateway.js';

const TOKEN = 'refusing-cloud-token';

interface Rejected {
  data: Array<{ deviceName: string; kind: string; data: unknown; reason: string }>;
  totalElements: number;
}

for (const version of ['5', '3.1.1'] as const) {
  describe(`a message the cloud refuses (MQTT ${version})`, () => {
    it('is retried a bounded number of times, set aside with its reason, and does not hold back the messages behind it', async () => {
      // The cloud refuses every publish naming the device "Poison": MQTT 5 answers PUBACK 0x87,
      // MQTT 3.1.1 closes the connection (as ThingsBoard does on a processing error).
      const cloud = new FakeCloud({
        token: TOKEN,
        refuse: (topic, payload) =>
          topic === 'v1/gateway/telemetry' && payload.includes('"Poison"'),
      });
      await cloud.start();
      const t = await startGateway({
        config: { upstream: { url: cloud.url, token: TOKEN, mqttVersion: version } },
      });
      try {
        const admin = await t.adminToken();
        await waitFor(async () => {
          const res = await t.api('/api/upstream/status', { token: admin });
          return ((await res.json()) as { connected: boolean }).connected;
        }, 20_000);
        const poison = await createDevice(t, 'Poison');
        const good = await createDevice(t, 'Good');
        for (const [token, v] of [
          [poison.token, 1],
          [good.token, 2],
          [good.token, 3],
        ] as const) {
          const res = await fetch(`${t.baseUrl}/api/v1/${token}/telemetry`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ ts: 1700000000000 + v, values: { v } }),
          });
          assert.equal(res.status, 200);
        }
        await waitFor(() => cloud.telemetry('Good').length >= 2, 60_000, 'Good in the cloud');
        assert.deepEqual(
          cloud.telemetry('Good').map((p) => p.values.v),
          [2, 3],
        );
        assert.deepEqual(cloud.telemetry('Poison'), []);
        const status = await waitFor(async () => {
          const res = await t.api('/api/upstream/status', { token: admin });
          const s = (await res.json()) as { backlog: number; rejectedTotal: number };
          return s.backlog === 0 && s.rejectedTotal === 1 ? s : undefined;
        }, 60_000);
        assert.equal(status.rejectedTotal, 1);
        const res = await t.api('/api/upstream/rejected?pageSize=10', { token: admin });
        assert.equal(res.status, 200);
        const rejected = (await res.json()) as Rejected;
        assert.equal(rejected.totalElements, 1);
        assert.equal(rejected.data[0].deviceName, 'Poison');
        assert.equal(rejected.data[0].kind, 'telemetry');
        assert.deepEqual(rejected.data[0].data, [{ ts: 1700000000001, values: { v: 1 } }]);
        assert.match(rejected.data[0].reason, version === '5' ? /135/ : /closed/);
        const bad = await t.api('/api/upstream/rejected?pageSize=x', { token: admin });
        assert.equal(bad.status, 400);
      } finally {
        await t.close();
        await cloud.stop();
      }
    });
  });
}
