/**
 * The next runs of an unsaved schedule (`POST /api/scheduler/nextRuns`, issue 15 item 4): a cron
 * expression and ThingsBoard's repeat shapes in their time zone, across both DST changes, computed
 * by the scheduler host's own matcher without arming a job; the preview of a saved event's
 * schedule is the armed job's next run; bad input is a 400 naming it; customer users get 403.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

interface Preview {
  expression: string;
  timezone: string | null;
  runs: number[];
}

describe('scheduler: next runs of an unsaved schedule', () => {
  let t: TestGateway;
  let admin: string;
  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  const preview = async (body: Record<string, unknown>, token = admin) =>
    t.api('/api/scheduler/nextRuns', { token, body });
  const runs = async (body: Record<string, unknown>): Promise<Preview> => {
    const res = await preview(body);
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as Preview;
  };
  const iso = (p: Preview) => p.runs.map((r) => new Date(r).toISOString());
  const jobKeys = async () =>
    (
      (await (await t.api('/api/scheduler/jobs', { token: admin })).json()) as {
        jobs: Array<{ key: string; nextRun: number | null }>;
      }
    ).jobs;

  it('runs a cron expression in its time zone: the skipped wall time on the spring change, the repeated one once in autumn', async () => {
    const before = await jobKeys();
    // Berlin goes from 02:00 to 03:00 on 2027-03-28: 02:30 does not exist that day.
    const spring = await runs({
      schedule: { cron: '0 30 2 * * *', timezone: 'Europe/Berlin' },
      from: Date.UTC(2027, 2, 26, 0, 0),
      count: 4,
    });
    assert.equal(spring.expression, '0 30 2 * * *');
    assert.equal(spring.timezone, 'Europe/Berlin');
    assert.deepEqual(iso(spring), [
      '2027-03-26T01:30:00.000Z',
      '2027-03-27T01:30:00.000Z',
      '2027-03-29T00:30:00.000Z',
      '2027-03-30T00:30:00.000Z',
    ]);
    // Back from 03:00 to 02:00 on 2027-10-31: 02:30 comes twice and runs once.
    const autumn = await runs({
      schedule: { cron: '0 30 2 * * *', timezone: 'Europe/Berlin' },
      from: Date.UTC(2027, 9, 30, 0, 0),
      count: 3,
    });
    assert.deepEqual(iso(autumn), [
      '2027-10-30T00:30:00.000Z',
      '2027-10-31T01:30:00.000Z',
      '2027-11-01T01:30:00.000Z',
    ]);
    // The same expression in UTC: every day at 02:30 UTC.
    const utc = await runs({
      schedule: { cron: '0 30 2 * * *', timezone: 'UTC' },
      from: Date.UTC(2027, 2, 27, 12, 0),
      count: 2,
    });
    assert.deepEqual(iso(utc), ['2027-03-28T02:30:00.000Z', '2027-03-29T02:30:00.000Z']);
    // Nothing was armed.
    assert.deepEqual(await jobKeys(), before);
  });

  it("keeps a daily repeat's wall time in its zone across a DST change, from startTime on", async () => {
    // 09:00 in New York, from Friday 2027-03-12; clocks go forward on Sunday 2027-03-14.
    const startTime = Date.UTC(2027, 2, 12, 14, 0);
    const daily = await runs({
      schedule: { timezone: 'America/New_York', startTime, repeat: { type: 'DAILY', endsOn: 0 } },
      from: Date.UTC(2026, 10, 24),
      count: 4,
    });
    assert.equal(daily.expression, '0 0 9 * * *');
    assert.deepEqual(iso(daily), [
      '2027-03-12T14:00:00.000Z',
      '2027-03-13T14:00:00.000Z',
      '2027-03-14T13:00:00.000Z',
      '2027-03-15T13:00:00.000Z',
    ]);
    // Weekly on Monday and Wednesday, at 07:15 in Tokyo (no DST), ending after two weeks.
    const weekly = await runs({
      schedule: {
        timezone: 'Asia/Tokyo',
        startTime: Date.UTC(2027, 0, 3, 22, 15), // Monday 2027-01-04 07:15 in Tokyo
        repeat: { type: 'WEEKLY', repeatOn: [1, 3], endsOn: Date.UTC(2027, 0, 17) },
      },
      from: Date.UTC(2026, 10, 24),
      count: 10,
    });
    assert.deepEqual(iso(weekly), [
      '2027-01-03T22:15:00.000Z',
      '2027-01-05T22:15:00.000Z',
      '2027-01-10T22:15:00.000Z',
      '2027-01-12T22:15:00.000Z',
    ]);
  });

  it('runs a timer every repeatInterval from startTime until endsOn; a one-time event once, or not when past', async () => {
    const startTime = Date.UTC(2027, 5, 1, 8, 0, 0, 400);
    const timer = await runs({
      schedule: {
        timezone: 'Asia/Kolkata',
        startTime,
        repeat: {
          type: 'TIMER',
          repeatInterval: 90,
          timeUnit: 'MINUTES',
          endsOn: startTime + 5 * 3_600_000,
        },
      },
      from: Date.UTC(2027, 5, 1, 8, 30),
      count: 10,
    });
    // From 08:30, the interval ticks after it; endsOn (13:00) ends it after three runs.
    assert.deepEqual(iso(timer), [
      '2027-06-01T09:30:00.000Z',
      '2027-06-01T11:00:00.000Z',
      '2027-06-01T12:30:00.000Z',
    ]);
    // A huge interval does not walk every tick between runs.
    const sparse = await runs({
      schedule: {
        startTime,
        repeat: { type: 'TIMER', repeatInterval: 1_000_000, timeUnit: 'SECONDS' },
      },
      from: startTime - 1000,
      count: 3,
    });
    assert.deepEqual(
      sparse.runs,
      [0, 1, 2].map((k) => startTime - 400 + k * 1_000_000_000),
    );
    const once = await runs({
      schedule: { timezone: 'UTC', startTime: Date.UTC(2027, 1, 1, 6, 0) },
      from: Date.UTC(2026, 10, 24),
    });
    assert.deepEqual(iso(once), ['2027-02-01T06:00:00.000Z']);
    const past = await runs({
      schedule: { timezone: 'UTC', startTime: Date.UTC(2026, 1, 1, 6, 0) },
      from: Date.UTC(2026, 10, 24),
    });
    assert.deepEqual(past.runs, []);
  });

  it("previews a saved event's schedule as the armed job's next run, from the gateway's clock", async () => {
    const device = await createDevice(t, 'preview-armed');
    const schedule = { cron: '0 0 3 * * *', timezone: 'Asia/Tokyo' };
    const res = await t.api('/api/schedulerEvent', {
      token: admin,
      body: {
        name: 'Tokyo at three',
        type: 'UPDATE_ATTRIBUTES',
        schedule,
        configuration: {
          originatorId: { entityType: 'DEVICE', id: device.id },
          msgType: 'POST_ATTRIBUTES_REQUEST',
          msgBody: { mode: 'night' },
          metadata: { scope: 'SHARED_SCOPE' },
        },
      },
    });
    assert.equal(res.status, 200, await res.clone().text());
    const id = ((await res.json()) as { id: { id: string } }).id.id;
    const armed = (await jobKeys()).find((j) => j.key === id);
    const p = await runs({ schedule, count: 2 });
    assert.equal(p.runs[0], armed?.nextRun);
    assert.equal(p.runs[1] - p.runs[0], 86_400_000);
  });

  it('refuses a bad expression, time zone, count or shape with a 400 naming it; 403 for a customer user', async () => {
    const bad = async (body: Record<string, unknown>, pattern: RegExp) => {
      const res = await preview(body);
      assert.equal(res.status, 400);
      assert.match(((await res.json()) as { message: string }).message, pattern);
    };
    await bad({ schedule: { cron: 'every minute' } }, /Invalid cron expression: every minute/);
    await bad(
      { schedule: { cron: '0 0 * * *', timezone: 'Mars/Olympus' } },
      /Invalid time zone: Mars\/Olympus/,
    );
    await bad(
      { schedule: { startTime: Date.now(), timezone: 'Mars/Olympus' } },
      /Invalid time zone: Mars\/Olympus/,
    );
    await bad({ schedule: { cron: '* * * * *' }, count: 1000 }, /count/);
    await bad({ schedule: {} }, /schedule needs cron or startTime/);
    await bad(
      { schedule: { startTime: Date.now(), repeat: { type: 'TIMER' } } },
      /repeatInterval and timeUnit/,
    );
    const customerId = await createCustomer(t, 'Preview Ltd');
    const userId = await createUser(t, 'tech@preview.test', customerId);
    const customer = await activateUser(t, userId, 'customer-password-1');
    const res = await preview({ schedule: { cron: '* * * * *' } }, customer);
    assert.equal(res.status, 403);
  });
});
