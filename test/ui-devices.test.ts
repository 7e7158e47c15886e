import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import type { MqttClient } from 'mqtt';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect, nextMessage } from './helpers/mqtt.js';
import { selfSignedClient } from './helpers/pki.js';

// The web page against a real gateway and a real MQTT device: sign in, create a device, live
// telemetry and chart, a shared attribute reaching the device, the RPC console, 360 px width.

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
  if (firstDataDir) await rm(firstDataDir, { recursive: true, force: true });
});

/** The first gateway's data directory, reused by the restarted one (removed at the end). */
let firstDataDir: string | undefined;

/** The value cell of `key` in the table labelled `table`. */
const cell = (table: string, key: string) =>
  page.getByRole('table', { name: table }).locator(`tr[data-key="${key}"] td.value`);

test('sign in, create a device, see MQTT telemetry live in the table and the chart', async () => {
  await signIn(page, t);
  await page.getByRole('heading', { name: 'Devices' }).waitFor();
  await screenshot(page, 'devices-empty');

  await page.getByRole('button', { name: 'Add device' }).click();
  const dialog = page.getByRole('dialog', { name: 'Add device' });
  await dialog.getByLabel('Name').fill('Boiler 1');
  await dialog.getByLabel('Access token (empty: generated)').fill('boiler-1-token');
  await dialog.getByRole('button', { name: 'Save' }).click();
  await page.getByRole('heading', { name: 'Boiler 1' }).waitFor();

  device = await mqttConnect(t.gw.ports.mqtt, { username: 'boiler-1-token' });
  await device.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 21.5 }));
  await waitFor(
    async () => (await cell('Latest telemetry', 'temperature').textContent()) === '21.5',
    30_000,
    'the first value',
  );
  await device.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 22.75 }));
  await waitFor(
    async () => (await cell('Latest telemetry', 'temperature').textContent()) === '22.75',
    30_000,
    'the live update',
  );
  await screenshot(page, 'device-latest');

  await page.getByRole('tab', { name: 'Chart' }).click();
  const chart = page.locator('.chart');
  await chart.waitFor();
  const points = async () => Number(await chart.getAttribute('data-points'));
  await waitFor(async () => (await points()) >= 2, 30_000, 'the chart to show both points');
  const before = await points();
  await device.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 23 }));
  await waitFor(async () => (await points()) > before, 30_000, 'the chart to take the new point');
  assert.equal(await page.locator('.u-legend').getByText('temperature').count(), 1);
  await screenshot(page, 'device-chart');
});

test('a shared attribute set on the page reaches the subscribed MQTT device', async () => {
  assert.ok(device);
  await device.subscribeAsync('v1/devices/me/attributes');
  await page.getByRole('tab', { name: 'Attributes' }).click();
  const form = page.getByRole('form', { name: 'Set shared attributes' });
  await form.getByLabel('Key').fill('targetTemperature');
  await form.getByLabel('Value (JSON or text)').fill('24.5');
  const received = nextMessage(device, 'v1/devices/me/attributes', 30_000);
  await form.getByRole('button', { name: 'Save attribute' }).click();
  assert.deepEqual(JSON.parse((await received).payload.toString()), { targetTemperature: 24.5 });
  await waitFor(
    async () => (await cell('Shared attributes', 'targetTemperature').textContent()) === '24.5',
    30_000,
    'the attribute in the table',
  );
  await screenshot(page, 'device-attributes');
});

test('an RPC from the console gets the device reply', async () => {
  assert.ok(device);
  await device.subscribeAsync('v1/devices/me/rpc/request/+');
  device.on('message', (topic, payload) => {
    const m = /^v1\/devices\/me\/rpc\/request\/(\d+)$/.exec(topic);
    if (!m) return;
    const req = JSON.parse(payload.toString()) as { method: string; params: unknown };
    void device?.publishAsync(
      `v1/devices/me/rpc/response/${m[1]}`,
      JSON.stringify({ echo: req.method, params: req.params }),
    );
  });
  await page.getByRole('tab', { name: 'RPC' }).click();
  const form = page.getByRole('form', { name: 'RPC console' });
  await form.getByLabel('Method').fill('getState');
  await form.getByLabel('Params (JSON)').fill('{"valve":2}');
  await form.getByRole('button', { name: 'Send RPC' }).click();
  const result = page.getByRole('list', { name: 'RPC results' }).locator('code').first();
  await result.waitFor();
  assert.deepEqual(JSON.parse((await result.textContent()) ?? ''), {
    echo: 'getState',
    params: { valve: 2 },
  });
  await screenshot(page, 'device-rpc');
});

test('at 360 px the device page fits and its tabs work', async () => {
  const small = await newPage(browser, { width: 360, height: 740 });
  try {
    await signIn(small, t);
    await small.getByRole('link', { name: 'Boiler 1' }).click();
    await small.getByRole('heading', { name: 'Boiler 1' }).waitFor();
    const latest = small
      .getByRole('table', { name: 'Latest telemetry' })
      .locator('tr[data-key="temperature"] td.value');
    // Over the WebSocket a double is text as ThingsBoard prints it ("23.0"), over REST "23".
    await waitFor(
      async () => Number(await latest.textContent()) === 23,
      30_000,
      'the latest value on the small screen',
    );
    const overflow = await small.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(overflow <= 360, `the page is ${overflow} px wide at 360 px`);
    // Keyboard: the tabs move with the arrow keys.
    await small.getByRole('tab', { name: 'Latest telemetry' }).focus();
    await small.keyboard.press('ArrowRight');
    assert.equal(
      await small.getByRole('tab', { name: 'Chart' }).getAttribute('aria-selected'),
      'true',
    );
    const chart = small.locator('.chart');
    await waitFor(
      async () => Number(await chart.getAttribute('data-points')) >= 3,
      30_000,
      'the chart data',
    );
    await screenshot(small, 'device-360px');
  } finally {
    await small.context().close();
  }
});

test('the credentials tab shows and replaces an X.509 certificate', async () => {
  const admin = await t.adminToken();
  const [first, second] = [await selfSignedClient('meter-x1'), await selfSignedClient('meter-x2')];
  const body = (pem: string) => pem.replace(/-----(BEGIN|END) CERTIFICATE-----|\s/g, '');
  const created = await t.api('/api/device', { body: { name: 'Meter X' }, token: admin });
  const id = ((await created.json()) as { id: { id: string } }).id.id;
  const credentials = async () =>
    (await (await t.api(`/api/device/${id}/credentials`, { token: admin })).json()) as {
      credentialsType: string;
      credentialsValue: string;
    };
  const set = await t.api('/api/device/credentials', {
    body: { deviceId: { id }, credentialsType: 'X509_CERTIFICATE', credentialsValue: first.cert },
    token: admin,
  });
  assert.equal(set.status, 200);
  const other = await newPage(browser);
  try {
    await signIn(other, t);
    await other.getByRole('link', { name: 'Meter X' }).click();
    await other.getByRole('heading', { name: 'Meter X' }).waitFor();
    await other.getByRole('tab', { name: 'Credentials' }).click();
    const form = other.getByRole('form', { name: 'Device credentials' });
    const pem = form.getByLabel('Certificate (PEM)');
    await pem.waitFor();
    assert.equal(await form.getByLabel('Credentials type').inputValue(), 'X509_CERTIFICATE');
    assert.equal(body(await pem.inputValue()), body(first.cert));
    await pem.fill(second.cert);
    await form.getByRole('button', { name: 'Save credentials' }).click();
    await waitFor(
      async () => (await credentials()).credentialsValue === body(second.cert),
      30_000,
      'the new certificate saved',
    );
    assert.equal((await credentials()).credentialsType, 'X509_CERTIFICATE');
  } finally {
    await other.context().close();
  }
});

test("the audit tab pages the device's own entries", async () => {
  const admin = await t.adminToken();
  const make = async (name: string) => {
    const res = await t.api('/api/device', { body: { name }, token: admin });
    return ((await res.json()) as { id: { id: string } }).id.id;
  };
  const [pump, other] = [await make('Audited pump'), await make('Other pump')];
  const customer = await t.api('/api/customer', { body: { title: 'Pump owner' }, token: admin });
  const customerId = ((await customer.json()) as { id: { id: string } }).id.id;
  const assign = (id: string) =>
    t.api(`/api/customer/${customerId}/device/${id}`, { method: 'POST', token: admin });
  // 21 entries of the pump (one more than a page), one of the other device.
  for (let i = 0; i < 21; i++) {
    const res =
      i % 2 === 0
        ? await assign(pump)
        : await t.api(`/api/customer/device/${pump}`, { method: 'DELETE', token: admin });
    assert.equal(res.status, 200);
  }
  assert.equal((await assign(other)).status, 200);

  const tab = await newPage(browser);
  try {
    await signIn(tab, t);
    await tab.getByRole('link', { name: 'Audited pump' }).click();
    await tab.getByRole('heading', { name: 'Audited pump' }).waitFor();
    await tab.getByRole('tab', { name: 'Audit' }).click();
    const rows = tab.getByRole('table', { name: 'Audit log' }).locator('tbody tr');
    await waitFor(async () => (await rows.count()) === 20, 30_000, 'the first page of 20');
    assert.equal(await rows.first().locator('td').nth(2).textContent(), 'ASSIGNED_TO_CUSTOMER');
    const pages = tab.getByRole('navigation', { name: 'Pages' });
    await pages.getByRole('button', { name: 'Next' }).click();
    await tab.getByText('Page 2').waitFor();
    await waitFor(async () => (await rows.count()) === 1, 30_000, 'the oldest entry alone');
    assert.equal(await rows.first().locator('td').nth(2).textContent(), 'ASSIGNED_TO_CUSTOMER');
    assert.equal(await pages.getByRole('button', { name: 'Next' }).isDisabled(), true);
    await screenshot(tab, 'device-audit');
  } finally {
    await tab.context().close();
  }
});

test('after a gateway restart the page reconnects its socket and resubscribes by itself', async () => {
  await page.getByRole('tab', { name: 'Latest telemetry' }).click();
  await page.locator('.dot.live').waitFor();
  const ports = { http: t.gw.ports.http, mqtt: t.gw.ports.mqtt };
  firstDataDir = t.dataDir;
  await device?.endAsync();
  device = undefined;
  await t.close(false);
  await page.locator('.dot.live').waitFor({ state: 'detached' });

  t = await startGateway({
    dataDir: firstDataDir,
    config: { http: { port: ports.http }, mqtt: { port: ports.mqtt } },
  });
  await page.locator('.dot.live').waitFor({ timeout: 60_000 });
  device = await mqttConnect(t.gw.ports.mqtt, { username: 'boiler-1-token' });
  await device.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 30.5 }));
  await waitFor(
    async () => (await cell('Latest telemetry', 'temperature').textContent()) === '30.5',
    30_000,
    'the value after the restart, without a reload',
  );
});
