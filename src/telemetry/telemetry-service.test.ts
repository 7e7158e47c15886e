import assert from 'node:assert/strict';
import { statfsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { Config } from '../config.js';
import { MIGRATIONS } from '../db/migrations/index.js';
import { migrate } from '../db/migrator.js';
import { type Db, openDb } from '../db/open.js';
import { DeviceProfileService } from '../devices/device-profile-service.js';
import { type DeviceIdentity, DeviceService } from '../devices/device-service.js';
import { ValidationError } from '../errors.js';
import { EventBus, type GatewayEvents } from '../events.js';
import { TenantService } from '../tenant/tenant-service.js';
import { parseDeleteQuery, parseTimeseriesQuery } from './telemetry-query.js';
import { TelemetryService, type TelemetryServiceDeps } from './telemetry-service.js';
import { BLOCK_OVERHEAD, CHUNK_MS, LOG_OVERHEAD } from './telemetry-store.js';

const log = pino({ level: 'silent' });
const HOUR = CHUNK_MS;
const T0 = 1_699_999_200_000; // an hour boundary

interface Fixture {
  dir: string;
  db: Db;
  bus: EventBus;
  devices: DeviceService;
  telemetry: TelemetryService;
  now: { value: number };
  device(name: string): DeviceIdentity;
  reopen(): Promise<void>;
  close(): Promise<void>;
}

async function fixture(
  cfg: Partial<Config['telemetry']> = {},
  evictStepPoints = 7,
  inCommit?: TelemetryServiceDeps['inCommit'],
): Promise<Fixture> {
  const dir = await mkdtemp(join(tmpdir(), 'edge-telemetry-'));
  const now = { value: T0 + 10 * HOUR };
  const config: Config['telemetry'] = {
    maxPoints: 10_000_000,
    maxPointsPerDevice: 0,
    ttlDays: 0,
    batchMaxWaitMs: 5,
    batchLingerMs: 0,
    batchMaxPoints: 20_000,
    ...cfg,
  };
  const f = {} as Fixture;
  const open = () => {
    const db = openDb({ dataDir: dir, durability: 'normal' });
    migrate(db, MIGRATIONS, log);
    const bus = new EventBus(log);
    const tenants = new TenantService({ db });
    tenants.init();
    const profiles = new DeviceProfileService({ db, tenants });
    profiles.init();
    const devices = new DeviceService({ db, tenants, profiles, bus });
    const telemetry = new TelemetryService({
      db,
      bus,
      devices,
      log,
      config,
      now: () => now.value,
      evictStepPoints,
      inCommit,
    });
    telemetry.start();
    Object.assign(f, { db, bus, devices, telemetry });
  };
  open();
  Object.assign(f, {
    dir,
    now,
    device(name: string) {
      const d = f.devices.save({ name });
      return f.devices.identity(d.id.id) as DeviceIdentity;
    },
    async reopen() {
      await f.telemetry.stop();
      f.db.close();
      open();
    },
    async close() {
      await f.telemetry.stop();
      if (f.db.open) f.db.close();
      await rm(dir, { recursive: true, force: true });
    },
  });
  return f;
}

const history = (params: Record<string, string>) => parseTimeseriesQuery(params);
/** Committed points by default: moved into `ts_kv` or still staged. */
const COMMITTED = 'SELECT (SELECT count(*) FROM ts_kv) + (SELECT count(*) FROM ts_kv_stage) AS n';
const count = (db: Db, sql = COMMITTED) => (db.prepare(sql).get() as { n: number }).n;

describe('ingest and group commit', () => {
  let f: Fixture;
  before(async () => {
    f = await fixture({ batchMaxWaitMs: 30 });
  });
  after(() => f.close());

  it('resolves only after the commit, and batches concurrent writers into one transaction', async () => {
    const a = f.device('gc-a');
    const b = f.device('gc-b');
    const events: Array<GatewayEvents['telemetry']> = [];
    f.bus.on('test', 'telemetry', (e) => events.push(e));
    const before = f.telemetry.stats.batches;
    const writes = [
      f.telemetry.ingest(a, '{"temp":21.5}', T0),
      f.telemetry.ingest(a, '{"hum":40}', T0),
      f.telemetry.ingest(b, '[{"ts":1,"values":{"x":1}},{"ts":2,"values":{"x":2}}]'),
    ];
    // Nothing is visible before the batch's timer fires.
    assert.equal(count(f.db), 0);
    assert.equal(f.telemetry.stats.pending, 4);
    assert.deepEqual(await Promise.all(writes), [1, 1, 2]);
    assert.equal(count(f.db), 4);
    assert.equal(f.telemetry.stats.batches - before, 1);
    // One event per device per batch, with that device's points.
    assert.equal(events.length, 2);
    const byDevice = Object.fromEntries(events.map((e) => [e.deviceId, e.points]));
    assert.deepEqual(
      byDevice[a.id].map((p) => [p.key, p.value]),
      [
        ['temp', 21.5],
        ['hum', 40],
      ],
    );
    assert.deepEqual(
      byDevice[b.id].map((p) => p.ts),
      [1, 2],
    );
    f.bus.removeOwner('test');
  });

  it('commits at the next event-loop turn by default, and lingers only when asked, up to the max wait', async () => {
    const immediate = () => new Promise((r) => setImmediate(r));
    const g = await fixture({ batchMaxWaitMs: 10_000, batchLingerMs: 0 });
    const h = await fixture({ batchMaxWaitMs: 10_000, batchLingerMs: 60 });
    const k = await fixture({ batchMaxWaitMs: 20, batchLingerMs: 5_000 });
    try {
      const started = Date.now();
      const fast = g.telemetry.ingest(g.device('next-turn'), '{"a":1}');
      await immediate();
      await immediate();
      assert.equal(count(g.db), 1, 'committed at the next turn, not after the 10 s max wait');
      await fast;
      const lingering = h.telemetry.ingest(h.device('linger'), '{"a":1}');
      await immediate();
      await immediate();
      assert.equal(count(h.db), 0, 'a lingering batch waits');
      await lingering;
      assert.ok(Date.now() - started >= 55, 'committed after its linger time');
      const capped = Date.now();
      await k.telemetry.ingest(k.device('capped'), '{"a":1}');
      assert.ok(Date.now() - capped < 2_000, 'the max wait caps the linger time');
    } finally {
      await Promise.all([g.close(), h.close(), k.close()]);
    }
  });

  it('commits at the batch size without waiting for the timer', async () => {
    const g = await fixture({ batchMaxWaitMs: 10_000, batchMaxPoints: 3 });
    try {
      const d = g.device('size');
      const started = Date.now();
      await g.telemetry.ingest(d, '{"a":1,"b":2,"c":3}');
      assert.ok(Date.now() - started < 5000);
      assert.equal(count(g.db), 3);
    } finally {
      await g.close();
    }
  });

  it('keeps batches to 2 % of the ring-buffer bound', async () => {
    // Bound 500,000: batches of at most 10,000 points, whatever --telemetry-batch-max-points says.
    const g = await fixture({ maxPoints: 500_000, batchMaxPoints: 100_000 });
    try {
      const devices = Array.from({ length: 25 }, (_, i) => g.device(`cap-${i}`));
      const before = g.telemetry.stats.batches;
      const body = JSON.stringify(
        Array.from({ length: 1000 }, (_, i) => ({ ts: i + 1, values: { v: i } })),
      );
      await Promise.all(devices.map((d) => g.telemetry.ingest(d, body)));
      assert.ok(
        g.telemetry.stats.batches - before >= 3,
        `25,000 points in batches of at most 10,000: ${g.telemetry.stats.batches - before} batches`,
      );
      assert.equal(g.telemetry.stats.points, 25_000);
    } finally {
      await g.close();
    }
  });

  it('stores nothing of a bad payload', async () => {
    const d = f.device('bad');
    const n = count(f.db);
    await assert.rejects(
      () => f.telemetry.ingest(d, '[{"ts":1,"values":{"a":1}},{"ts":"x","values":{"a":2}}]'),
      ValidationError,
    );
    assert.equal(count(f.db), n);
  });

  it('rejects every caller of a batch whose commit fails, and keeps working afterwards', async () => {
    const d = f.device('fail');
    f.db.pragma('query_only = ON');
    const results = await Promise.allSettled([
      f.telemetry.ingest(d, '{"a":1}'),
      f.telemetry.ingest(d, '{"b":2}'),
    ]);
    f.db.pragma('query_only = OFF');
    assert.deepEqual(
      results.map((r) => r.status),
      ['rejected', 'rejected'],
    );
    assert.equal(f.telemetry.devicePoints(d.id), 0);
    await f.telemetry.ingest(d, '{"a":1}');
    assert.equal(f.telemetry.devicePoints(d.id), 1);
    assert.deepEqual(f.telemetry.keys(d.id), ['a']);
  });

  it('stop() commits what is pending, then refuses writes', async () => {
    const g = await fixture({ batchMaxWaitMs: 10_000 });
    const d = g.device('stop');
    const pending = g.telemetry.ingest(d, '{"a":1}');
    await g.telemetry.stop();
    await pending;
    assert.equal(count(g.db), 1);
    await assert.rejects(() => g.telemetry.ingest(d, '{"a":2}'), /stopped/);
    await g.close();
  });
});

describe('storage, overwrite and latest values', () => {
  let f: Fixture;
  let d: DeviceIdentity;
  before(async () => {
    f = await fixture();
    d = f.device('store');
  });
  after(() => f.close());

  it('keeps every value type and returns strings unless strict', async () => {
    await f.telemetry.ingest(
      d,
      '{"ts":1000,"values":{"b":true,"l":42,"d":21.0,"s":"hi","j":{"a":[1,2]},"big":9223372036854775807}}',
    );
    const loose = f.telemetry.query(d.id, history({}));
    assert.deepEqual(loose, {
      b: [{ ts: 1000, value: 'true' }],
      l: [{ ts: 1000, value: '42' }],
      d: [{ ts: 1000, value: '21.0' }],
      s: [{ ts: 1000, value: 'hi' }],
      j: [{ ts: 1000, value: '{"a":[1,2]}' }],
      big: [{ ts: 1000, value: '9223372036854775807' }],
    });
    const strict = f.telemetry.query(
      d.id,
      history({ useStrictDataTypes: 'true', keys: 'b,l,d,s,j' }),
    );
    assert.deepEqual(strict, {
      b: [{ ts: 1000, value: true }],
      l: [{ ts: 1000, value: 42 }],
      d: [{ ts: 1000, value: 21 }],
      s: [{ ts: 1000, value: 'hi' }],
      j: [{ ts: 1000, value: { a: [1, 2] } }],
    });
    f.telemetry.flush();
    const types = f.db
      .prepare('SELECT typeof(dbl_v) AS d FROM ts_kv WHERE ts = 1000 AND dbl_v IS NOT NULL')
      .get() as { d: string };
    assert.equal(types.d, 'real');
  });

  it('a repeated (device, key, ts) overwrites, also with another type, and is counted once', async () => {
    const before = f.telemetry.devicePoints(d.id);
    await f.telemetry.ingest(d, '{"ts":2000,"values":{"o":1}}');
    await f.telemetry.ingest(d, '{"ts":2000,"values":{"o":"two"}}');
    await Promise.all([
      f.telemetry.ingest(d, '{"ts":3000,"values":{"o":3}}'),
      f.telemetry.ingest(d, '{"ts":3000,"values":{"o":4}}'),
    ]);
    assert.equal(f.telemetry.devicePoints(d.id), before + 2);
    const rows = f.telemetry.query(
      d.id,
      history({
        keys: 'o',
        startTs: '0',
        endTs: '10000',
        orderBy: 'ASC',
        useStrictDataTypes: 'true',
      }),
    );
    assert.deepEqual(rows.o, [
      { ts: 2000, value: 'two' },
      { ts: 3000, value: 4 },
    ]);
    const total = count(f.db);
    assert.equal(f.telemetry.stats.points, total);
  });

  it('a series whose value type changes within one batch is counted exactly', async () => {
    const before = f.telemetry.devicePoints(d.id);
    await f.telemetry.ingest(
      d,
      '[{"ts":7001,"values":{"m":1}},{"ts":7002,"values":{"m":"x"}},{"ts":7003,"values":{"m":2.5}}]',
    );
    assert.equal(f.telemetry.devicePoints(d.id), before + 3);
    assert.equal(count(f.db, 'SELECT sum(points) AS n FROM ts_kv_chunk'), count(f.db));
    assert.deepEqual(f.telemetry.query(d.id, history({ keys: 'm' })).m, [
      { ts: 7003, value: '2.5' },
    ]);
  });

  it('latest keeps the newest ts; an older point does not replace it', async () => {
    await f.telemetry.ingest(d, '{"ts":5000,"values":{"t":5}}');
    await f.telemetry.ingest(d, '{"ts":4000,"values":{"t":4}}');
    assert.deepEqual(f.telemetry.query(d.id, history({ keys: 't' })).t, [{ ts: 5000, value: '5' }]);
  });

  it('latest of a key without data is null at the current time', () => {
    const res = f.telemetry.query(d.id, history({ keys: 't,nope' }));
    assert.deepEqual(res.nope, [{ ts: f.now.value, value: null }]);
  });

  it('raw history: [startTs, endTs), limit and order', async () => {
    const payload = Array.from({ length: 10 }, (_, i) => ({
      ts: 10_000 + i * 100,
      values: { h: i },
    }));
    await f.telemetry.ingest(d, JSON.stringify(payload));
    const q = (p: Record<string, string>) =>
      f.telemetry.query(d.id, history({ keys: 'h', useStrictDataTypes: 'true', ...p })).h ?? [];
    assert.deepEqual(
      q({ startTs: '10100', endTs: '10400' }).map((p) => p.value),
      [3, 2, 1],
    );
    assert.deepEqual(
      q({ startTs: '10000', endTs: '20000', orderBy: 'ASC', limit: '3' }).map((p) => p.value),
      [0, 1, 2],
    );
    assert.deepEqual(
      q({ startTs: '10000', endTs: '20000', limit: '2' }).map((p) => p.value),
      [9, 8],
    );
    assert.deepEqual(q({ startTs: '20000', endTs: '30000' }), []);
    assert.ok(!('h' in f.telemetry.query(d.id, history({ keys: 'h', startTs: '0', endTs: '1' }))));
  });

  it('keys of a device', () => {
    assert.deepEqual(f.telemetry.keys(d.id), ['b', 'big', 'd', 'h', 'j', 'l', 'm', 'o', 's', 't']);
  });

  it('server-side save refuses a payload without data and unknown devices', async () => {
    await assert.rejects(() => f.telemetry.save(d.id, '{}'), /No timeseries data/);
    await assert.rejects(
      () => f.telemetry.save('6a2f4e1c-0000-4000-8000-000000000000', '{"a":1}'),
      /not found/,
    );
    assert.equal(await f.telemetry.save(d.id, { ts: 1, values: { srv: 1 } }), 1);
  });
});

describe('aggregation', () => {
  let f: Fixture;
  let d: DeviceIdentity;
  const agg = (agg: string, p: Record<string, string> = {}) =>
    f.telemetry.query(
      d.id,
      history({
        keys: 'v',
        agg,
        startTs: '0',
        endTs: '1000',
        interval: '300',
        useStrictDataTypes: 'true',
        orderBy: 'ASC',
        ...p,
      }),
    ).v ?? [];
  before(async () => {
    f = await fixture();
    d = f.device('agg');
    // Buckets of 300 ms over [0, 1000): [0,300) [300,600) [600,900) [900,1000).
    // 300 and 900 sit exactly on bucket edges; [600,900) is empty.
    await f.telemetry.ingest(
      d,
      JSON.stringify([
        { ts: 0, values: { v: 1 } },
        { ts: 100, values: { v: 2.5 } },
        { ts: 299, values: { v: 'text' } },
        { ts: 300, values: { v: 10 } },
        { ts: 599, values: { v: 20 } },
        { ts: 900, values: { v: 'b' } },
        { ts: 950, values: { v: 'a' } },
        { ts: 999, values: { v: true } },
        { ts: 1000, values: { v: 1000 } },
      ]),
    );
  });
  after(() => f.close());

  it('AVG over numeric values, bucket ts in the middle, empty buckets omitted', () => {
    assert.deepEqual(agg('AVG'), [
      { ts: 150, value: 1.75 },
      { ts: 450, value: 15 },
    ]);
  });

  it('the last bucket is cut at endTs and its middle moves', () => {
    assert.deepEqual(agg('COUNT'), [
      { ts: 150, value: 3 },
      { ts: 450, value: 2 },
      { ts: 950, value: 3 },
    ]);
  });

  it('SUM is a long for long values, a double when doubles take part', () => {
    assert.deepEqual(agg('SUM'), [
      { ts: 150, value: 3.5 },
      { ts: 450, value: 30 },
    ]);
    assert.deepEqual(
      f.telemetry.query(
        d.id,
        history({ keys: 'v', agg: 'SUM', startTs: '300', endTs: '600', interval: '300' }),
      ).v,
      [{ ts: 450, value: '30' }],
    );
  });

  it('MIN/MAX use numbers, else strings, else booleans', () => {
    assert.deepEqual(agg('MIN'), [
      { ts: 150, value: 1 },
      { ts: 450, value: 10 },
      { ts: 950, value: 'a' },
    ]);
    assert.deepEqual(agg('MAX'), [
      { ts: 150, value: 2.5 },
      { ts: 450, value: 20 },
      { ts: 950, value: 'b' },
    ]);
    assert.deepEqual(agg('MAX', { startTs: '999', endTs: '1000' }), [{ ts: 999, value: true }]);
  });

  it('DESC order and string rendering of aggregates', () => {
    const res = f.telemetry.query(
      d.id,
      history({ keys: 'v', agg: 'AVG', startTs: '0', endTs: '1000', interval: '300' }),
    );
    assert.deepEqual(res.v, [
      { ts: 450, value: '15.0' },
      { ts: 150, value: '1.75' },
    ]);
  });

  it('one bucket wider than the range covers it', () => {
    assert.deepEqual(agg('COUNT', { interval: '100000' }), [{ ts: 500, value: 8 }]);
  });
});

describe('ring buffer eviction', () => {
  it('evicts the oldest chunks first, down to the bound, and never the latest values', async () => {
    const f = await fixture({ maxPoints: 1000 });
    try {
      const d1 = f.device('ev1');
      const d2 = f.device('ev2');
      // 4 hours x 300 points per device: 2400 points, oldest hour first.
      for (let h = 0; h < 4; h++) {
        for (const d of [d1, d2]) {
          const payload = Array.from({ length: 300 }, (_, i) => ({
            ts: T0 + h * HOUR + i * 1000,
            values: { v: h * 1000 + i },
          }));
          await f.telemetry.ingest(d, JSON.stringify(payload));
        }
      }
      f.telemetry.evictNow();
      const stored = count(f.db);
      assert.ok(stored <= 1000 && stored >= 990, `stored ${stored}`);
      assert.equal(f.telemetry.stats.points, stored);
      // Everything older than the evicted range is gone; the newest hours are intact.
      const minTs = (f.db.prepare('SELECT min(ts) AS m FROM ts_kv').get() as { m: number }).m;
      assert.ok(minTs >= T0 + 2 * HOUR, 'hours 0 and 1 evicted first');
      const newest = f.db
        .prepare('SELECT count(*) AS n FROM ts_kv WHERE ts >= ?')
        .get(T0 + 3 * HOUR) as { n: number };
      assert.equal(newest.n, 600);
      // Both devices lost the same share of hour 2.
      const perDevice = f.db
        .prepare('SELECT device_rid, count(*) AS n FROM ts_kv GROUP BY device_rid')
        .all() as Array<{ n: number }>;
      assert.ok(Math.abs(perDevice[0].n - perDevice[1].n) <= 1);
      // Chunk counts agree with the table.
      assert.equal(count(f.db, 'SELECT sum(points) AS n FROM ts_kv_chunk'), stored);
      assert.equal(count(f.db, 'SELECT count(*) AS n FROM ts_kv_latest'), 2);
    } finally {
      await f.close();
    }
  });

  it('runs by itself after commits, in small steps', async () => {
    const f = await fixture({ maxPoints: 1000 });
    try {
      const d = f.device('auto');
      const payload = Array.from({ length: 1500 }, (_, i) => ({ ts: T0 + i, values: { v: i } }));
      await f.telemetry.ingest(d, JSON.stringify(payload));
      const deadline = Date.now() + 5000;
      while (f.telemetry.stats.points > 1000 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 5));
      }
      assert.ok(f.telemetry.stats.points <= 1000);
      // The oldest points went: what is left is the newest range.
      const minTs = (f.db.prepare('SELECT min(ts) AS m FROM ts_kv').get() as { m: number }).m;
      assert.equal(minTs, T0 + 1500 - count(f.db));
    } finally {
      await f.close();
    }
  });

  it('per-device cap evicts only that device', async () => {
    const f = await fixture({ maxPointsPerDevice: 100 });
    try {
      const big = f.device('big');
      const small = f.device('small');
      const mk = (n: number) =>
        JSON.stringify(Array.from({ length: n }, (_, i) => ({ ts: T0 + i, values: { v: i } })));
      await f.telemetry.ingest(big, mk(250));
      await f.telemetry.ingest(small, mk(50));
      f.telemetry.evictNow();
      assert.ok(f.telemetry.devicePoints(big.id) <= 100);
      assert.equal(f.telemetry.devicePoints(small.id), 50);
    } finally {
      await f.close();
    }
  });

  it('TTL removes whole chunks older than the age limit', async () => {
    const f = await fixture({ ttlDays: 1 });
    try {
      const d = f.device('ttl');
      f.now.value = T0 + 30 * HOUR;
      await f.telemetry.ingest(
        d,
        JSON.stringify([
          { ts: T0, values: { v: 1 } },
          { ts: T0 + 5 * HOUR, values: { v: 2 } },
          { ts: T0 + 6 * HOUR + 1, values: { v: 3 } },
          { ts: T0 + 29 * HOUR, values: { v: 4 } },
        ]),
      );
      f.telemetry.evictNow();
      const left = (
        f.db.prepare('SELECT ts FROM ts_kv ORDER BY ts').all() as Array<{ ts: number }>
      ).map((r) => r.ts);
      assert.deepEqual(left, [T0 + 6 * HOUR + 1, T0 + 29 * HOUR]);
    } finally {
      await f.close();
    }
  });

  it('with an age limit, the check after each commit leaves the staged points staged', async () => {
    const f = await fixture({ ttlDays: 1 });
    try {
      const d = f.device('ttl-staged');
      f.now.value = T0 + 30 * HOUR;
      await f.telemetry.ingest(d, JSON.stringify({ ts: T0 + 29 * HOUR, values: { v: 1 } }));
      // The evictor's check runs on the next turn of the event loop.
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      const staged = f.db.prepare('SELECT count(*) AS n FROM ts_kv_stage').get() as { n: number };
      assert.equal(staged.n, 1, 'not moved by the eviction check');
      assert.equal(f.telemetry.evictNow(), 0);
      assert.equal(f.telemetry.devicePoints(d.id), 1);
    } finally {
      await f.close();
    }
  });
});

describe('restart and deletes', () => {
  let f: Fixture;
  let d: DeviceIdentity;
  before(async () => {
    f = await fixture();
    d = f.device('keep');
    await f.telemetry.ingest(
      d,
      JSON.stringify(
        Array.from({ length: 10 }, (_, i) => ({ ts: 1000 * (i + 1), values: { a: i, b: i * 2 } })),
      ),
    );
  });
  after(() => f.close());

  it('data, counts and keys survive a restart', async () => {
    await f.reopen();
    assert.equal(f.telemetry.stats.points, 20);
    assert.equal(f.telemetry.devicePoints(d.id), 20);
    assert.deepEqual(f.telemetry.keys(d.id), ['a', 'b']);
    // The key dictionary is reused, not duplicated.
    await f.telemetry.ingest(d, '{"ts":20000,"values":{"a":99}}');
    assert.equal(count(f.db, 'SELECT count(*) AS n FROM ts_key'), 2);
  });

  it('deletes a range, adjusts counts, and removes the latest value inside it', async () => {
    const events: Array<GatewayEvents['telemetry.deleted']> = [];
    f.bus.on('test', 'telemetry.deleted', (e) => events.push(e));
    f.telemetry.delete(d.id, parseDeleteQuery({ keys: 'a', startTs: '15000', endTs: '25000' }));
    assert.equal(f.telemetry.devicePoints(d.id), 20);
    assert.ok(!('a' in f.telemetry.query(d.id, history({}))), 'latest of a deleted');
    f.telemetry.delete(
      d.id,
      parseDeleteQuery({
        keys: 'a',
        startTs: '9000',
        endTs: '11000',
        rewriteLatestIfDeleted: 'true',
      }),
    );
    assert.equal(f.telemetry.devicePoints(d.id), 18);
    assert.deepEqual(
      events.map((e) => e.keys),
      [['a'], ['a']],
    );
    f.bus.removeOwner('test');
  });

  it('rewrites the latest value from the remaining points when asked', async () => {
    await f.telemetry.ingest(d, '{"ts":50000,"values":{"a":50}}');
    f.telemetry.delete(
      d.id,
      parseDeleteQuery({
        keys: 'a',
        startTs: '40000',
        endTs: '60000',
        rewriteLatestIfDeleted: 'true',
      }),
    );
    assert.deepEqual(f.telemetry.query(d.id, history({ keys: 'a' })).a, [{ ts: 8000, value: '7' }]);
  });

  it('deleteAllDataForKeys removes the whole series; latest stays with deleteLatest=false', () => {
    f.telemetry.delete(
      d.id,
      parseDeleteQuery({ keys: 'b', deleteAllDataForKeys: 'true', deleteLatest: 'false' }),
    );
    assert.equal(f.telemetry.devicePoints(d.id), 8);
    assert.equal(count(f.db, 'SELECT sum(points) AS n FROM ts_kv_chunk'), 8);
    assert.deepEqual(f.telemetry.query(d.id, history({ keys: 'b' })).b, [
      { ts: 10000, value: '18' },
    ]);
  });

  it('deleting the device removes its telemetry and its counts', async () => {
    const other = f.device('other');
    await f.telemetry.ingest(other, '{"x":1}');
    f.devices.delete(d.id);
    assert.equal(count(f.db, `SELECT count(*) AS n FROM ts_kv WHERE device_rid = ${d.rid}`), 0);
    assert.equal(f.telemetry.stats.points, 1);
  });

  it('points of a device deleted while they wait for their batch are dropped', async () => {
    const doomed = f.device('doomed');
    const events: string[] = [];
    f.bus.on('test', 'telemetry', (e) => events.push(e.deviceId));
    const pending = f.telemetry.ingest(doomed, '{"y":1}');
    f.devices.delete(doomed.id);
    await pending;
    f.bus.removeOwner('test');
    assert.deepEqual(events, []);
    assert.equal(
      count(f.db, `SELECT count(*) AS n FROM ts_kv WHERE device_rid = ${doomed.rid}`),
      0,
    );
    assert.equal(
      count(f.db, `SELECT count(*) AS n FROM ts_kv_latest WHERE device_rid = ${doomed.rid}`),
      0,
    );
    assert.equal(f.telemetry.stats.points, 1);
  });
});

describe('log and blocks: commits append to ts_log, seals write compressed blocks', () => {
  const staged = (f: Fixture) => count(f.db, 'SELECT count(*) AS n FROM ts_kv_stage');
  const logRows = (f: Fixture) => count(f.db, 'SELECT count(*) AS n FROM ts_log');
  const blocks = (f: Fixture) => count(f.db, 'SELECT count(*) AS n FROM ts_block');

  it('an acknowledged message is one log row, readable at once, and sealed with exact counts', async () => {
    const f = await fixture();
    try {
      const d = f.device('st-read');
      await f.telemetry.ingest(d, '[{"ts":1000,"values":{"a":1}},{"ts":2000,"values":{"a":2}}]');
      assert.equal(logRows(f), 1, 'one row per message, not per point');
      assert.equal(staged(f), 2, 'both points are open');
      assert.equal(count(f.db, 'SELECT count(*) AS n FROM ts_kv'), 0);
      // A read serves the open range without sealing it.
      const rows = f.telemetry.query(d.id, history({ keys: 'a', startTs: '0', endTs: '5000' }));
      assert.deepEqual(
        rows.a.map((r) => r.value),
        ['2', '1'],
      );
      assert.equal(staged(f), 2);
      assert.deepEqual(f.telemetry.query(d.id, { mode: 'latest', strict: true }), {
        a: [{ ts: 2000, value: 2 }],
      });
      f.telemetry.flush();
      assert.equal(staged(f), 0);
      assert.equal(logRows(f), 0, 'sealed: the log rows are gone');
      assert.equal(blocks(f), 1);
      assert.equal(count(f.db, 'SELECT sum(points) AS n FROM ts_kv_chunk'), 2);
      assert.equal(count(f.db, 'SELECT count(*) AS n FROM ts_kv_latest'), 1);
    } finally {
      await f.close();
    }
  });

  it('a staged point overwrites a moved one and is not counted twice', async () => {
    const f = await fixture();
    try {
      const d = f.device('st-over');
      await f.telemetry.ingest(d, '[{"ts":1000,"values":{"a":1}},{"ts":2000,"values":{"a":2}}]');
      f.telemetry.flush();
      // One overwrite, one new point, and a ts written twice within the stage.
      await f.telemetry.ingest(d, '{"ts":1000,"values":{"a":"one"}}');
      await f.telemetry.ingest(d, '{"ts":3000,"values":{"a":3}}');
      await f.telemetry.ingest(d, '{"ts":3000,"values":{"a":true}}');
      assert.equal(staged(f), 3);
      assert.equal(f.telemetry.devicePoints(d.id), 3);
      const rows = f.telemetry.query(
        d.id,
        history({ keys: 'a', startTs: '0', endTs: '5000', orderBy: 'ASC' }),
      );
      assert.deepEqual(
        rows.a.map((r) => [r.ts, r.value]),
        [
          [1000, 'one'],
          [2000, '2'],
          [3000, 'true'],
        ],
      );
      assert.equal(count(f.db, 'SELECT sum(points) AS n FROM ts_kv_chunk'), 3);
      assert.equal(f.telemetry.stats.points, 3);
    } finally {
      await f.close();
    }
  });

  it('a restart resumes the open range from the log: points, counts and latest values', async () => {
    const f = await fixture();
    try {
      const d = f.device('st-crash');
      await f.telemetry.ingest(d, '[{"ts":1000,"values":{"a":1}},{"ts":2000,"values":{"a":2}}]');
      f.telemetry.flush();
      await f.telemetry.ingest(d, '{"ts":2000,"values":{"a":20}}');
      await f.telemetry.ingest(d, '{"ts":3000,"values":{"a":3,"b":4}}');
      assert.equal(staged(f), 3);
      assert.equal(
        count(f.db, 'SELECT count(*) AS n FROM ts_kv_latest'),
        1,
        'b is not written yet',
      );
      // No stop(): the connection goes away as in a crash, with the points only in the log.
      f.db.close();
      await f.reopen();
      // The open range is back (not sealed by the start), with its latest values.
      assert.equal(logRows(f), 2);
      assert.equal(staged(f), 3);
      const latest = f.telemetry.query(d.id, history({ keys: 'a,b' }));
      assert.deepEqual(latest, { a: [{ ts: 3000, value: '3' }], b: [{ ts: 3000, value: '4' }] });
      const rows = f.telemetry.query(
        d.id,
        history({ keys: 'a', startTs: '0', endTs: '5000', orderBy: 'ASC' }),
      );
      assert.deepEqual(
        rows.a.map((r) => r.value),
        ['1', '20', '3'],
      );
      // It keeps growing, and seals with the overwrite counted once.
      await f.telemetry.ingest(d, '{"ts":4000,"values":{"a":4}}');
      assert.equal(f.telemetry.stats.points, 5);
      assert.equal(f.telemetry.devicePoints(d.id), 5);
      assert.equal(count(f.db, 'SELECT sum(points) AS n FROM ts_kv_chunk'), 5);
      assert.equal(logRows(f), 0);
    } finally {
      await f.close();
    }
  });

  it('deleting a device removes its log rows and blocks; the others are still sealed exactly', async () => {
    const f = await fixture();
    try {
      const gone = f.device('st-gone');
      const kept = f.device('st-kept');
      await Promise.all([
        f.telemetry.ingest(gone, '{"ts":1000,"values":{"a":1}}'),
        f.telemetry.ingest(kept, '{"ts":1000,"values":{"a":1}}'),
      ]);
      f.telemetry.flush();
      await Promise.all([
        f.telemetry.ingest(gone, '{"ts":2000,"values":{"a":2}}'),
        f.telemetry.ingest(kept, '{"ts":2000,"values":{"a":2}}'),
      ]);
      f.devices.delete(gone.id);
      assert.equal(staged(f), 1);
      assert.equal(f.telemetry.stats.points, 2);
      assert.equal(count(f.db, 'SELECT count(*) AS n FROM ts_kv'), 2);
      assert.equal(
        count(f.db, `SELECT count(*) AS n FROM ts_block WHERE device_rid = ${gone.rid}`),
        0,
      );
      assert.equal(f.telemetry.devicePoints(kept.id), 2);
    } finally {
      await f.close();
    }
  });

  it('queries read across blocks of several seals, hour chunks and the open range alike', async () => {
    const f = await fixture();
    try {
      const d = f.device('st-across');
      // 3 hours at one point a minute, sealed in 3 uneven parts, the last hour left open.
      const pts = Array.from({ length: 180 }, (_, i) => ({
        ts: T0 + i * 60_000,
        values: { v: i },
      }));
      await f.telemetry.ingest(d, JSON.stringify(pts.slice(0, 50)));
      f.telemetry.flush();
      await f.telemetry.ingest(d, JSON.stringify(pts.slice(50, 130)));
      f.telemetry.flush();
      await f.telemetry.ingest(d, JSON.stringify(pts.slice(130)));
      assert.ok(blocks(f) >= 3, `blocks ${blocks(f)}`);
      assert.equal(staged(f), 50);
      const q = (p: Record<string, string>) =>
        f.telemetry.query(d.id, history({ keys: 'v', useStrictDataTypes: 'true', ...p })).v;
      // Raw reads: a range over every part, both orders, with limits crossing the boundaries.
      const all = q({
        startTs: String(T0),
        endTs: String(T0 + 3 * HOUR),
        orderBy: 'ASC',
        limit: '1000',
      });
      assert.deepEqual(
        all.map((r) => r.value),
        pts.map((_, i) => i),
      );
      const tail = q({
        startTs: String(T0 + 45 * 60_000),
        endTs: String(T0 + 135 * 60_000),
        limit: '7',
      });
      assert.deepEqual(
        tail.map((r) => r.value),
        [134, 133, 132, 131, 130, 129, 128],
      );
      // Aggregates over buckets that straddle seals, chunks and the open range.
      const avg = q({
        startTs: String(T0),
        endTs: String(T0 + 3 * HOUR),
        agg: 'AVG',
        interval: String(40 * 60_000),
      });
      const expected = [0, 1, 2, 3, 4].map((k) => {
        const xs = pts.map((_, i) => i).filter((i) => i >= k * 40 && i < (k + 1) * 40);
        return xs.reduce((a, b) => a + b, 0) / xs.length;
      });
      assert.deepEqual(avg.map((r) => r.value).reverse(), expected);
      const cnt = q({
        startTs: String(T0),
        endTs: String(T0 + 3 * HOUR),
        agg: 'COUNT',
        interval: String(3 * HOUR),
        orderBy: 'ASC',
      });
      assert.deepEqual(cnt, [{ ts: T0 + 1.5 * HOUR, value: 180 }]);
      // The same after everything is sealed, and after a restart.
      f.telemetry.flush();
      assert.deepEqual(
        q({ startTs: String(T0), endTs: String(T0 + 3 * HOUR), orderBy: 'ASC', limit: '1000' }),
        all,
      );
      await f.reopen();
      assert.deepEqual(
        q({ startTs: String(T0), endTs: String(T0 + 3 * HOUR), orderBy: 'ASC', limit: '1000' }),
        all,
      );
    } finally {
      await f.close();
    }
  });

  it('aggregates a series of doubles (NaN, -0, several seals, the open range) as from its raw points', async () => {
    const f = await fixture();
    try {
      const d = f.device('st-doubles');
      // 3 hours at one point a minute, in steps of 0.25 (sums are exact): NaN and -0 among them.
      const value = (i: number) =>
        i % 37 === 5 ? Number.NaN : i % 41 === 7 ? -0 : (i % 13) * 0.25 - 1;
      const pts = Array.from({ length: 180 }, (_, i) => ({ ts: T0 + i * 60_000, v: value(i) }));
      const write = (from: number, to: number) =>
        f.telemetry.writePoints(
          d,
          pts
            .slice(from, to)
            .map((p) => ({ key: 'v', ts: p.ts, kind: 'double' as const, value: p.v })),
        );
      await write(0, 70);
      f.telemetry.flush();
      await write(70, 140);
      f.telemetry.flush();
      await write(140, 180);
      assert.ok(blocks(f) >= 3);
      assert.equal(staged(f), 40);
      const startTs = T0 + 13 * 60_000 + 500;
      const endTs = T0 + 171 * 60_000 + 1;
      const interval = 25 * 60_000;
      for (const agg of ['AVG', 'SUM', 'MIN', 'MAX', 'COUNT'] as const) {
        const got = f.telemetry.query(
          d.id,
          history({
            keys: 'v',
            agg,
            startTs: String(startTs),
            endTs: String(endTs),
            interval: String(interval),
            orderBy: 'ASC',
            useStrictDataTypes: 'true',
          }),
        ).v;
        const want: Array<{ ts: number; value: number }> = [];
        for (let b = startTs; b < endTs; b += interval) {
          const bEnd = Math.min(b + interval, endTs);
          const all = pts.filter((p) => p.ts >= b && p.ts < bEnd).map((p) => p.v);
          const nums = all.filter((v) => !Number.isNaN(v));
          const mid = b + Math.floor((bEnd - b) / 2);
          if (agg === 'COUNT') want.push({ ts: mid, value: all.length });
          else if (nums.length === 0) continue;
          else if (agg === 'SUM') want.push({ ts: mid, value: nums.reduce((x, y) => x + y) });
          else if (agg === 'AVG')
            want.push({ ts: mid, value: nums.reduce((x, y) => x + y) / nums.length });
          else want.push({ ts: mid, value: (agg === 'MIN' ? Math.min : Math.max)(...nums) });
        }
        assert.deepEqual(got, want, agg);
      }
    } finally {
      await f.close();
    }
  });

  it('eviction drops whole blocks, oldest first, and cuts only the last one it needs', async () => {
    const f = await fixture({ maxPoints: 1000 }, 5000);
    try {
      const d = f.device('st-evict');
      // 6 blocks (one per hour and seal) of 200 points, the last of 250: 1,250 points in all.
      for (let h = 0; h < 6; h++) {
        const pts = Array.from({ length: h === 5 ? 250 : 200 }, (_, i) => ({
          ts: T0 + h * HOUR + i * 1000,
          values: { v: i },
        }));
        await f.telemetry.ingest(d, JSON.stringify(pts));
        f.telemetry.flush();
      }
      f.telemetry.evictNow();
      assert.ok(f.telemetry.stats.points <= 1000 && f.telemetry.stats.points >= 990);
      // Hour 0 is gone as a whole block; hour 1 lost its oldest points only.
      const sizes = f.db.prepare('SELECT chunk, n FROM ts_block ORDER BY chunk').all() as Array<{
        chunk: number;
        n: number;
      }>;
      assert.equal(sizes.length, 5);
      assert.equal(sizes[0].chunk, T0 / HOUR + 1);
      assert.ok(sizes[0].n < 200);
      assert.deepEqual(
        sizes.slice(1).map((r) => r.n),
        [200, 200, 200, 250],
      );
      assert.equal(
        count(f.db, 'SELECT min(ts) AS n FROM ts_kv'),
        T0 + HOUR + (200 - sizes[0].n) * 1000,
      );
    } finally {
      await f.close();
    }
  });

  it('commits linger for devices on their own clock, not for callers that wait for their ack', async () => {
    const f = await fixture({ batchMaxWaitMs: 10_000, batchLingerMs: 300 });
    try {
      const a = f.device('st-linger-a');
      const b = f.device('st-linger-b');
      // A first batch with both devices lingers.
      let started = Date.now();
      await Promise.all([f.telemetry.ingest(a, '{"v":1}'), f.telemetry.ingest(b, '{"v":1}')]);
      assert.ok(Date.now() - started >= 250, 'the first batch lingered');
      // Both come straight back (they waited for their ack): committed without lingering.
      started = Date.now();
      const batches = f.telemetry.stats.batches;
      await Promise.all([f.telemetry.ingest(a, '{"v":2}'), f.telemetry.ingest(b, '{"v":2}')]);
      assert.ok(
        Date.now() - started < 250,
        `a closed loop is not held up (${Date.now() - started} ms)`,
      );
      assert.equal(f.telemetry.stats.batches, batches + 1, 'one commit for both');
    } finally {
      await f.close();
    }
  });

  it('the writer seals by itself: once a series fills a block, and after the flush interval', async () => {
    const f = await fixture({ blockPoints: 100, flushIntervalSec: 1 });
    try {
      const d = f.device('st-auto');
      await f.telemetry.ingest(
        d,
        JSON.stringify(Array.from({ length: 150 }, (_, i) => ({ ts: T0 + i, values: { v: i } }))),
      );
      const deadline = Date.now() + 5000;
      while (staged(f) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      assert.equal(staged(f), 0, 'a full block seals at once');
      await f.telemetry.ingest(d, '{"ts":1,"values":{"v":1}}');
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(staged(f), 1, 'a trickle stays open ...');
      const later = Date.now() + 5000;
      while (staged(f) > 0 && Date.now() < later) await new Promise((r) => setTimeout(r, 20));
      assert.equal(staged(f), 0, '... until the flush interval');
      assert.equal(logRows(f), 0);
      assert.equal(f.telemetry.stats.points, 151);
    } finally {
      await f.close();
    }
  });
});

describe('the commit hook (inCommit)', () => {
  it('writes in the commit of the points: both are stored, or neither and the callers are rejected', async () => {
    let fail = false;
    const f: Fixture = await fixture({}, 7, (items) => {
      if (fail) throw new Error('outbox full');
      const insert = f.db.prepare('INSERT INTO outbox (device_id, points) VALUES (?, ?)');
      for (const i of items) insert.run(i.deviceId, i.points.length);
    });
    try {
      f.db.exec('CREATE TABLE outbox (device_id TEXT NOT NULL, points INTEGER NOT NULL)');
      const d = f.device('hook');
      assert.equal(await f.telemetry.ingest(d, '{"a":1,"b":2}', T0), 2);
      assert.deepEqual(f.db.prepare('SELECT device_id, points FROM outbox').all(), [
        { device_id: d.id, points: 2 },
      ]);
      fail = true;
      await assert.rejects(f.telemetry.ingest(d, '{"a":3}', T0 + 1000), /outbox full/);
      assert.equal(count(f.db, 'SELECT count(*) AS n FROM outbox'), 1);
      assert.equal(count(f.db, 'SELECT count(*) AS n FROM ts_log'), 1);
      const latest = f.telemetry.query(d.id, { mode: 'latest', keys: ['a'], strict: true });
      assert.equal(latest.a[0].value, 1);
      fail = false;
      assert.equal(await f.telemetry.ingest(d, '{"a":4}', T0 + 2000), 1);
      assert.equal(count(f.db, 'SELECT count(*) AS n FROM outbox'), 2);
    } finally {
      await f.close();
    }
  });
});

describe('byte bound (issue 20)', () => {
  const counted = (f: Fixture) =>
    count(
      f.db,
      `SELECT (SELECT coalesce(sum(length(data) + ${BLOCK_OVERHEAD}), 0) FROM ts_block)
        + (SELECT coalesce(sum(length(data) + ${LOG_OVERHEAD}), 0) FROM ts_log) AS n`,
    );

  it('evicts the oldest blocks once the stored bytes pass --telemetry-max-bytes, counted as eviction does', async () => {
    const f = await fixture({ maxBytes: 60_000 }, 5000);
    try {
      const d = f.device('bytes');
      // 10 hours x 50 strings of 400 characters: about 200 KB, 500 points (far under maxPoints).
      for (let h = 0; h < 10; h++) {
        const pts = Array.from({ length: 50 }, (_, i) => ({
          ts: T0 + h * HOUR + i * 1000,
          values: { s: `${h}-${i}-`.padEnd(400, 'x') },
        }));
        await f.telemetry.ingest(d, JSON.stringify(pts));
        assert.equal(f.telemetry.gauges.bytes, counted(f), 'the count matches the tables');
        f.telemetry.flush();
        assert.equal(f.telemetry.gauges.bytes, counted(f), 'and after the seal');
      }
      f.telemetry.evictNow();
      const bytes = f.telemetry.gauges.bytes;
      assert.equal(bytes, counted(f));
      assert.ok(bytes <= 60_000 && bytes > 40_000, `bytes ${bytes}`);
      assert.equal(f.telemetry.gauges.maxBytes, 60_000);
      // The oldest hours went first; the newest is whole.
      const minTs = count(f.db, 'SELECT min(ts) AS n FROM ts_kv');
      assert.ok(minTs >= T0 + 6 * HOUR, `oldest left ${(minTs - T0) / HOUR} h`);
      assert.equal(count(f.db, `SELECT count(*) AS n FROM ts_kv WHERE ts >= ${T0 + 9 * HOUR}`), 50);
      assert.ok(f.telemetry.stats.evicted > 300);
    } finally {
      await f.close();
    }
  });

  it('is sized to the disk by default', async () => {
    const f = await fixture();
    try {
      const bound = f.telemetry.gauges.maxBytes;
      const fs = statfsSync(f.dir);
      assert.ok(bound > 0 && bound <= (fs.blocks * fs.bsize) / 4, `bound ${bound}`);
    } finally {
      await f.close();
    }
  });
});

describe('query parameters', () => {
  it('reports bad parameters in one message', () => {
    const bad = (p: Record<string, string>, re: RegExp) =>
      assert.throws(
        () => parseTimeseriesQuery(p),
        (e: unknown) => e instanceof ValidationError && re.test(e.message),
      );
    bad({ startTs: '1' }, /endTs is required/);
    bad({ startTs: 'x', endTs: '1' }, /startTs must be an integer/);
    bad({ startTs: '5', endTs: '1' }, /endTs must not be before startTs/);
    bad({ startTs: '0', endTs: '1', agg: 'MEDIAN' }, /agg must be one of/);
    bad({ startTs: '0', endTs: '10', agg: 'AVG' }, /interval must be at least 1/);
    bad({ startTs: '0', endTs: '1000000000', agg: 'AVG', interval: '1' }, /too small/);
    bad({ startTs: '0', endTs: '1', limit: '0' }, /limit must be an integer >= 1/);
    bad({ startTs: '0', endTs: '1', orderBy: 'UP' }, /orderBy must be ASC or DESC/);
    bad({ useStrictDataTypes: 'yes' }, /useStrictDataTypes must be true or false/);
    bad({ startTs: '0', endTs: '1', intervalType: 'WEEK' }, /not supported/);
    assert.throws(() => parseDeleteQuery({ startTs: '0', endTs: '1' }), /keys is required/);
    assert.throws(() => parseDeleteQuery({ keys: 'a' }), /startTs and endTs are required/);
  });
});
