/**
 * Upstream sync (issue 16): the gateway bundle as its own process, an Aedes broker in this
 * process as the cloud, MQTT devices publishing 3-key telemetry (QoS 1). Measures
 * 1. disk: the outbox's bytes per queued message (dbstat pages of `upstream_outbox` / messages queued),
 *    after `--backlog` messages queued while the cloud is down;
 * 2. drain: the cloud comes up; time until that backlog is gone while local ingest goes on at
 *    `--ingest-rate` msg/s (target ≥ 5,000 msg/s drained);
 * 3. CPU: two gateways, upstream off and on (cloud up), alternately `--rounds` times for
 *    `--seconds` each at `--rate` msg/s; CPU seconds of the gateway process per message
 *    (target ≤ +10 %), so that a machine that cannot reach the rate still compares alike.
 *    after `--warmup` seconds of the same load on each (not counted).
 * Usage: npm run bench:upstream [-- --backlog 100000 --rate 5000 --seconds 10 --rounds 2]
 *   `--cpu-only` skips 1 and 2; `--prof-dir DIR` writes a V8 CPU profile of each gateway there;
 *   `--before BUNDLE` runs another build's off/on pair in the same CPU rounds (side by side), and
 *   its disk and drain figures right after this build's.
 */

import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import mqtt, { type MqttClient } from 'mqtt';
import { FakeCloud } from '../../test/helpers/cloud.js';
import {
  adminToken,
  type BenchGateway,
  buildBundle,
  cpuSeconds,
  createDevices,
  loadAverage,
  startGatewayProcess,
} from './support.js';

const { values } = parseArgs({
  options: {
    backlog: { type: 'string', default: '100000' },
    devices: { type: 'string', default: '50' },
    'ingest-rate': { type: 'string', default: '1000' },
    rate: { type: 'string', default: '5000' },
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '2' },
    /** Seconds of load on each gateway before the measured rounds (JIT, caches), not counted. */
    warmup: { type: 'string', default: '3' },
    'no-build': { type: 'boolean', default: false },
    /** Only the CPU comparison (skips the disk and drain figures). */
    'cpu-only': { type: 'boolean', default: false },
    /** Writes a V8 CPU profile of each gateway process here (node --cpu-prof). */
    'prof-dir': { type: 'string' },
    /** Another build (a bundle path): its two gateways run in the same CPU rounds, side by side. */
    before: { type: 'string' },
  },
});
const BACKLOG = Number(values.backlog);
const DEVICES = Number(values.devices);
const INGEST_RATE = Number(values['ingest-rate']);
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);
const ROUNDS = Number(values.rounds);
const TOKEN = 'bench-upstream-token';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Load {
  clients: MqttClient[];
  sent: number;
}

async function connectDevices(port: number, tokens: readonly string[]): Promise<Load> {
  const clients = await Promise.all(
    tokens.map(
      (token, i) =>
        new Promise<MqttClient>((resolve, reject) => {
          const c = mqtt.connect({
            host: '127.0.0.1',
            port,
            username: token,
            clientId: `bench-up-${i}`,
            reconnectPeriod: 0,
          });
          c.once('connect', () => resolve(c));
          c.once('error', reject);
        }),
    ),
  );
  return { clients, sent: 0 };
}

/** Publishes `total` messages (or for `ms`) at `rate` msg/s spread over the devices, QoS 1. */
async function publish(load: Load, rate: number, opts: { total?: number; ms?: number }) {
  const started = performance.now();
  const tickMs = 10;
  let due = 0;
  const pending: Array<Promise<unknown>> = [];
  let i = 0;
  for (;;) {
    const elapsed = performance.now() - started;
    if (opts.ms !== undefined && elapsed >= opts.ms) break;
    if (opts.total !== undefined && i >= opts.total) break;
    due = Math.floor((elapsed / 1000) * rate) + 1;
    while (i < due && (opts.total === undefined || i < opts.total)) {
      const c = load.clients[i % load.clients.length];
      const v = (20 + (i % 100) / 10).toFixed(1);
      pending.push(
        c.publishAsync('v1/devices/me/telemetry', `{"temperature":${v},"humidity":55,"ok":true}`, {
          qos: 1,
        }),
      );
      i++;
    }
    if (pending.length > 2000) await Promise.all(pending.splice(0));
    await sleep(tickMs);
  }
  await Promise.all(pending);
  load.sent += i;
  return { sent: i, seconds: (performance.now() - started) / 1000 };
}

async function status(baseUrl: string, token: string) {
  const res = await fetch(`${baseUrl}/api/upstream/status`, {
    headers: { 'X-Authorization': `Bearer ${token}` },
  });
  return (await res.json()) as { backlog: number; connected: boolean; sentTotal: number };
}

async function gateway(cloud: FakeCloud | undefined, bundle?: string): Promise<BenchGateway> {
  const prof: Record<string, string> = values['prof-dir']
    ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${values['prof-dir']}` }
    : {};
  return await startGatewayProcess(
    [],
    cloud ? { ...prof, EDGE_UPSTREAM_URL: cloud.url, EDGE_UPSTREAM_TOKEN: TOKEN } : prof,
    bundle,
  );
}

if (!values['no-build']) buildBundle();
console.log(`upstream bench, load average ${loadAverage()}`);

// 1 and 2: backlog while the cloud is down, then the drain (and `--before`'s, right after).
for (const [build, bundle] of values['cpu-only']
  ? []
  : ([['', undefined]] as Array<[string, string | undefined]>).concat(
      values.before ? [[' (before)', values.before]] : [],
    )) {
  const cloud = new FakeCloud({ token: TOKEN, sessionLimits: {} });
  await cloud.start();
  await cloud.stop(); // its port is known; nothing listens until start()
  const gw = await gateway(cloud, bundle);
  try {
    const tokens = await createDevices(gw.baseUrl, 'up', DEVICES);
    const admin = await adminToken(gw.baseUrl);
    const load = await connectDevices(gw.proc.ports.mqtt, tokens);
    const fill = await publish(load, 1e9, { total: BACKLOG });
    const s0 = await status(gw.baseUrl, admin);
    const db = new Database(join(gw.dataDir, 'edge-gateway.db'), { readonly: true });
    // A table row holds the messages of one commit (each framed by a short header); before
    // migration 019 (a `--before` build) one message.
    const perRow = (db.pragma('table_info(upstream_outbox)') as Array<{ name: string }>).some(
      (c) => c.name === 'n',
    )
      ? 'n'
      : '1';
    const { bytes, rows } = db
      .prepare(
        `SELECT (SELECT sum(pgsize) FROM dbstat WHERE name = 'upstream_outbox') AS bytes,
                (SELECT sum(${perRow}) FROM upstream_outbox) AS rows`,
      )
      .get() as { bytes: number; rows: number };
    const payload = db
      .prepare(`SELECT sum(length(data)) * 1.0 / sum(${perRow}) AS n FROM upstream_outbox`)
      .get() as { n: number };
    db.close();
    console.log(
      `disk${build}: ${rows} messages queued (${fill.sent} sent in ${fill.seconds.toFixed(1)} s, backlog ${s0.backlog}): ` +
        `${(bytes / rows).toFixed(1)} B per message in the outbox table (data ${payload.n.toFixed(1)} B with its header)`,
    );
    await cloud.start();
    const t0 = performance.now();
    let ingest = { sent: 0, seconds: 0 };
    let done = false;
    const ingesting = (async () => {
      while (!done) {
        const r = await publish(load, INGEST_RATE, { ms: 1000 });
        ingest = { sent: ingest.sent + r.sent, seconds: ingest.seconds + r.seconds };
      }
    })();
    let s = await status(gw.baseUrl, admin);
    while (s.backlog > INGEST_RATE) {
      await sleep(100);
      s = await status(gw.baseUrl, admin);
    }
    const drainSeconds = (performance.now() - t0) / 1000;
    done = true;
    await ingesting;
    const drained = s0.backlog + ingest.sent - s.backlog;
    console.log(
      `drain${build}: ${drained} messages in ${drainSeconds.toFixed(2)} s = ${Math.round(drained / drainSeconds)} msg/s ` +
        `(local ingest ${Math.round(ingest.sent / ingest.seconds)} msg/s meanwhile; ${cloud.messages.length} publishes to the cloud)`,
    );
    await Promise.all(load.clients.map((c) => c.endAsync()));
  } finally {
    await gw.close();
    await cloud.stop();
  }
}

// 3: CPU of local ingest at RATE msg/s, upstream off vs on, alternately (and `--before`'s pair).
{
  const cloud = new FakeCloud({ token: TOKEN, sessionLimits: {} });
  await cloud.start();
  const builds: Array<[string, string | undefined]> = [['', undefined]];
  if (values.before) builds.push([' (before)', values.before]);
  const gws: Array<{ name: string; build: string; on: boolean; gw: BenchGateway }> = [];
  try {
    for (const [build, bundle] of builds) {
      gws.push({ name: `off${build}`, build, on: false, gw: await gateway(undefined, bundle) });
      gws.push({ name: `on${build}`, build, on: true, gw: await gateway(cloud, bundle) });
    }
    const loads = new Map<BenchGateway, Load>();
    for (const { gw } of gws) {
      const tokens = await createDevices(gw.baseUrl, 'cpu', DEVICES);
      loads.set(gw, await connectDevices(gw.proc.ports.mqtt, tokens));
    }
    for (const load of loads.values()) {
      await publish(load, RATE, { ms: Number(values.warmup) * 1000 });
    }
    await sleep(500);
    const cpu = new Map<string, number[]>(gws.map((g) => [g.name, []]));
    for (let r = 0; r < ROUNDS; r++) {
      for (const { name, on, gw } of gws) {
        const load = loads.get(gw) as Load;
        const c0 = await cpuSeconds(gw.pid);
        const p0 = cloud.messages.length;
        const res = await publish(load, RATE, { ms: SECONDS * 1000 });
        await sleep(500);
        const c1 = await cpuSeconds(gw.pid);
        const publishes = cloud.messages.length - p0;
        // Per message: a loaded machine may not reach the rate, and not alike in both rounds.
        cpu.get(name)?.push(((c1 - c0) * 1e6) / res.sent);
        console.log(
          `cpu round ${r + 1} upstream ${name}: ${Math.round(res.sent / res.seconds)} msg/s, ` +
            `${(c1 - c0).toFixed(2)} CPU s in ${res.seconds.toFixed(1)} s = ${(((c1 - c0) * 1e6) / res.sent).toFixed(1)} µs per message` +
            (on ? ` (${publishes} publishes to the cloud)` : ''),
        );
      }
    }
    const mean = (xs: number[] = []) => xs.reduce((a, b) => a + b, 0) / xs.length;
    for (const [build] of builds) {
      const off = mean(cpu.get(`off${build}`));
      const on = mean(cpu.get(`on${build}`));
      const gw = gws.find((g) => g.build === build && g.on)?.gw as BenchGateway;
      const s = await status(gw.baseUrl, await adminToken(gw.baseUrl));
      console.log(
        `cpu${build}: upstream off ${off.toFixed(1)} µs, on ${on.toFixed(1)} µs per message: ` +
          `${(((on - off) / off) * 100).toFixed(1)} % more (target ≤ 10 %); ` +
          `upstream sent ${s.sentTotal}, backlog ${s.backlog}; load average ${loadAverage()}`,
      );
    }
    for (const load of loads.values()) await Promise.all(load.clients.map((c) => c.endAsync()));
  } finally {
    for (const { gw } of gws) await gw.close();
    await cloud.stop();
  }
}
