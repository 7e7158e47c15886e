import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Locator, Page } from 'playwright-core';
import { launchBrowser, screenshot, signIn } from './helpers/browser.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';

// Issue 15 item 6: panning a uPlot chart. On the device page's realtime chart (last minute),
// Shift+drag, a touch drag and the arrow keys move the shown time range; while it is held the live
// window stops sliding (new data still arrives), and double click, Escape or "Back to live" bring
// the live window back. A plain drag still zooms.

let t: TestGateway;
let browser: Browser;
let page: Page;
let device: { id: string; token: string };

const post = async (values: Array<{ ts: number; values: Record<string, number> }>) => {
  const res = await t.api(`/api/v1/${device.token}/telemetry`, { body: values });
  assert.equal(res.status, 200);
};

before(async () => {
  t = await startGateway();
  device = await createDevice(t, 'Press 1', 'press-1');
  const now = Date.now();
  await post(
    Array.from({ length: 20 }, (_, i) => ({ ts: now - 50_000 + i * 2500, values: { force: i } })),
  );
  browser = await launchBrowser();
  const context = await browser.newContext({
    viewport: { width: 1280, height: 860 },
    hasTouch: true,
  });
  page = await context.newPage();
  page.setDefaultTimeout(30_000);
});

after(async () => {
  await browser?.close();
  await t?.close();
});

/** The shown x range of the chart (ms), from the attributes the chart keeps up to date. */
async function range(chart: Locator): Promise<{ min: number; max: number }> {
  return {
    min: Number(await chart.getAttribute('data-x-min')),
    max: Number(await chart.getAttribute('data-x-max')),
  };
}

const live = async (chart: Locator) => (await chart.getAttribute('data-live')) === 'true';

test('drag, touch and keys pan the chart; live updates stop while panned and resume on reset', async () => {
  await signIn(page, t);
  await page.goto(`${t.baseUrl}/devices/${device.id}`);
  await page.getByRole('tab', { name: 'Chart' }).click();
  const chart = page.locator('.chart');
  await waitFor(
    async () => Number(await chart.getAttribute('data-points')) >= 20,
    30_000,
    'points',
  );
  assert.equal(await live(chart), true);

  // Live: the window follows the clock.
  const first = await range(chart);
  assert.ok(
    Math.abs(first.max - first.min - 60_000) < 5,
    `a one-minute window: ${JSON.stringify(first)}`,
  );
  await waitFor(
    async () => (await range(chart)).max > first.max,
    30_000,
    'the live window to slide',
  );

  // Shift+drag to the right by a quarter of the plot shows earlier data.
  const over = page.locator('.chart .u-over');
  const box = await over.boundingBox();
  assert.ok(box);
  const y = box.y + box.height / 2;
  const before = await range(chart);
  await page.keyboard.down('Shift');
  await page.mouse.move(box.x + box.width / 2, y);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width / 2 + box.width / 4, y, { steps: 8 });
  await page.mouse.up();
  await page.keyboard.up('Shift');
  assert.equal(await live(chart), false, 'held after the pan');
  const panned = await range(chart);
  const span = panned.max - panned.min;
  assert.ok(Math.abs(span - 60_000) < 5, `the pan keeps the span: ${span}`);
  const moved = before.min - panned.min;
  // A quarter of the plot is 15 s; the live window may have slid by up to ~1 s in between.
  assert.ok(moved > 13_000 && moved < 17_000, `moved back ${moved} ms`);
  assert.equal(await page.locator('.u-select').evaluate((el) => el.clientWidth), 0, 'no zoom box');

  // While held, new data arrives but the range stays put.
  const points = Number(await chart.getAttribute('data-points'));
  await post([{ ts: Date.now(), values: { force: 99 } }]);
  await waitFor(
    async () => Number(await chart.getAttribute('data-points')) > points,
    30_000,
    'the new point to arrive',
  );
  await new Promise((r) => setTimeout(r, 1500)); // longer than the 1 s live tick
  assert.deepEqual(await range(chart), panned, 'the held range does not slide');
  await screenshot(page, 'chart-panned');

  // Double click goes back to the live window, which slides again.
  await over.dblclick();
  await waitFor(() => live(chart), 30_000, 'live again');
  const back = await range(chart);
  assert.ok(back.max > panned.max + 10_000, `back at now: ${JSON.stringify(back)}`);
  await waitFor(async () => (await range(chart)).max > back.max, 30_000, 'sliding again');

  // The keyboard: the chart takes focus; ArrowLeft pans back a tenth, + zooms, Escape is live.
  await chart.focus();
  const k0 = await range(chart);
  await page.keyboard.press('ArrowLeft');
  assert.equal(await live(chart), false);
  const k1 = await range(chart);
  assert.ok(Math.abs(k0.min - k1.min - 6000) < 1500, `ArrowLeft moved ${k0.min - k1.min} ms`);
  await page.keyboard.press('+');
  const k2 = await range(chart);
  assert.ok(Math.abs(k2.max - k2.min - 30_000) < 5, `+ halves the span: ${k2.max - k2.min}`);
  await page.keyboard.press('Escape');
  assert.equal(await live(chart), true);

  // A plain drag still zooms (and holds); "Back to live" releases it.
  const z0 = await range(chart);
  await page.mouse.move(box.x + box.width * 0.25, y);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.5, y, { steps: 8 });
  await page.mouse.up();
  assert.equal(await live(chart), false, 'held after the zoom');
  const zoomed = await range(chart);
  assert.ok(
    zoomed.max - zoomed.min < (z0.max - z0.min) / 2,
    `zoomed in: ${JSON.stringify(zoomed)}`,
  );
  await page.getByRole('button', { name: 'Back to live' }).click();
  assert.equal(await live(chart), true);

  // A one-finger touch drag pans too (pointer type "touch", no Shift needed).
  const cdp = await page.context().newCDPSession(page);
  const t0 = await range(chart);
  const x0 = Math.round(box.x + box.width / 2);
  const touch = (type: 'touchStart' | 'touchMove' | 'touchEnd', x: number) =>
    cdp.send('Input.dispatchTouchEvent', {
      type,
      touchPoints: type === 'touchEnd' ? [] : [{ x, y: Math.round(y) }],
    });
  await touch('touchStart', x0);
  for (let i = 1; i <= 8; i++) await touch('touchMove', x0 + Math.round((box.width / 4) * (i / 8)));
  await touch('touchEnd', x0);
  assert.equal(await live(chart), false, 'held after the touch pan');
  const t1 = await range(chart);
  const byTouch = t0.min - t1.min;
  assert.ok(byTouch > 12_000 && byTouch < 17_000, `touch moved back ${byTouch} ms`);
});
