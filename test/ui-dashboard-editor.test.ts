import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';

// Issue 15 item 5, the dashboard editor: its code is a chunk loaded only when Edit is pressed;
// a widget moves by dragging its grip and resizes by dragging its corner (pointer events, whole
// grid cells), and the saved JSON has the layout's row/col/sizeX/sizeY as ThingsBoard keeps them.
// (The keyboard path, the buttons, is in ui-dashboards.test.ts.)

let t: TestGateway;
let browser: Browser;
let page: Page;
let id = '';
const HOT = '7c1e0a52-0d4b-4c35-9a51-1f6a2b7d0002';

/** Imports test/fixtures/ui/`name` over REST; its new id. */
async function importFixture(name: string): Promise<string> {
  const json = await readFile(new URL(`./fixtures/ui/${name}`, import.meta.url), 'utf8');
  const res = await t.api('/api/dashboard', {
    token: await t.adminToken(),
    body: JSON.parse(json),
  });
  assert.equal(res.status, 200);
  return ((await res.json()) as { id: { id: string } }).id.id;
}

before(async () => {
  t = await startGateway();
  id = await importFixture('kiln-line-dashboard.json');
  browser = await launchBrowser();
  // Tall enough that every drag stays inside the window.
  page = await newPage(browser, { width: 1280, height: 1300 });
});

after(async () => {
  await browser?.close();
  await t?.close();
});

test('drag a widget by its grip and resize it by its corner; the saved layout has the new row/col/sizeX/sizeY', async () => {
  const scripts: string[] = [];
  page.on('request', (r) => {
    if (r.resourceType() === 'script') scripts.push(new URL(r.url()).pathname);
  });
  await signIn(page, t);
  await page.goto(`${t.baseUrl}/dashboards/${id}`);
  await page.getByRole('heading', { name: 'Kiln line', level: 1 }).waitFor();
  await page.getByRole('article', { name: 'Hot kilns' }).waitFor();
  assert.ok(
    !scripts.some((s) => s.includes('dashboard-editor')),
    `viewing loads no editor code: ${scripts.join(' ')}`,
  );

  await page.getByRole('button', { name: 'Edit' }).click();
  const hot = page.getByRole('article', { name: 'Hot kilns' });
  const grip = hot.locator('.drag-grip');
  await grip.waitFor();
  assert.ok(
    scripts.some((s) => /\/assets\/dashboard-editor-[A-Z0-9]+\.js$/.test(s)),
    'loaded on Edit',
  );

  const grid = await page.locator('.grid[data-layout="main"]').boundingBox();
  assert.ok(grid);
  const col = (grid.width + 10) / 24;
  const row = 60;
  /** Drags the centre of `handle` by (dx, dy) pixels in small steps. */
  const drag = async (handle: typeof grip, dx: number, dy: number) => {
    const b = await handle.boundingBox();
    assert.ok(b);
    const x = b.x + b.width / 2;
    const y = b.y + b.height / 2;
    await page.mouse.move(x, y);
    await page.mouse.down();
    await page.mouse.move(x + dx, y + dy, { steps: 12 });
    await page.mouse.up();
  };
  const place = async () =>
    hot.evaluate((el) => {
      const s = (el as HTMLElement).style;
      return ['--c', '--r', '--w', '--h'].map((v) => Number(s.getPropertyValue(v)));
    });
  assert.deepEqual(await place(), [13, 1, 12, 6], 'col 12, row 0, 12 x 6 (CSS lines from 1)');

  // Twelve columns left and seven rows down.
  await drag(grip, -12 * col, 7 * row);
  await waitFor(async () => (await place()).join() === '1,8,12,6', 30_000, 'moved to col 0 row 7');
  // The corner: four columns wider, one row taller.
  await drag(hot.locator('.drag-corner'), 4 * col, row);
  await waitFor(async () => (await place()).join() === '1,8,16,7', 30_000, 'resized to 16 x 7');
  // Past the grid's right edge it stops at column 24.
  await drag(grip, 20 * col, 0);
  await waitFor(async () => (await place()).join() === '9,8,16,7', 30_000, 'clamped at col 8');
  await screenshot(page, 'dashboard-drag');

  await page.getByRole('button', { name: 'Save dashboard' }).click();
  await page.getByRole('button', { name: 'Edit' }).waitFor();
  const saved = (await (
    await t.api(`/api/dashboard/${id}`, { token: await t.adminToken() })
  ).json()) as {
    configuration: {
      states: { default: { layouts: { main: { widgets: Record<string, unknown> } } } };
    };
  };
  assert.deepEqual(saved.configuration.states.default.layouts.main.widgets[HOT], {
    sizeX: 16,
    sizeY: 7,
    row: 7,
    col: 8,
  });
});

test('the right layout is arranged too: drag its corner, a button moves it, saved under layouts.right', async () => {
  const pumpId = await importFixture('pump-station-dashboard.json');
  await page.goto(`${t.baseUrl}/dashboards/${pumpId}`);
  await page.getByRole('button', { name: 'Edit' }).click();
  const rightGrid = page.locator('.grid[data-layout="right"]');
  const station = rightGrid.getByRole('article', { name: 'Station' });
  const corner = station.locator('.drag-corner');
  await corner.waitFor();
  const grid = await rightGrid.boundingBox();
  const b = await corner.boundingBox();
  assert.ok(grid && b);
  const col = (grid.width + 10) / 24;
  await page.mouse.move(b.x + b.width / 2, b.y + b.height / 2);
  await page.mouse.down();
  await page.mouse.move(b.x + b.width / 2 - 12 * col, b.y + b.height / 2 + 60, { steps: 12 });
  await page.mouse.up();
  await station.getByRole('button', { name: 'Move right' }).click();
  await page.getByRole('button', { name: 'Save dashboard' }).click();
  await page.getByRole('button', { name: 'Edit' }).waitFor();
  const saved = (await (
    await t.api(`/api/dashboard/${pumpId}`, { token: await t.adminToken() })
  ).json()) as {
    configuration: {
      states: { default: { layouts: Record<string, { widgets: Record<string, unknown> }> } };
    };
  };
  const layouts = saved.configuration.states.default.layouts;
  assert.deepEqual(layouts.right.widgets['c0ffee00-0006-4b2c-8d3e-1f2a3b4c5d06'], {
    sizeX: 12,
    sizeY: 5,
    row: 0,
    col: 1,
  });
  assert.deepEqual(
    layouts.main.widgets['c0ffee00-0001-4b2c-8d3e-1f2a3b4c5d01'],
    { sizeX: 24, sizeY: 5, row: 0, col: 0 },
    'main untouched',
  );
});
