/**
 * Issue 16 item 5: the link to the cloud going down and up reaches a notification rule
 * (ThingsBoard's EDGE_CONNECTION trigger), so someone is told: the tenant administrator's inbox
 * and a webhook, with the link's URL and error in the template. A real broker is the cloud.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Notification } from '../src/notifications/types.js';
import { FakeCloud } from './helpers/cloud.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { adminPost, startRecorder } from './helpers/notify.js';

const CLOUD_TOKEN = 'edge-gateway-in-the-cloud';

describe('notifications of the cloud link (EDGE_CONNECTION rules)', () => {
  let cloud: FakeCloud;
  let t: TestGateway;
  let hook: Awaited<ReturnType<typeof startRecorder>>;
  let admin: string;

  before(async () => {
    hook = await startRecorder();
    cloud = new FakeCloud({ token: CLOUD_TOKEN });
    await cloud.start();
    t = await startGateway({ config: { upstream: { url: cloud.url, token: CLOUD_TOKEN } } });
    admin = await t.adminToken();
    await waitFor(
      async () => {
        const res = await t.api('/api/upstream/status', { token: admin });
        return ((await res.json()) as { connected: boolean }).connected;
      },
      20_000,
      'the upstream link',
    );
  });
  after(async () => {
    await t?.close();
    await cloud?.stop();
    await hook?.close();
  });

  const inbox = async () => {
    const res = await t.api('/api/notifications?pageSize=100&page=0', { token: admin });
    return ((await res.json()) as { data: Notification[] }).data.filter(
      (n) => n.type === 'EDGE_CONNECTION',
    );
  };

  it('tells the inbox and a webhook when the link goes down and comes back, once per change', async () => {
    const target = await adminPost(t, '/api/notification/target', {
      name: 'Admins',
      configuration: { type: 'PLATFORM_USERS', usersFilter: { type: 'TENANT_ADMINISTRATORS' } },
    });
    const webhook = await adminPost(t, '/api/notification/target', {
      name: 'Ops webhook',
      configuration: { type: 'WEBHOOK', url: hook.url },
    });
    const template = await adminPost(t, '/api/notification/template', {
      name: 'Cloud link',
      notificationType: 'EDGE_CONNECTION',
      configuration: {
        deliveryMethodsTemplates: {
          WEB: { method: 'WEB', enabled: true, subject: 'Cloud ${eventType}', body: '${url}' },
          WEBHOOK: { method: 'WEBHOOK', enabled: true, body: 'cloud link ${eventType}' },
        },
      },
    });
    const rule = {
      name: 'Cloud link',
      templateId: template.id,
      triggerType: 'EDGE_CONNECTION',
      triggerConfig: { triggerType: 'EDGE_CONNECTION', notifyOn: ['CONNECTED', 'DISCONNECTED'] },
      recipientsConfig: { triggerType: 'EDGE_CONNECTION', targets: [target.id.id, webhook.id.id] },
    };
    await adminPost(t, '/api/notification/rule', rule);
    // A notifyOn ThingsBoard does not have is refused, naming the field.
    const bad = await t.api('/api/notification/rule', {
      body: { ...rule, triggerConfig: { ...rule.triggerConfig, notifyOn: ['FLAPPING'] } },
      token: admin,
    });
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /notifyOn/);

    await cloud.stop();
    const down = await waitFor(async () => {
      const n = await inbox();
      return n.length === 1 ? n : undefined;
    }, 20_000);
    assert.equal(down[0]?.subject, 'Cloud disconnected');
    assert.equal(down[0]?.text, cloud.url);
    assert.equal((down[0]?.info as { connected: boolean } | undefined)?.connected, false);

    await cloud.start();
    const both = await waitFor(async () => {
      const n = await inbox();
      return n.length === 2 ? n : undefined;
    }, 30_000);
    assert.deepEqual(both.map((n) => n.subject).sort(), ['Cloud connected', 'Cloud disconnected']);
    await waitFor(() => hook.requests.length >= 2, 20_000, 'both webhook deliveries');
    assert.deepEqual(
      hook.requests.map((r) => r.body),
      ['cloud link disconnected', 'cloud link connected'],
    );
    // Reconnect attempts while it was down told nobody more.
    assert.equal((await inbox()).length, 2);
  });
});
