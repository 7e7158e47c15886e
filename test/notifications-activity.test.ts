/**
 * DEVICE_ACTIVITY notifications (issue 14 §7): a device that connects over MQTT becomes active
 * and one that stays silent past its inactivity timeout becomes inactive; each change puts an
 * entry in the tenant admin's inbox and a webhook delivery in the outbox. They are written in the
 * transaction that saves the activity attributes (before the attributes, so that they are already
 * visible inside it when `attributes.updated` is emitted), not after it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Notification } from '../src/notifications/types.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { adminPost, startRecorder } from './helpers/notify.js';

describe('DEVICE_ACTIVITY notifications', () => {
  let t: TestGateway;
  let admin: string;
  let hook: Awaited<ReturnType<typeof startRecorder>>;
  before(async () => {
    hook = await startRecorder();
    t = await startGateway({
      config: { activity: { inactivityTimeoutSec: 1, checkIntervalSec: 1 } },
    });
    admin = await t.adminToken();
    const inbox = await adminPost(t, '/api/notification/target', {
      name: 'Admins',
      configuration: { type: 'PLATFORM_USERS', usersFilter: { type: 'TENANT_ADMINISTRATORS' } },
    });
    const webhook = await adminPost(t, '/api/notification/target', {
      name: 'Ops webhook',
      configuration: { type: 'WEBHOOK', url: hook.url },
    });
    const template = await adminPost(t, '/api/notification/template', {
      name: 'Activity',
      notificationType: 'DEVICE_ACTIVITY',
      configuration: {
        deliveryMethodsTemplates: {
          WEB: { method: 'WEB', enabled: true, subject: '${deviceName}', body: '${eventType}' },
          WEBHOOK: { method: 'WEBHOOK', enabled: true, body: '${deviceName} is ${eventType}' },
        },
      },
    });
    await adminPost(t, '/api/notification/rule', {
      name: 'Activity',
      templateId: template.id,
      triggerType: 'DEVICE_ACTIVITY',
      triggerConfig: { triggerType: 'DEVICE_ACTIVITY', notifyOn: ['ACTIVE', 'INACTIVE'] },
      recipientsConfig: { triggerType: 'DEVICE_ACTIVITY', targets: [inbox.id.id, webhook.id.id] },
    });
  });
  after(async () => {
    await t.close();
    await hook.close();
  });

  const inbox = async () => {
    const res = await t.api('/api/notifications?pageSize=100&page=0', { token: admin });
    return ((await res.json()) as { data: Notification[] }).data.filter(
      (n) => n.type === 'DEVICE_ACTIVITY',
    );
  };

  it('active on connect, inactive after the timeout: inbox and outbox written with the change', async () => {
    const device = await createDevice(t, 'Pump 3');
    const me = await t.api('/api/auth/user', { token: admin });
    const adminId = ((await me.json()) as { id: { id: string } }).id.id;
    // What is stored when the `active` attribute is saved (inside its transaction) and when the
    // change is announced (after the commit): the notifications are there both times.
    const seen: string[] = [];
    const stored = (when: string, active: unknown) => {
      const { store } = t.gw.services.notifications.service;
      const inbox = store.inbox(adminId, false, 100, 0).rows;
      const n = inbox.filter((r) => r.type === 'DEVICE_ACTIVITY').length;
      seen.push(
        `${when} active=${active}: inbox ${n}, outbox ${store.outboxPage('', 100, 0).rows.length}`,
      );
    };
    t.gw.bus.on('test', 'attributes.updated', ({ deviceId, values }) => {
      const active = values.find((v) => v.key === 'active');
      if (deviceId === device.id && active) stored('saved', active.value);
    });
    t.gw.bus.on('test', 'device.activity', (s) => {
      if (s.deviceId === device.id) stored('announced', s.active);
    });
    const client = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
    await waitFor(async () => (await inbox()).some((n) => n.text === 'active'), 10_000, 'active');
    await client.endAsync();
    await waitFor(
      async () => (await inbox()).some((n) => n.text === 'inactive'),
      15_000,
      'inactive',
    );
    const mine = (await inbox()).filter((n) => n.subject === 'Pump 3');
    assert.deepEqual(mine.map((n) => n.text).sort(), ['active', 'inactive']);
    await waitFor(() => hook.requests.length >= 2, 10_000, 'two webhook calls');
    assert.deepEqual(
      hook.requests.map((r) => r.body),
      ['Pump 3 is active', 'Pump 3 is inactive'],
    );
    assert.deepEqual(seen, [
      'saved active=true: inbox 1, outbox 1',
      'announced active=true: inbox 1, outbox 1',
      'saved active=false: inbox 2, outbox 2',
      'announced active=false: inbox 2, outbox 2',
    ]);
  });
});
