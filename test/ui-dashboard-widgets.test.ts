import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import type { MqttClient } from 'mqtt';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { raiseAlarm } from './helpers/notify.js';

// A dashboard with two states (test/fixtures/ui/pump-station-dashboard.json, ThingsBoard's
// format): the root state's entities table live, its alarms table, a card in the `right` layout, a row
// click (widget action openDashboardState) opening the pump's state with that pump as its state
// entity, where a switch and a button send RPCs the MQTT device answers, and a header button
// (updateDashboardState) going back.

let t: TestGateway;
let browser: Browser;
let page: Page;
let pump: MqttClient | undefined;
const rpcs: Array<{ method: string; params: unknown }> = [];
const ids: Record<string, string> = {};

before(async () => {
  t = await startGateway();
  const token = await t.adminToken();
  for (const name of ['Pump 1', 'Pump 2']) {
    const q = `?accessToken=${name.replace(' ', '-').toLowerCase()}`;
    const res = await t.api(`/api/device${q}`, { token, body: { name, type: 'pump' } });
    assert.equal(res.status, 200);
    ids[name] = ((await res.json()) as { id: { id: string } }).id.id;
  }
  pump = await mqttConnect(t.gw.ports.mqtt, { username: 'pump-1' });
  await pump.subscribeAsync('v1/devices/me/rpc/request/+');
  pump.on('message', (topic, payload) => {
    const id = /rpc\/request\/(\d+)$/.exec(topic)?.[1];
    if (!id) return;
    const body = JSON.parse(payload.toString()) as { method: string; params: unknown };
    rpcs.push(body);
    void pump?.publishAsync(`v1/devices/me/rpc/response/${id}`, JSON.stringify({ ok: true }));
  });
  await pump.publishAsync('v1/devices/me/telemetry', JSON.stringify({ pressure: 2.5 }));
  const other = await mqttConnect(t.gw.ports.mqtt, { username: 'pump-2' });
  await other.publishAsync('v1/devices/me/telemetry', JSON.stringify({ pressure: 1.25 }));
  await other.endAsync();
  await raiseAlarm(t, ids['Pump 2'], 'Low pressure', {}, 'MAJOR');
  browser = await launchBrowser();
  page = await newPage(browser);
});

after(async () => {
  await pump?.endAsync();
  await browser?.close();
  await t?.close();
});

test('entities table live, alarms table, a right layout, a row opens the pump state; switch and button send RPCs', async () => {
  await signIn(page, t);
  await page.getByRole('link', { name: 'Dashboards' }).click();
  await page.getByRole('button', { name: 'Import dashboard' }).click();
  const json = await readFile(
    new URL('./fixtures/ui/pump-station-dashboard.json', import.meta.url),
    'utf8',
  );
  await page.getByLabel('Or paste the JSON').fill(json);
  await page.getByRole('button', { name: 'Import', exact: true }).click();
  await page.getByRole('heading', { name: 'Pump station', level: 1 }).waitFor();

  // The entities table: one row per pump with its latest pressure, updated live.
  const table = page.getByRole('table', { name: 'Pumps' });
  const cell = (name: string) => table.locator('tr', { hasText: name }).locator('td.value');
  await waitFor(async () => (await cell('Pump 2').textContent()) === '1.25', 30_000, 'pump 2');
  await waitFor(async () => (await cell('Pump 1').textContent()) === '2.5', 30_000, 'pump 1');
  assert.ok(pump);
  await pump.publishAsync('v1/devices/me/telemetry', JSON.stringify({ pressure: 3.75 }));
  await waitFor(async () => (await cell('Pump 1').textContent()) === '3.75', 30_000, 'live value');

  // The alarms table lists the pump's alarm; the `right` layout holds the station card.
  await page
    .getByRole('article', { name: 'Pump alarms' })
    .locator('tr[data-alarm-type="Low pressure"]')
    .waitFor();
  const right = page.locator('.grid[data-layout="right"]');
  await right.getByRole('article', { name: 'Station' }).getByText('3.8').waitFor();
  await screenshot(page, 'dashboard-states-root');

  // A row click is the widget's openDashboardState action: the pump's own state.
  await table.getByRole('button', { name: 'Pump 1' }).click();
  await page
    .getByRole('navigation', { name: 'Dashboard states' })
    .getByText('Pump station › Pump')
    .waitFor();
  assert.equal(await table.count(), 0, 'the root state is left');
  const card = page
    .getByRole('article', { name: 'Selected pressure' })
    .locator('.value-card[data-key="pressure"] .value');
  await waitFor(async () => (await card.textContent()) === '3.8 bar', 30_000, 'the state entity');

  await page.getByRole('switch', { name: 'Motor' }).check();
  await waitFor(() => rpcs.find((r) => r.method === 'setMotor'), 30_000, 'the switch RPC');
  assert.deepEqual(rpcs.find((r) => r.method === 'setMotor')?.params, true);
  await page.getByRole('article', { name: 'Motor' }).getByText('Done').waitFor();
  await page.getByRole('button', { name: 'Flush now' }).click();
  await waitFor(() => rpcs.find((r) => r.method === 'flush'), 30_000, 'the button RPC');
  assert.deepEqual(rpcs.find((r) => r.method === 'flush')?.params, { seconds: 5 });
  await page.getByRole('article', { name: 'Flush' }).getByText('Done').waitFor();
  await screenshot(page, 'dashboard-states-pump');

  // The card's header button (updateDashboardState to the root) goes back.
  await page.getByRole('button', { name: 'Overview' }).click();
  await table.waitFor();
  assert.equal(await page.getByRole('navigation', { name: 'Dashboard states' }).count(), 0);
});
