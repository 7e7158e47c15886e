/**
 * Storage benchmark of the telemetry engine (issue 3): `npm run bench:storage`.
 *
 * Runs the real TelemetryService (parser, group-commit writer, store, evictor) on a real SQLite
 * file in a temp dir, `normal` durability, and prints:
 *   1. sustained points/s through the group-commit writer (pre-typed points, many concurrent
 *      device messages, default batch settings) and through the whole ingest path (JSON text);
 *   2. query latency: 1 day of 1 Hz data aggregated to 1-minute AVG; latest values of 20 keys;
 *   3. bytes on disk per numeric point (file size and dbstat, indexes included);
 *   4. file size under the ring-buffer bound: size at N points vs after 3N points written.
 * Set BENCH_SCALE=0.2 for a quick run.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { configWith } from '../../src/config.js';
import { Checkpointer } from '../../src/db/checkpointer.js';
import { MIGRATIONS } from '../../src/db/migrations/index.js';
import { migrate } from '../../src/db/migrator.js';
import { DB_FILE, type Db, openDb } from '../../src/db/open.js';
import { DeviceProfileService } from '../../src/devices/device-profile-service.js';
import { type DeviceIdentity, DeviceService } from '../../src/devices/device-service.js';
import { EventBus } from '../../src/events.js';
import type { TsEntry } from '../../src/telemetry/telemetry-parser.js';
import { TelemetryService } from '../../src/telemetry/telemetry-service.js';
import { TenantService } from '../../src/tenant/tenant-service.js';

const SCALE = Number(process.env.BENCH_SCALE ?? 1);
const log = pino({ level: 'silent' });
const T0 = 1_763_769_600_000; // 2025-11-22T00:00:00Z

interface Env {
  dir: string;
  db: Db;
  telemetry: TelemetryService;
  devices: DeviceIdentity[];
  close(): Promise<void>;
}

async function env(opts: {
  devices: number;
  maxPoints?: number;
  batchMaxPoints?: number;
}): Promise<Env> {
  const dir = mkdtempSync(join(tmpdir(), 'edge-bench-'));
  const config = configWith({ dataDir: dir });
  const db = openDb({ dataDir: dir, durability: 'normal' });
  migrate(db, MIGRATIONS, log);
  // As in the gateway: WAL checkpoints on a worker thread, none inside commits.
  const checkpointer = new Checkpointer({ db, dataDir: dir, log });
  checkpointer.start();
  const bus = new EventBus(log);
  const tenants = new TenantService({ db });
  tenants.init();
  const profiles = new DeviceProfileService({ db, tenants });
  profiles.init();
  const deviceService = new DeviceService({ db, tenants, profiles, bus });
  const telemetry = new TelemetryService({
    db,
    bus,
    devices: deviceService,
    log,
    config: {
      ...config.telemetry,
      maxPoints: opts.maxPoints ?? config.telemetry.maxPoints,
      batchMaxPoints: opts.batchMaxPoints ?? config.telemetry.batchMaxPoints,
    },
  });
  telemetry.start();
  const devices: DeviceIdentity[] = [];
  for (let i = 0; i < opts.devices; i++) {
    const d = deviceService.save({ name: `bench-${i}` });
    devices.push(deviceService.identity(d.id.id) as DeviceIdentity);
  }
  return {
    dir,
    db,
    telemetry,
    devices,
    async close() {
      await telemetry.stop();
      await checkpointer.stop();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const KEYS = Array.from({ length: 10 }, (_, k) => `key${k}`);

/** One device message: 10 numeric keys at one ts (a typical sensor report). */
function message(ts: number, i: number): TsEntry[] {
  return KEYS.map((key, k) => ({ key, ts, kind: 'double', value: 20 + ((i * 7 + k) % 1000) / 10 }));
}

/**
 * Streams `total` points as device messages (every device reports once per simulated second)
 * through `write`, keeping a bounded number of points in flight as transports would, and
 * returns points/s measured from the first write until every point is sealed into a block.
 */
async function stream(
  e: Env,
  total: number,
  startTs: number,
  write: (d: DeviceIdentity, ts: number, i: number) => Promise<unknown>,
): Promise<{ rate: number; endTs: number }> {
  const inFlightMax = 300_000;
  let inFlight = 0;
  let written = 0;
  let second = 0;
  const started = performance.now();
  const all: Array<Promise<unknown>> = [];
  let wake: (() => void) | undefined;
  while (written < total) {
    const ts = startTs + second * 1000;
    for (let i = 0; i < e.devices.length && written < total; i++) {
      inFlight += KEYS.length;
      written += KEYS.length;
      const p = write(e.devices[i], ts, i).then(() => {
        inFlight -= KEYS.length;
        if (wake && inFlight < inFlightMax / 2) {
          const w = wake;
          wake = undefined;
          w();
        }
      });
      all.push(p);
    }
    second++;
    if (inFlight >= inFlightMax) await new Promise<void>((r) => (wake = r));
    if (all.length > 100_000) all.splice(0, all.length - 1000);
  }
  await Promise.all(all);
  // Open points are sealed within the measured time: the rate is into compressed blocks.
  e.telemetry.flush();
  const seconds = (performance.now() - started) / 1000;
  return { rate: Math.round(total / seconds), endTs: startTs + second * 1000 };
}

function fileBytes(e: Env): number {
  // The checkpoint worker may hold the checkpoint lock for a moment.
  while ((e.db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>)[0].busy) {}
  return statSync(join(e.dir, DB_FILE)).size;
}

function dbstat(db: Db, names: string[]): number {
  const rows = db
    .prepare('SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name')
    .all() as Array<{ name: string; bytes: number }>;
  return rows.filter((r) => names.includes(r.name)).reduce((a, r) => a + r.bytes, 0);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const fmt = (n: number) => n.toLocaleString('en-US');

async function throughput() {
  const total = Math.round(3_000_000 * SCALE);
  // Defaults (config: batch 20,000 points) with 1,000, 10,000 and 100 series; then a larger
  // batch, for comparison.
  const runs = [
    { devices: 100, batchMaxPoints: 0 },
    { devices: 1000, batchMaxPoints: 0 },
    { devices: 10, batchMaxPoints: 0 },
    { devices: 100, batchMaxPoints: 100_000 },
  ];
  for (const { devices, batchMaxPoints } of runs) {
    const e = await env({
      devices,
      batchMaxPoints: batchMaxPoints || undefined,
    });
    // Pre-typed points straight into the group-commit writer.
    const w = await stream(e, total, T0, (d, ts, i) => e.telemetry.writePoints(d, message(ts, i)));
    const bytes = fileBytes(e);
    const tsBytes = dbstat(e.db, ['ts_block']);
    const all = dbstat(e.db, [
      'ts_block',
      'ts_block_age',
      'ts_log_spill',
      'ts_kv_latest',
      'ts_key',
    ]);
    console.log(
      `writer: ${devices} devices x 10 keys, ${fmt(total)} points, ` +
        `batch ${fmt(batchMaxPoints || configWith({}).telemetry.batchMaxPoints)}: ` +
        `${fmt(w.rate)} points/s ` +
        `(${fmt(e.telemetry.stats.batches)} batches); bytes/point: file ${(bytes / total).toFixed(1)}, ` +
        `ts_block ${(tsBytes / total).toFixed(1)}, all telemetry tables ${(all / total).toFixed(1)}`,
    );
    await e.close();
  }
  const e = await env({ devices: 100 });
  const objects = (ts: number, i: number) => ({
    ts,
    values: Object.fromEntries(message(ts, i).map((p) => [p.key, p.value])),
  });
  const part = Math.round(total / 3);
  const o = await stream(e, part, T0, (d, ts, i) => e.telemetry.ingest(d, objects(ts, i)));
  const end = o.endTs;
  const text = await stream(e, part, end, (d, ts, i) =>
    e.telemetry.ingest(d, JSON.stringify(objects(ts, i))),
  );
  console.log(
    `ingest (typing + writer), 100 devices: parsed objects ${fmt(o.rate)} points/s, ` +
      `JSON text ${fmt(text.rate)} points/s`,
  );
  await e.close();
}

async function queries() {
  const e = await env({ devices: 2 });
  const [d, d2] = e.devices;
  const day: TsEntry[] = [];
  for (let i = 0; i < 86_400; i++) {
    day.push({ key: 'temp', ts: T0 + i * 1000, kind: 'double', value: 20 + Math.sin(i / 600) });
  }
  await e.telemetry.writePoints(d, day);
  const latest: TsEntry[] = Array.from({ length: 20 }, (_, k) => ({
    key: `k${k}`,
    ts: T0,
    kind: 'double',
    value: k + 0.5,
  }));
  await e.telemetry.writePoints(d2, latest);
  const q = {
    mode: 'history',
    keys: ['temp'],
    startTs: T0,
    endTs: T0 + 86_400_000,
    agg: 'AVG',
    interval: 60_000,
    limit: 100,
    orderBy: 'ASC',
    strict: false,
  } as const;
  const aggTimes: number[] = [];
  // CPU time of this thread per query too: on a shared, loaded machine the wall time mostly
  // measures the wait for a core.
  const aggCpu: number[] = [];
  let buckets = 0;
  for (let i = 0; i < 30; i++) {
    const c = process.cpuUsage();
    const t = performance.now();
    buckets = e.telemetry.query(d.id, q).temp.length;
    aggTimes.push(performance.now() - t);
    const used = process.cpuUsage(c);
    aggCpu.push((used.user + used.system) / 1000);
  }
  const keys = latest.map((p) => p.key);
  const latestTimes: number[] = [];
  for (let i = 0; i < 2000; i++) {
    const t = performance.now();
    e.telemetry.query(d2.id, { mode: 'latest', keys, strict: false });
    latestTimes.push(performance.now() - t);
  }
  const raw: number[] = [];
  for (let i = 0; i < 30; i++) {
    const t = performance.now();
    e.telemetry.query(d.id, { ...q, agg: 'NONE', limit: 1000 });
    raw.push(performance.now() - t);
  }
  console.log(
    `query: 86,400 points -> ${buckets} x 1-minute AVG: median ${median(aggTimes).toFixed(1)} ms ` +
      `(min ${Math.min(...aggTimes).toFixed(1)}, max ${Math.max(...aggTimes).toFixed(1)}); ` +
      `CPU median ${median(aggCpu).toFixed(1)} ms (min ${Math.min(...aggCpu).toFixed(1)})`,
  );
  console.log(
    `query: latest values of 20 keys: median ${median(latestTimes).toFixed(3)} ms ` +
      `(p99 ${[...latestTimes].sort((a, b) => a - b)[Math.floor(latestTimes.length * 0.99)].toFixed(3)})`,
  );
  console.log(`query: 1,000 raw points of one key: median ${median(raw).toFixed(2)} ms`);
  await e.close();
}

async function ringBuffer() {
  const n = Math.round(1_000_000 * SCALE);
  const e = await env({ devices: 100, maxPoints: n });
  const write = (d: DeviceIdentity, ts: number, i: number) =>
    e.telemetry.writePoints(d, message(ts, i));
  const first = await stream(e, n, T0, write);
  e.telemetry.evictNow();
  const atN = fileBytes(e);
  const wal: number[] = [];
  let endTs = first.endTs;
  for (let round = 1; round <= 2; round++) {
    const r = await stream(e, n, endTs, write);
    endTs = r.endTs;
    e.telemetry.evictNow();
    wal.push(statSync(join(e.dir, `${DB_FILE}-wal`)).size);
  }
  const at3N = fileBytes(e);
  const free = e.db.pragma('freelist_count', { simple: true }) as number;
  console.log(
    `ring buffer: bound ${fmt(n)}; file at N ${(atN / 1e6).toFixed(1)} MB (${(atN / n).toFixed(1)} B/point), ` +
      `after 3N written ${(at3N / 1e6).toFixed(1)} MB = ${((at3N / atN) * 100).toFixed(1)}% of it; ` +
      `stored ${fmt(e.telemetry.stats.points)}, evicted ${fmt(e.telemetry.stats.evicted)}, ` +
      `free pages ${fmt(free)}; WAL before checkpoint ${wal.map((b) => `${(b / 1e6).toFixed(1)} MB`).join(', ')}`,
  );
  await e.close();
}

console.log(
  `edge-gateway storage benchmark: Node ${process.version}, ${process.arch}, scale ${SCALE}, ${new Date().toISOString()}`,
);
const only = process.env.BENCH_ONLY;
if (!only || only === 'writer') await throughput();
if (!only || only === 'query') await queries();
if (!only || only === 'ring') await ringBuffer();
