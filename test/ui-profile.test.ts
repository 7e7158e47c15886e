import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';
import { hotterThan, postTelemetry, type Update, WsClient } from './helpers/ws.js';

// The Profile page: a customer user edits their own server attributes (docs/users.md "User
// attributes"), and a live query reading one as `CURRENT_USER` follows the edit at once.

const EMAIL = 'tech@profile.test';
const PASSWORD = 'profile-password';

let t: TestGateway;
let browser: Browser;
let page: Page;
let userId: string;
let token: string;
let customerId: string;

before(async () => {
  t = await startGateway();
  customerId = await createCustomer(t, 'Profile customer');
  userId = await createUser(t, EMAIL, customerId, { firstName: 'Tess', lastName: 'Tech' });
  token = await activateUser(t, userId, PASSWORD);
  browser = await launchBrowser();
  page = await newPage(browser);
});

after(async () => {
  await browser?.close();
  await t?.close();
});

const ids = (u: Update) =>
  (u.data as { data: Array<{ entityId: { id: string } }> }).data.map((e) => e.entityId.id);

async function attrs(): Promise<Record<string, unknown>> {
  const res = await t.api(`/api/plugins/telemetry/USER/${userId}/values/attributes/SERVER_SCOPE`, {
    token,
  });
  assert.equal(res.status, 200);
  const list = (await res.json()) as Array<{ key: string; value: unknown }>;
  return Object.fromEntries(list.map((a) => [a.key, a.value]));
}

test('a customer user sets, edits and deletes their own attributes on the Profile page', async () => {
  const admin = await t.adminToken();
  const kiln = await createDevice(t, 'profile-kiln');
  const assign = await t.api(`/api/customer/${customerId}/device/${kiln.id}`, {
    method: 'POST',
    token: admin,
  });
  assert.equal(assign.status, 200);
  await postTelemetry(t, kiln.token, { temperature: 520 });
  // The user's dashboard filter: kilns hotter than the user's own `hotAbove` (default 600).
  const ws = await WsClient.open(t, '/api/ws', token);
  try {
    ws.send({
      cmds: [
        {
          type: 'ENTITY_DATA',
          cmdId: 1,
          query: {
            entityFilter: {
              type: 'singleEntity',
              singleEntity: { entityType: 'DEVICE', id: kiln.id },
            },
            pageLink: { pageSize: 10, page: 0 },
            keyFilters: [
              hotterThan(600, { sourceType: 'CURRENT_USER', sourceAttribute: 'hotAbove' }),
            ],
          },
        },
      ],
    });
    const page1 = (u: Update) => u.cmdId === 1 && u.data != null;
    assert.deepEqual(ids(await ws.next(page1)), []);

    await signIn(page, t, EMAIL, PASSWORD);
    await page.getByRole('link', { name: 'Profile', exact: true }).click();
    await page.getByRole('heading', { name: 'Profile', exact: true }).waitFor();
    await page.getByText('Tess Tech').waitFor();
    await page.getByText('Customer user').waitFor();
    const table = page.getByRole('table', { name: 'My attributes' });
    const form = page.getByRole('form', { name: 'Set my attribute' });
    await form.getByLabel('Key').fill('hotAbove');
    await form.getByLabel(/Value/).fill('500');
    await form.getByRole('button', { name: 'Save attribute' }).click();
    await table.locator('tr[data-key="hotAbove"] td.value', { hasText: /^500$/ }).waitFor();
    assert.deepEqual(await attrs(), { hotAbove: 500 }, 'saved as a number');
    // The live query follows the new threshold at once: 520 > 500.
    assert.deepEqual(ids(await ws.next(page1)), [kiln.id]);

    await form.getByLabel('Key').fill('shift');
    await form.getByLabel(/Value/).fill('night');
    await form.getByRole('button', { name: 'Save attribute' }).click();
    await table.locator('tr[data-key="shift"] td.value', { hasText: /^night$/ }).waitFor();
    await screenshot(page, 'profile-attributes');

    // Edit fills the form; saving overwrites the value.
    await table.getByRole('button', { name: 'Edit hotAbove' }).click();
    assert.equal(await form.getByLabel('Key').inputValue(), 'hotAbove');
    assert.equal(await form.getByLabel(/Value/).inputValue(), '500');
    await form.getByLabel(/Value/).fill('550');
    await form.getByRole('button', { name: 'Save attribute' }).click();
    await table.locator('tr[data-key="hotAbove"] td.value', { hasText: /^550$/ }).waitFor();
    assert.deepEqual(ids(await ws.next(page1)), [], '520 is not above 550');

    await table.getByRole('button', { name: 'Delete shift' }).click();
    await table.locator('tr[data-key="shift"]').waitFor({ state: 'detached' });
    assert.deepEqual(await attrs(), { hotAbove: 550 });

    // The table follows the user's attributes live: a change made elsewhere (the tenant admin over
    // REST) shows without a reload, and so does a delete.
    const byAdmin = await t.api(`/api/plugins/telemetry/USER/${userId}/attributes/SERVER_SCOPE`, {
      token: admin,
      body: { hotAbove: 580, badge: 'B-7' },
    });
    assert.equal(byAdmin.status, 200);
    await table.locator('tr[data-key="hotAbove"] td.value', { hasText: /^580$/ }).waitFor();
    await table.locator('tr[data-key="badge"] td.value', { hasText: /^B-7$/ }).waitFor();
    const removed = await t.api(`/api/plugins/telemetry/USER/${userId}/SERVER_SCOPE?keys=badge`, {
      method: 'DELETE',
      token: admin,
    });
    assert.equal(removed.status, 200);
    await table.locator('tr[data-key="badge"]').waitFor({ state: 'detached' });

    // At 360 px the Profile link is still in the header.
    await page.setViewportSize({ width: 360, height: 740 });
    await page.getByRole('link', { name: 'Profile', exact: true }).waitFor();
    const sideways = await page.evaluate(
      () => document.documentElement.scrollWidth > document.documentElement.clientWidth,
    );
    assert.equal(sideways, false, 'no sideways scroll at 360 px');
    await screenshot(page, 'profile-attributes-360');
  } finally {
    ws.close();
  }
});
