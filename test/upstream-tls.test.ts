import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FakeCloud } from './helpers/cloud.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { issue, makeCa } from './helpers/pki.js';

// Upstream over mqtts:// to a real TLS broker (Aedes over tls.createServer): the cloud's
// certificate checked against a CA file, and X.509 device credentials (a client certificate).

const TOKEN = 'tls-cloud-token';

interface Status {
  connected: boolean;
  lastError: string | null;
}

async function status(t: TestGateway): Promise<Status> {
  const res = await t.api('/api/upstream/status', { token: await t.adminToken() });
  return (await res.json()) as Status;
}

/** Posts one reading over HTTP and waits for it in the cloud. */
async function readingReaches(t: TestGateway, cloud: FakeCloud, name: string): Promise<void> {
  const device = await createDevice(t, name);
  const res = await fetch(`${t.baseUrl}/api/v1/${device.token}/telemetry`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"ts":1700000000000,"values":{"t":7}}',
  });
  assert.equal(res.status, 200);
  await waitFor(() => cloud.telemetry(name).length === 1, 15_000, `${name}'s reading`);
  assert.deepEqual(cloud.telemetry(name), [{ ts: 1700000000000, values: { t: 7 } }]);
}

describe('upstream over TLS (mqtts://)', () => {
  let dir: string;
  const files = { ca: '', otherCa: '', clientCert: '', clientKey: '' };
  let server: { cert: string; key: string };
  let caPem: string;
  const stops: Array<() => Promise<unknown>> = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-upstream-tls-'));
    const ca = await makeCa('Cloud test CA');
    const other = await makeCa('Some other CA');
    caPem = ca.cert;
    server = await issue(ca, 'cloud.test', 'server');
    const client = await issue(ca, 'edge-gateway-plant-2', 'client');
    files.ca = join(dir, 'ca.pem');
    files.otherCa = join(dir, 'other-ca.pem');
    files.clientCert = join(dir, 'client.pem');
    files.clientKey = join(dir, 'client-key.pem');
    await writeFile(files.ca, ca.cert);
    await writeFile(files.otherCa, other.cert);
    await writeFile(files.clientCert, client.cert);
    await writeFile(files.clientKey, client.key);
  });
  after(async () => {
    for (const stop of stops.reverse()) await stop();
    await rm(dir, { recursive: true, force: true });
  });

  async function start(
    cloudTls: ConstructorParameters<typeof FakeCloud>[0]['tls'],
    upstream: object,
  ) {
    const cloud = new FakeCloud({ token: TOKEN, tls: cloudTls });
    await cloud.start();
    stops.push(() => cloud.stop());
    const t = await startGateway({ config: { upstream: { url: cloud.url, ...upstream } } });
    stops.push(() => t.close());
    return { cloud, t };
  }

  it('connects with an access token, trusting the cloud by the CA file', async () => {
    const { cloud, t } = await start(server, { token: TOKEN, caFile: files.ca });
    assert.match(cloud.url, /^mqtts:\/\//);
    await waitFor(async () => (await status(t)).connected, 20_000, 'the TLS link');
    await readingReaches(t, cloud, 'TLS Pump');
  });

  it('refuses a cloud whose certificate the CA file did not sign, and says why', async () => {
    const { cloud, t } = await start(server, { token: TOKEN, caFile: files.otherCa });
    await waitFor(async () => (await status(t)).lastError !== null, 20_000, 'the TLS error');
    const s = await status(t);
    assert.equal(s.connected, false);
    assert.match(s.lastError ?? '', /certificate/i);
    assert.equal(cloud.connects, 0);
  });

  it('authenticates with an X.509 client certificate (no token)', async () => {
    const { cloud, t } = await start(
      { ...server, ca: caPem, clientCn: 'edge-gateway-plant-2' },
      { caFile: files.ca, certFile: files.clientCert, keyFile: files.clientKey },
    );
    await waitFor(async () => (await status(t)).connected, 20_000, 'the X.509 link');
    assert.equal(cloud.connects, 1);
    await readingReaches(t, cloud, 'X509 Pump');
  });
});
