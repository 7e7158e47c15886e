/**
 * Issue 14's bounds are visible: a rule chain past MAX_RULE_CHAINS and a scheduler event past
 * MAX_EVENTS are refused with a 409 naming the bound, and each refusal is counted in /metrics
 * (`edge_refused_total`). Filled over REST, as an operator would.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MAX_RULE_CHAINS } from '../src/rules/rule-chain-service.js';
import { MAX_EVENTS } from '../src/scheduler/scheduler.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';

/** Runs `count` requests, `width` at a time. */
async function fill(count: number, width: number, one: (i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < count) await one(next++);
    }),
  );
}

describe('bounds of rule chains and scheduler events', () => {
  let t: TestGateway;
  let admin: string;
  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  const refused = async (what: string) => {
    const text = await (await t.api('/metrics', { token: admin })).text();
    const line = text.split('\n').find((l) => l.startsWith(`edge_refused_total{what="${what}"} `));
    return Number(line?.split(' ')[1]);
  };

  it('refuses the rule chain past the bound with a 409, counted in /metrics', async () => {
    const page = (await (
      await t.api('/api/ruleChains?pageSize=10&page=0', { token: admin })
    ).json()) as { totalElements: number };
    assert.equal(await refused('rule_chain'), 0);
    await fill(MAX_RULE_CHAINS - page.totalElements, 4, async (i) => {
      const res = await t.api('/api/ruleChain', { token: admin, body: { name: `chain ${i}` } });
      assert.equal(res.status, 200, await res.clone().text());
    });
    for (let i = 0; i < 2; i++) {
      const res = await t.api('/api/ruleChain', { token: admin, body: { name: 'one too many' } });
      assert.equal(res.status, 409);
      assert.match(
        ((await res.json()) as { message: string }).message,
        new RegExp(`At most ${MAX_RULE_CHAINS} rule chains`),
      );
    }
    assert.equal(await refused('rule_chain'), 2);
  });

  it('refuses the scheduler event past the bound with a 409, counted in /metrics', async () => {
    const device = await createDevice(t, 'bounded-schedules');
    // One-time events a year ahead: their cron jobs (no year field) tick today for the first
    // few, which must be skipped and stay armed, not run and cancelled.
    const startTime = Date.now() + 365 * 86_400_000;
    const body = (i: number) => ({
      name: `event ${i}`,
      type: 'UPDATE_ATTRIBUTES',
      schedule: { timezone: 'UTC', startTime: startTime + i * 1000 },
      configuration: {
        originatorId: { entityType: 'DEVICE', id: device.id },
        msgType: 'POST_ATTRIBUTES_REQUEST',
        msgBody: { n: i },
        metadata: { scope: 'SHARED_SCOPE' },
      },
    });
    await fill(MAX_EVENTS, 4, async (i) => {
      const res = await t.api('/api/schedulerEvent', { token: admin, body: body(i) });
      assert.equal(res.status, 200, await res.clone().text());
    });
    const res = await t.api('/api/schedulerEvent', { token: admin, body: body(MAX_EVENTS) });
    assert.equal(res.status, 409);
    assert.match(
      ((await res.json()) as { message: string }).message,
      new RegExp(`At most ${MAX_EVENTS} scheduler events`),
    );
    assert.equal(await refused('scheduler_event'), 1);
    const jobs = (await (await t.api('/api/scheduler/jobs', { token: admin })).json()) as {
      jobs: Array<{ key: string }>;
    };
    assert.equal(jobs.jobs.filter((j) => !j.key.startsWith('gateway.')).length, MAX_EVENTS);
  });
});
