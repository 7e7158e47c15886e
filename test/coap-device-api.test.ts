import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { coapObserve, coapRequest } from './helpers/coap.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';

describe('device API over CoAP', () => {
  let t: TestGateway;
  let admin: string;
  let dev: { id: string; token: string };
  let port: number;
  const path = (feature: string) => `/api/v1/${dev.token}/${feature}`;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    dev = await createDevice(t, 'coap-device', 'COAP_TOKEN');
    port = t.gw.ports.coap;
  });
  after(() => t.close());

  it('stores telemetry with 2.01 on confirmable and non-confirmable requests', async () => {
    const con = await coapRequest({
      port,
      method: 'POST',
      pathname: path('telemetry'),
      payload: '{"temp":20.5}',
    });
    assert.equal(con.code, '2.01');
    const non = await coapRequest({
      port,
      method: 'POST',
      pathname: path('telemetry'),
      payload: '{"ts":1700000000000,"values":{"hum":40}}',
      confirmable: false,
    });
    assert.equal(non.code, '2.01');
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${dev.id}/values/timeseries?keys=temp,hum`,
      { token: admin },
    );
    const latest = (await res.json()) as Record<string, Array<{ ts: number; value: string }>>;
    assert.equal(latest.temp[0].value, '20.5');
    assert.deepEqual(latest.hum[0], { ts: 1700000000000, value: '40' });
  });

  it('answers bad requests with 4.00, 4.01, 4.04 and 4.05', async () => {
    const cases: Array<[Parameters<typeof coapRequest>[0], string]> = [
      [{ port, method: 'POST', pathname: path('telemetry'), payload: '{"broken":' }, '4.00'],
      [{ port, method: 'POST', pathname: path('telemetry'), payload: '[1,2]' }, '4.00'],
      [{ port, method: 'GET', pathname: path('telemetry') }, '4.00'],
      [{ port, method: 'POST', pathname: path('nonsense'), payload: '{}' }, '4.00'],
      [
        { port, method: 'POST', pathname: '/api/v1/NO_SUCH_TOKEN/telemetry', payload: '{"a":1}' },
        '4.01',
      ],
      [{ port, method: 'POST', pathname: '/api/v1', payload: '{}' }, '4.01'],
      [{ port, method: 'PUT', pathname: path('telemetry'), payload: '{}' }, '4.05'],
      [{ port, method: 'GET', pathname: path('attributes'), query: 'clientKeys=nothing' }, '4.04'],
    ];
    for (const [call, code] of cases) {
      const res = await coapRequest(call);
      assert.equal(res.code, code, `${call.method} ${call.pathname}`);
    }
    assert.deepEqual(
      t.gw.services.telemetry.keys(dev.id).sort(),
      ['hum', 'temp'],
      'nothing of a bad request is stored',
    );
  });

  it('publishes client attributes and answers attribute requests', async () => {
    const post = await coapRequest({
      port,
      method: 'POST',
      pathname: path('attributes'),
      payload: '{"model":"C1","rev":2}',
    });
    assert.equal(post.code, '2.01');
    await t.api(`/api/plugins/telemetry/DEVICE/${dev.id}/attributes/SHARED_SCOPE`, {
      body: { period: 5 },
      token: admin,
    });
    const get = await coapRequest({
      port,
      pathname: path('attributes'),
      query: 'clientKeys=model&sharedKeys=period',
    });
    assert.equal(get.code, '2.05');
    assert.deepEqual(JSON.parse(get.text), { client: { model: 'C1' }, shared: { period: 5 } });
  });

  it('observes shared attributes: a snapshot first, then each change made through REST', async () => {
    const obs = await coapObserve({ port, pathname: path('attributes') });
    try {
      const first = await obs.next();
      assert.equal(first.code, '2.05');
      assert.deepEqual(JSON.parse(first.text), { period: 5 });
      await t.api(`/api/plugins/telemetry/DEVICE/${dev.id}/attributes/SHARED_SCOPE`, {
        body: { period: 10 },
        token: admin,
      });
      assert.deepEqual(JSON.parse((await obs.next()).text), { period: 10 });
    } finally {
      obs.close();
    }
  });

  it('observes server-side RPC and takes the reply', async () => {
    const obs = await coapObserve({ port, pathname: path('rpc') });
    try {
      assert.equal(obs.replies[0].code, '2.03');
      const call = t.api(`/api/rpc/twoway/${dev.id}`, {
        body: { method: 'reboot', params: {}, timeout: 5000 },
        token: admin,
      });
      let note = await obs.next();
      while (note.text === '') note = await obs.next();
      const req = JSON.parse(note.text) as { id: number; method: string };
      assert.equal(req.method, 'reboot');
      const ack = await coapRequest({
        port,
        method: 'POST',
        pathname: path(`rpc/${req.id}`),
        payload: '{"ok":true}',
      });
      assert.equal(ack.code, '2.01');
      const res = await call;
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { ok: true });
    } finally {
      obs.close();
    }
    await waitFor(() => t.gw.services.rpc.counts.subscribers === 0, 5000, 'the observation to end');
  });

  it('answers client-side RPC and registers claims', async () => {
    const rpc = await coapRequest({
      port,
      method: 'POST',
      pathname: path('rpc'),
      payload: '{"method":"getCurrentTime","params":{}}',
    });
    assert.equal(rpc.code, '2.05');
    assert.ok(Math.abs(Number(rpc.text) - Date.now()) < 5000);
    const claim = await coapRequest({ port, method: 'POST', pathname: path('claim') });
    assert.equal(claim.code, '2.01');
    assert.equal(t.gw.services.claims.pending(dev.id)?.secretKey, '');
  });

  it('provisions a device: 2.01 on success, 4.00 with the JSON otherwise', async () => {
    const profile = await t.api('/api/deviceProfile', {
      body: {
        name: 'coap-provisioned',
        profileData: {
          provisionConfiguration: {
            type: 'ALLOW_CREATE_NEW_DEVICES',
            provisionDeviceKey: 'ck',
            provisionDeviceSecret: 'cs',
          },
        },
      },
      token: admin,
    });
    assert.equal(profile.status, 200);
    const ok = await coapRequest({
      port,
      method: 'POST',
      pathname: '/api/v1/provision',
      payload: JSON.stringify({
        deviceName: 'coap-born',
        provisionDeviceKey: 'ck',
        provisionDeviceSecret: 'cs',
      }),
    });
    assert.equal(ok.code, '2.01');
    assert.equal((JSON.parse(ok.text) as { status: string }).status, 'SUCCESS');
    const bad = await coapRequest({
      port,
      method: 'POST',
      pathname: '/api/v1/provision',
      payload: JSON.stringify({
        deviceName: 'coap-born-2',
        provisionDeviceKey: 'ck',
        provisionDeviceSecret: 'wrong',
      }),
    });
    assert.equal(bad.code, '4.00');
    assert.equal((JSON.parse(bad.text) as { status: string }).status, 'NOT_FOUND');
  });

  it('serves firmware at /fw/{token} with block-wise transfer', async () => {
    const image = Buffer.alloc(4000);
    for (let i = 0; i < image.length; i++) image[i] = (i * 13) % 256;
    const sha = createHash('sha256').update(image).digest('hex');
    const created = await t.api('/api/otaPackage', {
      body: { title: 'fw-coap', version: '1.1', type: 'FIRMWARE' },
      token: admin,
    });
    const pkg = (await created.json()) as { id: { id: string } };
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
    assert.equal(up.status, 200);
    const none = await coapRequest({ port, pathname: `/fw/${dev.token}` });
    assert.equal(none.code, '4.04', 'nothing assigned yet');
    const device = (await (
      await t.api(`/api/device/${dev.id}`, { token: admin })
    ).json()) as Record<string, unknown>;
    await t.api('/api/device', { body: { ...device, firmwareId: pkg.id }, token: admin });
    const whole = await coapRequest({
      port,
      pathname: `/fw/${dev.token}`,
      query: 'title=fw-coap&version=1.1',
    });
    assert.equal(whole.code, '2.05');
    assert.equal(createHash('sha256').update(whole.payload).digest('hex'), sha);
    const chunk = await coapRequest({
      port,
      pathname: `/fw/${dev.token}`,
      query: 'size=1000&chunk=3',
    });
    assert.deepEqual(chunk.payload, image.subarray(3000, 4000));
    const mismatch = await coapRequest({
      port,
      pathname: `/fw/${dev.token}`,
      query: 'title=other&version=1.1',
    });
    assert.equal(mismatch.code, '4.00');
    const post = await coapRequest({ port, method: 'POST', pathname: `/fw/${dev.token}` });
    assert.equal(post.code, '4.05');
  });
});
