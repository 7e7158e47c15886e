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
import { raiseAlarm, startSmtp } from './helpers/notify.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

// The settings and setup pages beyond the basics (issue 15 item 4): retention settings, alarm
// assignment, password reset from the sign-in page, scheduler event editing and the notification
// rules' options, against a real gateway (and a real SMTP server for the reset mail).

let t: TestGateway;
let browser: Browser;
let page: Page;
let smtp: Awaited<ReturnType<typeof startSmtp>>;
let boiler: MqttClient | undefined;

before(async () => {
  t = await startGateway({ config: { telemetry: { maxPoints: 2_000_000 } } });
  smtp = await startSmtp();
  browser = await launchBrowser();
  page = await newPage(browser);
});

after(async () => {
  await boiler?.endAsync();
  await browser?.close();
  await smtp?.close();
  await t?.close();
});

/** The text of a received mail: MIME quoted-printable soft breaks and escapes undone. */
function mailText(data: string): string {
  return data
    .replace(/=\r?\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

const adminGet = async <T>(path: string): Promise<T> =>
  (await (await t.api(path, { token: await t.adminToken() })).json()) as T;

test('retention settings: shown with their defaults, saved on the page, applied', async () => {
  await signIn(page, t);
  await page.getByRole('link', { name: 'Settings' }).click();
  await page.getByRole('tab', { name: 'Retention' }).click();
  const form = page.getByRole('form', { name: 'Retention' });
  const points = form.getByLabel(/Telemetry: points kept \(ring buffer\)/);
  assert.equal(await points.inputValue(), '2000000');
  await form.getByText(/default 2,000,000/).waitFor();
  await points.fill('1500000');
  await form.getByLabel(/Telemetry: days kept/).fill('30');
  await form.getByLabel(/Cleared alarms: days kept/).fill('14');
  await form.getByRole('button', { name: 'Save' }).click();
  await form.getByText('Saved', { exact: true }).waitFor();
  const stored = await adminGet<{ jsonValue: Record<string, number> }>(
    '/api/admin/settings/retention',
  );
  assert.equal(stored.jsonValue.telemetryMaxPoints, 1_500_000);
  assert.equal(stored.jsonValue.telemetryTtlDays, 30);
  assert.equal(stored.jsonValue.alarmRetentionDays, 14);
  // Applied without a restart: the age limit now runs on the scheduler host.
  assert.ok(t.gw.services.scheduler.jobs().some((j) => j.key === 'gateway.telemetry-age'));
  await screenshot(page, 'settings-retention');

  // The core's refusal is shown on the page (a bound the field itself does not know).
  await form.getByLabel(/Telemetry: days kept/).fill('0');
  await page.evaluate(() => {
    const input = document.querySelector<HTMLInputElement>('input[name="alarmMaxCount"]');
    if (input) {
      input.removeAttribute('min');
      input.value = '5';
    }
  });
  await form.getByRole('button', { name: 'Save' }).click();
  await form
    .getByRole('alert')
    .getByText(/alarmMaxCount/)
    .waitFor();
});

test('password reset from the sign-in page: a mail through the SMTP settings, the link, a new password', async () => {
  const admin = await t.adminToken();
  const res = await t.api('/api/admin/settings', {
    token: admin,
    body: {
      key: 'mail',
      jsonValue: { mailFrom: 'gateway@plant.local', smtpHost: '127.0.0.1', smtpPort: smtp.port },
    },
  });
  assert.equal(res.status, 200);
  const customerId = await createCustomer(t, 'Reset Works');
  const userId = await createUser(t, 'forgetful@plant.local', customerId);
  await activateUser(t, userId, 'old-password-1');

  const p = await newPage(browser);
  await p.goto(t.baseUrl);
  await p.getByRole('button', { name: 'Forgot password?' }).click();
  const form = p.getByRole('form', { name: 'Reset password' });
  await form.getByLabel('Email').fill('forgetful@plant.local');
  await form.getByRole('button', { name: 'Send reset link' }).click();
  await form.getByText(/a mail with a reset link is on its way/).waitFor();
  // An unknown address gets the same answer and no mail.
  await form.getByLabel('Email').fill('nobody@plant.local');
  await form.getByRole('button', { name: 'Send reset link' }).click();
  await form.getByText(/If nobody@plant.local belongs to an account/).waitFor();
  await screenshot(p, 'forgot-password');

  const mail = await waitFor(
    () => smtp.mails.find((m) => m.to.includes('forgetful@plant.local')),
    30_000,
    'the reset mail',
  );
  assert.equal(mail.from, 'gateway@plant.local');
  const link = /http:\/\/\S+\/api\/noauth\/resetPassword\?resetToken=[A-Za-z0-9]{30}/.exec(
    mailText(mail.data),
  )?.[0];
  assert.ok(link, 'the mail carries the reset link');
  assert.ok(link.startsWith(t.baseUrl), link);

  await p.goto(link);
  await p.getByRole('heading', { name: 'Reset password' }).waitFor();
  await p.getByLabel('Password', { exact: true }).fill('new-password-2');
  await p.getByLabel('Repeat password').fill('new-password-2');
  await p.getByRole('button', { name: 'Save' }).click();
  // Signed in with the new password's tokens: the customer user's pages.
  await p.getByRole('navigation', { name: 'Main' }).waitFor();
  await p.getByText('forgetful@plant.local').first().waitFor();
  await p.close();

  const login = (password: string) =>
    t.api('/api/auth/login', { body: { username: 'forgetful@plant.local', password } });
  assert.equal((await login('new-password-2')).status, 200);
  assert.equal((await login('old-password-1')).status, 401);
  assert.equal(smtp.mails.filter((m) => m.to.includes('nobody@plant.local')).length, 0);
  // The link works once.
  const again = await t.api('/api/noauth/resetPassword', {
    body: { resetToken: new URL(link).searchParams.get('resetToken'), password: 'third-pass-3' },
  });
  assert.equal(again.status, 400);
});

test('alarm assignment: the admin and a customer user pick an assignee who can see the device', async () => {
  const admin = await t.adminToken();
  const plant = await createCustomer(t, 'Plant North');
  const other = await createCustomer(t, 'Plant South');
  const anna = await createUser(t, 'anna@north.local', plant, { firstName: 'Anna' });
  const ben = await createUser(t, 'ben@north.local', plant);
  const carl = await createUser(t, 'carl@south.local', other);
  await activateUser(t, anna, 'anna-password-1');
  await activateUser(t, ben, 'ben-password-1');
  await activateUser(t, carl, 'carl-password-1');
  const dev = await createDevice(t, 'north-pump');
  const owned = await t.api(`/api/customer/${plant}/device/${dev.id}`, {
    method: 'POST',
    token: admin,
  });
  assert.equal(owned.status, 200);
  const alarmId = await raiseAlarm(t, dev.id, 'Pump Overheat');
  const assignee = async () =>
    (await adminGet<{ assignee: { email: string } | null }>(`/api/alarm/info/${alarmId}`)).assignee
      ?.email;

  // The tenant administrator: itself and the customer's users, not another customer's.
  await page.goto(`${t.baseUrl}/alarms`);
  const row = page.getByRole('row').filter({ hasText: 'Pump Overheat' });
  await row.getByRole('button', { name: 'Assign', exact: true }).click();
  const dialog = page.getByRole('form', { name: 'Assign alarm' });
  const picker = dialog.getByLabel('Assignee');
  await picker
    .locator('option', { hasText: 'anna@north.local (Anna)' })
    .waitFor({ state: 'attached' });
  const options = await picker.locator('option').allTextContents();
  assert.deepEqual(options.sort(), [
    `${ADMIN_EMAIL} (me)`,
    'anna@north.local (Anna)',
    'ben@north.local',
  ]);
  await picker.selectOption({ label: 'anna@north.local (Anna)' });
  await screenshot(page, 'alarm-assign');
  await dialog.getByRole('button', { name: 'Assign', exact: true }).click();
  await row.getByRole('cell', { name: 'anna@north.local' }).waitFor();
  assert.equal(await assignee(), 'anna@north.local');

  // Someone who cannot see the device is refused by the core too.
  const refused = await t.api(`/api/alarm/${alarmId}/assign/${carl}`, {
    method: 'POST',
    token: admin,
  });
  assert.equal(refused.status, 400);
  assert.match(((await refused.json()) as { message: string }).message, /carl@south.local/);

  // A customer user assigns within its customer: no tenant administrator in its list.
  const p = await newPage(browser);
  await signIn(p, t, 'ben@north.local', 'ben-password-1');
  await p.goto(`${t.baseUrl}/alarms`);
  const benRow = p.getByRole('row').filter({ hasText: 'Pump Overheat' });
  await benRow.getByRole('button', { name: 'Assign', exact: true }).click();
  const benDialog = p.getByRole('form', { name: 'Assign alarm' });
  const benPicker = benDialog.getByLabel('Assignee');
  await benPicker.locator('option', { hasText: '(me)' }).waitFor({ state: 'attached' });
  assert.deepEqual((await benPicker.locator('option').allTextContents()).sort(), [
    'anna@north.local (Anna)',
    'ben@north.local (me)',
  ]);
  await benDialog.getByText('Assigned to: anna@north.local').waitFor();
  await benPicker.selectOption({ label: 'ben@north.local (me)' });
  await benDialog.getByRole('button', { name: 'Assign', exact: true }).click();
  await benRow.getByRole('cell', { name: 'ben@north.local' }).waitFor();
  assert.equal(await assignee(), 'ben@north.local');

  // Unassign from the same dialog.
  await benRow.getByRole('button', { name: 'Assign', exact: true }).click();
  await benDialog.getByRole('button', { name: 'Unassign' }).click();
  await waitFor(async () => (await assignee()) === undefined, 30_000, 'the alarm unassigned');
  await p.close();
});

test('scheduler events: edited on the page (prefilled form, next run shown), disabled and enabled', async () => {
  const admin = await t.adminToken();
  const d = await createDevice(t, 'Boiler 7');
  const device = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
  boiler = device;
  await device.subscribeAsync('v1/devices/me/attributes');
  const received: Array<Record<string, unknown>> = [];
  device.on('message', (topic, payload) => {
    if (topic === 'v1/devices/me/attributes') received.push(JSON.parse(payload.toString()));
  });
  const start = Date.now() + 86_400_000;
  const created = await t.api('/api/schedulerEvent', {
    token: admin,
    body: {
      name: 'Morning mode',
      type: 'UPDATE_ATTRIBUTES',
      schedule: { timezone: 'UTC', startTime: start, repeat: { type: 'DAILY' } },
      configuration: {
        originatorId: { entityType: 'DEVICE', id: d.id },
        msgType: 'POST_ATTRIBUTES_REQUEST',
        msgBody: { mode: 'day' },
        metadata: { scope: 'SHARED_SCOPE' },
      },
    },
  });
  assert.equal(created.status, 200);
  const id = ((await created.json()) as { id: { id: string } }).id.id;
  const event = () =>
    adminGet<{ name: string; enabled: boolean; version: number; schedule: { cron?: string } }>(
      `/api/schedulerEvent/${id}`,
    );

  await page.goto(`${t.baseUrl}/settings`);
  await page.getByRole('tab', { name: 'Scheduler events' }).click();
  const table = page.getByRole('table', { name: 'Scheduler events' });
  const row = table.locator('tr', { hasText: 'Morning mode' });
  // The next run is tomorrow's start (the scheduler host's job), not "none".
  await row
    .getByRole('cell')
    .nth(3)
    .filter({ hasText: new Date(start).toLocaleDateString() })
    .waitFor();
  await row.getByRole('button', { name: 'Edit' }).click();
  const dialog = page.getByRole('dialog', { name: 'Edit scheduler event Morning mode' });
  assert.equal(await dialog.getByLabel('Name').inputValue(), 'Morning mode');
  assert.equal(await dialog.getByLabel(/^Body/).inputValue(), '{"mode":"day"}');
  assert.equal(await dialog.getByLabel('Repeat').inputValue(), 'DAILY');
  assert.equal(await dialog.getByLabel('Action').inputValue(), 'SHARED_SCOPE');
  await dialog.getByLabel('Device').locator('option:checked', { hasText: 'Boiler 7' }).waitFor({
    state: 'attached',
  });
  await dialog.getByText(/^Next run: /).waitFor();
  await dialog.getByLabel('Name').fill('Early mode');
  await dialog.getByLabel(/^Body/).fill('{"mode":"early"}');
  await dialog.getByLabel('Schedule by cron expression').check();
  await dialog.getByLabel('Cron expression', { exact: true }).fill('* * * * * *');
  await screenshot(page, 'settings-scheduler-edit');
  await dialog.getByRole('button', { name: 'Save' }).click();
  await table.getByRole('cell', { name: 'Early mode', exact: true }).waitFor();
  await waitFor(() => received.some((m) => m.mode === 'early'), 30_000, 'the edited action');
  const edited = await event();
  assert.equal(edited.name, 'Early mode');
  assert.equal(edited.schedule.cron, '* * * * * *');
  assert.equal(edited.version, 2);
  assert.equal(
    ((await adminGet<unknown[]>('/api/schedulerEvents')) as unknown[]).length,
    1,
    'edited in place, not added',
  );

  // Disabled on the page: the job is no longer armed; enabled again: it is.
  const armed = async () =>
    (await adminGet<{ jobs: Array<{ key: string }> }>('/api/scheduler/jobs')).jobs.some(
      (j) => j.key === id,
    );
  const toggle = table.getByLabel('Enabled: Early mode');
  await toggle.click();
  await waitFor(async () => (await event()).enabled === false, 30_000, 'the event disabled');
  assert.equal(await armed(), false);
  // The next-run cell empties: nothing is armed.
  await table
    .locator('tr', { hasText: 'Early mode' })
    .getByRole('cell')
    .nth(3)
    .filter({ hasText: /^$/ })
    .waitFor();
  assert.equal(await toggle.isChecked(), false);
  await toggle.click();
  await waitFor(async () => (await event()).enabled === true, 30_000, 'the event enabled');
  assert.equal(await armed(), true);
  // The box shows the saved state once the list is read again.
  await waitFor(() => toggle.isChecked(), 30_000, 'the box checked');
});

test('notification rules: severity filter, clear rule and an escalation level set on the page', async () => {
  const admin = await t.adminToken();
  const post = async (path: string, body: unknown) => {
    const res = await t.api(path, { token: admin, body });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { id: { id: string } }).id.id;
  };
  const shift = await post('/api/notification/target', {
    name: 'Shift desk',
    configuration: { type: 'EMAIL_ADDRESSES', emails: ['shift@plant.local'] },
  });
  const boss = await post('/api/notification/target', {
    name: 'Plant manager',
    configuration: { type: 'EMAIL_ADDRESSES', emails: ['manager@plant.local'] },
  });
  const template = await post('/api/notification/template', {
    name: 'Escalation mail',
    notificationType: 'ALARM',
    configuration: {
      deliveryMethodsTemplates: {
        EMAIL: { method: 'EMAIL', enabled: true, subject: '${alarmType}', body: '${alarmStatus}' },
      },
    },
  });
  const ruleId = await post('/api/notification/rule', {
    name: 'Boiler alarms',
    enabled: true,
    templateId: { id: template },
    triggerType: 'ALARM',
    triggerConfig: { triggerType: 'ALARM', notifyOn: ['CREATED'], alarmTypes: null },
    recipientsConfig: { triggerType: 'ALARM', escalationTable: { '0': [shift] } },
  });
  const stored = () =>
    adminGet<{
      triggerConfig: Record<string, unknown>;
      recipientsConfig: { escalationTable: Record<string, string[]> };
    }>(`/api/notification/rule/${ruleId}`);

  await page.goto(`${t.baseUrl}/notification-center`);
  await page.getByRole('tab', { name: 'Rules' }).click();
  const row = page.getByRole('table', { name: 'Notification rules' }).locator('tr', {
    hasText: 'Boiler alarms',
  });
  await row.getByRole('button', { name: 'Edit' }).click();
  const dialog = page.getByRole('dialog', { name: 'Edit rule' });
  const severities = dialog.getByRole('group', { name: /Severities/ });
  await severities.getByLabel('CRITICAL').check();
  await severities.getByLabel('MAJOR').check();
  await dialog
    .getByRole('group', { name: 'Stop escalating once the alarm is' })
    .getByLabel('ACK', { exact: true })
    .check();
  await dialog.getByRole('button', { name: 'Add escalation level' }).click();
  await dialog.getByLabel('Level 2: after (seconds)').fill('900');
  await dialog.getByRole('group', { name: 'Level 2: send to' }).getByLabel('Plant manager').check();
  await screenshot(page, 'notification-rule-escalation');
  await dialog.getByRole('button', { name: 'Save' }).click();
  await dialog.waitFor({ state: 'hidden' });

  const saved = await stored();
  assert.deepEqual(saved.triggerConfig.alarmSeverities, ['CRITICAL', 'MAJOR']);
  assert.deepEqual(saved.triggerConfig.clearRule, { alarmStatuses: ['ACK'] });
  assert.deepEqual(saved.triggerConfig.notifyOn, ['CREATED']);
  assert.deepEqual(saved.recipientsConfig.escalationTable, { '0': [shift], '900': [boss] });

  // Opened again, the form shows what is stored; clearing the filters removes them.
  await row.getByRole('button', { name: 'Edit' }).click();
  assert.equal(await severities.getByLabel('MAJOR').isChecked(), true);
  assert.equal(await dialog.getByLabel('Level 2: after (seconds)').inputValue(), '900');
  await severities.getByLabel('CRITICAL').uncheck();
  await severities.getByLabel('MAJOR').uncheck();
  await dialog.getByRole('button', { name: 'Remove level 2' }).click();
  await dialog.getByRole('button', { name: 'Save' }).click();
  await dialog.waitFor({ state: 'hidden' });
  const cleared = await stored();
  assert.equal(cleared.triggerConfig.alarmSeverities, undefined);
  assert.deepEqual(cleared.recipientsConfig.escalationTable, { '0': [shift] });
});
