/**
 * Fault drill (issue 20): the wall clock jumps back an hour and forward a day, as on a Pi
 * without a real-time clock before and after NTP. Server timestamps stay ordered and timers
 * (long polls, RPC timeouts, DURATION alarm rules, claim expiry) still fire on time.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { ServerClock } from '../src/common/clock.js';
import { Scheduler } from '../src/scheduler/scheduler.js';
import {
  alarmsOf,
  createProfile,
  createProfiledDevice,
  latest,
  numeric,
  rule,
} from './helpers/alarms.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

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

  it('claims run on server time: expiry neither stuck after a jump back nor negative after a jump forward', async () => {
    const customer = await createCustomer(t, 'Clock claimer');
    const user = await activateUser(
      t,
      await createUser(t, 'clock-claimer@example.com', customer),
      'password-clock-1',
    );
    const ticker = await createDevice(t, 'clock-ticker');
    const admin = await t.adminToken();
    /** The server's time now: the timestamp it gives a reading. */
    const serverTime = async () => {
      const seq = performance.now();
      assert.equal(
        (await t.api(`/api/v1/${ticker.token}/telemetry`, { body: { seq } })).status,
        200,
      );
      const res = await t.api(
        `/api/plugins/telemetry/DEVICE/${ticker.id}/values/timeseries?keys=seq`,
        { token: admin },
      );
      const [point] = ((await res.json()) as { seq: Array<{ ts: number; value: number }> }).seq;
      assert.equal(Number(point.value), seq);
      return point.ts;
    };
    const deviceClaim = async (token: string, durationMs: number) => {
      const res = await t.api(`/api/v1/${token}/claim`, {
        method: 'POST',
        body: { secretKey: 'k', durationMs },
      });
      assert.equal(res.status, 200);
    };
    const customerClaim = async (name: string) => {
      const res = await t.api(`/api/customer/device/${name}/claim`, {
        method: 'POST',
        body: { secretKey: 'k' },
        token: user,
      });
      const body = (await res.json()) as { response: string } | string;
      return typeof body === 'string' ? body : body.response;
    };

    // Forward a day: the claim's times are the server's (a day ahead), not the wall clock's.
    offset = DAY;
    const a = await createDevice(t, 'clock-claim-a');
    const before = await serverTime();
    await deviceClaim(a.token, 3000);
    const after = await serverTime();
    const pa = t.gw.services.claims.pending(a.id);
    assert.ok(pa && pa.createdTime >= before && pa.createdTime <= after, `${pa?.createdTime}`);
    assert.equal(pa.expirationTime - pa.createdTime, 3000);

    // Back a day: the 3 s claim still expires 3 s later, not a day later.
    offset = 0;
    await new Promise((r) => setTimeout(r, 3500));
    assert.equal(await customerClaim('clock-claim-a'), 'FAILURE', 'expired on time');

    // A claim made while the wall clock is behind has its full, positive duration...
    const b = await createDevice(t, 'clock-claim-b');
    await deviceClaim(b.token, 60_000);
    const pb = t.gw.services.claims.pending(b.id);
    assert.ok(pb && pb.expirationTime - pb.createdTime === 60_000);
    // ...and a jump two days forward (server time moves a day past its expiry) ends it; a claim
    // made after the jump is valid for its own minute.
    offset = 2 * DAY;
    assert.equal(await customerClaim('clock-claim-b'), 'FAILURE', 'expired by the jump forward');
    const c = await createDevice(t, 'clock-claim-c');
    await deviceClaim(c.token, 60_000);
    assert.equal(await customerClaim('clock-claim-c'), 'SUCCESS');
  });
});

/**
 * The scheduler on a jumping wall clock. node-cron reads the global `Date` (it cannot be given a
 * clock), so `Date` is replaced by one running `shift` ms off the real time for these tests;
 * timers stay monotonic, as on a Pi whose clock NTP moves.
 */
describe('fault drill: scheduled jobs when the clock jumps', () => {
  const RealDate = Date;
  let shift = 0;
  class ShiftedDate extends RealDate {
    constructor(...args: ConstructorParameters<typeof Date> | []) {
      if (args.length === 0) super(RealDate.now() + shift);
      else super(...(args as ConstructorParameters<typeof Date>));
    }
    static override now(): number {
      return RealDate.now() + shift;
    }
  }
  let scheduler: Scheduler;
  before(() => {
    globalThis.Date = ShiftedDate as DateConstructor;
    scheduler = new Scheduler({ log: pino({ level: 'silent' }), watchMs: 100 });
  });
  after(() => {
    scheduler.stop();
    globalThis.Date = RealDate;
  });

  it('an every-second job keeps running after the clock goes back an hour and forward a day, no slot twice', async () => {
    shift = 0;
    const slots: number[] = [];
    scheduler.schedule('drill.every-second', '* * * * * *', undefined, () => {
      slots.push(RealDate.now() + shift);
    });
    await waitFor(() => slots.length >= 2, 10_000, 'two runs');
    shift = -HOUR;
    const back = slots.length;
    // node-cron alone waits for the stale slot an hour ahead: no run for an hour.
    await waitFor(() => slots.length >= back + 3, 15_000, 'three runs after the jump back');
    shift = DAY;
    const forward = slots.length;
    await waitFor(() => slots.length >= forward + 3, 15_000, 'three runs after the jump forward');
    const seconds = slots.map((t) => Math.floor(t / 1000));
    assert.equal(new Set(seconds).size, seconds.length, `a second ran twice: ${seconds}`);
    assert.ok(slots[slots.length - 1] > RealDate.now() + DAY - 10_000, 'runs on the new time');
    scheduler.cancel('drill.every-second');
  });

  it('a slot already run does not run again when the clock goes back over it', async () => {
    shift = 0;
    const slots: number[] = [];
    scheduler.schedule('drill.every-4s', '*/4 * * * * *', undefined, () => {
      slots.push(Math.round((RealDate.now() + shift) / 1000) * 1000);
    });
    await waitFor(() => slots.length >= 1, 10_000, 'the first run');
    const first = slots[0];
    // Back 3 s: the wall clock passes the slot just run once more.
    shift = -3000;
    await waitFor(() => slots.length >= 2, 15_000, 'the next run');
    assert.equal(slots.filter((s) => s === first).length, 1, `slots ${slots}`);
    assert.equal(slots[1], first + 4000, `slots ${slots}`);
    scheduler.cancel('drill.every-4s');
  });
});
