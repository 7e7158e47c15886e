import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import { createDevices, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { raiseAlarm } from './helpers/notify.js';

// Issue 15 item 5, ThingsBoard's dashboard JSON (test/fixtures/ui/press-line-dashboard.json, our
// own fixture): a markdown/HTML card whose elements with an id run `elementClick` actions (mouse and
// keyboard; its script and handlers never run), a value card whose `cardClick` opens a state with
// the clicked card's device in a named state parameter (`stateEntityParamName`) that a
// `stateEntity` alias reads, and an alarms table of a device-type alias that lists only those
// devices' alarms, live.

let t: TestGateway;
let browser: Browser;
let page: Page;
let ids: Record<string, string> = {};

before(async () => {
  t = await startGateway();
  ids = await createDevices(t, [
    ['Press 1', 'press'],
    ['Press 2', 'press'],
    ['Oven 1', 'oven'],
  ]);
  for (const [user, pressure] of [
    ['press-1', 2.5],
    ['press-2', 1.25],
  ] as const) {
    const c = await mqttConnect(t.gw.ports.mqtt, { username: user });
    await c.publishAsync('v1/devices/me/telemetry', JSON.stringify({ pressure }));
    await c.endAsync();
  }
  await raiseAlarm(t, ids['Press 2'], 'Low pressure', {}, 'MAJOR');
  await raiseAlarm(t, ids['Oven 1'], 'Overheat', {}, 'CRITICAL');
  browser = await launchBrowser();
  page = await newPage(browser);
});

after(async () => {
  await browser?.close();
  await t?.close();
});

/** The state stack in the page's URL, decoded as ThingsBoard encodes it. */
function urlState(): Array<{ id: string; params?: Record<string, unknown> }> {
  const raw = new URL(page.url()).searchParams.get('state');
  return raw ? JSON.parse(Buffer.from(raw, 'base64').toString('utf8')) : [];
}

test('elementClick and cardClick open a state with a named parameter; the alarms table shows only the alias devices', async () => {
  const json = await readFile(
    new URL('./fixtures/ui/press-line-dashboard.json', import.meta.url),
    'utf8',
  );
  const res = await t.api('/api/dashboard', {
    token: await t.adminToken(),
    body: JSON.parse(json),
  });
  assert.equal(res.status, 200);
  const id = ((await res.json()) as { id: { id: string } }).id.id;
  await signIn(page, t);
  await page.goto(`${t.baseUrl}/dashboards/${id}`);

  // The HTML card: values filled in, markup kept as far as it is safe, nothing of it run.
  const line = page.getByRole('article', { name: 'Line' });
  await line.getByText('First press: Press 1, 2.5 bar').waitFor();
  assert.equal(await line.getByRole('heading', { name: 'Press line' }).count(), 1);
  assert.equal(await line.locator('script, img').count(), 0, 'no script or image rendered');
  assert.notEqual(await page.title(), 'script ran');
  assert.notEqual(await page.title(), 'handler ran');

  // The alarms table of the Presses alias: Press 2's alarm, not the oven's; a new one arrives live.
  const alarms = page.getByRole('article', { name: 'Press alarms' }).getByRole('table');
  await alarms.getByRole('row', { name: /Low pressure/ }).waitFor();
  await raiseAlarm(t, ids['Press 1'], 'Stuck ram', {}, 'CRITICAL');
  await alarms.getByRole('row', { name: /Stuck ram/ }).waitFor();
  assert.equal(await alarms.getByRole('row', { name: /Overheat/ }).count(), 0, 'oven alarm hidden');
  assert.equal(await alarms.locator('tbody tr').count(), 2);
  // Acknowledged on the page: the subscription sends the changed alarm.
  const stuck = alarms.getByRole('row', { name: /Stuck ram/ });
  await stuck.getByRole('button', { name: 'Acknowledge' }).click();
  await waitFor(
    async () => (await stuck.locator('td.status').textContent()) === 'ACTIVE_ACK',
    30_000,
    'acknowledged',
  );
  await screenshot(page, 'dashboard-actions-root');

  // A custom action on an element is refused: marked disabled, a click changes nothing.
  const script = line.getByRole('button', { name: 'Run a script' });
  assert.equal(await script.getAttribute('aria-disabled'), 'true');
  await script.click({ force: true });
  assert.deepEqual(urlState(), []);

  // The element with the open-press id, from the keyboard: the press state with Press 1 in the
  // named parameter "press"; the alias that reads the state's own entity has none.
  await line.getByRole('button', { name: 'Open the first press' }).focus();
  await page.keyboard.press('Enter');
  const chosen = page.getByRole('article', { name: 'Chosen press' });
  await waitFor(
    async () => (await chosen.locator('.value').textContent()) === '2.5 bar',
    30_000,
    'chosen press is Press 1',
  );
  const top = urlState().at(-1);
  assert.equal(top?.id, 'press');
  assert.deepEqual(top?.params, {
    press: { entityId: { entityType: 'DEVICE', id: ids['Press 1'] }, entityName: 'Press 1' },
    targetEntityParamName: 'press',
  });
  await page.getByText('Press line › Press Press 1').waitFor();
  await page
    .getByRole('article', { name: "State's own entity" })
    .getByText("No entity for this widget's alias.")
    .waitFor();

  // Back, then a click on Press 2's card: the same state with Press 2.
  await page.getByRole('button', { name: 'Back' }).click();
  await page.getByRole('button', { name: /Press 2 · Pressure/ }).click();
  await waitFor(
    async () => (await chosen.locator('.value').textContent()) === '1.25 bar',
    30_000,
    'chosen press is Press 2',
  );
  assert.deepEqual(urlState().at(-1)?.params?.press, {
    entityId: { entityType: 'DEVICE', id: ids['Press 2'] },
    entityName: 'Press 2',
  });
  await screenshot(page, 'dashboard-actions-press');
});
