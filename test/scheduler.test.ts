/**
 * Scheduled jobs (issue 14 §11): a scheduler event on a cron expression sets a shared attribute
 * that a subscribed MQTT device receives; a bad expression is a 400; a deleted event stops;
 * ThingsBoard PE's repeat types (DAILY, WEEKLY, MONTHLY, YEARLY, TIMER, endsOn) against a
 * controlled clock; the scheduler host's job list and its bound in /metrics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { everyExpression, MAX_JOBS } from '../src/scheduler/scheduler.js';
import { cronOf, isDue } from '../src/scheduler/scheduler-event-service.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect, nextMessage } from './helpers/mqtt.js';

describe('scheduler events', () => {
  let t: TestGateway;
  let admin: string;
  /** The gateway's wall clock runs this far ahead of the real one. */
  let offset = 0;
  before(async () => {
    t = await startGateway({ wallClock: () => Date.now() + offset });
    admin = await t.adminToken();
  });
  after(() => t.close());

  const event = (deviceId: string, schedule: Record<string, unknown>) => ({
    name: 'Night setpoint',
    type: 'UPDATE_ATTRIBUTES',
    schedule,
    configuration: {
      originatorId: { entityType: 'DEVICE', id: deviceId },
      msgType: 'POST_ATTRIBUTES_REQUEST',
      msgBody: { setpoint: 18 },
      metadata: { scope: 'SHARED_SCOPE' },
    },
  });

  it('fires on a cron expression and sets a shared attribute a subscribed device receives', async () => {
    const device = await createDevice(t, 'scheduled-device');
    const client = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
    try {
      await client.subscribeAsync('v1/devices/me/attributes', { qos: 1 });
      const update = nextMessage(client, 'v1/devices/me/attributes', 10_000);
      // Every second, in a time zone of its own.
      const res = await t.api('/api/schedulerEvent', {
        token: admin,
        body: event(device.id, { timezone: 'Europe/Berlin', cron: '* * * * * *' }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      const saved = (await res.json()) as { id: { id: string; entityType: string } };
      assert.equal(saved.id.entityType, 'SCHEDULER_EVENT');
      assert.deepEqual(JSON.parse((await update).payload.toString()), { setpoint: 18 });

      const list = (await (
        await t.api('/api/schedulerEvents', { token: admin })
      ).json()) as unknown[];
      assert.equal(list.length, 1);
      const del = await t.api(`/api/schedulerEvent/${saved.id.id}`, {
        method: 'DELETE',
        token: admin,
      });
      assert.equal(del.status, 200);
      assert.equal(
        (await t.api(`/api/schedulerEvent/${saved.id.id}`, { token: admin })).status,
        404,
      );
    } finally {
      await client.endAsync();
    }
  });

  it('refuses a bad cron expression or time zone with a 400 naming it', async () => {
    const device = await createDevice(t, 'scheduled-bad');
    const bad = await t.api('/api/schedulerEvent', {
      token: admin,
      body: event(device.id, { cron: 'every minute' }),
    });
    assert.equal(bad.status, 400);
    assert.match(
      ((await bad.json()) as { message: string }).message,
      /Invalid cron expression: every minute/,
    );
    const zone = await t.api('/api/schedulerEvent', {
      token: admin,
      body: event(device.id, { cron: '0 0 * * *', timezone: 'Mars/Olympus' }),
    });
    assert.equal(zone.status, 400);
    assert.match(
      ((await zone.json()) as { message: string }).message,
      /Invalid time zone: Mars\/Olympus/,
    );
  });

  it('turns a daily or weekly repeat into a cron expression in its time zone', async () => {
    // 2026-11-23 06:30:15 UTC is 07:30:15 in Berlin.
    const startTime = Date.UTC(2026, 10, 23, 6, 30, 15);
    assert.deepEqual(cronOf({ timezone: 'Europe/Berlin', startTime, repeat: { type: 'DAILY' } }), {
      expression: '15 30 7 * * *',
      once: false,
    });
    assert.deepEqual(
      cronOf({ timezone: 'UTC', startTime, repeat: { type: 'WEEKLY', repeatOn: [1, 3] } }),
      { expression: '15 30 6 * * 1,3', once: false },
    );
    assert.deepEqual(cronOf({ timezone: 'UTC', startTime }), {
      expression: '15 30 6 23 11 *',
      once: true,
    });
  });

  it('turns monthly, yearly and timer repeats into cron ticks', () => {
    // 2026-01-31 22:45:07 UTC is 2026-02-01 04:15:07 in Kolkata (UTC+05:30).
    const startTime = Date.UTC(2026, 0, 31, 22, 45, 7);
    const kolkata = (repeat: Record<string, unknown>) =>
      cronOf({ timezone: 'Asia/Kolkata', startTime, repeat: repeat as never }).expression;
    assert.equal(kolkata({ type: 'MONTHLY' }), '7 15 4 1 * *');
    assert.equal(kolkata({ type: 'YEARLY' }), '7 15 4 1 2 *');
    assert.equal(kolkata({ type: 'TIMER', repeatInterval: 5, timeUnit: 'SECONDS' }), '* * * * * *');
    assert.equal(
      kolkata({ type: 'TIMER', repeatInterval: 90, timeUnit: 'MINUTES' }),
      '7 * * * * *',
    );
    // The hour tick keeps Kolkata's half-hour offset.
    assert.equal(kolkata({ type: 'TIMER', repeatInterval: 2, timeUnit: 'HOURS' }), '7 15 * * * *');
  });

  it('runs a timer every repeatInterval from startTime and nothing after endsOn (controlled clock)', () => {
    const startTime = Date.UTC(2026, 10, 24, 0, 0, 0, 400);
    const schedule = {
      startTime,
      repeat: {
        type: 'TIMER' as const,
        repeatInterval: 90,
        timeUnit: 'MINUTES' as const,
        endsOn: startTime + 6 * 3_600_000,
      },
    };
    const at = (minutes: number, lateMs = 0) =>
      isDue(schedule, Date.UTC(2026, 10, 24, 0, minutes, 0) + lateMs);
    assert.equal(at(-1), 'skip'); // before startTime
    assert.equal(at(0), 'run');
    assert.equal(at(1), 'skip');
    assert.equal(at(89), 'skip');
    assert.equal(at(90, 1_700), 'run'); // a tick that came 1.7 s late still counts
    assert.equal(at(180), 'run');
    assert.equal(at(360), 'run'); // endsOn is the last moment a run may happen
    assert.equal(at(361), 'ended');
    // Daily repeats run on every tick of their cron job, until endsOn.
    const daily = { startTime, repeat: { type: 'DAILY' as const, endsOn: startTime + 86_400_000 } };
    assert.equal(isDue(daily, startTime + 86_400_000), 'run');
    assert.equal(isDue(daily, startTime + 2 * 86_400_000), 'ended');
    // endsOn 0 is ThingsBoard's "never".
    assert.equal(isDue({ startTime, repeat: { type: 'DAILY', endsOn: 0 } }, startTime * 2), 'run');
  });

  it('refuses a timer without its interval or unit', async () => {
    const device = await createDevice(t, 'scheduled-timer-bad');
    const res = await t.api('/api/schedulerEvent', {
      token: admin,
      body: event(device.id, {
        startTime: Date.now(),
        repeat: { type: 'TIMER', timeUnit: 'DAYS' },
      }),
    });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { message: string }).message, /timeUnit/);
  });

  it('lists its jobs; a timer past endsOn on the gateway clock is cancelled; refusals are in /metrics', async () => {
    const device = await createDevice(t, 'scheduled-timer');
    const startTime = Date.now() + offset;
    const res = await t.api('/api/schedulerEvent', {
      token: admin,
      body: event(device.id, {
        timezone: 'UTC',
        startTime,
        repeat: {
          type: 'TIMER',
          repeatInterval: 1,
          timeUnit: 'SECONDS',
          endsOn: startTime + 3_600_000,
        },
      }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    const id = ((await res.json()) as { id: { id: string } }).id.id;
    type Jobs = {
      maxJobs: number;
      jobs: Array<{ key: string; expression: string; nextRun: number }>;
    };
    const jobs = async () =>
      (await (await t.api('/api/scheduler/jobs', { token: admin })).json()) as Jobs;
    const listed = (await jobs()).jobs.find((j) => j.key === id);
    assert.equal(listed?.expression, '* * * * * *');
    assert.equal(typeof listed?.nextRun, 'number');
    assert.equal((await jobs()).maxJobs, MAX_JOBS);
    // The gateway's clock jumps past endsOn: the next tick cancels the job.
    offset = 2 * 3_600_000;
    try {
      await waitFor(async () => !(await jobs()).jobs.some((j) => j.key === id), 15_000);
    } finally {
      offset = 0;
    }
    // The event itself stays stored (as ThingsBoard keeps a finished event).
    assert.equal((await t.api(`/api/schedulerEvent/${id}`, { token: admin })).status, 200);
    const metrics = await (await t.api('/metrics', { token: admin })).text();
    assert.match(metrics, /^edge_refused_total\{what="scheduler_event"\} 0$/m);
    assert.match(metrics, /^edge_refused_total\{what="rule_chain"\} 0$/m);
    assert.match(metrics, /^edge_scheduler_jobs \d+$/m);
  });

  it("runs the gateway's own periodic jobs on the same host, listed with their cron expressions", async () => {
    const res = await t.api('/api/scheduler/jobs', { token: admin });
    const { jobs } = (await res.json()) as { jobs: Array<{ key: string; expression: string }> };
    const own = Object.fromEntries(
      jobs.filter((j) => j.key.startsWith('gateway.')).map((j) => [j.key, j.expression]),
    );
    // Inactivity checks every 60 s (EDGE_ACTIVITY_CHECK_INTERVAL_SEC), alarm retention hourly;
    // the telemetry age check only with an age limit (EDGE_TELEMETRY_TTL_DAYS, 0 here).
    assert.deepEqual(own, {
      'gateway.activity-check': '0 * * * * *',
      'gateway.alarm-retention': '0 0 * * * *',
    });
    const aged = await startGateway({ config: { telemetry: { ttlDays: 30 } } });
    try {
      const r = await aged.api('/api/scheduler/jobs', { token: await aged.adminToken() });
      const listed = ((await r.json()) as { jobs: Array<{ key: string; expression: string }> })
        .jobs;
      assert.equal(
        listed.find((j) => j.key === 'gateway.telemetry-age')?.expression,
        '0 * * * * *',
      );
    } finally {
      await aged.close();
    }
    assert.equal(everyExpression(1), '* * * * * *');
    assert.equal(everyExpression(15), '*/15 * * * * *');
    assert.equal(everyExpression(7), undefined); // ticks every second, runs every 7th
    assert.equal(everyExpression(300), '0 */5 * * * *');
    assert.equal(everyExpression(6 * 3600), '0 0 */6 * * *');
    assert.equal(everyExpression(86_400), '0 0 0 * * *');
  });
});
