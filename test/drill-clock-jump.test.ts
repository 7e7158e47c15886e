/**
 * Fault drill (issue 20): the wall clock jumps back an hour and forward a day, as on a Pi
 * without a real-time clock before and after NTP. Server timestamps stay ordered and timers
 * (long polls, RPC timeouts, DURATION alarm rules) still fire on time.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ServerClock } from '../src/common/clock.js';
import {
  alarmsOf,
  createProfile,
  createProfiledDevice,
  latest,
  numeric,
  rule,
} from './helpers/alarms.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe('ServerClock', () => {
  it('never runs backwards: a jump forward is taken, after a jump back it advances at the real rate', () => {
    let wall = 1_700_000_000_000;
    let mono = 0;
    const clock = new ServerClock(
      () => wall,
      () => mono,
    );
    const readings: number[] = [];
    const step = (ms: number, jump = 0) => {
      wall += ms + jump;
      mono += ms;
      readings.push(clock.now());
    };
    step(0);
    step(10);
    step(10, -HOUR); // back an hour
    step(10);
    step(0.4);
    step(0.7); // fractions add up, never drift
    step(10, DAY); // forward a day
    step(10, -HOUR);
    step(10);
    for (let i = 1; i < readings.length; i++) {
      assert.ok(readings[i] >= readings[i - 1], `reading ${i} went back: ${readings}`);
    }
    const t0 = 1_700_000_000_000;
    assert.deepEqual(readings.slice(0, 4), [t0, t0 + 10, t0 + 20, t0 + 30]);
    assert.equal(readings[5], t0 + 31, 'whole milliseconds of 1.1 ms elapsed');
    assert.equal(readings[6], wall - 20 + HOUR, 'the forward jump is taken at once');
    assert.equal(readings[8], readings[6] + 20, 'then real time again after the jump back');
  });
});

describe('fault drill: the clock jumps back an hour and forward a day', () => {
  let t: TestGateway;
  let offset = 0;
  let dev: { id: string; token: string };

  before(async () => {
    t = await startGateway({ wallClock: () => Date.now() + offset });
    dev = await createDevice(t, 'clock-dev');
  });
  after(() => t.close());

  it('server-time telemetry stays in the order it was received', async () => {
    const post = async (seq: number) => {
      const res = await t.api(`/api/v1/${dev.token}/telemetry`, { body: { seq } });
      assert.equal(res.status, 200);
    };
    await post(1);
    offset = -HOUR;
    await post(2);
    offset = DAY;
    await post(3);
    offset = -HOUR;
    await post(4);
    await post(5);
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${dev.id}/values/timeseries?keys=seq&startTs=0&endTs=${Date.now() + 2 * DAY}&limit=100&orderBy=ASC`,
      { token: await t.adminToken() },
    );
    const points = ((await res.json()) as { seq: Array<{ ts: number; value: string }> }).seq;
    assert.deepEqual(
      points.map((p) => Number(p.value)),
      [1, 2, 3, 4, 5],
    );
    for (let i = 1; i < points.length; i++) assert.ok(points[i].ts > points[i - 1].ts);
  });

  it('a long poll still times out on time after the jumps (timers are monotonic)', async () => {
    offset = -HOUR;
    const started = performance.now();
    const res = await t.api(`/api/v1/${dev.token}/attributes/updates?timeout=1000`);
    assert.equal(res.status, 408);
    assert.ok(performance.now() - started < 30_000);
  });

  it('an RPC times out on time although the clock was set back an hour after it was sent', async () => {
    offset = 0;
    const started = performance.now();
    const call = fetch(`${t.baseUrl}/api/rpc/twoway/${dev.id}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'X-Authorization': `Bearer ${await t.adminToken()}`,
      },
      body: JSON.stringify({ method: 'ping', params: {}, timeout: 5000 }),
      signal: AbortSignal.timeout(60_000),
    });
    await new Promise((r) => setTimeout(r, 500));
    offset = -HOUR;
    const res = await call;
    assert.equal(res.status, 504);
    const took = performance.now() - started;
    assert.ok(took >= 4000 && took < 60_000, `took ${took} ms`);
  });

  it('a DURATION alarm rule fires on time after the clock jumps forward a day and back again', async () => {
    offset = 0;
    const profileId = await createProfile(t, 'Clock oven', [
      {
        id: 'hot',
        alarmType: 'Hot for 2 seconds',
        createRules: {
          MAJOR: rule([numeric('temperature', 'GREATER', 50)], {
            type: 'DURATION',
            unit: 'SECONDS',
            predicate: { defaultValue: 2, userValue: null, dynamicValue: null },
          }),
        },
        clearRule: null,
      },
    ]);
    const oven = await createProfiledDevice(t, 'clock-oven', profileId);
    // The reading is stamped with server time a day ahead; then the wall clock goes back 25
    // hours. No further reading: only the engine's timer can raise the alarm, on server time.
    offset = DAY;
    const res = await t.api(`/api/v1/${oven.token}/telemetry`, { body: { temperature: 60 } });
    assert.equal(res.status, 200);
    await waitFor(async () => (await latest(t, oven.id, 'temperature')) === 60);
    offset = -HOUR;
    const started = performance.now();
    const [alarm] = await waitFor(
      async () => {
        const list = await alarmsOf(t, oven.id);
        return list.length ? list : undefined;
      },
      30_000,
      'the DURATION alarm',
    );
    assert.equal(alarm.type, 'Hot for 2 seconds');
    assert.ok(performance.now() - started < 60_000);
  });
});
