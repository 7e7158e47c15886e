/**
 * What the other notification tests leave out (issue 14 §7-8), over real sockets: ALARM rules on
 * SEVERITY_CHANGED, ACKNOWLEDGED and CLEARED with their type and severity filters; every platform
 * users filter (CUSTOMER_USERS, USER_LIST, ALL_USERS, ORIGINATOR_ENTITY_OWNER_USERS) resolved to
 * the right people, seen as the emails a real `smtp-server` receives; and the outbox and inbox
 * bounds: with the SMTP server down the oldest undelivered rows are dropped and counted (stats,
 * /metrics, the request's errors), the rest delivered once it is back; the oldest inbox entries go.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RequestInfo } from '../src/notifications/types.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import {
  adminPost,
  alarmRule,
  type Mail,
  raiseAlarm,
  requestSent,
  startRecorder,
  startSmtp,
} from './helpers/notify.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

const saveMail = (t: TestGateway, port: number) =>
  adminPost(t, '/api/admin/settings', {
    key: 'mail',
    jsonValue: { mailFrom: 'gw@plant.local', smtpHost: '127.0.0.1', smtpPort: port, timeout: 2000 },
  });
const subjectOf = (m: Mail) => /^Subject: (.*)$/m.exec(m.data)?.[1]?.trim();
const target = async (t: TestGateway, name: string, usersFilter: unknown) =>
  (
    await adminPost(t, '/api/notification/target', {
      name,
      configuration: { type: 'PLATFORM_USERS', usersFilter },
    })
  ).id.id;

describe('notification rules and targets', () => {
  let t: TestGateway;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  before(async () => {
    t = await startGateway({ config: { notifications: { retryBaseMs: 20, retryMaxMs: 200 } } });
    smtp = await startSmtp();
    await saveMail(t, smtp.port);
  });
  after(async () => {
    await t.close();
    await smtp.close();
  });

  it('ALARM rules notify on severity changes, acknowledgement and clearing, filtered by type and severity', async () => {
    const hook = await startRecorder();
    try {
      await alarmRule(t, {
        target: { type: 'WEBHOOK', url: `${hook.url}/alarms` },
        templates: { WEBHOOK: { body: '${alarmType} ${action} ${alarmSeverity} ${alarmStatus}' } },
        trigger: {
          notifyOn: ['SEVERITY_CHANGED', 'ACKNOWLEDGED', 'CLEARED'],
          alarmTypes: ['Pressure'],
          alarmSeverities: ['CRITICAL', 'MAJOR'],
        },
      });
      const boiler = await createDevice(t, 'Boiler');
      const admin = await t.adminToken();
      const id = await raiseAlarm(t, boiler.id, 'Pressure', {}, 'MAJOR');
      assert.equal(await raiseAlarm(t, boiler.id, 'Pressure', {}, 'CRITICAL'), id);
      for (const op of ['ack', 'clear']) {
        const res = await t.api(`/api/alarm/${id}/${op}`, { method: 'POST', token: admin });
        assert.equal(res.status, 200, await res.text());
      }
      // Filtered out: another type, and a severity the rule does not name.
      const other = await raiseAlarm(t, boiler.id, 'Flow', {}, 'CRITICAL');
      await raiseAlarm(t, boiler.id, 'Flow', {}, 'MAJOR');
      await t.api(`/api/alarm/${other}/ack`, { method: 'POST', token: admin });
      const minor = await raiseAlarm(
        t,
        (await createDevice(t, 'Pump')).id,
        'Pressure',
        {},
        'MINOR',
      );
      await t.api(`/api/alarm/${minor}/ack`, { method: 'POST', token: admin });

      await waitFor(() => hook.requests.length >= 3, 20_000, 'three webhook calls');
      // A fourth (a filtered alarm let through) would come with the same sender run.
      const done = await waitFor(async () => {
        const res = await t.api('/api/notification/deliveries?pageSize=100&page=0&status=PENDING', {
          token: admin,
        });
        return ((await res.json()) as { totalElements: number }).totalElements === 0;
      });
      assert.ok(done);
      assert.deepEqual(
        hook.requests.map((r) => r.body),
        [
          'Pressure severity changed critical ACTIVE_UNACK',
          'Pressure acknowledged critical ACTIVE_ACK',
          'Pressure cleared critical CLEARED_ACK',
        ],
      );
    } finally {
      await hook.close();
    }
  });

  it('resolves every platform users filter to the right people', async () => {
    const customerA = await createCustomer(t, 'Customer A');
    const customerB = await createCustomer(t, 'Customer B');
    // Only enabled (activated) users receive notifications.
    const user = async (email: string, customerId?: string) => {
      const id = await createUser(t, email, customerId);
      await activateUser(t, id, 'a-long-password-1');
      return id;
    };
    await user('a@customer.local', customerA);
    const userB = await user('b@customer.local', customerB);
    const tech = await user('tech@plant.local');
    await createUser(t, 'never-activated@plant.local');
    const ids = {
      customerA: await target(t, 'Customer A users', {
        type: 'CUSTOMER_USERS',
        customerId: customerA,
      }),
      list: await target(t, 'Listed', { type: 'USER_LIST', usersIds: [userB, tech] }),
      all: await target(t, 'Everyone', { type: 'ALL_USERS' }),
    };
    const everyone = [
      'a@customer.local',
      'admin@test.local',
      'b@customer.local',
      'tech@plant.local',
    ];
    const expected: Record<string, string[]> = {
      customerA: ['a@customer.local'],
      list: ['b@customer.local', 'tech@plant.local'],
      all: everyone,
    };
    for (const [name, expect] of Object.entries(expected)) {
      const sent = await adminPost<RequestInfo>(t, '/api/notification/request', {
        template: {
          configuration: {
            deliveryMethodsTemplates: {
              EMAIL: { subject: `To ${name}`, body: 'Hello ${recipientEmail}' },
            },
          },
        },
        targets: [ids[name as keyof typeof ids]],
      });
      const mails = await waitFor(
        () => {
          const m = smtp.mails.filter((x) => subjectOf(x) === `To ${name}`);
          return m.length >= expect.length ? m : undefined;
        },
        20_000,
        `mails to ${name}`,
      );
      assert.deepEqual(mails.flatMap((m) => m.to).sort(), expect, name);
      assert.ok(
        mails.every((m) => m.data.includes(`Hello ${m.to[0]}`)),
        'recipientEmail filled',
      );
      const done = await requestSent(t, sent.id.id);
      assert.deepEqual(done.stats.sent, { EMAIL: expect.length });
    }

    // The originator's owner: customer A's users for A's device, the tenant admins for the tenant's.
    await alarmRule(t, {
      target: { type: 'PLATFORM_USERS', usersFilter: { type: 'ORIGINATOR_ENTITY_OWNER_USERS' } },
      templates: { EMAIL: { subject: 'Owner ${alarmOriginatorName}', body: 'b' } },
      trigger: { alarmTypes: ['OwnerCheck'] },
    });
    const ownedByA = await createDevice(t, 'A press');
    const assign = await t.api(`/api/owner/CUSTOMER/${customerA}/DEVICE/${ownedByA.id}`, {
      method: 'POST',
      token: await t.adminToken(),
    });
    assert.equal(assign.status, 200, await assign.text());
    const tenantDevice = await createDevice(t, 'Tenant press');
    await raiseAlarm(t, ownedByA.id, 'OwnerCheck');
    await raiseAlarm(t, tenantDevice.id, 'OwnerCheck');
    for (const [device, to] of [
      ['A press', ['a@customer.local']],
      ['Tenant press', ['admin@test.local', 'tech@plant.local']],
    ] as const) {
      const mails = await waitFor(
        () => {
          const m = smtp.mails.filter((x) => subjectOf(x) === `Owner ${device}`);
          return m.length >= to.length ? m : undefined;
        },
        20_000,
        `owner mails for ${device}`,
      );
      assert.deepEqual(mails.flatMap((m) => m.to).sort(), to);
    }
  });
});

describe('notification bounds', () => {
  let t: TestGateway;
  before(async () => {
    t = await startGateway({
      config: {
        notifications: { outboxMax: 10, inboxMax: 10, retryBaseMs: 20, retryMaxMs: 200 },
      },
    });
  });
  after(() => t.close());

  const stats = async () =>
    (await (await t.api('/api/notification/stats', { token: await t.adminToken() })).json()) as {
      pending: number;
      inbox: number;
      outboxDropped: number;
      inboxDropped: number;
    };
  const metric = async (what: string) => {
    const text = await (await t.api('/metrics', { token: await t.adminToken() })).text();
    const line = text
      .split('\n')
      .find((l) => l.startsWith(`edge_notifications_dropped_total{what="${what}"}`));
    return Number(line?.split(' ')[1]);
  };

  it('drops the oldest undelivered rows past outboxMax while SMTP is down, counted; the rest arrive once it is back', async () => {
    const probe = await startSmtp();
    const port = probe.port;
    await probe.close();
    await saveMail(t, port);
    const emails = Array.from(
      { length: 12 },
      (_, i) => `op${String(i).padStart(2, '0')}@plant.local`,
    );
    const list = (
      await adminPost(t, '/api/notification/target', {
        name: 'Operators',
        configuration: { type: 'EMAIL_ADDRESSES', emails },
      })
    ).id.id;
    const sent = await adminPost<RequestInfo>(t, '/api/notification/request', {
      template: {
        configuration: { deliveryMethodsTemplates: { EMAIL: { subject: 'Down', body: 'b' } } },
      },
      targets: [list],
    });
    assert.equal(sent.status, 'PROCESSING');
    assert.equal(sent.stats.totalErrors, 2);
    assert.deepEqual(Object.keys(sent.stats.errors.EMAIL ?? {}).sort(), emails.slice(0, 2));
    assert.match(sent.stats.errors.EMAIL?.['op00@plant.local'] ?? '', /outbox was full/);
    const s = await stats();
    assert.equal(s.pending, 10);
    assert.equal(s.outboxDropped, 2);
    assert.equal(await metric('outbox'), 2);

    const smtp = await startSmtp(port);
    try {
      const mails = await waitFor(
        () => (smtp.mails.length >= 10 ? smtp.mails : undefined),
        30_000,
        'ten emails after SMTP came back',
      );
      assert.deepEqual(
        mails.flatMap((m) => m.to),
        emails.slice(2),
        'in order, the two oldest dropped',
      );
      const r = await requestSent(t, sent.id.id, 30_000);
      assert.deepEqual(r.stats.sent, { EMAIL: 10 });
    } finally {
      await smtp.close();
    }
  });

  it('keeps at most inboxMax inbox entries; the oldest go, counted', async () => {
    const admins = await target(t, 'Admins', { type: 'TENANT_ADMINISTRATORS' });
    for (let i = 0; i < 12; i++)
      await adminPost(t, '/api/notification/request', {
        template: {
          configuration: { deliveryMethodsTemplates: { WEB: { subject: `Note ${i}`, body: 'b' } } },
        },
        targets: [admins],
      });
    const s = await stats();
    assert.equal(s.inbox, 10);
    assert.ok(s.inboxDropped >= 2, JSON.stringify(s));
    assert.equal(await metric('inbox'), s.inboxDropped);
    const inbox = (await (
      await t.api('/api/notifications?pageSize=100&page=0', { token: await t.adminToken() })
    ).json()) as { data: Array<{ subject: string }> };
    assert.deepEqual(
      inbox.data.map((n) => n.subject),
      Array.from({ length: 10 }, (_, i) => `Note ${11 - i}`),
    );
  });
});
