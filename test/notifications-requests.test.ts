/**
 * Ad-hoc notification requests over real sockets (issue 14 §7, ThingsBoard's
 * `/api/notification/request(s)`): a request is kept with its status and per-method stats (inbox
 * entries at once; emails counted when a real `smtp-server` took them; a webhook that keeps
 * refusing counted as an error), listed, searched, sorted and paged; a delayed request is
 * SCHEDULED, delivered when due, or cancelled by DELETE; deleting a sent request removes its inbox
 * entries; the table keeps the newest `requestsMax` and counts what it dropped.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Notification, RequestInfo } from '../src/notifications/types.js';
import { startGateway, type TestGateway } from './helpers/gateway.js';
import { adminPost, requestSent, startRecorder, startSmtp } from './helpers/notify.js';

interface Page<T> {
  data: T[];
  totalElements: number;
  hasNext: boolean;
}

describe('notification requests', () => {
  let t: TestGateway;
  let admin: string;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let refusing: Awaited<ReturnType<typeof startRecorder>>;
  const ids: Record<'admins' | 'emails' | 'hook', string> = { admins: '', emails: '', hook: '' };

  before(async () => {
    t = await startGateway({
      config: {
        notifications: { requestsMax: 10, retryBaseMs: 20, retryMaxMs: 100, maxAttempts: 2 },
      },
    });
    admin = await t.adminToken();
    smtp = await startSmtp();
    refusing = await startRecorder(() => 500);
    await adminPost(t, '/api/admin/settings', {
      key: 'mail',
      jsonValue: { mailFrom: 'gateway@plant.local', smtpHost: '127.0.0.1', smtpPort: smtp.port },
    });
    const target = async (name: string, configuration: unknown) =>
      (await adminPost(t, '/api/notification/target', { name, configuration })).id.id;
    ids.admins = await target('Admins', {
      type: 'PLATFORM_USERS',
      usersFilter: { type: 'TENANT_ADMINISTRATORS' },
    });
    ids.emails = await target('Shift', { type: 'EMAIL_ADDRESSES', emails: ['shift@plant.local'] });
    ids.hook = await target('Refusing hook', { type: 'WEBHOOK', url: `${refusing.url}/hook` });
  });
  after(async () => {
    await t.close();
    await smtp.close();
    await refusing.close();
  });

  const get = async <T>(path: string): Promise<T> => {
    const res = await t.api(path, { token: admin });
    assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
    return (await res.json()) as T;
  };
  const inbox = () => get<Page<Notification>>('/api/notifications?pageSize=100&page=0');
  const send = (body: unknown) => adminPost<RequestInfo>(t, '/api/notification/request', body);
  const webOnly = (subject: string, sendingDelayInSec = 0) => ({
    template: {
      configuration: { deliveryMethodsTemplates: { WEB: { enabled: true, subject, body: 'b' } } },
    },
    targets: [ids.admins],
    additionalConfig: { sendingDelayInSec },
  });

  it('a request is kept with its status and stats: inbox at once, emails sent, a refusing webhook as an error', async () => {
    const template = await adminPost(t, '/api/notification/template', {
      name: 'Shift notice',
      notificationType: 'GENERAL',
      configuration: {
        deliveryMethodsTemplates: {
          WEB: { enabled: true, subject: 'Shift change', body: 'Line 2 stops at 14:00' },
          EMAIL: { enabled: true, subject: 'Shift change', body: 'Line 2 stops at 14:00' },
          SMS: { enabled: false, body: 'not sent' },
        },
      },
    });
    const me = await get<{ id: { id: string } }>('/api/auth/user');
    const sent = await send({
      templateId: template.id,
      targets: [ids.admins, ids.emails, ids.hook],
      info: { line: 2 },
    });
    assert.equal(sent.id.entityType, 'NOTIFICATION_REQUEST');
    assert.equal(sent.templateName, 'Shift notice');
    assert.deepEqual(sent.templateId, { entityType: 'NOTIFICATION_TEMPLATE', id: template.id.id });
    assert.deepEqual(sent.deliveryMethods, ['WEB', 'EMAIL']);
    assert.deepEqual(sent.targets, [ids.admins, ids.emails, ids.hook]);
    assert.deepEqual(sent.originatorEntityId, { entityType: 'USER', id: me.id.id });
    assert.deepEqual(sent.info, { line: 2 });
    assert.equal(sent.status, 'PROCESSING', 'two emails and a webhook are still in the outbox');
    assert.deepEqual(sent.stats.sent, { WEB: 1 });

    const done = await requestSent(t, sent.id.id);
    assert.deepEqual(done.stats.sent, { WEB: 1, EMAIL: 2 });
    assert.equal(done.stats.totalErrors, 1);
    const hookError = done.stats.errors.WEBHOOK?.[`${refusing.url}/hook`];
    assert.match(hookError ?? '', /500/, JSON.stringify(done.stats));
    assert.equal(refusing.requests.length, 2, 'maxAttempts refusals');
    const to = smtp.mails.flatMap((m) => m.to).sort();
    assert.deepEqual(to, ['admin@test.local', 'shift@plant.local']);

    const entry = (await inbox()).data.find((n) => n.requestId?.id === sent.id.id);
    assert.ok(entry, 'the inbox entry names its request');
    assert.equal(entry.subject, 'Shift change');
    assert.equal(entry.type, 'GENERAL');

    // Deleting a sent request removes the notifications it made.
    const deleted: unknown[] = [];
    t.gw.bus.on('test', 'notification.deleted', (e) => deleted.push(e));
    const del = await t.api(`/api/notification/request/${sent.id.id}`, {
      method: 'DELETE',
      token: admin,
    });
    assert.equal(del.status, 200, await del.text());
    t.gw.bus.removeOwner('test');
    assert.equal(
      (await t.api(`/api/notification/request/${sent.id.id}`, { token: admin })).status,
      404,
    );
    assert.equal(
      (await inbox()).data.some((n) => n.requestId?.id === sent.id.id),
      false,
      'its inbox entry is gone',
    );
    assert.deepEqual(deleted, [
      {
        recipientId: entry.recipientId.id,
        id: entry.id.id,
        unread: await get<number>('/api/notifications/unread/count'),
      },
    ]);
  });

  it('a delayed request is SCHEDULED, delivered when due, and a deleted one is cancelled', async () => {
    const later = await send(webOnly('Much later', 3600));
    assert.equal(later.status, 'SCHEDULED');
    assert.deepEqual(later.stats.sent, {});
    assert.deepEqual(later.additionalConfig, { sendingDelayInSec: 3600 });
    assert.equal(later.templateName, null);

    const soon = await send(webOnly('In a second', 1));
    assert.equal(soon.status, 'SCHEDULED');
    assert.equal(
      (await inbox()).data.some((n) => n.subject === 'In a second'),
      false,
    );
    const delivered = await requestSent(t, soon.id.id);
    assert.deepEqual(delivered.stats.sent, { WEB: 1 });
    const entry = (await inbox()).data.find((n) => n.subject === 'In a second');
    assert.equal(entry?.requestId?.id, soon.id.id);

    const del = await t.api(`/api/notification/request/${later.id.id}`, {
      method: 'DELETE',
      token: admin,
    });
    assert.equal(del.status, 200);
    const cancelled = await get<Page<{ status: string; lastError: string | null; method: string }>>(
      '/api/notification/deliveries?pageSize=100&page=0&status=CANCELLED',
    );
    assert.ok(
      cancelled.data.some((d) => d.method === 'WEB' && d.lastError === 'request deleted'),
      JSON.stringify(cancelled.data),
    );
  });

  it('requests are listed newest first, searched by template name, sorted and paged; bad queries are 400', async () => {
    const page = await get<Page<RequestInfo>>('/api/notification/requests?pageSize=1&page=0');
    assert.equal(page.data.length, 1);
    assert.equal(page.hasNext, page.totalElements > 1);
    const all = await get<Page<RequestInfo>>('/api/notification/requests?pageSize=100&page=0');
    const times = all.data.map((r) => r.createdTime);
    assert.deepEqual(
      times,
      [...times].sort((a, b) => b - a),
    );
    const asc = await get<Page<RequestInfo>>(
      '/api/notification/requests?pageSize=100&page=0&sortProperty=createdTime&sortOrder=ASC',
    );
    assert.deepEqual(
      asc.data.map((r) => r.id.id),
      all.data.map((r) => r.id.id).reverse(),
    );

    const template = await adminPost(t, '/api/notification/template', {
      name: 'Boiler maintenance',
      notificationType: 'GENERAL',
      configuration: { deliveryMethodsTemplates: { WEB: { enabled: true, body: 'Soon' } } },
    });
    const r = await send({ templateId: template.id, targets: [ids.admins] });
    const found = await get<Page<RequestInfo>>(
      '/api/notification/requests?pageSize=10&page=0&textSearch=BOILER',
    );
    assert.deepEqual(
      found.data.map((x) => x.id.id),
      [r.id.id],
    );

    for (const [path, problem] of [
      ['/api/notification/requests?pageSize=10&page=0&sortProperty=name', /sortProperty/],
      ['/api/notification/requests?page=0', /pageSize/],
      ['/api/notification/request/not-a-uuid', /requestId/],
    ] as const) {
      const res = await t.api(path, { token: admin });
      assert.equal(res.status, 400, path);
      assert.match(await res.text(), problem);
    }
    const tooLate = await t.api('/api/notification/request', {
      token: admin,
      body: webOnly('x', 604_801),
    });
    assert.equal(tooLate.status, 400);
    assert.match(await tooLate.text(), /sendingDelayInSec/);
    const unknown = await t.api('/api/notification/request/00000000-0000-4000-8000-000000000000', {
      token: admin,
    });
    assert.equal(unknown.status, 404);
  });

  it('the table keeps the newest requestsMax requests; the oldest go, counted in stats and /metrics', async () => {
    const first = await send(webOnly('Bound 0'));
    for (let i = 1; i <= 10; i++) await send(webOnly(`Bound ${i}`));
    const all = await get<Page<RequestInfo>>('/api/notification/requests?pageSize=100&page=0');
    assert.equal(all.totalElements, 10);
    assert.equal(
      (await t.api(`/api/notification/request/${first.id.id}`, { token: admin })).status,
      404,
    );
    const stats = await get<{ requests: number; requestsDropped: number }>(
      '/api/notification/stats',
    );
    assert.equal(stats.requests, 10);
    assert.ok(stats.requestsDropped >= 1, JSON.stringify(stats));
    const metrics = await (await t.api('/metrics', { token: admin })).text();
    const line = metrics
      .split('\n')
      .find((l) => l.startsWith('edge_notifications_dropped_total{what="request"}'));
    assert.equal(Number(line?.split(' ')[1]), stats.requestsDropped);
    // The inbox entries of a dropped request stay; only the record of the request goes.
    assert.ok((await inbox()).data.some((n) => n.subject === 'Bound 0'));
  });
});
