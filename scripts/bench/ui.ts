/**
 * Benchmark of issue 15 items 6-7: the web page in Debian's chromium. Usage:
 *   npm run bench:ui [-- --points 100000 --loads 5 --no-build]
 *
 * 1. First render: a fresh browser context (cold cache) opens the gateway on loopback until the
 *    sign-in form is there, `--loads` times; then the same with a warm cache. Prints the wall time
 *    and chromium's first-contentful-paint. Target ≤ 1 s.
 * 2. A chart of `--points` points: they are written over REST (one point a second), the device
 *    page's history chart loads them all (agg NONE); prints the time from *Show* to the drawn
 *    chart, then drags a zoom selection across the chart while counting animation frames
 *    (frames seen, longest gap between frames) and times the redraw of the zoom and of the reset.
 */

import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { launchBrowser, newPage, signIn } from '../../test/helpers/browser.js';
import { createDevice, startGateway } from '../../test/helpers/gateway.js';
import { buildBundle, loadAverage } from './support.js';

const { values: args } = parseArgs({
  options: {
    points: { type: 'string', default: '100000' },
    loads: { type: 'string', default: '5' },
    'no-build': { type: 'boolean', default: false },
  },
});
const POINTS = Number(args.points);
const LOADS = Number(args.loads);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (xs: number[]) =>
  `median ${median(xs).toFixed(0)} ms, max ${Math.max(...xs).toFixed(0)} ms (${xs.map((x) => x.toFixed(0)).join(', ')})`;

if (!args['no-build']) buildBundle();
console.log(`load average before: ${loadAverage()}`);
const t = await startGateway({ config: { logLevel: 'warn' } });
const browser = await launchBrowser();
try {
  // 1. First render.
  const firstPaint = async (page: Page) => {
    const start = performance.now();
    await page.goto(t.baseUrl);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    const wall = performance.now() - start;
    const fcp = await page.evaluate(
      () => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1,
    );
    return { wall, fcp };
  };
  const cold: number[] = [];
  const coldFcp: number[] = [];
  for (let i = 0; i < LOADS; i++) {
    const page = await newPage(browser);
    const r = await firstPaint(page);
    cold.push(r.wall);
    coldFcp.push(r.fcp);
    await page.context().close();
  }
  const warmPage = await newPage(browser);
  await firstPaint(warmPage);
  const warm: number[] = [];
  for (let i = 0; i < LOADS; i++) warm.push((await firstPaint(warmPage)).wall);
  await warmPage.context().close();
  console.log(`first render, cold cache: ${fmt(cold)}; first contentful paint ${fmt(coldFcp)}`);
  console.log(`first render, warm cache: ${fmt(warm)}`);

  // 2. The chart of POINTS points.
  const { id } = await createDevice(t, 'Chart bench');
  const token = await t.adminToken();
  const end = Date.now() - 1000;
  const start = end - (POINTS - 1) * 1000;
  const BATCH = 800;
  for (let i = 0; i < POINTS; i += BATCH) {
    const batch = [];
    for (let j = i; j < Math.min(POINTS, i + BATCH); j++) {
      batch.push({ ts: start + j * 1000, values: { temperature: 20 + 5 * Math.sin(j / 500) } });
    }
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${id}/timeseries/ANY`, {
      token,
      body: batch,
    });
    if (res.status !== 200) throw new Error(`write: ${res.status} ${await res.text()}`);
  }
  const page = await newPage(browser);
  page.setDefaultTimeout(120_000);
  await signIn(page, t);
  await page.goto(`${t.baseUrl}/devices/${id}`);
  await page.getByRole('tab', { name: 'Chart' }).click();
  await page.getByLabel('Time window').selectOption('history');
  const toLocal = (ts: number) => {
    const d = new Date(ts - new Date(ts).getTimezoneOffset() * 60_000);
    return d.toISOString().slice(0, 16);
  };
  await page.getByLabel('From', { exact: true }).fill(toLocal(start - 60_000));
  await page.getByLabel('To', { exact: true }).fill(toLocal(end + 120_000));
  await page.getByLabel('Aggregation').selectOption('NONE');
  const chart = page.locator('.chart');
  const t0 = performance.now();
  await page.getByRole('button', { name: 'Show' }).click();
  await page.waitForFunction(
    (n) => Number(document.querySelector('.chart')?.getAttribute('data-points')) >= n,
    POINTS,
    { timeout: 120_000 },
  );
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(null))));
  const loadMs = performance.now() - t0;

  // Drag a zoom selection over the middle half while counting frames.
  const box = await page.locator('.chart .u-over').boundingBox();
  if (!box) throw new Error('no chart plot area');
  // A string: tsx would wrap a named function in the callback with a helper the page lacks.
  await page.evaluate(`(() => {
    window.__frames = [];
    window.__stop = false;
    const tick = (ts) => {
      window.__frames.push(ts);
      if (!window.__stop) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  })()`);
  const y = box.y + box.height / 2;
  await page.mouse.move(box.x + box.width * 0.25, y);
  await page.mouse.down();
  for (let i = 1; i <= 30; i++)
    await page.mouse.move(box.x + box.width * (0.25 + 0.5 * (i / 30)), y);
  const zoomStart = await page.evaluate(() => performance.now());
  await page.mouse.up();
  const zoomMs = await page.evaluate(
    (since) =>
      new Promise<number>((r) => requestAnimationFrame(() => r(performance.now() - since))),
    zoomStart,
  );
  const frames = await page.evaluate(() => {
    const w = window as unknown as { __frames: number[]; __stop: boolean };
    w.__stop = true;
    const f = w.__frames;
    let gap = 0;
    for (let i = 1; i < f.length; i++) gap = Math.max(gap, f[i] - f[i - 1]);
    return { count: f.length, span: f[f.length - 1] - f[0], gap };
  });
  const resetStart = await page.evaluate(() => performance.now());
  await chart.locator('.u-over').dblclick();
  const resetMs = await page.evaluate(
    (since) =>
      new Promise<number>((r) => requestAnimationFrame(() => r(performance.now() - since))),
    resetStart,
  );
  console.log(
    `chart of ${POINTS} points: loaded and drawn ${loadMs.toFixed(0)} ms after Show; ` +
      `zoom drag: ${frames.count} frames in ${frames.span.toFixed(0)} ms, longest gap ${frames.gap.toFixed(0)} ms; ` +
      `zoom redraw ${zoomMs.toFixed(0)} ms, reset redraw ${resetMs.toFixed(0)} ms`,
  );
  await page.context().close();
} finally {
  await browser.close();
  await t.close();
  console.log(`load average after: ${loadAverage()}`);
}
