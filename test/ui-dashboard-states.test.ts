import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { postTelemetry } from './helpers/ws.js';

// Issue 15 item 5, dashboards (our own fixtures in ThingsBoard's format,
// test/fixtures/ui/kiln-*-dashboard.json): the state stack in the URL (`?state=`, base64 JSON as
// ThingsBoard writes it) restored on reload and from a link, the browser's Back and Forward
// walking states; a dashboard filter (`configuration.filters`, key filter temperature > a
// dynamic value from a tenant attribute, default 500) applied to an alias; the widget actions
// openDashboard (another dashboard, in its state with the row's entity) and openURL; a custom
// (JavaScript) action shown but refused.

let t: TestGateway;
let browser: Browser;
let page: Page;
const kilns: Record<string, { id: string; token: string }> = {};
let lineId = '';
let maintenanceId = '';

const fixture = (name: string) =>
  readFile(new URL(`./fixtures/ui/${name}`, import.meta.url), 'utf8');

async function importDashboard(json: string): Promise<string> {
  const res = await t.api('/api/dashboard', {
    token: await t.adminToken(),
    body: JSON.parse(json),
  });
  assert.equal(res.status, 200);
  return ((await res.json()) as { id: { id: string } }).id.id;
}

before(async () => {
  t = await startGateway();
  const token = await t.adminToken();
  for (const [name, temperature] of [
    ['Kiln 1', 620],
    ['Kiln 2', 450],
  ] as const) {
    const accessToken = name.replace(' ', '-').toLowerCase();
    const res = await t.api(`/api/device?accessToken=${accessToken}`, {
      token,
      body: { name, type: 'kiln' },
    });
    assert.equal(res.status, 200);
    kilns[name] = { id: ((await res.json()) as { id: { id: string } }).id.id, token: accessToken };
    await postTelemetry(t, kilns[name].token, { temperature });
  }
  maintenanceId = await importDashboard(await fixture('kiln-maintenance-dashboard.json'));
  lineId = await importDashboard(
    (await fixture('kiln-line-dashboard.json')).replace('__MAINTENANCE_ID__', maintenanceId),
  );
  browser = await launchBrowser();
  page = await newPage(browser);
});

after(async () => {
  await browser?.close();
  await t?.close();
});

/** The state stack in the page's URL, decoded as ThingsBoard encodes it. */
function urlState(): Array<{ id: string; params?: { entityId?: { id: string } } }> {
  const raw = new URL(page.url()).searchParams.get('state');
  return raw ? JSON.parse(Buffer.from(raw, 'base64').toString('utf8')) : [];
}

const rows = (table: string) =>
  page
    .getByRole('table', { name: table })
    .locator('tbody tr')
    .evaluateAll((trs) => trs.map((tr) => tr.querySelector('td')?.textContent?.trim()).sort());

test('dashboard filter with a dynamic value; state in the URL, reload, links, Back/Forward; openDashboard, openURL, custom refused', async () => {
  await signIn(page, t);
  await page.goto(`${t.baseUrl}/dashboards/${lineId}`);
  await page.getByRole('heading', { name: 'Kiln line', level: 1 }).waitFor();

  // The filter (temperature > tenant attribute kilnHotAbove, default 500): Kiln 1 only; Kiln 2
  // heating to 550 joins it live (the gateway re-evaluates the filter on new values).
  await waitFor(async () => (await rows('All kilns')).length === 2, 30_000, 'all kilns');
  await waitFor(async () => (await rows('Hot kilns')).join() === 'Kiln 1', 30_000, 'hot: default');
  await postTelemetry(t, kilns['Kiln 2'].token, { temperature: 550 });
  await waitFor(
    async () => (await rows('Hot kilns')).join() === 'Kiln 1,Kiln 2',
    30_000,
    'Kiln 2 joins the hot ones',
  );
  // The dynamic value: the tenant's kilnHotAbove = 600 replaces the default 500.
  const me = (await (await t.api('/api/auth/user', { token: await t.adminToken() })).json()) as {
    tenantId: { id: string };
  };
  const res = await t.api(
    `/api/plugins/telemetry/TENANT/${me.tenantId.id}/attributes/SERVER_SCOPE`,
    { token: await t.adminToken(), body: { kilnHotAbove: 600 } },
  );
  assert.equal(res.status, 200);
  await page.reload();
  await waitFor(async () => (await rows('All kilns')).length === 2, 30_000, 'all kilns again');
  await waitFor(async () => (await rows('Hot kilns')).join() === 'Kiln 1', 30_000, 'hot: 600');
  await screenshot(page, 'dashboard-filter');

  // A row click opens the kiln's state: the URL carries the stack with the selected entity.
  await page
    .getByRole('table', { name: 'All kilns' })
    .getByRole('button', { name: 'Kiln 2', exact: true })
    .click();
  const card = page
    .getByRole('article', { name: 'Kiln temperature' })
    .locator('.value-card[data-key="temperature"] .value');
  await waitFor(async () => (await card.textContent()) === '550 °C', 30_000, "Kiln 2's card");
  await page
    .getByRole('navigation', { name: 'Dashboard states' })
    .getByText('Kiln line › Kiln 2')
    .waitFor();
  assert.deepEqual(
    urlState().map((s) => [s.id, s.params?.entityId?.id]),
    [
      ['default', undefined],
      ['kiln', kilns['Kiln 2'].id],
    ],
  );

  // A reload opens the same state with the same entity.
  await page.reload();
  await waitFor(async () => (await card.textContent()) === '550 °C', 30_000, 'after the reload');

  // The browser's Back returns to the root state, Forward to the kiln again.
  await page.goBack();
  await page.getByRole('table', { name: 'All kilns' }).waitFor();
  assert.equal(await card.count(), 0);
  await page.goForward();
  await waitFor(async () => (await card.textContent()) === '550 °C', 30_000, 'forward');

  // A link made elsewhere (ThingsBoard's encoding) opens Kiln 1's state directly.
  const link = Buffer.from(
    JSON.stringify([
      { id: 'default', params: {} },
      {
        id: 'kiln',
        params: {
          entityId: { entityType: 'DEVICE', id: kilns['Kiln 1'].id },
          entityName: 'Kiln 1',
        },
      },
    ]),
  ).toString('base64');
  await page.goto(`${t.baseUrl}/dashboards/${lineId}?state=${encodeURIComponent(link)}`);
  await waitFor(async () => (await card.textContent()) === '620 °C', 30_000, 'the linked state');
  await screenshot(page, 'dashboard-state-from-url');

  // updateDashboardState to the root (the card's header button) clears the stack and the URL.
  await page.getByRole('button', { name: 'Overview' }).click();
  await page.getByRole('table', { name: 'All kilns' }).waitFor();
  assert.deepEqual(urlState(), []);

  // The custom action is shown but refused (imported JavaScript is never run).
  const custom = page.getByRole('button', { name: 'Run script' });
  assert.equal(await custom.isDisabled(), true);
  assert.match((await custom.getAttribute('title')) ?? '', /custom JavaScript/);

  // openDashboard: the row's Maintenance button opens the other dashboard in its `log` state
  // with that kiln.
  await page.getByRole('button', { name: 'Maintenance Kiln 1' }).click();
  await page.getByRole('heading', { name: 'Kiln maintenance', level: 1 }).waitFor();
  assert.match(page.url(), new RegExp(`/dashboards/${maintenanceId}\\?state=`));
  await page.getByRole('heading', { name: 'Maintenance of Kiln 1' }).waitFor();
  await page.getByRole('article', { name: 'Log' }).getByText('620 °C').waitFor();
  assert.deepEqual(
    urlState().map((s) => [s.id, s.params?.entityId?.id]),
    [['log', kilns['Kiln 1'].id]],
  );
  await screenshot(page, 'dashboard-open-dashboard');
  await page.goBack();
  await page.getByRole('heading', { name: 'Kiln line', level: 1 }).waitFor();

  // openURL: the header button follows the address (a page of this gateway here).
  await page.getByRole('button', { name: 'Manual' }).click();
  await page.waitForURL(`${t.baseUrl}/alarms`);
  await page.getByRole('heading', { name: 'Alarms' }).waitFor();
});
