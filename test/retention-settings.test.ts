import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

const PATH = '/api/admin/settings/retention';

interface Retention {
  key: string;
  jsonValue: Record<string, number>;
  defaults: Record<string, number>;
}

describe('retention settings over REST', () => {
  let t: TestGateway;
  let admin: string;

  before(async () => {
    t = await startGateway({
      config: {
        telemetry: { maxPoints: 50_000, ttlDays: 0 },
        alarms: { retentionDays: 30 },
      },
    });
    admin = await t.adminToken();
  });
  after(async () => {
    await t.close();
    await rm(t.dataDir, { recursive: true, force: true });
  });

  const save = (jsonValue: unknown, token = admin) =>
    t.api('/api/admin/settings', { body: { key: 'retention', jsonValue }, token });

  it('shows the config values as defaults', async () => {
    const res = await t.api(PATH, { token: admin });
    assert.equal(res.status, 200);
    const body = (await res.json()) as Retention;
    assert.equal(body.key, 'retention');
    assert.equal(body.jsonValue.telemetryMaxPoints, 50_000);
    assert.equal(body.jsonValue.telemetryTtlDays, 0);
    assert.equal(body.jsonValue.alarmRetentionDays, 30);
    assert.equal(body.jsonValue.auditMaxRows, 100_000);
    assert.deepEqual(body.defaults, body.jsonValue);
  });

  it('refuses values out of bounds and unknown fields with a 400 naming the field', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ telemetryTtlDays: 40_000 }, /telemetryTtlDays/],
      [{ telemetryMaxPoints: 10 }, /telemetryMaxPoints/],
      [{ alarmRetentionDays: 0 }, /alarmRetentionDays/],
      [{ auditMaxRows: 1.5 }, /auditMaxRows/],
      [{ alarmMaxCount: '500' }, /alarmMaxCount/],
      [{ debugDays: 3 }, /debugDays/],
    ];
    for (const [value, field] of cases) {
      const res = await save(value);
      assert.equal(res.status, 400, JSON.stringify(value));
      const body = (await res.json()) as { message: string };
      assert.match(body.message, field);
    }
    const now = (await (await t.api(PATH, { token: admin })).json()) as Retention;
    assert.equal(now.jsonValue.telemetryMaxPoints, 50_000, 'nothing stored after a refusal');
  });

  it('is for the tenant administrator only', async () => {
    assert.equal((await t.api(PATH)).status, 401);
    const customerId = await createCustomer(t, 'Retention Ltd');
    const userId = await createUser(t, 'tech@retention.test', customerId);
    const token = await activateUser(t, userId, 'customer-password-1');
    assert.equal((await t.api(PATH, { token })).status, 403);
    assert.equal((await save({ telemetryTtlDays: 1 }, token)).status, 403);
  });

  it('a lower ring bound evicts stored points at once, without a restart', async () => {
    const dev = await createDevice(t, 'retention-dev');
    const base = Date.now() - 3_000_000;
    for (let from = 0; from < 3000; from += 300) {
      const body = Array.from({ length: 300 }, (_, i) => ({
        ts: base + (from + i) * 1000,
        values: { t: from + i },
      }));
      const res = await t.api(`/api/v1/${dev.token}/telemetry`, { body });
      assert.equal(res.status, 200);
    }
    const telemetry = t.gw.services.telemetry;
    await waitFor(() => telemetry.stats.points >= 3000, 10_000, '3000 points stored');

    const saved = await save({ telemetryMaxPoints: 1000 });
    assert.equal(saved.status, 200);
    const body2 = (await saved.json()) as Retention;
    assert.equal(body2.jsonValue.telemetryMaxPoints, 1000);
    assert.equal(body2.jsonValue.telemetryTtlDays, 0, 'fields left out keep their value');
    assert.equal(body2.defaults.telemetryMaxPoints, 50_000);
    await waitFor(() => telemetry.stats.points <= 1000, 10_000, 'eviction to the new bound');
    assert.ok(telemetry.stats.points > 0);
    // The newest points are kept.
    const q = `?keys=t&startTs=${base}&endTs=${base + 3_000_000}&limit=5000`;
    const read = await t.api(`/api/plugins/telemetry/DEVICE/${dev.id}/values/timeseries${q}`, {
      token: admin,
    });
    const series = ((await read.json()) as { t: Array<{ value: string }> }).t;
    assert.ok(series.some((p) => Number(p.value) === 2999));
    assert.ok(!series.some((p) => Number(p.value) === 0));
  });

  it('saved values survive a restart and apply again', async () => {
    assert.equal((await save({ telemetryTtlDays: 7, auditMaxRows: 5000 })).status, 200);
    await t.close(false);
    t = await startGateway({
      dataDir: t.dataDir,
      config: { telemetry: { maxPoints: 50_000, ttlDays: 0 }, alarms: { retentionDays: 30 } },
    });
    admin = await t.adminToken();
    const body = (await (await t.api(PATH, { token: admin })).json()) as Retention;
    assert.equal(body.jsonValue.telemetryMaxPoints, 1000);
    assert.equal(body.jsonValue.telemetryTtlDays, 7);
    assert.equal(body.jsonValue.auditMaxRows, 5000);
    assert.equal(body.defaults.telemetryTtlDays, 0);
    // The age limit now runs on the scheduler host, as with --telemetry-ttl-days.
    assert.ok(t.gw.services.scheduler.jobs().some((j) => j.key === 'gateway.telemetry-age'));
  });
});
