/**
 * Issue 16 item 1: the gateway logs in to the cloud with ThingsBoard's MQTT basic credentials
 * (EDGE_UPSTREAM_CLIENT_ID, EDGE_UPSTREAM_USERNAME, EDGE_UPSTREAM_PASSWORD) instead of a token;
 * a wrong password is refused by the cloud and shown as the link's last error.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { UpstreamStatus } from '../src/upstream/upstream-service.js';
import { FakeCloud } from './helpers/cloud.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';

const BASIC = { clientId: 'plant-7-gateway', username: 'plant-7', password: 's3cret-pass' };

async function status(t: TestGateway): Promise<UpstreamStatus> {
  const res = await t.api('/api/upstream/status', { token: await t.adminToken() });
  return (await res.json()) as UpstreamStatus;
}

describe('upstream with MQTT basic credentials', () => {
  let cloud: FakeCloud;
  const gateways: TestGateway[] = [];

  before(async () => {
    cloud = new FakeCloud({ token: 'unused-token', basic: BASIC });
    await cloud.start();
  });
  after(async () => {
    for (const g of gateways) await g.close();
    await cloud?.stop();
  });

  it('connects with the client id, user name and password, and sends data', async () => {
    const t = await startGateway({ config: { upstream: { url: cloud.url, token: '', ...BASIC } } });
    gateways.push(t);
    await waitFor(async () => (await status(t)).connected, 20_000, 'the upstream link');
    assert.equal(cloud.gatewayClient?.id, BASIC.clientId);
    const dev = await createDevice(t, 'Press 2');
    const res = await t.api(`/api/v1/${dev.token}/telemetry`, { body: { force: 12.5 } });
    assert.equal(res.status, 200);
    await waitFor(() => cloud.telemetry('Press 2').length === 1, 10_000, 'telemetry in the cloud');
    assert.equal(cloud.telemetry('Press 2')[0]?.values.force, 12.5);
  });

  it('a wrong password is refused by the cloud and named in the status', async () => {
    const t = await startGateway({
      config: { upstream: { url: cloud.url, token: '', ...BASIC, password: 'wrong' } },
    });
    gateways.push(t);
    const s = await waitFor(async () => {
      const st = await status(t);
      return st.lastError ? st : undefined;
    }, 20_000);
    assert.equal(s.connected, false);
    assert.match(s.lastError ?? '', /not authorized|bad user name or password|refused/i);
  });
});
