import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ActivitySnapshot } from '../src/devices/activity-service.js';
import { coapRequest } from './helpers/coap.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';

describe('device activity', () => {
  let t: TestGateway;
  let admin: string;
  const events: ActivitySnapshot[] = [];

  before(async () => {
    t = await startGateway({ config: { activity: { checkIntervalSec: 1 } } });
    admin = await t.adminToken();
    t.gw.bus.on('test', 'device.activity', (e) => events.push(e));
  });
  after(() => t.close());

  async function serverAttributes(deviceId: string): Promise<Record<string, unknown>> {
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${deviceId}/values/attributes/SERVER_SCOPE`,
      { token: admin },
    );
    assert.equal(res.status, 200);
    const list = (await res.json()) as Array<{ key: string; value: unknown }>;
    return Object.fromEntries(list.map((a) => [a.key, a.value]));
  }

  it('records MQTT connects, activity and disconnects as server attributes and events', async () => {
    const d = await createDevice(t, 'active-mqtt');
    const before = Date.now();
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'act' });
    await c.publishAsync('v1/devices/me/telemetry', '{"x":1}', { qos: 1 });
    const attrs = await waitFor(async () => {
      const a = await serverAttributes(d.id);
      return a.active === true && typeof a.lastConnectTime === 'number' ? a : undefined;
    });
    assert.ok((attrs.lastConnectTime as number) >= before);
    assert.ok((attrs.lastActivityTime as number) >= before);
    assert.ok(events.some((e) => e.deviceId === d.id && e.active));
    await c.endAsync();
    const gone = await waitFor(async () => {
      const a = await serverAttributes(d.id);
      return typeof a.lastDisconnectTime === 'number' ? a : undefined;
    });
    assert.ok((gone.lastDisconnectTime as number) >= (attrs.lastConnectTime as number));
  });

  it('counts CoAP requests as activity', async () => {
    const d = await createDevice(t, 'active-coap');
    const res = await coapRequest({
      port: t.gw.ports.coap,
      method: 'POST',
      pathname: `/api/v1/${d.token}/telemetry`,
      payload: '{"y":2}',
    });
    assert.equal(res.code, '2.01');
    await waitFor(
      async () => (await serverAttributes(d.id)).active === true,
      5000,
      'CoAP activity',
    );
  });

  it('marks a device inactive after its inactivityTimeout and emits an event', async () => {
    const d = await createDevice(t, 'goes-quiet');
    await t.api(`/api/plugins/telemetry/DEVICE/${d.id}/attributes/SERVER_SCOPE`, {
      body: { inactivityTimeout: 300 },
      token: admin,
    });
    const c = await mqttConnect(t.gw.ports.mqtt, {
      username: d.token,
      clientId: 'quiet',
      keepalive: 0,
    });
    try {
      await waitFor(() => events.some((e) => e.deviceId === d.id && e.active), 5000, 'active');
      const inactive = await waitFor(
        () => events.find((e) => e.deviceId === d.id && !e.active),
        5000,
        'inactive',
      );
      assert.equal(inactive.inactivityTimeout, 300);
      const attrs = await serverAttributes(d.id);
      assert.equal(attrs.active, false);
      assert.ok((attrs.inactivityAlarmTime as number) >= (attrs.lastActivityTime as number) + 300);
      // The next message makes it active again.
      await c.publishAsync('v1/devices/me/telemetry', '{"z":3}', { qos: 1 });
      await waitFor(
        async () => (await serverAttributes(d.id)).active === true,
        5000,
        'active again',
      );
    } finally {
      await c.endAsync();
    }
  });
});
