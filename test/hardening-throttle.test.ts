import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { coapRequest } from './helpers/coap.js';
import {
  ADMIN_EMAIL,
  ADMIN_PASSWORD,
  createDevice,
  startGateway,
  type TestGateway,
} from './helpers/gateway.js';
import { mqttConnect, mqttRefusal } from './helpers/mqtt.js';

describe('hardening: throttling with bounded tables (issue 20 case 8)', () => {
  let t: TestGateway;
  let dev: { id: string; token: string };

  before(async () => {
    t = await startGateway({
      config: {
        auth: {
          deviceAuthMaxFailures: 3,
          deviceAuthWindowSec: 60,
          deviceAuthThrottleSec: 60,
          deviceAuthDelayMs: 1500,
        },
      },
    });
    dev = await createDevice(t, 'throttle-dev');
  });
  after(() => t.close());

  it('MQTT: after N failed CONNECTs from an address its refusals are delayed; valid tokens still connect', async () => {
    const port = t.gw.ports.mqtt;
    for (let i = 0; i < 3; i++) assert.equal(await mqttRefusal(port, { username: `bad-${i}` }), 5);
    const started = Date.now();
    assert.equal(await mqttRefusal(port, { username: 'bad-late' }), 5);
    assert.ok(Date.now() - started >= 1400, `refusal took ${Date.now() - started} ms`);
    // One misconfigured device does not lock out the others behind the same address.
    const ok = await mqttConnect(port, { username: dev.token });
    await ok.endAsync();
    assert.equal(
      t.logs.filter((l) => l.msg === 'device authentication failures throttled').length,
      1,
      'logged once per throttled period',
    );
    assert.ok(t.gw.services.deviceAuth.counts.throttled >= 1);
  });

  it('CoAP: a throttled address gets 4.29 for a bad token; a valid token is served', async () => {
    // The address is still throttled from the MQTT failures: the count is per address.
    const bad = await coapRequest({
      port: t.gw.ports.coap,
      method: 'POST',
      pathname: '/api/v1/no-such-token/telemetry',
      payload: '{"a":1}',
    });
    assert.equal(bad.code, '4.29');
    const good = await coapRequest({
      port: t.gw.ports.coap,
      method: 'POST',
      pathname: `/api/v1/${dev.token}/telemetry`,
      payload: '{"a":1}',
    });
    assert.equal(good.code, '2.01');
  });

  it("login: one user's wrong passwords lock out only that user, never the administrator", async () => {
    const admin = await t.adminToken();
    const res = await t.api('/api/user?sendActivationMail=false', {
      body: {
        email: 'typo@test.local',
        authority: 'TENANT_ADMIN',
        firstName: 'T',
        lastName: 'Y',
      },
      token: admin,
    });
    assert.equal(res.status, 200, await res.clone().text());
    for (let i = 0; i < 6; i++) {
      const r = await t.api('/api/auth/login', {
        body: { username: 'typo@test.local', password: `wrong-${i}` },
      });
      assert.ok([401, 429].includes(r.status));
    }
    const locked = await t.api('/api/auth/login', {
      body: { username: 'typo@test.local', password: 'whatever' },
    });
    assert.equal(locked.status, 429);
    const other = await t.api('/api/auth/login', {
      body: { username: ADMIN_EMAIL, password: ADMIN_PASSWORD },
    });
    assert.equal(other.status, 200, 'the administrator logs in from the same address');
  });
});
