import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NULL_UUID } from '../src/common/entity.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

interface DeviceJson {
  id: { id: string };
  name: string;
  customerId: { entityType: string; id: string };
}

describe('claiming end to end: device claims, customer user completes', () => {
  let t: TestGateway;
  let admin: string;
  let customerA: string;
  let customerB: string;
  let userA: string;
  let userB: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    customerA = await createCustomer(t, 'Claimer A');
    customerB = await createCustomer(t, 'Claimer B');
    userA = await activateUser(t, await createUser(t, 'ca@example.com', customerA), 'password-a-1');
    userB = await activateUser(t, await createUser(t, 'cb@example.com', customerB), 'password-b-1');
  });
  after(() => t.close());

  const deviceClaimHttp = async (token: string, body?: unknown) => {
    const res = await t.api(`/api/v1/${token}/claim`, { method: 'POST', body });
    assert.equal(res.status, 200);
  };
  const customerClaim = (name: string, token: string, body?: unknown) =>
    t.api(`/api/customer/device/${encodeURIComponent(name)}/claim`, {
      method: 'POST',
      body,
      token,
    });
  const reclaim = (name: string, token: string) =>
    t.api(`/api/customer/device/${encodeURIComponent(name)}/claim`, { method: 'DELETE', token });
  const customerDevices = async (customerId: string, token: string) => {
    const res = await t.api(`/api/customer/${customerId}/devices?pageSize=10&page=0`, { token });
    assert.equal(res.status, 200);
    return ((await res.json()) as { data: DeviceJson[] }).data.map((d) => d.name);
  };

  it('HTTP device claim -> customer user completes -> it owns and sees the device', async () => {
    const d = await createDevice(t, 'claim-http');
    assert.equal((await t.api(`/api/device/${d.id}`, { token: userA })).status, 404);
    await deviceClaimHttp(d.token, { secretKey: 's3cret', durationMs: 60_000 });

    const res = await customerClaim('claim-http', userA, { secretKey: 's3cret' });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { device: DeviceJson; response: string };
    assert.equal(body.response, 'SUCCESS');
    assert.equal(body.device.name, 'claim-http');
    assert.deepEqual(body.device.customerId, { entityType: 'CUSTOMER', id: customerA });

    // Ownership and visibility follow.
    assert.equal((await t.api(`/api/device/${d.id}`, { token: userA })).status, 200);
    assert.deepEqual(await customerDevices(customerA, userA), ['claim-http']);
    const ts = await t.api(`/api/plugins/telemetry/DEVICE/${d.id}/timeseries/ANY`, {
      body: { claimed: true },
      token: userA,
    });
    assert.equal(ts.status, 200);
    assert.equal((await t.api(`/api/device/${d.id}`, { token: userB })).status, 404);

    // Already owned: 400 "CLAIMED" for anybody, the owner too.
    for (const token of [userB, userA]) {
      const again = await customerClaim('claim-http', token, { secretKey: 's3cret' });
      assert.equal(again.status, 400);
      assert.equal(await again.json(), 'CLAIMED');
    }
    // A device with a customer ignores a new device-side claim (still 200 to the device).
    await deviceClaimHttp(d.token, { secretKey: 'other' });
    assert.equal(
      await (await customerClaim('claim-http', userB, { secretKey: 'other' })).json(),
      'CLAIMED',
    );
  });

  it('MQTT device claim -> customer user completes', async () => {
    const d = await createDevice(t, 'claim-mqtt');
    const client = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    try {
      await client.publishAsync(
        'v1/devices/me/claim',
        JSON.stringify({ secretKey: 'mqtt-key', durationMs: 60_000 }),
        { qos: 1 },
      );
    } finally {
      await client.endAsync();
    }
    const res = await customerClaim('claim-mqtt', userB, { secretKey: 'mqtt-key' });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { device: DeviceJson; response: string };
    assert.equal(body.response, 'SUCCESS');
    assert.equal(body.device.customerId.id, customerB);
    assert.deepEqual(await customerDevices(customerB, userB), ['claim-mqtt']);
    assert.equal((await t.api(`/api/device/${d.id}`, { token: userA })).status, 404);
  });

  it('no secret on either side matches (empty MQTT payload, no REST body)', async () => {
    const d = await createDevice(t, 'claim-empty');
    const client = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    try {
      await client.publishAsync('v1/devices/me/claim', '', { qos: 1 });
    } finally {
      await client.endAsync();
    }
    const res = await customerClaim('claim-empty', userA);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { response: string }).response, 'SUCCESS');
  });

  it('wrong secret is 400 "FAILURE" and discards the pending claim', async () => {
    const d = await createDevice(t, 'claim-wrong');
    await deviceClaimHttp(d.token, { secretKey: 'right' });
    const wrong = await customerClaim('claim-wrong', userA, { secretKey: 'wrong' });
    assert.equal(wrong.status, 400);
    assert.equal(await wrong.json(), 'FAILURE');
    const right = await customerClaim('claim-wrong', userA, { secretKey: 'right' });
    assert.equal(right.status, 400);
    assert.equal(await right.json(), 'FAILURE');
    assert.equal(
      ((await t.api(`/api/device/${d.id}`, { token: admin }).then((r) => r.json())) as DeviceJson)
        .customerId.id,
      NULL_UUID,
    );
  });

  it('expired claim (short durationMs) and no claim at all are 400 "FAILURE"', async () => {
    const d = await createDevice(t, 'claim-expired');
    await deviceClaimHttp(d.token, { secretKey: 'k', durationMs: 30 });
    await new Promise((r) => setTimeout(r, 80));
    const expired = await customerClaim('claim-expired', userA, { secretKey: 'k' });
    assert.equal(expired.status, 400);
    assert.equal(await expired.json(), 'FAILURE');

    await createDevice(t, 'claim-never');
    const never = await customerClaim('claim-never', userA, { secretKey: '' });
    assert.equal(never.status, 400);
    assert.equal(await never.json(), 'FAILURE');
  });

  it('unknown device name is 404 with the TB error body; only customer users claim', async () => {
    const unknown = await customerClaim('no-such-device', userA, { secretKey: 'x' });
    assert.equal(unknown.status, 404);
    const body = (await unknown.json()) as { status: number; errorCode: number };
    assert.equal(body.status, 404);
    assert.equal(body.errorCode, 32);

    await createDevice(t, 'claim-by-admin');
    const byAdmin = await customerClaim('claim-by-admin', admin, { secretKey: '' });
    assert.equal(byAdmin.status, 403);
    const bad = await customerClaim('claim-by-admin', userA, '{not json');
    assert.equal(bad.status, 400);
  });

  it('re-claim by the tenant takes the device back; it can be claimed again', async () => {
    const d = await createDevice(t, 'claim-back');
    await deviceClaimHttp(d.token, { secretKey: 'one' });
    assert.equal((await customerClaim('claim-back', userA, { secretKey: 'one' })).status, 200);

    // Another customer's user does not see the device: 404.
    assert.equal((await reclaim('claim-back', userB)).status, 404);

    const back = await reclaim('claim-back', admin);
    assert.equal(back.status, 200);
    assert.equal(await back.text(), '');
    const device = (await (
      await t.api(`/api/device/${d.id}`, { token: admin })
    ).json()) as DeviceJson;
    assert.equal(device.customerId.id, NULL_UUID);
    assert.equal((await t.api(`/api/device/${d.id}`, { token: userA })).status, 404);
    assert.ok(!(await customerDevices(customerA, userA)).includes('claim-back'));

    await deviceClaimHttp(d.token, { secretKey: 'two' });
    const again = await customerClaim('claim-back', userB, { secretKey: 'two' });
    assert.equal(again.status, 200);
    assert.equal(((await again.json()) as { device: DeviceJson }).device.customerId.id, customerB);
    // The owner may give it back itself (ThingsBoard allows the customer user too).
    assert.equal((await reclaim('claim-back', userB)).status, 200);
    assert.equal((await t.api(`/api/device/${d.id}`, { token: userB })).status, 404);
    assert.equal((await reclaim('no-such-device', admin)).status, 404);
  });
});
