/**
 * ThingsBoard's ALARM_ASSIGNMENT and ALARM_COMMENT notification triggers (issue 14 §7, platform.md
 * §8) over REST: an alarm assigned, commented on, the comment edited, then unassigned; an email
 * to a real SMTP server for each assignment change and for the new comment (not for the edit,
 * `notifyOnCommentUpdate` false), with the placeholders filled in, in order; with
 * `onlyUserComments` false the system comments (acknowledged, cleared) notify too. The deliveries are
 * written in the alarm's (or the comment's) own transaction. ENTITY_ACTION: devices created and
 * deleted notify the inbox, updates only when asked for; the notification is written in the
 * device change's transaction, so a change that fails (refused, or undone inside its
 * transaction) writes none (the SIGKILL case: notifications-crash.test.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { adminPost, raiseAlarm, startSmtp } from './helpers/notify.js';

describe('ALARM_ASSIGNMENT and ALARM_COMMENT notifications', () => {
  let t: TestGateway;
  let admin: string;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  before(async () => {
    smtp = await startSmtp();
    t = await startGateway({ config: { notifications: { retryBaseMs: 50, retryMaxMs: 300 } } });
    admin = await t.adminToken();
    await adminPost(t, '/api/admin/settings', {
      key: 'mail',
      jsonValue: { mailFrom: 'gateway@plant.local', smtpHost: '127.0.0.1', smtpPort: smtp.port },
    });
    const target = await adminPost(t, '/api/notification/target', {
      name: 'Shift lead',
      configuration: { type: 'EMAIL_ADDRESSES', emails: ['lead@plant.local'] },
    });
    const rule = async (
      type: string,
      email: { subject: string; body: string },
      trigger: object,
    ) => {
      const template = await adminPost(t, '/api/notification/template', {
        name: type,
        notificationType: type,
        configuration: {
          deliveryMethodsTemplates: { EMAIL: { method: 'EMAIL', enabled: true, ...email } },
        },
      });
      await adminPost(t, '/api/notification/rule', {
        name: type,
        templateId: template.id,
        triggerType: type,
        triggerConfig: { triggerType: type, ...trigger },
        recipientsConfig: { triggerType: type, targets: [target.id.id] },
      });
    };
    await rule(
      'ALARM_ASSIGNMENT',
      {
        subject: '${alarmType} ${action}',
        body: '${alarmOriginatorName} (${alarmSeverity}) to ${assigneeEmail}.',
      },
      { notifyOn: ['ASSIGNED', 'UNASSIGNED'], alarmTypes: ['Overpressure'] },
    );
    await rule(
      'ALARM_COMMENT',
      { subject: 'Comment ${action} on ${alarmType}', body: '${userEmail}: ${comment}' },
      { alarmStatuses: ['ACTIVE'], notifyOnCommentUpdate: false, onlyUserComments: true },
    );
    // ThingsBoard's default (onlyUserComments false): the system comments notify too.
    await rule(
      'ALARM_COMMENT',
      { subject: 'System comment on ${alarmType}', body: '${comment} [${userEmail}]' },
      { alarmTypes: ['Leak'], onlyUserComments: false },
    );
  });
  after(async () => {
    await t.close();
    await smtp.close();
  });

  it('emails the assignment, the new comment and the unassignment, not the edit', async () => {
    const device = await createDevice(t, 'Tank 4');
    const alarmId = await raiseAlarm(t, device.id, 'Overpressure', {}, 'MAJOR');
    const me = (await (await t.api('/api/auth/user', { token: admin })).json()) as {
      id: { id: string };
      email: string;
    };
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await t.api(path, { method, body, token: admin });
      assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
      return (await res.json().catch(() => undefined)) as { id: { id: string } } | undefined;
    };
    await call('POST', `/api/alarm/${alarmId}/assign/${me.id.id}`);
    const comment = await call('POST', `/api/alarm/${alarmId}/comment`, {
      comment: { text: 'Relief valve checked' },
    });
    await call('POST', `/api/alarm/${alarmId}/comment`, {
      id: comment?.id,
      comment: { text: 'Relief valve replaced' },
    });
    await call('DELETE', `/api/alarm/${alarmId}/assign`);
    await waitFor(() => smtp.mails.length >= 3, 20_000, 'three emails');
    const subjects = smtp.mails.map((m) => /^Subject: (.*)$/m.exec(m.data)?.[1]);
    assert.deepEqual(subjects, [
      'Overpressure assigned',
      'Comment added on Overpressure',
      'Overpressure unassigned',
    ]);
    assert.match(smtp.mails[0].data, new RegExp(`Tank 4 \\(major\\) to ${me.email}\\.`));
    assert.match(smtp.mails[1].data, new RegExp(`${me.email}: Relief valve checked`));
    assert.deepEqual(smtp.mails[2].to, ['lead@plant.local']);
  });

  it('with onlyUserComments false the system comments notify: acknowledged and cleared by a user', async () => {
    const device = await createDevice(t, 'Tank 5');
    const alarmId = await raiseAlarm(t, device.id, 'Leak');
    for (const op of ['ack', 'clear']) {
      const res = await t.api(`/api/alarm/${alarmId}/${op}`, { method: 'POST', token: admin });
      assert.equal(res.status, 200, await res.text());
    }
    const system = () =>
      smtp.mails.filter((m) => m.data.includes('Subject: System comment on Leak'));
    await waitFor(() => system().length >= 2, 20_000, 'two system comment emails');
    const bodies = system().map((m) =>
      /Alarm was (\w+) by user ([^\s]+) \[([^\]]*)\]/.exec(m.data),
    );
    assert.deepEqual(
      bodies.map((b) => b?.slice(1)),
      [
        ['acknowledged', 'admin@test.local', 'admin@test.local'],
        ['cleared', 'admin@test.local', 'admin@test.local'],
      ],
    );
  });
});

/** An ENTITY_ACTION rule to the tenant administrators' inbox ("DEVICE created: name"). */
async function entityActionRule(
  t: TestGateway,
  on: { created: boolean; updated: boolean; deleted: boolean },
): Promise<void> {
  const target = await adminPost(t, '/api/notification/target', {
    name: 'Admins',
    configuration: { type: 'PLATFORM_USERS', usersFilter: { type: 'TENANT_ADMINISTRATORS' } },
  });
  const template = await adminPost(t, '/api/notification/template', {
    name: 'Devices',
    notificationType: 'ENTITY_ACTION',
    configuration: {
      deliveryMethodsTemplates: {
        WEB: {
          method: 'WEB',
          enabled: true,
          subject: '${entityType} ${actionType}',
          body: '${entityName}',
        },
      },
    },
  });
  await adminPost(t, '/api/notification/rule', {
    name: 'Devices',
    templateId: template.id,
    triggerType: 'ENTITY_ACTION',
    triggerConfig: { triggerType: 'ENTITY_ACTION', entityTypes: ['DEVICE'], ...on },
    recipientsConfig: { triggerType: 'ENTITY_ACTION', targets: [target.id.id] },
  });
}

describe('ENTITY_ACTION notifications', () => {
  it('a device created and deleted reaches the inbox; an update does not when not asked for', async () => {
    const t = await startGateway();
    try {
      const admin = await t.adminToken();
      await entityActionRule(t, { created: true, updated: false, deleted: true });
      const device = await createDevice(t, 'Mixer 2');
      await adminPost(t, '/api/device', {
        id: { entityType: 'DEVICE', id: device.id },
        name: 'Mixer 2b',
      });
      const del = await t.api(`/api/device/${device.id}`, { method: 'DELETE', token: admin });
      assert.equal(del.status, 200);
      const inbox = await waitFor(
        async () => {
          const res = await t.api('/api/notifications?pageSize=10&page=0', { token: admin });
          const page = (await res.json()) as {
            data: Array<{ type: string; subject: string; text: string }>;
          };
          const mine = page.data.filter((n) => n.type === 'ENTITY_ACTION');
          return mine.length >= 2 ? mine : undefined;
        },
        10_000,
        'two ENTITY_ACTION notifications',
      );
      assert.deepEqual(inbox.map((n) => `${n.subject}: ${n.text}`).sort(), [
        'DEVICE created: Mixer 2',
        'DEVICE deleted: Mixer 2b',
      ]);
    } finally {
      await t.close();
    }
  });

  it('a device change that fails writes no notification; each committed one writes exactly one', async () => {
    const t = await startGateway();
    try {
      const admin = await t.adminToken();
      await entityActionRule(t, { created: true, updated: true, deleted: true });
      const press = await createDevice(t, 'Press 1');
      await createDevice(t, 'Press 2', 'press-2-token');
      // Refused before its transaction: the name is taken.
      const dup = await t.api('/api/device', { body: { name: 'Press 1' }, token: admin });
      assert.equal(dup.status, 400);
      // Undone inside its transaction: the rename is written, then the token is refused.
      const undone = await t.api('/api/device?accessToken=press-2-token', {
        body: { id: { entityType: 'DEVICE', id: press.id }, name: 'Press 1b' },
        token: admin,
      });
      assert.equal(undone.status, 400, await undone.clone().text());
      const kept = await t.api(`/api/device/${press.id}`, { token: admin });
      assert.equal(((await kept.json()) as { name: string }).name, 'Press 1');
      const gone = await t.api('/api/device/8c0d1e1a-33c4-4c55-9d7e-7f1b2a3c4d5e', {
        method: 'DELETE',
        token: admin,
      });
      assert.equal(gone.status, 404);
      const del = await t.api(`/api/device/${press.id}`, { method: 'DELETE', token: admin });
      assert.equal(del.status, 200);
      // The delete's notification is written before its answer: everything before it is there.
      const res = await t.api('/api/notifications?pageSize=50&page=0', { token: admin });
      const page = (await res.json()) as {
        data: Array<{ type: string; subject: string; text: string }>;
      };
      assert.deepEqual(
        page.data
          .filter((n) => n.type === 'ENTITY_ACTION')
          .map((n) => `${n.subject}: ${n.text}`)
          .sort(),
        ['DEVICE created: Press 1', 'DEVICE created: Press 2', 'DEVICE deleted: Press 1'],
      );
    } finally {
      await t.close();
    }
  });
});
