import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { MqttClient } from 'mqtt';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';

// The alarm rule editor and the alarms page against a real gateway: a rule built with forms only,
// triggered by MQTT telemetry, the unread notification badge, then acknowledged and cleared on
// the alarms page.

let t: TestGateway;
let browser: Browser;
let page: Page;
let device: MqttClient | undefined;

before(async () => {
  t = await startGateway();
  browser = await launchBrowser();
  page = await newPage(browser);
});

after(async () => {
  await device?.endAsync();
  await browser?.close();
  await t?.close();
});

interface ProfileJson {
  id: { id: string };
  profileData: { alarms: Array<{ alarmType: string; createRules: Record<string, unknown> }> };
}

test('build an alarm rule in the editor, trigger it over MQTT, acknowledge and clear it', async () => {
  await signIn(page, t);
  await page.getByRole('link', { name: 'Profiles' }).click();
  await page.getByRole('button', { name: 'Add profile' }).click();
  await page.getByRole('dialog', { name: 'Add profile' }).getByLabel('Name').fill('Boilers');
  await page.getByRole('button', { name: 'Create' }).click();
  await page.getByRole('heading', { name: 'Boilers' }).waitFor();

  await page.getByRole('button', { name: 'Add alarm rule' }).click();
  await page.getByLabel('Alarm type').fill('High temperature');
  const filter = page.getByRole('group', { name: 'Key filter 1' });
  await filter.getByLabel('Key', { exact: true }).fill('temperature');
  await filter.getByLabel('Operation').selectOption('GREATER');
  await filter.getByLabel('Threshold', { exact: true }).fill('50');
  await page.getByLabel('Severity').selectOption('MAJOR');
  await page.getByLabel('Alarm details').fill('Boiler too hot');
  await page.getByRole('button', { name: 'Save profile' }).click();
  await page.getByText('Saved', { exact: true }).waitFor();
  await screenshot(page, 'profile-alarm-rule');

  // The editor wrote ThingsBoard's JSON (platform.md §1).
  const token = await t.adminToken();
  const list = (await (
    await t.api('/api/deviceProfiles?pageSize=10&page=0&textSearch=Boilers', { token })
  ).json()) as {
    data: ProfileJson[];
  };
  const profile = list.data[0];
  const alarm = profile.profileData.alarms[0];
  assert.equal(alarm.alarmType, 'High temperature');
  assert.deepEqual(alarm.createRules.MAJOR, {
    condition: {
      condition: [
        {
          key: { type: 'TIME_SERIES', key: 'temperature' },
          valueType: 'NUMERIC',
          value: null,
          predicate: {
            type: 'NUMERIC',
            operation: 'GREATER',
            value: { defaultValue: 50, userValue: null, dynamicValue: null },
          },
        },
      ],
      spec: { type: 'SIMPLE' },
    },
    schedule: null,
    alarmDetails: 'Boiler too hot',
  });

  const res = await t.api('/api/device?accessToken=boiler-7', {
    token,
    body: {
      name: 'Boiler 7',
      deviceProfileId: { entityType: 'DEVICE_PROFILE', id: profile.id.id },
    },
  });
  assert.equal(res.status, 200);
  device = await mqttConnect(t.gw.ports.mqtt, { username: 'boiler-7' });
  await device.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 61 }));

  await page.getByRole('link', { name: 'Alarms' }).click();
  const row = page.locator('tr[data-alarm-type="High temperature"]');
  const status = () => row.locator('td.status').textContent();
  await waitFor(
    async () => (await row.count()) === 1 && (await status()) === 'ACTIVE_UNACK',
    30_000,
    'the alarm',
  );
  assert.equal(await row.locator('.sev').textContent(), 'MAJOR');
  await screenshot(page, 'alarms-active');
  // The gateway's default notification rule tells the tenant admin: the badge counts it, live.
  await page.getByRole('link', { name: /^Notifications, [1-9]\d* unread$/ }).waitFor();

  await row.getByRole('button', { name: 'Acknowledge' }).click();
  await waitFor(async () => (await status()) === 'ACTIVE_ACK', 30_000, 'the acknowledgement');
  await row.getByRole('button', { name: 'Clear' }).click();
  await waitFor(async () => (await status()) === 'CLEARED_ACK', 30_000, 'the clear');

  // The status filter hides the cleared alarm.
  await page.getByRole('group', { name: 'Status' }).getByLabel('ACTIVE', { exact: true }).check();
  await waitFor(async () => (await row.count()) === 0, 30_000, 'the filter');
  await page.getByText('No alarms.').waitFor();
  await screenshot(page, 'alarms-filtered');
});

test('rule chains: the root chain drawn read-only; OTA: upload, assign, progress from fw_state', async () => {
  await page.getByRole('link', { name: 'Rule chains' }).click();
  const root = page
    .getByRole('table', { name: 'Rule chains' })
    .locator('tr', { hasText: 'Root' })
    .getByRole('link');
  await root.click();
  const graph = page.getByRole('img', { name: /^Graph of \d+ rule nodes$/ });
  await graph.waitFor();
  const nodes = Number(/(\d+)/.exec((await graph.getAttribute('aria-label')) ?? '')?.[1]);
  assert.ok(nodes > 0, 'the root chain has nodes');
  assert.equal(await graph.locator('rect').count(), nodes);
  await screenshot(page, 'rule-chain');

  await page.getByRole('link', { name: 'OTA' }).click();
  await page.getByRole('button', { name: 'Upload package' }).click();
  const dialog = page.getByRole('dialog', { name: 'Upload package' });
  await dialog.getByLabel('Title').fill('boiler-fw');
  await dialog.getByLabel('Version').fill('1.1');
  await dialog.locator('select[name="profile"]').selectOption({ label: 'Boilers' });
  await dialog.getByLabel('File', { exact: true }).setInputFiles({
    name: 'boiler-fw-1.1.bin',
    mimeType: 'application/octet-stream',
    buffer: Buffer.alloc(4096, 7),
  });
  await dialog.getByRole('button', { name: 'Upload' }).click();
  const row = page
    .getByRole('table', { name: 'OTA packages' })
    .locator('tr', { hasText: 'boiler-fw' });
  await row.getByText('(4096 B)').waitFor();
  await row.getByRole('button', { name: 'Assign to profile' }).click();
  await row.getByText('Assigned').waitFor();
  await row.getByRole('button', { name: 'Progress' }).click();
  assert.ok(device);
  await device.publishAsync('v1/devices/me/telemetry', JSON.stringify({ fw_state: 'DOWNLOADING' }));
  const state = page
    .getByRole('table', { name: 'Update progress' })
    .locator('tr[data-device="Boiler 7"] td.state');
  await waitFor(async () => (await state.textContent()) === 'DOWNLOADING', 30_000, 'the fw_state');
  await device.publishAsync('v1/devices/me/telemetry', JSON.stringify({ fw_state: 'UPDATED' }));
  await waitFor(async () => (await state.textContent()) === 'UPDATED', 30_000, 'the next fw_state');
  await screenshot(page, 'ota');
});
