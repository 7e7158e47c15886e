/**
 * Benchmark of issue 15 item 3: commit-to-socket latency of the live WebSocket API. Usage:
 *   npm run bench:ws [-- --devices 50 --rate 500 --duration 10 --warmup 2 --clients 10 --blob 2048 --rounds 2]
 *
 * The gateway runs in this process (`createGateway`), so the moment of each commit is read from
 * its post-commit bus (`telemetry` event). A child process holds `--clients` WebSocket clients
 * (each with a legacy TIMESERIES subscription per device) and records when each update reaches
 * each client; another child holds `--devices` MQTT devices publishing `{"seq": n, "blob": …}`
 * with QoS 1 at `--rate` msg/s in total. Times in all three processes are
 * `performance.timeOrigin + performance.now()` (the same system clock).
 *
 * Two phases in one run, side by side and alternating (`--rounds` times A then B): A with the
 * fast clients only, B with one more client
 * that subscribes to everything and stops reading (it should be closed at its buffer bound while
 * the fast clients' latency stays the same).
 */

import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { connect, type MqttClient } from 'mqtt';
import { WebSocket } from 'ws';
import {
  adminToken,
  createDevices,
  Histogram,
  loadAverage,
  startGatewayInProcess,
} from './support.js';

/** The send-buffer bound of the run (the default is 1 MiB; smaller, so phase B reaches it). */
const PENDING_BYTES = 64 * 1024;

const now = () => performance.timeOrigin + performance.now();

interface ChildParams {
  readonly httpPort: number;
  readonly mqttPort: number;
  readonly jwt: string;
  readonly devices: ReadonlyArray<{ readonly id: string; readonly token: string }>;
  readonly clients: number;
  readonly slow: boolean;
  readonly rate: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly seqBase: number;
  readonly blobBytes: number;
}

/** [client, device index, seq, received at]. */
type Record4 = [number, number, number, number];

type ChildMsg =
  | { kind: 'ready' }
  | { kind: 'records'; records: Record4[]; slowClosed: { code: number; reason: string } | null }
  | { kind: 'sent'; sent: number; measuredFrom: number }
  | { kind: 'failed'; error: string };

/** Sends to the parent and waits until it is written (the child exits right after). */
function tell(msg: ChildMsg): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) resolve();
    else process.send(msg, undefined, {}, () => resolve());
  });
}

function spawnRole(role: string, params: ChildParams): ChildProcess {
  return fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, BENCH_WS_ROLE: role, BENCH_WS: JSON.stringify(params) },
    execArgv: ['--import', 'tsx'],
  });
}

async function next(child: ChildProcess): Promise<ChildMsg> {
  const [msg] = (await once(child, 'message')) as [ChildMsg];
  if (msg.kind === 'failed') throw new Error(`bench child failed: ${msg.error}`);
  return msg;
}

function openWs(p: ChildParams): Promise<WebSocket> {
  const ws = new WebSocket(`ws://127.0.0.1:${p.httpPort}/api/ws?token=${p.jwt}`);
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

/** Subscribes `ws` to every key of every device (cmdId = device index); resolves on every first update. */
async function subscribe(ws: WebSocket, p: ChildParams): Promise<void> {
  let pending = p.devices.length;
  const first = new Promise<void>((resolve) => {
    const onMsg = () => {
      pending--;
      if (pending === 0) {
        ws.off('message', onMsg);
        resolve();
      }
    };
    ws.on('message', onMsg);
  });
  ws.send(
    JSON.stringify({
      cmds: p.devices.map((d, i) => ({
        type: 'TIMESERIES',
        cmdId: i,
        entityType: 'DEVICE',
        entityId: d.id,
      })),
    }),
  );
  await first;
}

/** The receiving side: fast clients (and the slow one); records every update until told to stop. */
async function runClients(p: ChildParams): Promise<void> {
  const records: Record4[] = [];
  const sockets: WebSocket[] = [];
  for (let c = 0; c < p.clients; c++) {
    const ws = await openWs(p);
    await subscribe(ws, p);
    ws.on('message', (data) => {
      const t = now();
      const u = JSON.parse(data.toString()) as {
        subscriptionId: number;
        data: Record<string, Array<[number, string]>> | null;
      };
      for (const [, v] of u.data?.seq ?? []) records.push([c, u.subscriptionId, Number(v), t]);
    });
    sockets.push(ws);
  }
  let slowClosed: { code: number; reason: string } | null = null;
  let slow: WebSocket | undefined;
  if (p.slow) {
    slow = await openWs(p);
    await subscribe(slow, p);
    slow.on('close', (code, reason) => {
      slowClosed = { code, reason: reason.toString() };
    });
    slow.pause();
  }
  process.send?.({ kind: 'ready' });
  await once(process, 'message');
  if (slow) {
    slow.resume();
    await sleep(1000);
  }
  await tell({ kind: 'records', records, slowClosed });
  for (const ws of sockets) ws.terminate();
  slow?.terminate();
}

/** The sending side: MQTT devices publishing paced QoS 1 readings. */
async function runPublisher(p: ChildParams): Promise<void> {
  const devices: MqttClient[] = [];
  for (const d of p.devices) {
    devices.push(
      await new Promise<MqttClient>((resolve, reject) => {
        const c = connect({
          host: '127.0.0.1',
          port: p.mqttPort,
          username: d.token,
          clientId: d.token,
          reconnectPeriod: 0,
        });
        c.once('connect', () => resolve(c));
        c.once('error', reject);
      }),
    );
  }
  // A blob with every reading (both phases), so that a client that stops reading fills the
  // kernel's socket buffers (several MB on loopback) and then its send buffer within a phase.
  const blob = 'x'.repeat(p.blobBytes);
  const start = now();
  const measuredFrom = start + p.warmupMs;
  const end = measuredFrom + p.durationMs;
  const pending: Array<Promise<unknown>> = [];
  let i = 0;
  while (now() < end) {
    const due = start + (i * 1000) / p.rate;
    const wait = due - now();
    if (wait > 1) await sleep(wait);
    const payload = `{"seq":${p.seqBase + i},"blob":"${blob}"}`;
    pending.push(
      devices[i % devices.length].publishAsync('v1/devices/me/telemetry', payload, { qos: 1 }),
    );
    i++;
    if (pending.length > 5000) await Promise.all(pending.splice(0, 2500));
  }
  await Promise.all(pending);
  await tell({ kind: 'sent', sent: i, measuredFrom });
  await Promise.all(devices.map((d) => d.endAsync()));
}

const ROLES: Record<string, (p: ChildParams) => Promise<void>> = {
  clients: runClients,
  publisher: runPublisher,
};
const role = ROLES[process.env.BENCH_WS_ROLE ?? ''];
if (role) {
  try {
    await role(JSON.parse(process.env.BENCH_WS ?? '{}') as ChildParams);
  } catch (err) {
    await tell({ kind: 'failed', error: String(err) });
  }
  process.exit(0);
}

const { values: args } = parseArgs({
  options: {
    devices: { type: 'string', default: '50' },
    rate: { type: 'string', default: '500' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    clients: { type: 'string', default: '10' },
    blob: { type: 'string', default: '2048' },
    rounds: { type: 'string', default: '2' },
  },
});
const nDevices = Number(args.devices);
const rate = Number(args.rate);
const nClients = Number(args.clients);

// Pings would drop the paused client on their own after two intervals.
const { gw, stop } = await startGatewayInProcess('ws', {
  ws: { maxPendingBytes: PENDING_BYTES, pingIntervalSec: 600 },
});
try {
  const baseUrl = `http://127.0.0.1:${gw.ports.http}`;
  const tokens = await createDevices(baseUrl, 'ws-bench', nDevices);
  const devices = tokens.map((token) => {
    const identity = gw.services.devices.byAccessToken(token);
    if (!identity) throw new Error(`no device for ${token}`);
    return { id: identity.id, token };
  });
  const index = new Map(devices.map((d, i) => [d.id, i]));
  /** `device index:seq` -> commit time (the bus emits right after the commit). */
  const committed = new Map<string, number>();
  gw.bus.on('bench', 'telemetry', ({ deviceId, points }) => {
    const t = now();
    const i = index.get(deviceId);
    for (const p of points) if (p.key === 'seq') committed.set(`${i}:${p.value}`, t);
  });
  const jwt = await adminToken(baseUrl);

  const rows: string[] = [];
  let seqBase = 0;
  // A, B, A, B, ...: the phases alternate so that the machine's load falls on both alike.
  const phases = Array.from({ length: Number(args.rounds) }, () => [false, true]).flat();
  for (const slow of phases) {
    committed.clear();
    const params: ChildParams = {
      httpPort: gw.ports.http,
      mqttPort: gw.ports.mqtt,
      jwt,
      devices,
      clients: nClients,
      slow,
      rate,
      warmupMs: Number(args.warmup) * 1000,
      durationMs: Number(args.duration) * 1000,
      seqBase,
      blobBytes: Number(args.blob),
    };
    const label = slow ? 'B: + 1 client that stops reading' : 'A: fast clients only';
    console.error(`phase ${label}: connecting ${nClients} clients`);
    const clients = spawnRole('clients', params);
    await next(clients);
    console.error(`phase ${label}: publishing`);
    const publisher = spawnRole('publisher', params);
    const sentMsg = (await next(publisher)) as { sent: number; measuredFrom: number };
    await once(publisher, 'exit');
    console.error(`phase ${label}: ${sentMsg.sent} published, collecting`);
    await sleep(1000); // the last updates
    clients.send({ kind: 'stop' });
    const msg = {
      ...((await next(clients)) as Extract<ChildMsg, { kind: 'records' }>),
      ...sentMsg,
    };
    await once(clients, 'exit');
    const hist = new Histogram();
    let missing = 0;
    let measured = 0;
    const got = new Set<string>();
    for (const [c, dev, seq, t] of msg.records) {
      const at = committed.get(`${dev}:${seq}`);
      got.add(`${c}:${dev}:${seq}`);
      if (at === undefined || at < msg.measuredFrom) continue;
      hist.record(Math.max(0, t - at));
      measured++;
    }
    for (const key of committed.keys()) {
      for (let c = 0; c < nClients; c++) if (!got.has(`${c}:${key}`)) missing++;
    }
    const closed = msg.slowClosed
      ? `${msg.slowClosed.code} ${msg.slowClosed.reason}`
      : slow
        ? 'not closed'
        : '-';
    rows.push(
      `| ${label} | ${msg.sent} | ${measured} | ${missing} | ${hist.quantile(0.5).toFixed(2)} | ${hist.quantile(0.99).toFixed(2)} | ${hist.max.toFixed(1)} | ${closed} |`,
    );
    seqBase += msg.sent + 1;
  }
  console.log(
    `\nbench:ws  ${nDevices} MQTT devices, ${rate} msg/s, ${nClients} WebSocket clients × ${nDevices} subscriptions, ${args.blob}-byte readings, send buffer ${PENDING_BYTES / 1024} KiB, ${args.duration} s per phase after ${args.warmup} s warm-up; load average ${loadAverage()}\n`,
  );
  console.log(
    '| Phase | Published | Updates measured | Updates missing | Commit → socket p50 ms | p99 ms | max ms | Slow client |',
  );
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(r);
} finally {
  await stop();
}
