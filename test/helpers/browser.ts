import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { ADMIN_EMAIL, ADMIN_PASSWORD, type TestGateway } from './gateway.js';

/** Where browser tests save their screenshots (git-ignored). */
export const SCREENSHOT_DIR = join(process.cwd(), 'test-output', 'ui');

/** Generous: the CI machine has 2 cores and runs two test files at once. */
export const UI_TIMEOUT_MS = 30_000;

/** Debian's chromium, headless (one browser per test file). */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    timeout: 60_000,
  });
}

export async function newPage(
  browser: Browser,
  viewport = { width: 1280, height: 860 },
): Promise<Page> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.setDefaultTimeout(UI_TIMEOUT_MS);
  return page;
}

export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** Opens the gateway's page and signs in through the form. */
export async function signIn(
  page: Page,
  t: TestGateway,
  email = ADMIN_EMAIL,
  password = ADMIN_PASSWORD,
): Promise<void> {
  await page.goto(t.baseUrl);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}
