/**
 * Scheduled jobs (issue 14 §11): a scheduler event on a cron expression sets a shared attribute
 * that a subscribed MQTT device receives; a bad expression is a 400; a deleted event stops.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { mqttConnect, nextMessage } from './helpers/mqtt.js';

describe('scheduler events', () => {
  let t: TestGateway;
  let admin: string;
  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  const event = (deviceId: string, schedule: Record<string, unknown>) => ({
    name: 'Night setpoint',
    type: 'UPDATE_ATTRIBUTES',
    schedule,
    configuration: {
      originatorId: { entityType: 'DEVICE', id: deviceId },
      msgType: 'POST_ATTRIBUTES_REQUEST',
      msgBody: { setpoint: 18 },
      metadata: { scope: 'SHARED_SCOPE' },
    },
  });

  it('fires on a cron expression and sets a shared attribute a subscribed device receives', async () => {
    const device = await createDevice(t, 'scheduled-device');
    const client = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
    try {
      await client.subscribeAsync('v1/devices/me/attributes', { qos: 1 });
      const update = nextMessage(client, 'v1/devices/me/attributes', 10_000);
      // Every second, in a time zone of its own.
      const res = await t.api('/api/schedulerEvent', {
        token: admin,
        body: event(device.id, { timezone: 'Europe/Berlin', cron: '* * * * * *' }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      const saved = (await res.json()) as { id: { id: string; entityType: string } };
      assert.equal(saved.id.entityType, 'SCHEDULER_EVENT');
      assert.deepEqual(JSON.parse((await update).payload.toString()), { setpoint: 18 });

      const list = (await (
        await t.api('/api/schedulerEvents', { token: admin })
      ).json()) as unknown[];
      assert.equal(list.length, 1);
      const del = await t.api(`/api/schedulerEvent/${saved.id.id}`, {
        method: 'DELETE',
        token: admin,
      });
      assert.equal(del.status, 200);
      assert.equal(
        (await t.api(`/api/schedulerEvent/${saved.id.id}`, { token: admin })).status,
        404,
      );
    } finally {
      await client.endAsync();
    }
  });

  it('refuses a bad cron expression or time zone with a 400 naming it', async () => {
    const device = await createDevice(t, 'scheduled-bad');
    const bad = await t.api('/api/schedulerEvent', {
      token: admin,
      body: event(device.id, { cron: 'every minute' }),
    });
    assert.equal(bad.status, 400);
    assert.match(
      ((await bad.json()) as { message: string }).message,
      /Invalid cron expression: every minute/,
    );
    const zone = await t.api('/api/schedulerEvent', {
      token: admin,
      body: event(device.id, { cron: '0 0 * * *', timezone: 'Mars/Olympus' }),
    });
    assert.equal(zone.status, 400);
    assert.match(
      ((await zone.json()) as { message: string }).message,
      /Invalid time zone: Mars\/Olympus/,
    );
  });

  it('turns a daily or weekly repeat into a cron expression in its time zone', async () => {
    const { cronOf } = await import('../src/scheduler/scheduler-event-service.js');
    // 2026-11-23 06:30:15 UTC is 07:30:15 in Berlin.
    const startTime = Date.UTC(2026, 10, 23, 6, 30, 15);
    assert.deepEqual(cronOf({ timezone: 'Europe/Berlin', startTime, repeat: { type: 'DAILY' } }), {
      expression: '15 30 7 * * *',
      once: false,
    });
    assert.deepEqual(
      cronOf({ timezone: 'UTC', startTime, repeat: { type: 'WEEKLY', repeatOn: [1, 3] } }),
      { expression: '15 30 6 * * 1,3', once: false },
    );
    assert.deepEqual(cronOf({ timezone: 'UTC', startTime }), {
      expression: '15 30 6 23 11 *',
      once: true,
    });
  });
});
