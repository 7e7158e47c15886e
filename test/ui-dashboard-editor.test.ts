import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import type { Browser, Locator, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn } from './helpers/browser.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';

// Issue 15 item 5, the dashboard editor: its code is a chunk loaded only when Edit is pressed;
// a widget moves by dragging its grip and resizes by dragging its corner (pointer events, whole
// grid cells), and the saved JSON has the layout's row/col/sizeX/sizeY as ThingsBoard keeps them.
// Widgets never overlap: a widget moved or resized onto others pushes them down, as the third
// test checks in the saved JSON. (The keyboard path, the buttons, is in ui-dashboards.test.ts.)

let t: TestGateway;
let browser: Browser;
let page: Page;
let id = '';
const ALL = '7c1e0a52-0d4b-4c35-9a51-1f6a2b7d0001';
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

/** Drags the centre of `handle` by (dx, dy) pixels in small steps. */
async function drag(handle: Locator, dx: number, dy: number): Promise<void> {
  const b = await handle.boundingBox();
  assert.ok(b);
  const x = b.x + b.width / 2;
  const y = b.y + b.height / 2;
  await page.mouse.move(x, y);
  await page.mouse.down();
  await page.mouse.move(x + dx, y + dy, { steps: 12 });
  await page.mouse.up();
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

interface Place {
  sizeX: number;
  sizeY: number;
  row: number;
  col: number;
}

/** The saved places of the root state's main layout, read over REST. */
async function savedMain(dashboardId: string): Promise<Record<string, Place>> {
  const res = await t.api(`/api/dashboard/${dashboardId}`, { token: await t.adminToken() });
  const d = (await res.json()) as {
    configuration: {
      states: { default: { layouts: { main: { widgets: Record<string, Place> } } } };
    };
  };
  return d.configuration.states.default.layouts.main.widgets;
}

test('a widget dragged or resized onto another pushes it down; a button move too; saved without overlaps', async () => {
  const kilnId = await importFixture('kiln-line-dashboard.json');
  await page.goto(`${t.baseUrl}/dashboards/${kilnId}`);
  await page.getByRole('button', { name: 'Edit' }).click();
  const hot = page.getByRole('article', { name: 'Hot kilns' });
  const all = page.getByRole('article', { name: 'All kilns' });
  await hot.locator('.drag-grip').waitFor();
  const grid = await page.locator('.grid[data-layout="main"]').boundingBox();
  assert.ok(grid);
  const col = (grid.width + 10) / 24;
  const place = (w: typeof hot) =>
    w.evaluate((el) => {
      const s = (el as HTMLElement).style;
      return ['--c', '--r', '--w', '--h'].map((v) => s.getPropertyValue(v)).join();
    });
  // Hot kilns (col 12) onto All kilns (col 0, rows 0-5): All kilns goes below it.
  await drag(hot.locator('.drag-grip'), -12 * col, 0);
  await waitFor(async () => (await place(hot)) === '1,1,12,6', 30_000, 'hot moved to col 0');
  await waitFor(async () => (await place(all)) === '1,7,12,6', 30_000, 'all kilns pushed to row 6');
  // Two rows taller: All kilns goes down with its bottom edge.
  await drag(hot.locator('.drag-corner'), 0, 2 * 60);
  await waitFor(async () => (await place(hot)) === '1,1,12,8', 30_000, 'hot 8 rows high');
  await waitFor(async () => (await place(all)) === '1,9,12,6', 30_000, 'all kilns at row 8');
  await screenshot(page, 'dashboard-push');
  // The keyboard path: All kilns one row up lands on Hot kilns, which goes below it.
  await all.getByRole('button', { name: 'Move up' }).click();
  await waitFor(async () => (await place(all)) === '1,8,12,6', 30_000, 'all kilns at row 7');
  await waitFor(async () => (await place(hot)) === '1,14,12,8', 30_000, 'hot pushed to row 13');

  await page.getByRole('button', { name: 'Save dashboard' }).click();
  await page.getByRole('button', { name: 'Edit' }).waitFor();
  const saved = await savedMain(kilnId);
  assert.deepEqual(saved[ALL], { sizeX: 12, sizeY: 6, row: 7, col: 0 });
  assert.deepEqual(saved[HOT], { sizeX: 12, sizeY: 8, row: 13, col: 0 });
  const places = Object.entries(saved);
  for (const [a, p] of places) {
    for (const [b, q] of places) {
      const overlap =
        a !== b &&
        p.col < q.col + q.sizeX &&
        q.col < p.col + p.sizeX &&
        p.row < q.row + q.sizeY &&
        q.row < p.row + p.sizeY;
      assert.ok(!overlap, `${a} and ${b} overlap: ${JSON.stringify(saved)}`);
    }
  }
});
