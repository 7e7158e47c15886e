/**
 * The notification center over real sockets (issue 14 §7-10): the default rule fills the admin's
 * inbox; email through a real `smtp-server` with the alarm's placeholders filled in; a webhook
 * retried until the test's server answers 200; SMS through a fake Twilio and a generic HTTP
 * provider; escalation stopped by the clear rule; system settings and their test endpoints.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Notification } from '../src/notifications/types.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { adminPost, alarmRule, raiseAlarm, startRecorder, startSmtp } from './helpers/notify.js';

interface Page<T> {
  data: T[];
  totalElements: number;
}
interface DeliveryJson {
  id: string;
  method: string;
  recipient: string;
  status: string;
  attempts: number;
  lastError: string | null;
  history: Array<{ ok: boolean; error?: string }>;
  alarmId: string | null;
}

describe('notification center', () => {
  let t: TestGateway;
  let admin: string;
  let device: { id: string; token: string };

  before(async () => {
    t = await startGateway({
      config: { notifications: { retryBaseMs: 50, retryMaxMs: 300, maxAttempts: 20 } },
    });
    admin = await t.adminToken();
    device = await createDevice(t, 'Boiler 7');
  });
  after(() => t.close());

  const get = async <T>(path: string, token = admin): Promise<T> => {
    const res = await t.api(path, { token });
    assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
    return (await res.json()) as T;
  };
  const deliveries = () =>
    get<Page<DeliveryJson>>('/api/notification/deliveries?pageSize=100&page=0');

  it('the default rule puts new alarms in the tenant admin inbox; read/unread over REST and the bus', async () => {
    const rules = await get<Page<{ name: string; triggerConfig: { notifyOn: string[] } }>>(
      '/api/notification/rules?pageSize=10&page=0',
    );
    assert.ok(
      rules.data.some((r) => r.name === 'New alarm' && r.triggerConfig.notifyOn[0] === 'CREATED'),
    );
    const seen: Notification[] = [];
    const reads: unknown[] = [];
    t.gw.bus.on('test', 'notification.created', (e) => seen.push(e.notification));
    t.gw.bus.on('test', 'notification.read', (e) => reads.push(e));
    const before = await get<number>('/api/notifications/unread/count');
    await raiseAlarm(t, device.id, 'Overheat');
    const inbox = await waitFor(async () => {
      const page = await get<Page<Notification>>('/api/notifications?pageSize=10&page=0');
      return page.data.find((n) => n.subject === "New alarm 'Overheat'") && page;
    });
    const n = inbox.data.find((x) => x.subject === "New alarm 'Overheat'") as Notification;
    assert.equal(n.text, 'Severity: critical, originator: Boiler 7');
    assert.equal(n.status, 'SENT');
    assert.equal(n.type, 'ALARM');
    assert.equal((n.info as { alarmType: string }).alarmType, 'Overheat');
    assert.equal(await get<number>('/api/notifications/unread/count'), before + 1);
    await waitFor(() => seen.some((s) => s.id.id === n.id.id), 5000, 'notification.created');
    const read = await t.api(`/api/notification/${n.id.id}/read`, { method: 'PUT', token: admin });
    assert.equal(read.status, 200);
    assert.equal(await get<number>('/api/notifications/unread/count'), before);
    assert.deepEqual(reads.at(-1), {
      recipientId: n.recipientId.id,
      ids: [n.id.id],
      unread: before,
    });
    const unreadOnly = await get<Page<Notification>>(
      '/api/notifications?pageSize=10&page=0&unreadOnly=true',
    );
    assert.ok(!unreadOnly.data.some((x) => x.id.id === n.id.id));
    const all = await t.api('/api/notifications/read', { method: 'PUT', token: admin });
    assert.equal(all.status, 200);
    assert.equal(await get<number>('/api/notifications/unread/count'), 0);
    const del = await t.api(`/api/notification/${n.id.id}`, { method: 'DELETE', token: admin });
    assert.equal(del.status, 200);
    const gone = await t.api(`/api/notification/${n.id.id}/read`, { method: 'PUT', token: admin });
    assert.equal(gone.status, 404);
    t.gw.bus.removeOwner('test');
  });

  it('mail settings hide the password; test mail and an alarm email arrive with placeholders filled', async () => {
    const smtp = await startSmtp(0, { user: 'mailer', pass: 'secret-pass' });
    try {
      const saved = await adminPost<{ jsonValue: Record<string, unknown> }>(
        t,
        '/api/admin/settings',
        {
          key: 'mail',
          jsonValue: {
            mailFrom: 'gateway@plant.local',
            smtpProtocol: 'smtp',
            smtpHost: '127.0.0.1',
            smtpPort: String(smtp.port),
            timeout: '5000',
            enableTls: false,
            username: 'mailer',
            password: 'secret-pass',
          },
        },
      );
      assert.equal(saved.jsonValue.password, undefined);
      const read = await get<{ key: string; jsonValue: Record<string, unknown> }>(
        '/api/admin/settings/mail',
      );
      assert.equal(read.jsonValue.smtpHost, '127.0.0.1');
      assert.equal(read.jsonValue.password, undefined);

      const test = await t.api('/api/admin/settings/testMail', {
        token: admin,
        body: { key: 'mail', jsonValue: read.jsonValue },
      });
      assert.equal(test.status, 200, await test.text());
      await waitFor(() => smtp.mails.some((m) => m.to.includes('admin@test.local')));

      await alarmRule(t, {
        target: { type: 'EMAIL_ADDRESSES', emails: ['shift@plant.local'] },
        templates: {
          EMAIL: {
            subject: 'Alarm ${alarmType} on ${alarmOriginatorName}',
            body: 'Severity ${alarmSeverity}, status ${alarmStatus}, temperature ${temperature}',
          },
        },
        trigger: { alarmTypes: ['High Temperature'] },
      });
      await raiseAlarm(t, device.id, 'Not this one');
      await raiseAlarm(t, device.id, 'High Temperature', { temperature: 87.5 }, 'MAJOR');
      const mail = await waitFor(() => smtp.mails.find((m) => m.to.includes('shift@plant.local')));
      assert.equal(mail.from, 'gateway@plant.local');
      assert.match(mail.data, /Subject: Alarm High Temperature on Boiler 7/);
      assert.match(mail.data, /Severity major, status ACTIVE_UNACK, temperature 87\.5/);
      const shiftMails = smtp.mails.filter((m) => m.to.includes('shift@plant.local'));
      assert.equal(shiftMails.length, 1, 'the type filter let only High Temperature through');
      const d = await waitFor(async () =>
        (await deliveries()).data.find(
          (x) => x.recipient === 'shift@plant.local' && x.status === 'SENT',
        ),
      );
      assert.equal(d.attempts, 1);
      assert.deepEqual(
        d.history.map((h) => h.ok),
        [true],
      );
    } finally {
      await smtp.close();
    }
  });

  it('a webhook is retried with backoff until the server answers 200; attempts are readable', async () => {
    const hook = await startRecorder((n) => (n < 3 ? 503 : 200));
    try {
      await alarmRule(t, {
        target: {
          type: 'WEBHOOK',
          url: `${hook.url}/hooks/alarm`,
          headers: { 'X-Plant': 'north' },
        },
        templates: { WEB: { subject: 'Hook ${alarmType}', body: 'Device ${alarmOriginatorName}' } },
        trigger: { alarmTypes: ['Pressure'] },
      });
      const alarmId = await raiseAlarm(t, device.id, 'Pressure');
      await waitFor(() => hook.requests.length >= 3, 10_000, 'three webhook calls');
      const last = hook.requests[2];
      assert.equal(last.url, '/hooks/alarm');
      assert.equal(last.headers['x-plant'], 'north');
      const body = JSON.parse(last.body) as {
        subject: string;
        text: string;
        info: { alarmId: string };
      };
      assert.equal(body.subject, 'Hook Pressure');
      assert.equal(body.text, 'Device Boiler 7');
      assert.equal(body.info.alarmId, alarmId);
      const d = await waitFor(async () =>
        (await deliveries()).data.find((x) => x.method === 'WEBHOOK' && x.status === 'SENT'),
      );
      assert.equal(d.attempts, 3);
      assert.deepEqual(
        d.history.map((h) => h.ok),
        [false, false, true],
      );
      assert.match(d.history[0].error ?? '', /answered 503/);
      // Delivered once: no later call.
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(hook.requests.length, 3);
    } finally {
      await hook.close();
    }
  });

  it('SMS through a Twilio-shaped provider and a generic HTTP provider', async () => {
    const twilio = await startRecorder(() => 201);
    const generic = await startRecorder(() => 200);
    try {
      await adminPost(t, '/api/admin/settings', {
        key: 'sms',
        jsonValue: {
          type: 'TWILIO',
          accountSid: 'AC123',
          accountToken: 'tok-456',
          numberFrom: '+15550001',
          baseUrl: twilio.url,
        },
      });
      await alarmRule(t, {
        target: { type: 'PHONE_NUMBERS', phoneNumbers: ['+4915112345678'] },
        templates: { SMS: { body: '${alarmSeverity} ${alarmType} at ${alarmOriginatorName}' } },
        trigger: { alarmTypes: ['Leak'] },
      });
      await raiseAlarm(t, device.id, 'Leak', {}, 'WARNING');
      const req = await waitFor(() => twilio.requests[0]);
      assert.equal(req.url, '/2010-04-01/Accounts/AC123/Messages.json');
      assert.equal(
        req.headers.authorization,
        `Basic ${Buffer.from('AC123:tok-456').toString('base64')}`,
      );
      const form = new URLSearchParams(req.body);
      assert.equal(form.get('To'), '+4915112345678');
      assert.equal(form.get('From'), '+15550001');
      assert.equal(form.get('Body'), 'warning Leak at Boiler 7');

      const test = await t.api('/api/admin/settings/testSms', {
        token: admin,
        body: {
          numberTo: '+4917000000',
          message: 'say "hi"',
          providerConfiguration: {
            type: 'HTTP',
            url: `${generic.url}/send?to=\${phoneNumber}`,
            headers: { 'X-Key': 'k1' },
          },
        },
      });
      assert.equal(test.status, 200, await test.text());
      const g = generic.requests[0];
      assert.equal(g.url, '/send?to=%2B4917000000');
      assert.equal(g.headers['x-key'], 'k1');
      assert.deepEqual(JSON.parse(g.body), { to: '+4917000000', text: 'say "hi"' });

      const failing = await t.api('/api/admin/settings/testSms', {
        token: admin,
        body: {
          numberTo: '+4917000000',
          message: 'x',
          providerConfiguration: { type: 'HTTP', url: 'http://127.0.0.1:9/none' },
        },
      });
      assert.equal(failing.status, 400);
      assert.match(((await failing.json()) as { message: string }).message, /Test SMS failed/);
    } finally {
      await twilio.close();
      await generic.close();
    }
  });

  it('escalation: a later level reaches the inbox unless the alarm reached a clear status first', async () => {
    const { targetId } = await alarmRule(t, {
      target: { type: 'PLATFORM_USERS', usersFilter: { type: 'TENANT_ADMINISTRATORS' } },
      templates: { WEB: { subject: 'Escalated ${alarmType}', body: 'still ${alarmStatus}' } },
      trigger: { alarmTypes: ['Esc A', 'Esc B'], clearRule: { alarmStatuses: ['ACK'] } },
      escalation: (id) => ({ '1': [id] }),
    });
    assert.ok(targetId);
    const acked = await raiseAlarm(t, device.id, 'Esc A');
    const ack = await t.api(`/api/alarm/${acked}/ack`, { method: 'POST', token: admin });
    assert.equal(ack.status, 200);
    await raiseAlarm(t, device.id, 'Esc B');
    const inbox = await waitFor(
      async () => {
        const page = await get<Page<Notification>>('/api/notifications?pageSize=50&page=0');
        return page.data.find((n) => n.subject === 'Escalated Esc B') && page;
      },
      10_000,
      'the escalated notification',
    );
    assert.ok(!inbox.data.some((n) => n.subject === 'Escalated Esc A'));
    const cancelled = await waitFor(async () =>
      (await deliveries()).data.find((d) => d.alarmId === acked && d.status === 'CANCELLED'),
    );
    assert.equal(cancelled.attempts, 0);
  });

  it('bad bodies are refused with 400 naming the problem; used targets and templates cannot go', async () => {
    const bad = await t.api('/api/notification/target', {
      token: admin,
      body: { name: 'x', configuration: { type: 'PHONE_NUMBERS', phoneNumbers: ['call me'] } },
    });
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as { message: string }).message, /phoneNumbers\.0/);
    const { targetId, templateId } = await alarmRule(t, {
      target: { type: 'EMAIL_ADDRESSES', emails: ['a@b.local'] },
      templates: { EMAIL: { subject: 's', body: 'b' } },
    });
    const delTarget = await t.api(`/api/notification/target/${targetId}`, {
      method: 'DELETE',
      token: admin,
    });
    assert.equal(delTarget.status, 400);
    const delTemplate = await t.api(`/api/notification/template/${templateId}`, {
      method: 'DELETE',
      token: admin,
    });
    assert.equal(delTemplate.status, 400);
    const unknownTemplate = await t.api('/api/notification/rule', {
      token: admin,
      body: {
        name: 'r',
        templateId: { id: '00000000-0000-4000-8000-000000000000' },
        triggerType: 'ALARM',
        triggerConfig: { triggerType: 'ALARM', notifyOn: ['CREATED'] },
        recipientsConfig: { escalationTable: { '0': [targetId] } },
      },
    });
    assert.equal(unknownTemplate.status, 404);
    const badSettings = await t.api('/api/admin/settings', {
      token: admin,
      body: { key: 'mail', jsonValue: { smtpHost: '' } },
    });
    assert.equal(badSettings.status, 400);
    const unknownKey = await t.api('/api/admin/settings/ldap', { token: admin });
    assert.equal(unknownKey.status, 404);
  });
});
