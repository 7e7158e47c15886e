/**
 * Scheduled jobs (issue 14 §11): a scheduler event on a cron expression sets a shared attribute
 * that a subscribed MQTT device receives; a bad expression is a 400; a deleted event stops;
 * ThingsBoard PE's repeat types (DAILY, WEEKLY, MONTHLY, YEARLY, TIMER, endsOn) against a
 * controlled clock; the scheduler host's job list and its bound in /metrics; the other actions
 * (server attributes on every device of a group, an RPC to a subscribed device, a message to the
 * root rule chain that a REST API call node reports to the test's server).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { everyExpression, MAX_JOBS } from '../src/scheduler/scheduler.js';
import { cronOf, isDue } from '../src/scheduler/scheduler-event-service.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect, nextMessage } from './helpers/mqtt.js';
import { adminPost, startRecorder } from './helpers/notify.js';
import { chainFile } from './helpers/rule-chain.js';

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

  it('runs the other actions: server attributes on every device of a group, an RPC, a message to the root chain', async () => {
    const [a, b, outside] = await Promise.all(
      ['group-a', 'group-b', 'not-in-group'].map((n) => createDevice(t, n)),
    );
    const group = await t.api('/api/entityGroup', {
      token: admin,
      body: { name: 'Scheduled line', type: 'DEVICE' },
    });
    assert.equal(group.status, 200, await group.clone().text());
    const groupId = ((await group.json()) as { id: { id: string } }).id.id;
    const added = await t.api(`/api/entityGroup/${groupId}/addEntities`, {
      token: admin,
      body: [a.id, b.id],
    });
    assert.equal(added.status, 200);

    const recorder = await startRecorder();
    const chain = await adminPost(
      t,
      '/api/ruleChain/import',
      chainFile(
        'Scheduled ticks',
        [
          ['filter.TbMsgTypeFilterNode', 'Tick?', { messageTypes: ['SHIFT_TICK'] }],
          [
            'rest.TbRestApiCallNode',
            'Report',
            {
              restEndpointUrlPattern: `${recorder.url}/tick/\${line}/\${schedulerEventId}`,
              requestMethod: 'POST',
            },
          ],
        ],
        [[0, 1, 'True']],
      ),
    );
    const roots = (await (
      await t.api('/api/ruleChains?pageSize=100&page=0', { token: admin })
    ).json()) as { data: Array<{ id: { id: string }; root: boolean }> };
    const defaultRoot = roots.data.find((c) => c.root)?.id.id;
    const setRoot = (id: string | undefined) =>
      t.api(`/api/ruleChain/${id}/root`, { method: 'POST', token: admin });
    assert.equal((await setRoot(chain.id.id)).status, 200);

    const client = await mqttConnect(t.gw.ports.mqtt, { username: outside.token });
    const ids: string[] = [];
    const schedule = async (
      originatorId: unknown,
      msgType: string,
      msgBody: unknown,
      metadata: Record<string, string> = {},
    ) => {
      const e = await adminPost(t, '/api/schedulerEvent', {
        name: msgType,
        type: 'CUSTOM',
        schedule: { timezone: 'UTC', cron: '* * * * * *' },
        configuration: { originatorId, msgType, msgBody, metadata },
      });
      ids.push(e.id.id);
      return e.id.id;
    };
    try {
      await client.subscribeAsync('v1/devices/me/rpc/request/+', { qos: 1 });
      const rpc = nextMessage(client, /^v1\/devices\/me\/rpc\/request\/\d+$/, 15_000);
      await schedule({ entityType: 'ENTITY_GROUP', id: groupId }, 'POST_ATTRIBUTES_REQUEST', {
        mode: 'night',
      });
      await schedule({ entityType: 'DEVICE', id: outside.id }, 'RPC_CALL_FROM_SERVER_TO_DEVICE', {
        method: 'reboot',
        params: { delay: 5 },
      });
      const tickId = await schedule(
        { entityType: 'DEVICE', id: a.id },
        'SHIFT_TICK',
        { shift: 2 },
        { line: 'L2' },
      );

      assert.deepEqual(JSON.parse((await rpc).payload.toString()), {
        method: 'reboot',
        params: { delay: 5 },
      });
      const serverMode = async (id: string) => {
        const res = await t.api(
          `/api/plugins/telemetry/DEVICE/${id}/values/attributes/SERVER_SCOPE?keys=mode`,
          { token: admin },
        );
        return ((await res.json()) as Array<{ key: string; value: unknown }>)[0]?.value;
      };
      await waitFor(
        async () => (await serverMode(a.id)) === 'night' && (await serverMode(b.id)) === 'night',
        15_000,
        'the group schedule on both devices',
      );
      assert.equal(await serverMode(outside.id), undefined, 'a device outside the group');
      const tick = await waitFor(
        () => recorder.requests.find((r) => r.url.startsWith('/tick/')),
        15_000,
        'the scheduled message through the root chain',
      );
      // The event's metadata and its id are the message's metadata.
      assert.equal(tick.url, `/tick/L2/${tickId}`);
      assert.deepEqual(JSON.parse(tick.body), { shift: 2 });
    } finally {
      await client.endAsync();
      for (const id of ids)
        await t.api(`/api/schedulerEvent/${id}`, { method: 'DELETE', token: admin });
      await setRoot(defaultRoot);
      await recorder.close();
    }
  });
});
