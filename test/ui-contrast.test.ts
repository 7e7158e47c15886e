import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, signIn } from './helpers/browser.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { raiseAlarm } from './helpers/notify.js';
import { postTelemetry } from './helpers/ws.js';

// WCAG 2 AA contrast, measured: on each page, every visible element with its own text is checked
// with the browser's computed colours, its background being the composite of the translucent
// backgrounds behind it down to the first opaque one. Every pair must reach 4.5:1 (AA for normal
// text; no large-text allowance is taken). Disabled controls are exempt, as WCAG 1.4.3 says.

let t: TestGateway;
let browser: Browser;
let page: Page;
let deviceId = '';

before(async () => {
  t = await startGateway();
  const d = await createDevice(t, 'Contrast 1');
  deviceId = d.id;
  await postTelemetry(t, d.token, { temperature: 21.5 });
  for (const severity of ['CRITICAL', 'MAJOR', 'MINOR', 'WARNING', 'INDETERMINATE'])
    await raiseAlarm(t, d.id, `Check ${severity}`, {}, severity);
  browser = await launchBrowser();
  page = await newPage(browser);
});

after(async () => {
  await browser?.close();
  await t?.close();
});

interface Failure {
  text: string;
  color: string;
  background: string;
  ratio: number;
}

/**
 * The page's text/background pairs below 4.5:1, run in the browser (plain JavaScript in a string:
 * the test's own transpiled functions do not survive being sent to the page).
 */
const LOW_CONTRAST = String.raw`(() => {
  const parse = (c) => {
    const m = /rgba?\(([^)]+)\)/.exec(c);
    if (!m) return [0, 0, 0, 0];
    const p = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, under) => {
    const a = top[3] + under[3] * (1 - top[3]);
    if (a === 0) return [255, 255, 255, 0];
    const mix = (i) => (top[i] * top[3] + under[i] * under[3] * (1 - top[3])) / a;
    return [mix(0), mix(1), mix(2), a];
  };
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    let out = [255, 255, 255, 1];
    for (const l of layers.reverse()) out = over(l, out);
    return out;
  };
  const luminance = (c) => {
    const ch = (v) => {
      const s = v / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * ch(c[0]) + 0.7152 * ch(c[1]) + 0.0722 * ch(c[2]);
  };
  const failures = [];
  for (const el of document.querySelectorAll('body *')) {
    const own = [...el.childNodes]
      .filter((n) => n.nodeType === Node.TEXT_NODE)
      .map((n) => (n.textContent || '').trim())
      .join(' ')
      .trim();
    if (!own) continue;
    const style = getComputedStyle(el);
    const rect = el.getBoundingClientRect();
    if (style.visibility === 'hidden' || rect.width === 0 || rect.height === 0) continue;
    if (el.disabled || el.closest('[disabled]')) continue;
    const bg = background(el);
    const fg = over(parse(style.color), bg);
    const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    if (ratio < 4.5)
      failures.push({
        text: own.slice(0, 40),
        color: style.color,
        background: 'rgb(' + bg.slice(0, 3).map(Math.round).join(', ') + ')',
        ratio: Math.round(ratio * 100) / 100,
      });
  }
  return failures;
})()`;

test('every text/background pair on the main pages reaches 4.5:1', async () => {
  await page.goto(t.baseUrl);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  // The check finds a pair it must refuse: #999 on white is 2.85:1.
  await page.evaluate(
    `document.body.insertAdjacentHTML('beforeend', '<p id="probe" style="color:#999;background:#fff">probe</p>')`,
  );
  const found = await page.evaluate<Failure[]>(LOW_CONTRAST);
  const probe = found.find((f) => f.text === 'probe');
  assert.equal(probe?.ratio, 2.85, JSON.stringify(found));
  await page.evaluate(`document.getElementById('probe').remove()`);
  const report: Record<string, Failure[]> = {
    '/ (sign in)': await page.evaluate<Failure[]>(LOW_CONTRAST),
  };
  await signIn(page, t);
  const pages: Array<[string, string]> = [
    ['/devices', 'Devices'],
    [`/devices/${deviceId}`, 'Contrast 1'],
    ['/alarms', 'Alarms'],
    ['/profiles', 'Device profiles'],
    ['/customers', 'Customers'],
    ['/groups', 'Groups'],
    ['/ota', 'OTA packages'],
    ['/rule-chains', 'Rule chains'],
    ['/notifications', 'Notifications'],
    ['/notification-center', 'Notification targets'],
    ['/settings', 'Settings'],
    ['/dashboards', 'Dashboards'],
    ['/profile', 'Profile'],
  ];
  for (const [path, heading] of pages) {
    await page.evaluate((p) => {
      history.pushState(null, '', p);
      dispatchEvent(new PopStateEvent('popstate'));
    }, path);
    await page.getByRole('heading', { name: heading, exact: true }).first().waitFor();
    if (path === '/alarms')
      await page.locator('tr[data-alarm-type="Check INDETERMINATE"]').waitFor();
    report[path] = await page.evaluate<Failure[]>(LOW_CONTRAST);
  }
  const failing = Object.entries(report).filter(([, f]) => f.length > 0);
  assert.deepEqual(failing, [], JSON.stringify(failing, null, 1));
  assert.ok(Object.keys(report).length >= 13);
});
