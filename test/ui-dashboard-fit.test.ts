import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import { createDevices, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';

// Issue 15 items 5 and 6 on a dashboard (test/fixtures/ui/alias-check-dashboard.json, our own
// fixture): one value card per alias filter type (singleEntity, entityList, entityName,
// entityType) and a bar chart on a deviceType alias; the dashboard time window switched to
// history; a widget configured in edit mode and saved. Then the fit: every input labelled,
// keyboard focus visible, widgets that do not move when live values change, and 360 px without
// sideways scrolling.

let t: TestGateway;
let browser: Browser;
let page: Page;
let dashboardId = '';
let ids: Record<string, string> = {};

/** Sends `pressure` as the device with this access token. */
async function send(token: string, pressure: number): Promise<void> {
  const c = await mqttConnect(t.gw.ports.mqtt, { username: token });
  await c.publishAsync('v1/devices/me/telemetry', JSON.stringify({ pressure }));
  await c.endAsync();
}

before(async () => {
  t = await startGateway();
  ids = await createDevices(t, [
    ['Press 1', 'press'],
    ['Press 2', 'press'],
    ['Oven 1', 'oven'],
  ]);
  const token = await t.adminToken();
  await send('press-1', 2.5);
  await send('press-2', 1.25);
  await send('oven-1', 0.5);
  const json = (
    await readFile(new URL('./fixtures/ui/alias-check-dashboard.json', import.meta.url), 'utf8')
  )
    .replaceAll('${PRESS_1}', ids['Press 1'])
    .replaceAll('${PRESS_2}', ids['Press 2'])
    .replaceAll('${OVEN_1}', ids['Oven 1']);
  const res = await t.api('/api/dashboard', { token, body: JSON.parse(json) });
  assert.equal(res.status, 200);
  dashboardId = ((await res.json()) as { id: { id: string } }).id.id;
  browser = await launchBrowser();
  page = await newPage(browser);
});

after(async () => {
  await browser?.close();
  await t?.close();
});

/** The cards of the widget titled `title`: "label = value" each. */
const cards = (p: Page, title: string) =>
  p
    .getByRole('article', { name: title })
    .locator('.value-card')
    .evaluateAll((els) =>
      els.map(
        (el) =>
          `${el.querySelector('.muted')?.textContent} = ${el.querySelector('.value')?.textContent}`,
      ),
    );

test('aliases of each filter type, a bar chart, the history time window; a widget configured and saved', async () => {
  await signIn(page, t);
  await page.goto(`${t.baseUrl}/dashboards/${dashboardId}`);
  const expect = async (title: string, want: string[]) =>
    waitFor(
      async () => JSON.stringify(await cards(page, title)) === JSON.stringify(want),
      30_000,
      `${title}: ${want.join(', ')}`,
    );
  await expect('Single entity', ['Pressure = 2.5']);
  await expect('Entity list', ['Oven 1 · Pressure = 0.5', 'Press 2 · Pressure = 1.25']);
  await expect('Entity name', ['Press 1 · Pressure = 2.5', 'Press 2 · Pressure = 1.25']);
  await expect('Entity type', [
    'Oven 1 · Pressure = 0.5',
    'Press 1 · Pressure = 2.5',
    'Press 2 · Pressure = 1.25',
  ]);

  // The bar chart of the deviceType alias: live, then an hour of history averaged over REST.
  const bars = page.getByRole('article', { name: 'Pressure bars' });
  assert.equal(await bars.getAttribute('data-kind'), 'bar');
  const points = async () => Number(await bars.locator('.chart').getAttribute('data-points'));
  await send('press-2', 1.5);
  await waitFor(async () => (await points()) >= 1, 30_000, 'a live bar');
  await page.getByLabel('Time window').selectOption({ label: 'History: last hour (average)' });
  await waitFor(async () => (await points()) >= 2, 30_000, 'both presses averaged');
  await screenshot(page, 'dashboard-aliases');

  // Configure an existing widget: its title and key; saved in the JSON.
  await page.getByRole('button', { name: 'Edit' }).click();
  await page
    .getByRole('article', { name: 'Single entity' })
    .getByRole('button', { name: 'Configure' })
    .click();
  const dialog = page.getByRole('dialog', { name: 'Configure widget' });
  await dialog.getByLabel('Title').fill('Press 1 now');
  await dialog.getByLabel('Data keys (comma separated)').fill('pressure, temperature');
  await dialog.getByRole('button', { name: 'Apply' }).click();
  await page.getByRole('article', { name: 'Press 1 now' }).waitFor();
  await page.getByRole('button', { name: 'Save dashboard' }).click();
  await page.getByRole('button', { name: 'Edit' }).waitFor();
  const saved = (await (
    await t.api(`/api/dashboard/${dashboardId}`, { token: await t.adminToken() })
  ).json()) as {
    configuration: {
      widgets: Record<
        string,
        {
          config: {
            title: string;
            datasources: Array<{ entityAliasId: string; dataKeys: Array<{ name: string }> }>;
          };
        }
      >;
    };
  };
  const w = saved.configuration.widgets['b22b6000-0001-4e7f-8081-92b3c4d5e6f1'];
  assert.equal(w.config.title, 'Press 1 now');
  assert.deepEqual(
    w.config.datasources[0].dataKeys.map((k) => k.name),
    ['pressure', 'temperature'],
  );
  assert.equal(w.config.datasources[0].entityAliasId, 'a11a5000-0001-4d6e-8f70-81a2b3c4d5e1');
});

test('fit: inputs labelled, focus visible, no widget moves on live values, 360 px without sideways scroll', async () => {
  await page.goto(`${t.baseUrl}/dashboards/${dashboardId}`);
  await page.getByRole('article', { name: 'Press 1 now' }).waitFor();
  const unlabelled = () =>
    page.locator('input, select, textarea').evaluateAll((els) =>
      els
        .filter((e) => (e as HTMLElement).offsetParent !== null)
        .filter(
          (e) =>
            ((e as HTMLInputElement).labels?.length ?? 0) === 0 &&
            !e.getAttribute('aria-label') &&
            !e.getAttribute('aria-labelledby'),
        )
        .map((e) => e.outerHTML),
    );
  assert.deepEqual(await unlabelled(), [], 'the dashboard page');
  await page.getByRole('button', { name: 'Edit' }).click();
  await page.getByRole('button', { name: 'Add widget' }).click();
  await page.getByRole('dialog', { name: 'Add widget' }).getByLabel('Title').waitFor();
  assert.deepEqual(await unlabelled(), [], 'edit mode and the widget dialog');
  await page.keyboard.press('Escape');
  await page.getByRole('button', { name: 'Cancel' }).click();

  // The keyboard: from the time window, Tab reaches Edit, drawn with a visible outline.
  await page.getByLabel('Time window').focus();
  await page.keyboard.press('Tab');
  const edit = page.getByRole('button', { name: 'Edit' });
  assert.ok(await edit.evaluate((el) => el === document.activeElement), 'Edit has the focus');
  const outline = await edit.evaluate((el) => {
    const s = getComputedStyle(el);
    return { style: s.outlineStyle, width: Number.parseFloat(s.outlineWidth) };
  });
  assert.equal(outline.style, 'solid');
  assert.ok(outline.width >= 2, `outline ${outline.width}px`);

  // Live values of another length leave every widget where it was.
  const boxes = () =>
    page.locator('article.widget').evaluateAll((els) =>
      els.map((el) => {
        const r = el.getBoundingClientRect();
        return [r.x, r.y, r.width, r.height].map(Math.round).join();
      }),
    );
  const before = await boxes();
  await send('press-1', 12345.678);
  await waitFor(
    async () => (await cards(page, 'Entity type')).includes('Press 1 · Pressure = 12345.678'),
    30_000,
    'the new value',
  );
  assert.deepEqual(await boxes(), before);

  // 360 px: one column, nothing wider than the screen.
  const narrow = await newPage(browser, { width: 360, height: 740 });
  try {
    await signIn(narrow, t);
    await narrow.goto(`${t.baseUrl}/dashboards/${dashboardId}`);
    await narrow.getByRole('article', { name: 'Pressure bars' }).locator('.chart').waitFor();
    const fit = await narrow.evaluate(() => ({
      scroll: document.documentElement.scrollWidth,
      width: document.documentElement.clientWidth,
      lefts: Array.from(document.querySelectorAll('article.widget'), (el) =>
        Math.round(el.getBoundingClientRect().x),
      ),
    }));
    assert.ok(fit.scroll <= fit.width, `scrollWidth ${fit.scroll} > ${fit.width}`);
    assert.equal(new Set(fit.lefts).size, 1, `one column: ${fit.lefts.join()}`);
    // The chart's y axis is as wide as "10,000" (uPlot's default 50 px showed "0,000").
    const plotLeft = await narrow
      .getByRole('article', { name: 'Pressure bars' })
      .locator('.u-over')
      .evaluate((el) => Number.parseFloat((el as HTMLElement).style.left));
    assert.ok(plotLeft > 50, `y axis ${plotLeft} px`);
    await screenshot(narrow, 'dashboard-360px');
  } finally {
    await narrow.context().close();
  }
});

test('a switch added in the editor sets a shared attribute that the MQTT device receives', async () => {
  const device = await mqttConnect(t.gw.ports.mqtt, { username: 'press-2' });
  const got: unknown[] = [];
  try {
    await device.subscribeAsync('v1/devices/me/attributes');
    device.on('message', (_topic, payload) => got.push(JSON.parse(payload.toString())));
    await page.goto(`${t.baseUrl}/dashboards/${dashboardId}`);
    await page.getByRole('button', { name: 'Edit' }).click();
    await page.getByRole('button', { name: 'Add widget' }).click();
    const dialog = page.getByRole('dialog', { name: 'Add widget' });
    await dialog.getByLabel('Widget type').selectOption('switch');
    await dialog.getByLabel('Title').fill('Valve');
    await dialog.getByLabel('Entity alias').selectOption('new-device');
    await dialog.locator('select[name="device"]').selectOption({ label: 'Press 2' });
    await dialog.getByLabel('Or set this shared attribute').fill('valveOpen');
    await dialog.getByRole('button', { name: 'Add' }).click();
    await page.getByRole('button', { name: 'Save dashboard' }).click();
    await page.getByRole('button', { name: 'Edit' }).waitFor();
    const valve = page.getByRole('article', { name: 'Valve' });
    await valve.getByRole('switch', { name: 'Valve' }).check();
    await valve.getByText('Done').waitFor();
    await waitFor(
      async () => got.some((m) => (m as { valveOpen?: boolean }).valveOpen === true),
      30_000,
      'the device told valveOpen: true',
    );
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${ids['Press 2']}/values/attributes/SHARED_SCOPE?keys=valveOpen`,
      { token: await t.adminToken() },
    );
    const attrs = (await res.json()) as Array<{ key: string; value: unknown }>;
    assert.deepEqual(
      attrs.map((a) => [a.key, a.value]),
      [['valveOpen', true]],
    );
  } finally {
    await device.endAsync();
  }
});
