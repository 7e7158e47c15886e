import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newPage, screenshot, signIn, UI_TIMEOUT_MS } from './helpers/browser.js';
import { startGateway, type TestGateway } from './helpers/gateway.js';
import { RegisterBank, type RunningSlave, startTcpSlave } from './helpers/modbus.js';

// The Connectors page (issue 17 item 1, "from the web page") against a real gateway and a real
// Modbus TCP slave (modbus-serial's server): a connector added from the page polls the slave,
// its status follows live (active, then inactive when the slave goes silent), a bad field is
// named, and it is deleted from the page.

let t: TestGateway;
let bank: RegisterBank;
let slave: RunningSlave;
let browser: Browser;
let page: Page;

before(async () => {
  bank = new RegisterBank();
  bank.unit(1).holding[0] = 1234;
  slave = await startTcpSlave(bank);
  t = await startGateway();
  browser = await launchBrowser();
  page = await newPage(browser);
});

after(async () => {
  await browser?.close();
  await t?.close();
  await slave?.close();
});

test('add a Modbus connector from the Connectors page; its status follows live; delete it', async () => {
  const configuration = {
    master: {
      slaves: [
        {
          type: 'tcp',
          method: 'socket',
          host: '127.0.0.1',
          port: slave.port,
          unitId: 1,
          deviceName: 'Kiln meter',
          deviceType: 'meter',
          timeout: 0.5,
          pollPeriod: 200,
          timeseries: [{ tag: 'temp', type: '16uint', functionCode: 3, address: 0 }],
        },
      ],
    },
  };
  await signIn(page, t);
  await page.getByRole('link', { name: 'Connectors' }).click();
  await page.getByRole('button', { name: 'Add connector' }).click();
  const form = page.getByRole('form', { name: 'New connector' });
  await form.getByLabel('Name').fill('Kiln line');
  await form.getByLabel('Configuration (JSON)').fill(JSON.stringify(configuration));
  await form.getByRole('button', { name: 'Save' }).click();

  // The connector runs: the device is polled and shown active, live.
  const card = page.getByRole('region', { name: 'Connector Kiln line' });
  const device = card.locator('tr[data-device="Kiln meter"]');
  await device
    .locator('[data-field="state"]', { hasText: /^active$/ })
    .waitFor({ timeout: UI_TIMEOUT_MS });
  await card
    .locator(`tr[data-line="tcp://127.0.0.1:${slave.port}"] [data-field="state"]`, {
      hasText: /^open$/,
    })
    .waitFor();
  const admin = await t.adminToken();
  const devices = (await (
    await t.api('/api/tenant/devices?pageSize=10&page=0&textSearch=Kiln', { token: admin })
  ).json()) as { data: Array<{ name: string; type: string }> };
  assert.deepEqual(
    devices.data.map((d) => [d.name, d.type]),
    [['Kiln meter', 'meter']],
  );
  await screenshot(page, 'connectors');

  // The slave stops answering: inactive, with the timeout as its last error, without a reload.
  bank.silent.add(1);
  await device
    .locator('[data-field="state"]', { hasText: /^inactive$/ })
    .waitFor({ timeout: UI_TIMEOUT_MS });
  assert.match((await device.locator('[data-field="lastError"]').textContent()) ?? '', /timeout/);
  bank.silent.delete(1);
  await device
    .locator('[data-field="state"]', { hasText: /^active$/ })
    .waitFor({ timeout: UI_TIMEOUT_MS });

  // A bad field: the server's 400 names it; the running connector is unchanged.
  await card.getByRole('button', { name: 'Edit' }).click();
  const edit = page.getByRole('form', { name: 'Edit Kiln line' });
  const bad = structuredClone(configuration);
  bad.master.slaves[0].unitId = 300;
  await edit.getByLabel('Configuration (JSON)').fill(JSON.stringify(bad));
  await edit.getByRole('button', { name: 'Save' }).click();
  await edit.getByRole('alert').filter({ hasText: 'master.slaves.0.unitId' }).waitFor();
  // Not JSON at all: said before anything is sent.
  await edit.getByLabel('Configuration (JSON)').fill('{ "master": ');
  await edit.getByRole('button', { name: 'Save' }).click();
  await edit.getByRole('alert').filter({ hasText: 'not valid JSON' }).waitFor();
  await edit.getByRole('button', { name: 'Cancel' }).click();

  // Delete, confirmed: the card goes and the connector is gone over REST.
  page.once('dialog', (d) => void d.accept());
  await card.getByRole('button', { name: 'Delete' }).click();
  await card.waitFor({ state: 'detached' });
  const list = (await (await t.api('/api/connectors', { token: admin })).json()) as unknown[];
  assert.equal(list.length, 0);
});
