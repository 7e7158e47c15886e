import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import { startGateway, type TestGateway } from './helpers/gateway.js';

// The settings and setup pages beyond the basics (issue 15 item 4): retention settings, alarm
// assignment, password reset from the sign-in page, scheduler event editing and the notification
// rules' options, against a real gateway (and a real SMTP server for the reset mail).

let t: TestGateway;
let browser: Browser;
let page: Page;

before(async () => {
  t = await startGateway({ config: { telemetry: { maxPoints: 2_000_000 } } });
  browser = await launchBrowser();
  page = await newPage(browser);
});

after(async () => {
  await browser?.close();
  await t?.close();
});

const adminGet = async <T>(path: string): Promise<T> =>
  (await (await t.api(path, { token: await t.adminToken() })).json()) as T;

test('retention settings: shown with their defaults, saved on the page, applied', async () => {
  await signIn(page, t);
  await page.getByRole('link', { name: 'Settings' }).click();
  await page.getByRole('tab', { name: 'Retention' }).click();
  const form = page.getByRole('form', { name: 'Retention' });
  const points = form.getByLabel(/Telemetry: points kept \(ring buffer\)/);
  assert.equal(await points.inputValue(), '2000000');
  await form.getByText(/default 2,000,000/).waitFor();
  await points.fill('1500000');
  await form.getByLabel(/Telemetry: days kept/).fill('30');
  await form.getByLabel(/Cleared alarms: days kept/).fill('14');
  await form.getByRole('button', { name: 'Save' }).click();
  await form.getByText('Saved', { exact: true }).waitFor();
  const stored = await adminGet<{ jsonValue: Record<string, number> }>(
    '/api/admin/settings/retention',
  );
  assert.equal(stored.jsonValue.telemetryMaxPoints, 1_500_000);
  assert.equal(stored.jsonValue.telemetryTtlDays, 30);
  assert.equal(stored.jsonValue.alarmRetentionDays, 14);
  // Applied without a restart: the age limit now runs on the scheduler host.
  assert.ok(t.gw.services.scheduler.jobs().some((j) => j.key === 'gateway.telemetry-age'));
  await screenshot(page, 'settings-retention');

  // The core's refusal is shown on the page (a bound the field itself does not know).
  await form.getByLabel(/Telemetry: days kept/).fill('0');
  await page.evaluate(() => {
    const input = document.querySelector<HTMLInputElement>('input[name="alarmMaxCount"]');
    if (input) {
      input.removeAttribute('min');
      input.value = '5';
    }
  });
  await form.getByRole('button', { name: 'Save' }).click();
  await form
    .getByRole('alert')
    .getByText(/alarmMaxCount/)
    .waitFor();
});
