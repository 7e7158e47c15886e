import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn, UI_TIMEOUT_MS } from './helpers/browser.js';
import { FakeCloud } from './helpers/cloud.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';

// The Upstream page against a real gateway and a real broker as the cloud: upstream turned on
// from the page (saved over REST, applied without a restart), the status shown live, the
// token never shown.

const CLOUD_TOKEN = 'ui-upstream-cloud-token';

let t: TestGateway;
let cloud: FakeCloud;
let browser: Browser;
let page: Page;

before(async () => {
  cloud = new FakeCloud({ token: CLOUD_TOKEN });
  await cloud.start();
  t = await startGateway();
  browser = await launchBrowser();
  page = await newPage(browser);
});

after(async () => {
  await browser?.close();
  await t?.close();
  await cloud?.stop();
});

test('turn upstream on from the Upstream page; the status follows live; the token is not shown', async () => {
  await signIn(page, t);
  await page.getByRole('link', { name: 'Upstream' }).click();
  const status = page.getByRole('region', { name: 'Upstream status' });
  await status.locator('[data-field="Link"]', { hasText: /^off$/ }).waitFor();

  const form = page.getByRole('form', { name: 'Upstream settings' });
  await form.getByLabel(/Cloud URL/).fill(cloud.url);
  await form.getByLabel(/Access token/).fill(CLOUD_TOKEN);
  await form.getByRole('button', { name: 'Save and reconnect' }).click();
  await form.getByText('Saved; the gateway reconnects').waitFor();

  // Live: the page polls the status; the link comes up without a reload.
  await status
    .locator('[data-field="Link"]', { hasText: /^connected$/ })
    .waitFor({ timeout: UI_TIMEOUT_MS });
  assert.equal(await status.locator('[data-field="Cloud"]').textContent(), cloud.url);
  await waitFor(() => cloud.connects >= 1, 10_000, 'the gateway connected to the cloud');
  await screenshot(page, 'upstream');

  // The token is only "set": not in the form, not in the page.
  await page
    .getByRole('form', { name: 'Upstream settings' })
    .getByText(/Access token \(set/)
    .waitFor();
  assert.equal(await form.getByLabel(/Access token/).inputValue(), '');
  assert.ok(!(await page.content()).includes(CLOUD_TOKEN), 'the token is not in the page');

  // A bad value: the server's message is shown, the settings in effect stay.
  await form.getByText('MQTT basic credentials, TLS and limits').click();
  await form.getByLabel('Publishes in flight').fill('0');
  await form.getByRole('button', { name: 'Save and reconnect' }).click();
  await form.getByRole('alert').filter({ hasText: 'maxInFlight' }).waitFor();
  const res = await t.api('/api/upstream/status', { token: await t.adminToken() });
  assert.equal(((await res.json()) as { connected: boolean }).connected, true);

  // Back to the configuration file (upstream off there): the link goes down, live.
  await page.reload();
  await page.getByRole('button', { name: 'Use the configuration file' }).click();
  await status
    .locator('[data-field="Link"]', { hasText: /^off$/ })
    .waitFor({ timeout: UI_TIMEOUT_MS });
});
