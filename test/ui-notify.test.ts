import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { MqttClient } from 'mqtt';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import {
  ADMIN_EMAIL,
  createDevice,
  startGateway,
  type TestGateway,
  waitFor,
} from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { raiseAlarm, startRecorder } from './helpers/notify.js';
import { createCustomer, createUser } from './helpers/users.js';

// The scheduler form's live next-run preview and the notification rule editor (issue 15 item 4),
// against a real gateway.

let t: TestGateway;
let browser: Browser;
let page: Page;

before(async () => {
  t = await startGateway();
  browser = await launchBrowser();
  page = await newPage(browser);
  await signIn(page, t);
});

after(async () => {
  await browser?.close();
  await t?.close();
});

const adminGet = async <T>(path: string): Promise<T> =>
  (await (await t.api(path, { token: await t.adminToken() })).json()) as T;

const adminPost = async <T>(path: string, body: unknown): Promise<T> => {
  const res = await t.api(path, { token: await t.adminToken(), body });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as T;
};

test('scheduler form: the next runs of the unsaved schedule, live as it is typed, in its time zone', async () => {
  const jobKeys = async () =>
    (await adminGet<{ jobs: Array<{ key: string }> }>('/api/scheduler/jobs')).jobs.map(
      (j) => j.key,
    );
  const jobsBefore = await jobKeys();
  await page.goto(`${t.baseUrl}/settings`);
  await page.getByRole('tab', { name: 'Scheduler events' }).click();
  await page.getByRole('button', { name: 'Add scheduler event' }).click();
  const dialog = page.getByRole('dialog', { name: 'Add scheduler event' });
  const runs = dialog.getByRole('list', { name: 'Next runs' }).getByRole('listitem');
  /** The preview's runs (ms), once they are what the gateway says for `schedule`. */
  const shows = async (schedule: Record<string, unknown>) => {
    // The gateway's runs of `schedule` from just before the page's first one (so that a run
    // falling due between the page's request and this one cannot make them differ).
    const expected = async (shown: number[]) =>
      (
        await adminPost<{ runs: number[] }>('/api/scheduler/nextRuns', {
          schedule,
          count: 5,
          from: (shown[0] ?? Date.now()) - 1000,
        })
      ).runs;
    const started = Date.now();
    const shown = await waitFor(
      async () => {
        const page = await runs.evaluateAll((li) => li.map((l) => Number(l.dataset.ts)));
        return page.length === 5 && JSON.stringify(page) === JSON.stringify(await expected(page))
          ? page
          : undefined;
      },
      30_000,
      `the preview of ${JSON.stringify(schedule)}`,
    );
    assert.ok(shown[0] > started - 60_000, 'runs to come, not past ones');
    return shown;
  };

  await dialog.getByLabel('Time zone').fill('Asia/Tokyo');
  await dialog.getByLabel('Schedule by cron expression').check();
  const cron = dialog.getByLabel('Cron expression', { exact: true });
  await cron.fill('0 30 6 * * 1-5');
  const weekdays = await shows({ cron: '0 30 6 * * 1-5', timezone: 'Asia/Tokyo' });
  // Shown in the schedule's zone: 06:30 on weekdays.
  await dialog.getByText('Next runs (Asia/Tokyo)').waitFor();
  for (const text of await runs.allTextContents()) {
    assert.match(text, /06:30:00/);
    assert.doesNotMatch(text, /Sat|Sun/);
  }
  // Typing on: a new expression, a new preview.
  await cron.fill('0 0 */6 * * *');
  const sixHourly = await shows({ cron: '0 0 */6 * * *', timezone: 'Asia/Tokyo' });
  assert.equal(sixHourly[1] - sixHourly[0], 6 * 3_600_000);
  assert.notDeepEqual(sixHourly, weekdays);
  await runs.last().scrollIntoViewIfNeeded();
  await screenshot(page, 'settings-scheduler-preview');
  // A bad expression: the gateway's reason, no list.
  await cron.fill('0 0 25 * * *');
  await dialog.getByText(/Invalid cron expression: 0 0 25/).waitFor();
  assert.equal(await runs.count(), 0);

  // The repeat shape: every Monday at 09:00 in Berlin from a start in March 2027.
  await dialog.getByLabel('Schedule by cron expression').uncheck();
  await dialog.getByLabel('Time zone').fill('Europe/Berlin');
  await dialog.getByLabel('Start').fill('2027-03-01T09:00');
  await dialog.getByLabel('Repeat').selectOption('WEEKLY');
  await dialog.getByRole('group', { name: 'Days' }).getByLabel('Mon').check();
  const mondays = await shows({
    timezone: 'Europe/Berlin',
    startTime: Date.UTC(2027, 2, 1, 8, 0),
    repeat: { type: 'WEEKLY', repeatOn: [1], endsOn: 0 },
  });
  // Across the DST change of 2027-03-28 the wall time stays 09:00: 08:00 UTC, then 07:00 UTC.
  assert.deepEqual(
    mondays.map((r) => new Date(r).toISOString()),
    [
      '2027-03-01T08:00:00.000Z',
      '2027-03-08T08:00:00.000Z',
      '2027-03-15T08:00:00.000Z',
      '2027-03-22T08:00:00.000Z',
      '2027-03-29T07:00:00.000Z',
    ],
  );
  await runs.last().scrollIntoViewIfNeeded();
  await screenshot(page, 'settings-scheduler-preview-weekly');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  // Nothing was saved or armed by the preview.
  assert.deepEqual(await adminGet<unknown[]>('/api/schedulerEvents'), []);
  assert.deepEqual(await jobKeys(), jobsBefore);
});

/** Posts a notification entity as the admin; returns its id. */
const make = async (kind: string, body: unknown): Promise<string> =>
  (await adminPost<{ id: { id: string } }>(`/api/notification/${kind}`, body)).id.id;

const rule = (id: string) => adminGet<Record<string, unknown>>(`/api/notification/rule/${id}`);

/** The rules tab of the notification setup, opened afresh. */
async function rulesTab(): Promise<void> {
  await page.goto(`${t.baseUrl}/notification-center`);
  await page.getByRole('tab', { name: 'Rules' }).click();
}

const ruleRow = (name: string) =>
  page.getByRole('table', { name: 'Notification rules' }).locator('tr', { hasText: name });

test('notification rules on the page: a three-level escalation and a device activity rule with a device filter, saved as ThingsBoard JSON, firing', async () => {
  const hook = await startRecorder();
  const kiln1 = await createDevice(t, 'Kiln 1');
  const kiln2 = await createDevice(t, 'Kiln 2');
  const clients: MqttClient[] = [];
  try {
    const level = async (n: number) =>
      make('target', {
        name: `Hook ${n}`,
        configuration: { type: 'WEBHOOK', url: `${hook.url}/level${n}` },
      });
    const [l1, l2, l3] = [await level(1), await level(2), await level(3)];
    const admins = await make('target', {
      name: 'Admins inbox',
      configuration: { type: 'PLATFORM_USERS', usersFilter: { type: 'TENANT_ADMINISTRATORS' } },
    });
    const web = (subject: string, body: string) => ({
      WEB: { method: 'WEB', enabled: true, subject, body },
    });
    await make('template', {
      name: 'Kiln alarm',
      notificationType: 'ALARM',
      configuration: { deliveryMethodsTemplates: web('${alarmType}', '${alarmOriginatorName}') },
    });
    await make('template', {
      name: 'Kiln online',
      notificationType: 'DEVICE_ACTIVITY',
      configuration: { deliveryMethodsTemplates: web('${deviceName} online', '${eventType}') },
    });

    await rulesTab();
    await page.getByRole('button', { name: 'Add rule' }).click();
    const dialog = page.getByRole('dialog', { name: 'Add rule' });
    await dialog.getByLabel('Name').fill('Kiln escalation');
    await dialog.getByLabel(/^Alarm types/).fill('Kiln hot');
    await dialog
      .getByRole('group', { name: 'Stop escalating once the alarm is' })
      .getByLabel('CLEARED', { exact: true })
      .check();
    await dialog.getByLabel('Template').selectOption({ label: 'Kiln alarm' });
    await dialog.getByRole('group', { name: 'Send to', exact: true }).getByLabel('Hook 1').check();
    for (const [n, delay] of [
      [2, '1'],
      [3, '2'],
      [4, '3'],
    ] as const) {
      await dialog.getByRole('button', { name: 'Add escalation level' }).click();
      await dialog.getByLabel(`Level ${n}: after (seconds)`).fill(delay);
      await dialog
        .getByRole('group', { name: `Level ${n}: send to` })
        .getByLabel(`Hook ${Math.min(n, 3)}`)
        .check();
    }
    // A fourth level added, then removed again.
    await dialog.getByRole('button', { name: 'Remove level 4' }).click();
    await screenshot(page, 'notification-rule-levels');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await ruleRow('Kiln escalation').waitFor();

    await page.getByRole('button', { name: 'Add rule' }).click();
    await dialog.getByLabel('Name').fill('Kiln 1 online');
    await dialog.getByLabel('Trigger').selectOption('DEVICE_ACTIVITY');
    await dialog.getByLabel(/^Devices/).selectOption({ label: 'Kiln 1' });
    await dialog.getByLabel('Template').selectOption({ label: 'Kiln online' });
    await dialog
      .getByRole('group', { name: 'Send to', exact: true })
      .getByLabel('Admins inbox')
      .check();
    await screenshot(page, 'notification-rule-activity');
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await ruleRow('Kiln 1 online').waitFor();

    // Stored as ThingsBoard's JSON.
    const rules = await adminGet<{ data: Array<Record<string, unknown> & { name: string }> }>(
      '/api/notification/rules?pageSize=100&page=0',
    );
    const escalation = rules.data.find((r) => r.name === 'Kiln escalation');
    assert.deepEqual(escalation?.triggerConfig, {
      triggerType: 'ALARM',
      notifyOn: ['CREATED'],
      alarmTypes: ['Kiln hot'],
      clearRule: { alarmStatuses: ['CLEARED'] },
    });
    assert.deepEqual(escalation?.recipientsConfig, {
      triggerType: 'ALARM',
      escalationTable: { '0': [l1], '1': [l2], '2': [l3] },
    });
    const activity = rules.data.find((r) => r.name === 'Kiln 1 online');
    assert.equal(activity?.triggerType, 'DEVICE_ACTIVITY');
    assert.deepEqual(activity?.triggerConfig, {
      triggerType: 'DEVICE_ACTIVITY',
      notifyOn: ['ACTIVE'],
      devices: [kiln1.id],
    });
    assert.deepEqual(activity?.recipientsConfig, {
      triggerType: 'DEVICE_ACTIVITY',
      targets: [admins],
    });

    // They fire: an alarm reaches the three levels' webhooks, one after the other.
    await raiseAlarm(t, kiln1.id, 'Kiln hot');
    const arrived = (path: string) => hook.requests.find((r) => r.url === path);
    await waitFor(() => arrived('/level3'), 30_000, 'the third escalation level');
    assert.ok(arrived('/level1') && arrived('/level2'));
    // Each level went out when its delay had passed since the alarm's level 0 was written.
    const deliveries = await adminGet<{
      data: Array<{
        recipient: string;
        createdTime: number;
        history: Array<{ ts: number; ok: boolean }>;
      }>;
    }>('/api/notification/deliveries?pageSize=100&page=0');
    const sent = (n: number) => {
      const d = deliveries.data.find((x) => x.recipient === `${hook.url}/level${n}`);
      assert.ok(
        d?.history.some((h) => h.ok),
        `level ${n} sent`,
      );
      return d;
    };
    const first = sent(1);
    for (const [n, delay] of [
      [2, 1000],
      [3, 2000],
    ] as const)
      assert.ok(
        (sent(n)?.history[0].ts ?? 0) >= (first?.createdTime ?? 0) + delay,
        `level ${n} not before its delay`,
      );
    // Kiln 2 comes online first, then Kiln 1: only Kiln 1 is in the inbox.
    const inbox = async () =>
      (
        await adminGet<{ data: Array<{ type: string; subject: string }> }>(
          '/api/notifications?pageSize=100&page=0',
        )
      ).data.filter((n) => n.type === 'DEVICE_ACTIVITY');
    clients.push(await mqttConnect(t.gw.ports.mqtt, { username: kiln2.token }));
    clients.push(await mqttConnect(t.gw.ports.mqtt, { username: kiln1.token }));
    await waitFor(
      async () => (await inbox()).some((n) => n.subject === 'Kiln 1 online'),
      30_000,
      'the activity notification of Kiln 1',
    );
    const active = async (id: string) =>
      (
        await adminGet<Array<{ key: string; value: unknown }>>(
          `/api/plugins/telemetry/DEVICE/${id}/values/attributes/SERVER_SCOPE?keys=active`,
        )
      ).find((a) => a.key === 'active')?.value === true;
    await waitFor(() => active(kiln2.id), 30_000, 'Kiln 2 active');
    assert.deepEqual(
      (await inbox()).map((n) => n.subject),
      ['Kiln 1 online'],
    );
    // The delivery log shows the three webhook deliveries sent.
    await page.getByRole('tab', { name: 'Delivery log' }).click();
    const log = page.getByRole('table', { name: 'Deliveries' });
    for (const n of [1, 2, 3])
      await log
        .locator('tr', { hasText: `${hook.url}/level${n}` })
        .getByText('SENT')
        .waitFor();
  } finally {
    await Promise.all(clients.map((c) => c.endAsync()));
    await hook.close();
  }
});

test('every trigger type opens and saves unchanged to the same JSON, and its options are edited on the page', async () => {
  const inbox = await make('target', {
    name: 'Round trip inbox',
    configuration: { type: 'PLATFORM_USERS', usersFilter: { type: 'ALL_USERS' } },
  });
  const mail = await make('target', {
    name: 'Round trip mail',
    configuration: { type: 'EMAIL_ADDRESSES', emails: ['desk@plant.local'] },
  });
  const template = await make('template', {
    name: 'Round trip',
    notificationType: 'GENERAL',
    configuration: { deliveryMethodsTemplates: { WEB: { enabled: true, body: 'x' } } },
  });
  const kiln = await createDevice(t, 'Kiln 9');
  const profiles = await adminGet<{ data: Array<{ id: { id: string } }> }>(
    '/api/deviceProfiles?pageSize=10&page=0',
  );
  const base = (name: string, triggerConfig: Record<string, unknown>) => {
    const type = String(triggerConfig.triggerType);
    return {
      name,
      enabled: name !== 'RT comment',
      templateId: { entityType: 'NOTIFICATION_TEMPLATE', id: template },
      triggerType: type,
      triggerConfig,
      recipientsConfig:
        type === 'ALARM'
          ? {
              triggerType: type,
              escalationTable: { '0': [inbox], '60': [mail, inbox], '3600': [mail] },
            }
          : { triggerType: type, targets: [mail, inbox] },
      additionalConfig: { description: `${name}, made over REST` },
    };
  };
  const made = {
    alarm: await make(
      'rule',
      base('RT alarm', {
        triggerType: 'ALARM',
        alarmTypes: ['Overheat', 'Leak'],
        alarmSeverities: ['MAJOR', 'CRITICAL'],
        notifyOn: ['CLEARED', 'CREATED'],
        clearRule: { alarmStatuses: ['ACK', 'CLEARED'] },
      }),
    ),
    assignment: await make(
      'rule',
      base('RT assignment', {
        triggerType: 'ALARM_ASSIGNMENT',
        alarmTypes: null,
        alarmStatuses: ['ACTIVE'],
        notifyOn: ['ASSIGNED'],
      }),
    ),
    comment: await make(
      'rule',
      base('RT comment', {
        triggerType: 'ALARM_COMMENT',
        alarmTypes: ['Leak'],
        onlyUserComments: null,
        notifyOnCommentUpdate: true,
      }),
    ),
    activity: await make(
      'rule',
      base('RT activity', {
        triggerType: 'DEVICE_ACTIVITY',
        devices: [kiln.id],
        deviceProfiles: [profiles.data[0].id.id],
        notifyOn: ['INACTIVE', 'ACTIVE'],
      }),
    ),
    entity: await make(
      'rule',
      base('RT entity', {
        triggerType: 'ENTITY_ACTION',
        entityTypes: ['DEVICE'],
        created: false,
        updated: true,
        deleted: null,
      }),
    ),
    edge: await make(
      'rule',
      base('RT edge', { triggerType: 'EDGE_CONNECTION', notifyOn: ['DISCONNECTED'] }),
    ),
  };

  await rulesTab();
  const dialog = page.getByRole('dialog', { name: 'Edit rule' });
  /** Opens the rule `name`, lets `edit` change the form, saves; returns the stored JSON. */
  const edit = async (name: string, id: string, change?: () => Promise<void>) => {
    await ruleRow(name).getByRole('button', { name: 'Edit' }).click();
    await dialog
      .getByLabel('Template')
      .locator('option:checked', { hasText: 'Round trip' })
      .waitFor({
        state: 'attached',
      });
    await change?.();
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'hidden' });
    return rule(id);
  };
  for (const [name, id] of [
    ['RT alarm', made.alarm],
    ['RT assignment', made.assignment],
    ['RT comment', made.comment],
    ['RT activity', made.activity],
    ['RT entity', made.entity],
    ['RT edge', made.edge],
  ] as const) {
    const before = JSON.stringify(await rule(id));
    assert.equal(JSON.stringify(await edit(name, id)), before, `${name} saved unchanged`);
  }

  // The options of each trigger, edited on the page.
  const comment = await edit('RT comment', made.comment, async () => {
    await dialog
      .getByRole('group', { name: /^Severities/ })
      .getByLabel('MINOR')
      .check();
    await dialog
      .getByRole('group', { name: /^Alarm statuses/ })
      .getByLabel('UNACK', { exact: true })
      .check();
    await dialog.getByLabel(/^Only users' comments/).check();
    await dialog.getByLabel('Also when a comment is edited').uncheck();
    await screenshot(page, 'notification-rule-comment');
  });
  assert.deepEqual(comment.triggerConfig, {
    triggerType: 'ALARM_COMMENT',
    alarmTypes: ['Leak'],
    alarmSeverities: ['MINOR'],
    alarmStatuses: ['UNACK'],
    onlyUserComments: true,
    notifyOnCommentUpdate: false,
  });
  const assignment = await edit('RT assignment', made.assignment, async () => {
    await dialog.getByRole('group', { name: 'Notify on' }).getByLabel('UNASSIGNED').check();
    await dialog
      .getByRole('group', { name: /^Alarm statuses/ })
      .getByLabel('ACTIVE', { exact: true })
      .uncheck();
    await dialog
      .getByRole('group', { name: /^Severities/ })
      .getByLabel('CRITICAL')
      .check();
  });
  assert.deepEqual(assignment.triggerConfig, {
    triggerType: 'ALARM_ASSIGNMENT',
    alarmTypes: null,
    alarmSeverities: ['CRITICAL'],
    notifyOn: ['ASSIGNED', 'UNASSIGNED'],
  });
  const activity = await edit('RT activity', made.activity, async () => {
    await dialog.getByLabel(/^Devices/).selectOption([]);
    await dialog.getByRole('group', { name: 'Notify on' }).getByLabel('INACTIVE').uncheck();
  });
  assert.deepEqual(activity.triggerConfig, {
    triggerType: 'DEVICE_ACTIVITY',
    deviceProfiles: [profiles.data[0].id.id],
    notifyOn: ['ACTIVE'],
  });
  const entity = await edit('RT entity', made.entity, async () => {
    await dialog
      .getByRole('group', { name: 'Notify when a device is' })
      .getByLabel('deleted')
      .check();
    await dialog
      .getByRole('group', { name: 'Notify when a device is' })
      .getByLabel('updated')
      .uncheck();
  });
  assert.deepEqual(entity.triggerConfig, {
    triggerType: 'ENTITY_ACTION',
    entityTypes: ['DEVICE'],
    created: false,
    updated: false,
    deleted: true,
  });
  const edge = await edit('RT edge', made.edge, async () => {
    await dialog
      .getByRole('group', { name: 'Notify on' })
      .getByLabel('CONNECTED', { exact: true })
      .check();
  });
  assert.deepEqual(edge.triggerConfig, {
    triggerType: 'EDGE_CONNECTION',
    notifyOn: ['DISCONNECTED', 'CONNECTED'],
  });
  // An alarm rule's levels: the middle one removed, the last one's delay changed.
  const alarm = await edit('RT alarm', made.alarm, async () => {
    await dialog.getByRole('button', { name: 'Remove level 2' }).click();
    await dialog.getByLabel('Level 2: after (seconds)').fill('7200');
  });
  assert.deepEqual(alarm.recipientsConfig, {
    triggerType: 'ALARM',
    escalationTable: { '0': [inbox], '7200': [mail] },
  });
  // A switch of trigger: the first level's targets stay, the escalation table becomes a list.
  const switched = await edit('RT alarm', made.alarm, async () => {
    await dialog.getByLabel('Trigger').selectOption('EDGE_CONNECTION');
  });
  assert.deepEqual(switched.triggerConfig, {
    triggerType: 'EDGE_CONNECTION',
    notifyOn: ['CONNECTED'],
  });
  assert.deepEqual(switched.recipientsConfig, { triggerType: 'EDGE_CONNECTION', targets: [inbox] });
  // A refused rule shows the gateway's reason and keeps the dialog open.
  await ruleRow('RT edge').getByRole('button', { name: 'Edit' }).click();
  await dialog
    .getByRole('group', { name: 'Notify on' })
    .getByLabel('CONNECTED', { exact: true })
    .uncheck();
  await dialog.getByRole('group', { name: 'Notify on' }).getByLabel('DISCONNECTED').uncheck();
  await dialog.getByRole('button', { name: 'Save' }).click();
  await dialog
    .getByRole('alert')
    .getByText(/notifyOn/)
    .waitFor();
  await dialog.getByRole('button', { name: 'Cancel' }).click();
});

test('targets and templates: every users filter and notification type on the page; saved unchanged to the same JSON', async () => {
  const customerId = await createCustomer(t, 'Glassworks');
  const userId = await createUser(t, 'melter@glass.test', customerId);
  const get = (kind: string, id: string) =>
    adminGet<Record<string, unknown>>(`/api/notification/${kind}/${id}`);
  const made = {
    hook: await make('target', {
      name: 'Signed hook',
      configuration: {
        type: 'WEBHOOK',
        url: 'http://127.0.0.1:9/hook',
        method: 'PUT',
        headers: { 'X-Key': 'secret' },
        description: 'the ops desk',
      },
    }),
    customer: await make('target', {
      name: 'Glassworks users',
      configuration: {
        type: 'PLATFORM_USERS',
        usersFilter: { type: 'CUSTOMER_USERS', customerId },
      },
    }),
    list: await make('target', {
      name: 'Melter only',
      configuration: {
        type: 'PLATFORM_USERS',
        usersFilter: { type: 'USER_LIST', usersIds: [userId] },
      },
    }),
    template: await make('template', {
      name: 'Comment mail',
      notificationType: 'ALARM_COMMENT',
      configuration: {
        deliveryMethodsTemplates: {
          WEB: { method: 'WEB', enabled: true, subject: 'Comment', body: '${comment}' },
          SMS: { method: 'SMS', enabled: false, body: '${comment}' },
        },
      },
    }),
  };
  await page.goto(`${t.baseUrl}/notification-center`);
  const resave = async (tab: string, table: string, name: string, kind: string, id: string) => {
    await page.getByRole('tab', { name: tab }).click();
    const before = JSON.stringify(await get(kind, id));
    await page
      .getByRole('table', { name: table })
      .locator('tr', { hasText: name })
      .getByRole('button', { name: 'Edit' })
      .click();
    const dialog = page.getByRole('dialog', { name: `Edit ${kind}` });
    await dialog.getByLabel('Name').waitFor();
    if (kind === 'target' && name !== 'Signed hook')
      await dialog.getByLabel(name === 'Melter only' ? /^Chosen users/ : /^Customer/).waitFor();
    await dialog.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(JSON.stringify(await get(kind, id)), before, `${name} saved unchanged`);
  };
  await resave('Targets', 'Notification targets', 'Signed hook', 'target', made.hook);
  await resave('Targets', 'Notification targets', 'Glassworks users', 'target', made.customer);
  await resave('Targets', 'Notification targets', 'Melter only', 'target', made.list);
  await resave('Templates', 'Notification templates', 'Comment mail', 'template', made.template);

  // New targets of the two users filters that need a choice.
  await page.getByRole('tab', { name: 'Targets' }).click();
  const targets = page.getByRole('table', { name: 'Notification targets' });
  const addTarget = async (
    name: string,
    choose: (d: ReturnType<Page['getByRole']>) => Promise<void>,
  ) => {
    await page.getByRole('button', { name: 'Add target' }).click();
    const dialog = page.getByRole('dialog', { name: 'Add target' });
    await dialog.getByLabel('Name').fill(name);
    await choose(dialog);
    await dialog.getByRole('button', { name: 'Save' }).click();
    await targets.getByText(name, { exact: true }).waitFor();
  };
  await addTarget('Customer crew', async (d) => {
    await d.getByLabel(/^Users/).selectOption('CUSTOMER_USERS');
    await d.getByLabel(/^Customer/).selectOption({ label: 'Glassworks' });
  });
  await addTarget('Admin and melter', async (d) => {
    await d.getByLabel(/^Users/).selectOption('USER_LIST');
    await d
      .getByLabel(/^Chosen users/)
      .selectOption([{ label: 'melter@glass.test' }, { label: ADMIN_EMAIL }]);
    await screenshot(page, 'notification-target-users');
  });
  const all = await adminGet<{
    data: Array<{ name: string; configuration: Record<string, unknown> }>;
  }>('/api/notification/targets?pageSize=100&page=0');
  const config = (name: string) => all.data.find((x) => x.name === name)?.configuration;
  assert.deepEqual(config('Customer crew'), {
    type: 'PLATFORM_USERS',
    usersFilter: { type: 'CUSTOMER_USERS', customerId },
  });
  const me = await adminGet<{ id: { id: string } }>('/api/auth/user');
  const chosen = config('Admin and melter') as { usersFilter: { usersIds: string[] } };
  assert.deepEqual(chosen.usersFilter.usersIds.toSorted(), [me.id.id, userId].toSorted());

  // Every notification type for a template.
  await page.getByRole('tab', { name: 'Templates' }).click();
  await page.getByRole('button', { name: 'Add template' }).click();
  const dialog = page.getByRole('dialog', { name: 'Add template' });
  const types = await dialog
    .getByLabel('Notification type')
    .locator('option')
    .evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value));
  assert.deepEqual(types, [
    'ALARM',
    'ALARM_ASSIGNMENT',
    'ALARM_COMMENT',
    'DEVICE_ACTIVITY',
    'ENTITY_ACTION',
    'EDGE_CONNECTION',
    'GENERAL',
  ]);
  await dialog.getByLabel('Name').fill('Cloud link');
  await dialog.getByLabel('Notification type').selectOption('EDGE_CONNECTION');
  // The placeholders of that type are named.
  await dialog.getByText(/\$\{eventType\}, \$\{url\}, \$\{error\}/).waitFor();
  assert.equal(await dialog.getByText(/alarmSeverity/).count(), 0);
  await dialog.getByLabel('WEB body').fill('The cloud link is ${eventType}');
  await dialog.getByRole('button', { name: 'Save' }).click();
  await page
    .getByRole('table', { name: 'Notification templates' })
    .getByText('Cloud link')
    .waitFor();
  const templates = await adminGet<{
    data: Array<{ name: string; notificationType: string; configuration: unknown }>;
  }>('/api/notification/templates?pageSize=100&page=0');
  const cloud = templates.data.find((x) => x.name === 'Cloud link');
  assert.equal(cloud?.notificationType, 'EDGE_CONNECTION');
  assert.deepEqual(cloud?.configuration, {
    deliveryMethodsTemplates: {
      WEB: { method: 'WEB', enabled: true, body: 'The cloud link is ${eventType}' },
    },
  });
});

test('inbox: a new notification shows without a reload; marked read and deleted on the page', async () => {
  const admins = await make('target', {
    name: 'Inbox of the admins',
    configuration: { type: 'PLATFORM_USERS', usersFilter: { type: 'TENANT_ADMINISTRATORS' } },
  });
  await page.goto(`${t.baseUrl}/notifications`);
  const inbox = page.locator('ul.inbox');
  // The list has been read once (earlier tests left notifications, or it says there are none)
  // before the new one is sent: it can only appear by the live update.
  await page.locator('ul.inbox li, p:text("No notifications.")').first().waitFor();
  await adminPost('/api/notification/request', {
    template: {
      configuration: {
        deliveryMethodsTemplates: {
          WEB: {
            method: 'WEB',
            enabled: true,
            subject: 'Shift change',
            body: 'Night shift on duty',
          },
        },
      },
    },
    targets: [admins],
  });
  const item = inbox.locator('li', { hasText: 'Shift change' });
  await item.getByText('Night shift on duty').waitFor();
  await item.getByRole('button', { name: 'Mark read' }).click();
  await item.getByRole('button', { name: 'Mark read' }).waitFor({ state: 'detached' });
  await screenshot(page, 'notifications-inbox');
  await item.getByRole('button', { name: 'Delete Shift change' }).click();
  await item.waitFor({ state: 'detached' });
  const left = await adminGet<{ data: Array<{ subject: string | null }> }>(
    '/api/notifications?pageSize=100&page=0',
  );
  assert.equal(
    left.data.some((n) => n.subject === 'Shift change'),
    false,
  );
});
