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
import { raiseAlarm, startRecorder, startSmtp } from './helpers/notify.js';

// The settings page (SMTP, SMS, scheduler events) and the notification setup (targets, templates,
// rules, delivery log) against a real gateway, a real SMTP server and a recording HTTP server;
// and the unread badge, pushed over the WebSocket (no REST polling while the socket is up).

let t: TestGateway;
let browser: Browser;
let page: Page;
let smtp: Awaited<ReturnType<typeof startSmtp>>;
let sms: Awaited<ReturnType<typeof startRecorder>>;
let device: MqttClient | undefined;
/** The page's REST reads of the unread count (none while the socket is live). */
let countPolls = 0;

before(async () => {
  t = await startGateway();
  smtp = await startSmtp();
  sms = await startRecorder();
  browser = await launchBrowser();
  page = await newPage(browser);
  page.on('request', (r) => {
    if (r.url().includes('/api/notifications/unread/count')) countPolls++;
  });
});

after(async () => {
  await device?.endAsync();
  await browser?.close();
  await sms?.close();
  await smtp?.close();
  await t?.close();
});

test('SMTP and SMS settings saved on the page, each with a test message that arrives', async () => {
  await signIn(page, t);
  await page.getByRole('link', { name: 'Settings' }).click();
  const mail = page.getByRole('form', { name: 'Mail' });
  await mail.getByLabel('Mail from').fill('gateway@plant.local');
  await mail.getByLabel('SMTP host').fill('127.0.0.1');
  await mail.getByLabel('SMTP port').fill(String(smtp.port));
  await mail.getByRole('button', { name: 'Save' }).click();
  await mail.getByText('Saved', { exact: true }).waitFor();
  await mail.getByRole('button', { name: 'Send test mail' }).click();
  await mail.getByText('Test message sent').waitFor();
  await waitFor(() => smtp.mails.find((m) => m.to.includes(ADMIN_EMAIL)), 30_000, 'the test mail');
  const stored = (await (
    await t.api('/api/admin/settings/mail', { token: await t.adminToken() })
  ).json()) as { jsonValue: Record<string, unknown> };
  assert.equal(stored.jsonValue.smtpHost, '127.0.0.1');
  assert.equal(stored.jsonValue.smtpPort, smtp.port);
  await screenshot(page, 'settings-mail');

  await page.getByRole('tab', { name: 'SMS' }).click();
  const form = page.getByRole('form', { name: 'SMS' });
  await form.getByLabel('Provider').selectOption('HTTP');
  await form.getByLabel('URL').fill(`${sms.url}/sms`);
  await form.getByLabel('Test SMS to (phone number)').fill('+4915112345678');
  await form.getByRole('button', { name: 'Send test SMS' }).click();
  await form.getByText('Test message sent').waitFor();
  const sent = await waitFor(() => sms.requests.find((r) => r.url === '/sms'), 30_000, 'the SMS');
  assert.deepEqual(JSON.parse(sent.body), {
    to: '+4915112345678',
    text: 'Test SMS from edge-gateway',
  });
  await form.getByRole('button', { name: 'Save' }).click();
  await form.getByText('Saved', { exact: true }).waitFor();
});

test('a target, a template and a rule made on the page mail an alarm; the delivery log and the live badge show it', async () => {
  await page.getByRole('link', { name: 'Notification setup' }).click();

  await page.getByRole('button', { name: 'Add target' }).click();
  let dialog = page.getByRole('dialog', { name: 'Add target' });
  await dialog.getByLabel('Name').fill('Shift mailbox');
  await dialog.getByLabel('Type').selectOption('EMAIL_ADDRESSES');
  await dialog.getByLabel('Email addresses (one a line)').fill('shift@plant.local');
  await dialog.getByRole('button', { name: 'Save' }).click();
  await page
    .getByRole('table', { name: 'Notification targets' })
    .getByText('Shift mailbox')
    .waitFor();

  await page.getByRole('tab', { name: 'Templates' }).click();
  await page.getByRole('button', { name: 'Add template' }).click();
  dialog = page.getByRole('dialog', { name: 'Add template' });
  await dialog.getByLabel('Name').fill('Alarm mail');
  await dialog.getByLabel('Send by EMAIL').check();
  await dialog.getByLabel('EMAIL subject').fill('Alarm ${alarmType}');
  await dialog.getByLabel('EMAIL body').fill('${alarmOriginatorName} needs a look');
  await dialog.getByRole('button', { name: 'Save' }).click();
  await page
    .getByRole('table', { name: 'Notification templates' })
    .getByText('Alarm mail')
    .waitFor();

  await page.getByRole('tab', { name: 'Rules' }).click();
  await addRule('Mail the shift');
  await screenshot(page, 'notification-rules');

  const token = await t.adminToken();
  const rules = (await (
    await t.api('/api/notification/rules?pageSize=10&page=0', { token })
  ).json()) as {
    data: Array<{
      name: string;
      triggerConfig: unknown;
      recipientsConfig: { escalationTable: Record<string, string[]> };
    }>;
  };
  const rule = rules.data.find((r) => r.name === 'Mail the shift');
  assert.ok(rule, 'the rule is stored');
  assert.deepEqual(rule.triggerConfig, {
    triggerType: 'ALARM',
    notifyOn: ['CREATED'],
    alarmTypes: null,
  });
  assert.equal(rule.recipientsConfig.escalationTable['0'].length, 1);

  // An alarm assignment rule: ASSIGNED by default, its targets as a plain list.
  await addRule('Tell the assignee', 'ALARM_ASSIGNMENT');
  const all = (await (
    await t.api('/api/notification/rules?pageSize=10&page=0', { token })
  ).json()) as { data: Array<{ name: string; triggerConfig: unknown; recipientsConfig: unknown }> };
  const assignment = all.data.find((r) => r.name === 'Tell the assignee');
  assert.deepEqual(assignment?.triggerConfig, {
    triggerType: 'ALARM_ASSIGNMENT',
    notifyOn: ['ASSIGNED'],
    alarmTypes: null,
  });
  assert.deepEqual(assignment?.recipientsConfig, {
    triggerType: 'ALARM_ASSIGNMENT',
    targets: [rule.recipientsConfig.escalationTable['0'][0]],
  });

  // The unread badge before the alarm; the default rule puts each new alarm in the admin's inbox.
  const badge = page.getByRole('link', { name: /^Notifications, \d+ unread$/ });
  const unread = async () =>
    Number(/(\d+) unread/.exec((await badge.getAttribute('aria-label')) ?? '')?.[1]);
  const before = await unread();
  const pollsBefore = countPolls;

  const { id } = await createDevice(t, 'Press 4');
  await raiseAlarm(t, id, 'Overheat');
  const mailed = await waitFor(
    () => smtp.mails.find((m) => m.to.includes('shift@plant.local')),
    30_000,
    'the alarm mail',
  );
  assert.match(mailed.data, /Subject: Alarm Overheat/);
  assert.match(mailed.data, /Press 4 needs a look/);
  await waitFor(
    async () => (await unread()) === before + 1,
    30_000,
    'the badge to count the alarm',
  );
  assert.equal(countPolls, pollsBefore, 'the count came over the socket, not by polling REST');

  await page.getByRole('tab', { name: 'Delivery log' }).click();
  const row = page.getByRole('table', { name: 'Deliveries' }).locator('tr', {
    hasText: 'shift@plant.local',
  });
  await waitFor(
    async () => {
      await page.getByRole('button', { name: 'Refresh' }).click();
      return (await row.count()) === 1 && (await row.textContent())?.includes('SENT');
    },
    30_000,
    'the SENT delivery',
  );
  await screenshot(page, 'notification-deliveries');

  // Reading the notification in the inbox brings the badge down, again without a reload.
  await page.getByRole('link', { name: /^Notifications, / }).click();
  await page.getByRole('button', { name: 'Mark all read' }).click();
  await waitFor(async () => (await unread()) === 0, 30_000, 'the badge to clear');
});

test('a scheduler event made on the page sets a shared attribute on a subscribed MQTT device', async () => {
  const d = await createDevice(t, 'Chiller 2');
  device = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
  await device.subscribeAsync('v1/devices/me/attributes');
  const got = new Promise<Record<string, unknown>>((resolve) =>
    device?.on('message', (topic, payload) => {
      if (topic === 'v1/devices/me/attributes') resolve(JSON.parse(payload.toString()));
    }),
  );

  await page.getByRole('link', { name: 'Settings' }).click();
  await page.getByRole('tab', { name: 'Scheduler events' }).click();
  await page.getByRole('button', { name: 'Add scheduler event' }).click();
  const dialog = page.getByRole('dialog', { name: 'Add scheduler event' });
  await dialog.getByLabel('Name').fill('Night mode');
  await dialog.getByLabel('Device').selectOption({ label: 'Chiller 2' });
  await dialog.getByLabel('Action').selectOption('SHARED_SCOPE');
  await dialog.getByLabel(/^Body/).fill('{"mode":"night"}');
  await dialog.getByLabel('Schedule by cron expression').check();
  await dialog.getByLabel('Cron expression', { exact: true }).fill('* * * * * *');
  await dialog.getByRole('button', { name: 'Save' }).click();
  const table = page.getByRole('table', { name: 'Scheduler events' });
  await table.getByText('Night mode').waitFor();
  assert.deepEqual(await got, { mode: 'night' });
  await screenshot(page, 'settings-scheduler');

  page.once('dialog', (dlg) => void dlg.accept());
  await table
    .locator('tr', { hasText: 'Night mode' })
    .getByRole('button', { name: 'Delete' })
    .click();
  await page.getByText('No scheduler events.').waitFor();
  const left = (await (
    await t.api('/api/schedulerEvents', { token: await t.adminToken() })
  ).json()) as unknown[];
  assert.equal(left.length, 0);
});

/** Adds a notification rule on the page: the "Alarm mail" template to the "Shift mailbox" target. */
async function addRule(name: string, trigger?: string): Promise<void> {
  await page.getByRole('button', { name: 'Add rule' }).click();
  const dialog = page.getByRole('dialog', { name: 'Add rule' });
  await dialog.getByLabel('Name').fill(name);
  if (trigger) await dialog.getByLabel('Trigger').selectOption(trigger);
  await dialog.getByLabel('Template').selectOption({ label: 'Alarm mail' });
  await dialog
    .getByRole('group', { name: 'Send to', exact: true })
    .getByLabel('Shift mailbox')
    .check();
  await dialog.getByRole('button', { name: 'Save' }).click();
  await page.getByRole('table', { name: 'Notification rules' }).getByText(name).waitFor();
}
