import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import type { MqttClient } from 'mqtt';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';

// Dashboards and customers against a real gateway: import a ThingsBoard dashboard export and see
// its chart and card live; create a customer user, follow the activation link, set the password,
// land signed in, and see only the customer's device and the shared dashboard, read-only.

let t: TestGateway;
let browser: Browser;
let page: Page;
let device: MqttClient | undefined;

before(async () => {
  t = await startGateway();
  browser = await launchBrowser();
  page = await newPage(browser);
  const token = await t.adminToken();
  const profile = await t.api('/api/deviceProfile', {
    token,
    body: { name: 'thermostat', type: 'DEFAULT', profileData: { alarms: [] } },
  });
  assert.equal(profile.status, 200);
  const profileId = ((await profile.json()) as { id: { id: string } }).id.id;
  for (const [name, type] of [
    ['Thermostat A', profileId],
    ['Pump B', undefined],
  ] as const) {
    const res = await t.api(`/api/device?accessToken=${name.replace(' ', '-')}`, {
      token,
      body: {
        name,
        ...(type ? { deviceProfileId: { entityType: 'DEVICE_PROFILE', id: type } } : {}),
      },
    });
    assert.equal(res.status, 200);
  }
  device = await mqttConnect(t.gw.ports.mqtt, { username: 'Thermostat-A' });
});

after(async () => {
  await device?.endAsync();
  await browser?.close();
  await t?.close();
});

const card = (p: Page) =>
  p.getByRole('article', { name: 'Now' }).locator('.value-card[data-key="temperature"] .value');

test('import a ThingsBoard dashboard export and see its chart and card live', async () => {
  await signIn(page, t);
  await page.getByRole('link', { name: 'Dashboards' }).click();
  await page.getByRole('button', { name: 'Import dashboard' }).click();
  const json = await readFile(
    new URL('./fixtures/ui/thermostats-dashboard.json', import.meta.url),
    'utf8',
  );
  await page.getByLabel('Or paste the JSON').fill(json);
  await page.getByRole('button', { name: 'Import', exact: true }).click();
  await page.getByRole('heading', { name: 'Thermostats', level: 1 }).waitFor();

  // The old-style chart (bundleAlias + typeAlias) and the value card render; the map is named.
  const chart = page.getByRole('article', { name: 'Temperature history' }).locator('.chart');
  await chart.waitFor();
  assert.match(
    (await page.getByRole('article', { name: 'Where' }).textContent()) ?? '',
    /system\.maps\.openstreetmap/,
  );
  assert.ok(device);
  await device.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 19.25 }));
  await waitFor(
    async () => (await card(page).textContent()) === '19.3 °C',
    30_000,
    'the card value',
  );
  await device.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 20 }));
  await waitFor(
    async () => (await card(page).textContent()) === '20.0 °C',
    30_000,
    'the live card',
  );
  await waitFor(
    async () => Number(await chart.getAttribute('data-points')) >= 2,
    30_000,
    'the chart',
  );
  await screenshot(page, 'dashboard-imported');
});

test('a customer user activates, signs in and sees only its device and the shared dashboard read-only', async () => {
  await page.getByRole('link', { name: 'Customers' }).click();
  await page.getByRole('button', { name: 'Add customer' }).click();
  await page.getByRole('dialog', { name: 'Add customer' }).getByLabel('Title').fill('Acme');
  await page.getByRole('button', { name: 'Create' }).click();
  await page.getByRole('link', { name: 'Acme' }).click();
  await page.getByRole('heading', { name: 'Acme' }).waitFor();

  const assignDevice = page.getByRole('form', { name: 'Assign device' });
  await assignDevice.getByLabel('Device').selectOption({ label: 'Thermostat A' });
  await assignDevice.getByRole('button', { name: 'Assign device' }).click();
  await page
    .getByRole('table', { name: 'Customer devices' })
    .getByRole('link', { name: 'Thermostat A' })
    .waitFor();
  const assignDash = page.getByRole('form', { name: 'Assign dashboard' });
  await assignDash.getByLabel('Dashboard').selectOption({ label: 'Thermostats' });
  await assignDash.getByRole('button', { name: 'Assign dashboard' }).click();
  await page.getByRole('link', { name: 'Thermostats' }).waitFor();

  const addUser = page.getByRole('form', { name: 'Add customer user' });
  await addUser.getByLabel('User email').fill('tech@acme.test');
  await addUser.getByRole('button', { name: 'Add user' }).click();
  const link = await page.locator('a.activation-link').getAttribute('href');
  assert.ok(link, 'an activation link');
  assert.match(link, /\/api\/noauth\/activate\?activateToken=/);
  await screenshot(page, 'customer');

  // The technician's own browser: the link, a password, signed in.
  const tech = await newPage(browser, { width: 390, height: 800 });
  try {
    await tech.goto(link);
    await tech.getByLabel('Password', { exact: true }).fill('tech-password-1');
    await tech.getByLabel('Repeat password').fill('tech-password-1');
    await tech.getByRole('button', { name: 'Save' }).click();
    await tech.getByRole('navigation', { name: 'Main' }).waitFor();
    await tech.getByRole('link', { name: 'Thermostat A' }).waitFor();
    assert.equal(await tech.getByRole('link', { name: 'Pump B' }).count(), 0);
    assert.equal(await tech.getByRole('link', { name: 'Customers' }).count(), 0);
    await screenshot(tech, 'customer-user-devices');

    await tech.getByRole('link', { name: 'Dashboards' }).click();
    await tech.getByRole('link', { name: 'Thermostats' }).click();
    await tech.getByText('Read-only').waitFor();
    assert.equal(await tech.getByRole('button', { name: 'Edit' }).count(), 0);
    assert.ok(device);
    await device.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 21 }));
    await waitFor(
      async () => (await card(tech).textContent()) === '21.0 °C',
      30_000,
      'the live card for the customer',
    );
    await screenshot(tech, 'customer-user-dashboard');
  } finally {
    await tech.context().close();
  }
});

test('edit mode: add a latest-value widget bound to a key, move it, save it', async () => {
  await page.getByRole('link', { name: 'Dashboards' }).click();
  await page.getByRole('link', { name: 'Thermostats' }).click();
  await page.getByRole('button', { name: 'Edit' }).click();
  await page.getByRole('button', { name: 'Add widget' }).click();
  const dialog = page.getByRole('dialog', { name: 'Add widget' });
  await dialog.getByLabel('Widget type').selectOption('gauge');
  await dialog.getByLabel('Title').fill('Gauge A');
  await dialog.getByLabel('Entity alias').selectOption('new-device');
  await dialog.locator('select[name="device"]').selectOption({ label: 'Thermostat A' });
  await dialog.getByLabel('Data keys (comma separated)').fill('temperature');
  await dialog.getByRole('button', { name: 'Add' }).click();
  const gauge = page.getByRole('article', { name: 'Gauge A' });
  await gauge.getByRole('meter').waitFor();
  await gauge.getByRole('button', { name: 'Move right' }).click();
  await gauge.getByRole('button', { name: 'Wider' }).click();
  await page.getByRole('button', { name: 'Save dashboard' }).click();
  await page.getByRole('button', { name: 'Edit' }).waitFor();
  await screenshot(page, 'dashboard-edited');

  const list = (await (
    await t.api('/api/tenant/dashboards?pageSize=10&page=0', { token: await t.adminToken() })
  ).json()) as {
    data: Array<{ id: { id: string } }>;
  };
  const saved = (await (
    await t.api(`/api/dashboard/${list.data[0].id.id}`, { token: await t.adminToken() })
  ).json()) as {
    configuration: {
      widgets: Record<string, { typeFullFqn?: string; config: { title: string } }>;
      states: {
        default: { layouts: { main: { widgets: Record<string, { col: number; sizeX: number }> } } };
      };
    };
  };
  const [id, widget] =
    Object.entries(saved.configuration.widgets).find(([, w]) => w.config.title === 'Gauge A') ?? [];
  assert.ok(id && widget);
  assert.match(widget.typeFullFqn ?? '', /gauge/);
  assert.deepEqual(
    {
      col: saved.configuration.states.default.layouts.main.widgets[id].col,
      sizeX: saved.configuration.states.default.layouts.main.widgets[id].sizeX,
    },
    { col: 1, sizeX: 9 },
  );
});

test('a device group shared read-only with the customer lets its user read the device', async () => {
  await page.getByRole('link', { name: 'Groups' }).click();
  const add = page.getByRole('form', { name: 'Add group' });
  await add.getByLabel('Group name').fill('Pumps');
  await add.getByRole('button', { name: 'Add group' }).click();
  await page.getByRole('button', { name: 'Pumps' }).click();
  const members = page.getByRole('table', { name: 'Group members' });
  const pumpRow = members.locator('tr', { hasText: 'Pump B' });
  await pumpRow.getByRole('checkbox').click();
  await waitFor(async () => await pumpRow.getByRole('checkbox').isChecked(), 30_000, 'the member');
  const share = page.getByRole('form', { name: 'Share group' });
  await share.getByLabel('Share with customer').selectOption({ label: 'Acme' });
  await share.getByRole('button', { name: 'Share' }).click();
  await share.getByText('Shared read-only').waitFor();
  await screenshot(page, 'groups');

  const login = await t.api('/api/auth/login', {
    body: { username: 'tech@acme.test', password: 'tech-password-1' },
  });
  const techToken = ((await login.json()) as { token: string }).token;
  const pump = (await (
    await t.api('/api/tenant/devices?deviceName=Pump%20B', { token: await t.adminToken() })
  ).json()) as {
    id: { id: string };
  };
  assert.equal((await t.api(`/api/device/${pump.id.id}`, { token: techToken })).status, 200);
});
