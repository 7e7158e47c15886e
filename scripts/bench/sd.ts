/**
 * Benchmark of issue 19: bytes the gateway writes to storage per telemetry point (SD-card wear).
 * Usage:
 *   npm run bench:sd [-- --load plant,full,sparse --seconds 120 --messages 200000
 *                        --sparse-seconds 120 --tail 15 --bundle dist/edge-gateway.mjs
 *                        --label NAME --no-build --gateway-arg=--telemetry-batch-wait-ms=100]
 *
 * Each load runs against a fresh gateway (the built bundle in its own process, fresh data dir):
 * - plant:  500 devices, one message a second each, for `--seconds` (default 120);
 * - full:   50 devices at full speed (16 QoS 1 publishes in flight each), `--messages` in all;
 * - sparse: 2,000 devices, one message every 10 s each, for `--sparse-seconds` (default 120).
 * A message is MQTT QoS 1 with 3 numeric keys (slowly changing values; server time, except at
 * full speed, where each message carries its own ts so that none overwrites another).
 *
 * The gateway's `/proc/<pid>/io` `write_bytes` (bytes the process caused to be sent to the
 * storage layer, the checkpoint worker thread included) is read once every client is connected
 * and again `--tail` seconds (default 15) after the last acknowledgement, so that the moves and
 * the WAL checkpoint of the load are counted. Then the gateway is stopped (SIGTERM) and its file
 * opened read-only: points stored, and bytes on disk per point (pages of the telemetry tables,
 * from `dbstat`). Printed per load: points stored, bytes written per point, bytes on disk per
 * point, ack latency, the projected GB written per day at that rate and the years a card rated
 * for 30 TB written would last.
 *
 * `--bundle` runs another build (e.g. a copy of main's bundle) for side-by-side runs; the load
 * generator runs in this process (it is light: at most a few thousand messages a second).
 */

import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { connect, type MqttClient } from 'mqtt';
import {
  BUNDLE,
  buildBundle,
  createDevices,
  Histogram,
  loadAverage,
  startGatewayProcess,
  storedPoints,
} from './support.js';

const TOPIC = 'v1/devices/me/telemetry';
const KEYS_PER_MESSAGE = 3;
const CARD_TB = 30;

interface LoadSpec {
  readonly name: string;
  readonly devices: number;
  /** ms between two messages of a device; 0 = full speed. */
  readonly periodMs: number;
  /** Length of a timed load, ms. */
  readonly durationMs: number;
  /** Messages in all, for the full-speed load. */
  readonly messages: number;
}

interface LoadResult {
  readonly label: string;
  readonly load: string;
  readonly acked: number;
  readonly stored: number;
  readonly seconds: number;
  readonly writeBytes: number;
  readonly cancelledBytes: number;
  readonly diskBytes: number;
  /** The log ring's fixed pages (not per point). */
  readonly ringBytes: number;
  readonly hist: Histogram;
}

function procIo(pid: number): { write: number; cancelled: number } {
  const text = readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(text)?.[1]);
  return { write: field('write_bytes'), cancelled: field('cancelled_write_bytes') };
}

async function connectAll(port: number, tokens: readonly string[]): Promise<MqttClient[]> {
  const clients: MqttClient[] = [];
  // A few at a time: thousands of simultaneous CONNECTs only measure the accept queue.
  for (let i = 0; i < tokens.length; i += 50) {
    const part = await Promise.all(
      tokens.slice(i, i + 50).map(
        (token, j) =>
          new Promise<MqttClient>((res, rej) => {
            const c = connect({
              host: '127.0.0.1',
              port,
              protocolVersion: 4,
              clientId: `sd-${i + j}`,
              username: token,
              clean: true,
              keepalive: 120,
              reconnectPeriod: 0,
              connectTimeout: 60_000,
            });
            c.once('connect', () => res(c));
            c.once('error', rej);
          }),
      ),
    );
    clients.push(...part);
  }
  return clients;
}

/** A slowly changing reading: a random walk in steps of 0.01 around a base value. */
class Sensor {
  #v: number[];
  constructor(i: number) {
    this.#v = [20 + (i % 10), 40 + (i % 30), 1000 + (i % 20)];
  }
  next(): number[] {
    this.#v = this.#v.map((v) => Math.round((v + (Math.random() - 0.5) * 0.1) * 100) / 100);
    return this.#v;
  }
}

function payload(values: number[], ts?: number): string {
  const body = `{"temperature":${values[0]},"humidity":${values[1]},"pressure":${values[2]}}`;
  return ts === undefined ? body : `{"ts":${ts},"values":${body}}`;
}

/**
 * Runs a timed load: each device publishes every `periodMs`, phases spread evenly. One ticker
 * (5 ms) fires the devices that are due, so no device ever sends two messages at once.
 */
async function timedLoad(clients: MqttClient[], spec: LoadSpec, hist: Histogram): Promise<number> {
  let acked = 0;
  let outstanding = 0;
  const t0 = performance.now();
  const end = t0 + spec.durationMs;
  const sensors = clients.map((_, i) => new Sensor(i));
  const due = clients.map((_, i) => t0 + (i * spec.periodMs) / clients.length);
  let order = 0;
  await new Promise<void>((done) => {
    const tick = setInterval(() => {
      const now = performance.now();
      if (now >= end) {
        clearInterval(tick);
        if (outstanding === 0) done();
        return;
      }
      // Devices are due in index order (phases rise with the index), wrapping around.
      for (let n = 0; n < clients.length && due[order] <= now; n++) {
        const i = order;
        order = (order + 1) % clients.length;
        due[i] += spec.periodMs;
        const start = performance.now();
        outstanding++;
        clients[i].publish(TOPIC, payload(sensors[i].next()), { qos: 1 }, (err) => {
          outstanding--;
          if (!err) {
            acked++;
            hist.record(performance.now() - start);
          }
          if (performance.now() >= end && outstanding === 0) done();
        });
      }
    }, 5);
  });
  return acked;
}

/** Full speed: every client keeps 16 publishes in flight until `messages` were sent in all. */
async function fullLoad(clients: MqttClient[], spec: LoadSpec, hist: Histogram): Promise<number> {
  let acked = 0;
  let sent = 0;
  const base = Date.now() - 86_400_000;
  await Promise.all(
    clients.map(
      (client, i) =>
        new Promise<void>((done) => {
          const sensor = new Sensor(i);
          let inflight = 0;
          let seq = 0;
          const pump = () => {
            while (inflight < 16 && sent < spec.messages) {
              sent++;
              inflight++;
              const start = performance.now();
              client.publish(TOPIC, payload(sensor.next(), base + seq++), { qos: 1 }, (err) => {
                inflight--;
                if (!err) {
                  acked++;
                  hist.record(performance.now() - start);
                }
                if (sent < spec.messages) pump();
                else if (inflight === 0) done();
              });
            }
          };
          pump();
        }),
    ),
  );
  return acked;
}

/** Pages of the telemetry tables and their indexes, from `dbstat`. */
function telemetryDiskBytes(dataDir: string): { stored: number; bytes: number; ring: number } {
  const db = new Database(join(dataDir, 'edge-gateway.db'), {
    readonly: true,
    fileMustExist: true,
  });
  try {
    const all = db
      .prepare(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE 'ts\\_%' ESCAPE '\\'",
      )
      .pluck()
      .all() as string[];
    const tables = all.filter((t) => t !== 'ts_key' && t !== 'ts_ring');
    const bytes = db
      .prepare(
        `SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN (SELECT name FROM sqlite_schema
           WHERE tbl_name IN (${tables.map(() => '?').join(',')}))`,
      )
      .pluck()
      .get(...tables) as number;
    // Points: the store's own count where it keeps one, else the rows of the point tables.
    const has = (t: string) => tables.includes(t);
    let stored = 0;
    if (has('ts_block')) stored = storedPoints(dataDir);
    if (has('ts_kv_chunk')) {
      stored += db
        .prepare('SELECT coalesce(sum(points), 0) FROM ts_kv_chunk')
        .pluck()
        .get() as number;
    }
    if (has('ts_kv_stage')) {
      stored += db.prepare('SELECT count(*) FROM ts_kv_stage').pluck().get() as number;
    }
    // The log ring (migration 17) is a fixed area, whatever is stored: shown on its own.
    const ring = all.includes('ts_ring')
      ? (db
          .prepare("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = 'ts_ring'")
          .pluck()
          .get() as number)
      : 0;
    return { stored, bytes, ring };
  } finally {
    db.close();
  }
}

async function runLoad(
  spec: LoadSpec,
  label: string,
  bundle: string,
  gwArgs: string[],
  tailMs: number,
): Promise<LoadResult> {
  const gw = await startGatewayProcess(gwArgs, {}, bundle);
  try {
    const tokens = await createDevices(gw.baseUrl, 'sd', spec.devices);
    const clients = await connectAll(gw.proc.ports.mqtt, tokens);
    // Let the connects' own writes (activity, attributes) settle before the window.
    await new Promise((r) => setTimeout(r, 3_000));
    const io0 = procIo(gw.pid);
    const hist = new Histogram();
    const t0 = performance.now();
    const acked =
      spec.periodMs > 0
        ? await timedLoad(clients, spec, hist)
        : await fullLoad(clients, spec, hist);
    const seconds = (performance.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, tailMs));
    const io1 = procIo(gw.pid);
    await Promise.all(clients.map((c) => c.endAsync().catch(() => undefined)));
    await gw.close(true);
    const disk = telemetryDiskBytes(gw.dataDir);
    return {
      label,
      load: spec.name,
      acked,
      stored: disk.stored,
      seconds,
      writeBytes: io1.write - io0.write,
      cancelledBytes: io1.cancelled - io0.cancelled,
      diskBytes: disk.bytes,
      ringBytes: disk.ring,
      hist,
    };
  } finally {
    await gw.close().catch(() => undefined);
  }
}

function report(r: LoadResult, nominalRate: number | undefined): void {
  const points = r.acked * KEYS_PER_MESSAGE;
  const perPoint = r.writeBytes / Math.max(1, points);
  const rate = nominalRate ?? points / r.seconds;
  const gbDay = (perPoint * rate * 86_400) / 1e9;
  const years = (CARD_TB * 1e12) / (gbDay * 1e9 * 365);
  console.log(
    [
      `[${r.label}] ${r.load}: ${r.acked} messages acked in ${r.seconds.toFixed(1)} s, ${points} points (${r.stored} stored)`,
      `  written ${(r.writeBytes / 1e6).toFixed(1)} MB (cancelled ${(r.cancelledBytes / 1e6).toFixed(1)} MB): ${perPoint.toFixed(1)} B/point`,
      `  on disk ${(r.diskBytes / 1e6).toFixed(2)} MB: ${(r.diskBytes / Math.max(1, r.stored)).toFixed(1)} B/point` +
        (r.ringBytes > 0 ? ` (and the log ring, fixed: ${(r.ringBytes / 1e6).toFixed(2)} MB)` : ''),
      `  at ${Math.round(rate)} points/s: ${gbDay.toFixed(1)} GB/day, a ${CARD_TB} TB-written card lasts ${years.toFixed(1)} years`,
      `  ack p50 ${r.hist.quantile(0.5).toFixed(2)} ms, p99 ${r.hist.quantile(0.99).toFixed(2)} ms, max ${r.hist.max.toFixed(1)} ms`,
    ].join('\n'),
  );
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      load: { type: 'string', default: 'plant,full,sparse' },
      seconds: { type: 'string', default: '120' },
      messages: { type: 'string', default: '200000' },
      'sparse-seconds': { type: 'string', default: '120' },
      tail: { type: 'string', default: '15' },
      bundle: { type: 'string', multiple: true },
      label: { type: 'string', multiple: true },
      'gateway-arg': { type: 'string', multiple: true, default: [] },
      'no-build': { type: 'boolean', default: false },
      rounds: { type: 'string', default: '1' },
    },
  });
  if (!values['no-build']) buildBundle();
  // Several bundles run alternately, load by load: the machine is shared and noisy.
  const bundles = (values.bundle ?? [BUNDLE]).map((b) => resolve(b));
  for (const b of bundles) if (!existsSync(b)) throw new Error(`no bundle ${b}`);
  // The current build is copied, so a rebuild during the run does not change it.
  const labels = values.label ?? bundles.map((b) => b);
  const copies = bundles.map((b, i) => {
    const copy = `${b}.bench-sd-${i}.mjs`;
    copyFileSync(b, copy);
    return copy;
  });
  const gwArgs = (values['gateway-arg'] ?? []).flatMap((a) => a.split('='));
  const specs: Record<string, LoadSpec> = {
    plant: {
      name: 'plant floor (500 devices x 1 msg/s)',
      devices: 500,
      periodMs: 1_000,
      durationMs: Number(values.seconds) * 1000,
      messages: 0,
    },
    full: {
      name: `full speed (50 devices, ${values.messages} messages)`,
      devices: 50,
      periodMs: 0,
      durationMs: 0,
      messages: Number(values.messages),
    },
    sparse: {
      name: '2,000 devices x 1 msg/10 s',
      devices: 2_000,
      periodMs: 10_000,
      durationMs: Number(values['sparse-seconds']) * 1000,
      messages: 0,
    },
  };
  const nominal: Record<string, number | undefined> = {
    plant: 1_500,
    full: undefined,
    sparse: 600,
  };
  console.log(
    `bench:sd ${new Date().toISOString()}, load average ${loadAverage()}, gateway args: ${gwArgs.join(' ') || '(none)'}`,
  );
  try {
    for (let round = 0; round < Number(values.rounds); round++) {
      for (const name of (values.load ?? '').split(',')) {
        const spec = specs[name];
        if (!spec) throw new Error(`unknown load ${name}`);
        for (let i = 0; i < copies.length; i++) {
          const r = await runLoad(
            spec,
            labels[i] ?? copies[i],
            copies[i],
            gwArgs,
            Number(values.tail) * 1000,
          );
          report(r, nominal[name]);
          console.log(`  (load average ${loadAverage()})`);
        }
      }
    }
  } finally {
    for (const c of copies) {
      try {
        (await import('node:fs')).rmSync(c);
      } catch {}
    }
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
