import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';

// The scheduler form's live next-run preview and the notification rule editor (issue 15 item 4),
// against a real gateway.

let t: TestGateway;
let browser: Browser;
let page: Page;

before(async () => {
  t = await startGateway();
  browser = await launchBrowser();
  page = await newPage(browser);
  await signIn(page, t);
});

after(async () => {
  await browser?.close();
  await t?.close();
});

const adminGet = async <T>(path: string): Promise<T> =>
  (await (await t.api(path, { token: await t.adminToken() })).json()) as T;

const adminPost = async <T>(path: string, body: unknown): Promise<T> => {
  const res = await t.api(path, { token: await t.adminToken(), body });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as T;
};

test('scheduler form: the next runs of the unsaved schedule, live as it is typed, in its time zone', async () => {
  const jobKeys = async () =>
    (await adminGet<{ jobs: Array<{ key: string }> }>('/api/scheduler/jobs')).jobs.map(
      (j) => j.key,
    );
  const jobsBefore = await jobKeys();
  await page.goto(`${t.baseUrl}/settings`);
  await page.getByRole('tab', { name: 'Scheduler events' }).click();
  await page.getByRole('button', { name: 'Add scheduler event' }).click();
  const dialog = page.getByRole('dialog', { name: 'Add scheduler event' });
  const runs = dialog.getByRole('list', { name: 'Next runs' }).getByRole('listitem');
  /** The preview's runs (ms), once they are what the gateway says for `schedule`. */
  const shows = async (schedule: Record<string, unknown>) => {
    const expected = await adminPost<{ runs: number[] }>('/api/scheduler/nextRuns', {
      schedule,
      count: 5,
    });
    assert.equal(expected.runs.length, 5);
    await waitFor(
      async () =>
        JSON.stringify(await runs.evaluateAll((li) => li.map((l) => Number(l.dataset.ts)))) ===
        JSON.stringify(expected.runs),
      30_000,
      `the preview of ${JSON.stringify(schedule)}`,
    );
    return expected.runs;
  };

  await dialog.getByLabel('Time zone').fill('Asia/Tokyo');
  await dialog.getByLabel('Schedule by cron expression').check();
  const cron = dialog.getByLabel('Cron expression', { exact: true });
  await cron.fill('0 30 6 * * 1-5');
  const weekdays = await shows({ cron: '0 30 6 * * 1-5', timezone: 'Asia/Tokyo' });
  // Shown in the schedule's zone: 06:30 on weekdays.
  await dialog.getByText('Next runs (Asia/Tokyo)').waitFor();
  for (const text of await runs.allTextContents()) {
    assert.match(text, /06:30:00/);
    assert.doesNotMatch(text, /Sat|Sun/);
  }
  // Typing on: a new expression, a new preview.
  await cron.fill('0 0 */6 * * *');
  const sixHourly = await shows({ cron: '0 0 */6 * * *', timezone: 'Asia/Tokyo' });
  assert.equal(sixHourly[1] - sixHourly[0], 6 * 3_600_000);
  assert.notDeepEqual(sixHourly, weekdays);
  await runs.last().scrollIntoViewIfNeeded();
  await screenshot(page, 'settings-scheduler-preview');
  // A bad expression: the gateway's reason, no list.
  await cron.fill('0 0 25 * * *');
  await dialog.getByText(/Invalid cron expression: 0 0 25/).waitFor();
  assert.equal(await runs.count(), 0);

  // The repeat shape: every Monday at 09:00 in Berlin from a start in March 2027.
  await dialog.getByLabel('Schedule by cron expression').uncheck();
  await dialog.getByLabel('Time zone').fill('Europe/Berlin');
  await dialog.getByLabel('Start').fill('2027-03-01T09:00');
  await dialog.getByLabel('Repeat').selectOption('WEEKLY');
  await dialog.getByRole('group', { name: 'Days' }).getByLabel('Mon').check();
  const mondays = await shows({
    timezone: 'Europe/Berlin',
    startTime: Date.UTC(2027, 2, 1, 8, 0),
    repeat: { type: 'WEEKLY', repeatOn: [1], endsOn: 0 },
  });
  // Across the DST change of 2027-03-28 the wall time stays 09:00: 08:00 UTC, then 07:00 UTC.
  assert.deepEqual(
    mondays.map((r) => new Date(r).toISOString()),
    [
      '2027-03-01T08:00:00.000Z',
      '2027-03-08T08:00:00.000Z',
      '2027-03-15T08:00:00.000Z',
      '2027-03-22T08:00:00.000Z',
      '2027-03-29T07:00:00.000Z',
    ],
  );
  await runs.last().scrollIntoViewIfNeeded();
  await screenshot(page, 'settings-scheduler-preview-weekly');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  // Nothing was saved or armed by the preview.
  assert.deepEqual(await adminGet<unknown[]>('/api/schedulerEvents'), []);
  assert.deepEqual(await jobKeys(), jobsBefore);
});
