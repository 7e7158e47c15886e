/**
 * Benchmark of issue 5: CoAP confirmable telemetry (target: ≥ 5,000 req/s). Usage:
 *   npm run bench:coap [-- --clients 128 --devices 32 --duration 10 --warmup 2 --procs 2]
 *
 * The gateway runs as the built bundle in its own process. `--clients` CoAP clients (the `coap`
 * package, one UDP socket each, spread over `--procs` child processes) each POST a confirmable
 * 3-key telemetry JSON to `/api/v1/{token}/telemetry` and wait for the 2.01 before sending the
 * next; clients share `--devices` devices. Prints req/s and the request → 2.01 latency, then
 * checks that the SQLite file holds 3 points per 2.01.
 */

import { type ChildProcess, fork } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Agent, type IncomingMessage, request } from 'coap';
import {
  buildBundle,
  cpuSeconds,
  createDevices,
  Histogram,
  loadAverage,
  machineCpu,
  profilerEnv,
  startGatewayProcess,
  storedPoints,
} from './support.js';

const KEYS_PER_MESSAGE = 3;
const REQUEST_TIMEOUT_MS = 10_000;

interface GenParams {
  readonly port: number;
  /** One token per client of this process. */
  readonly tokens: string[];
  /** Index of this process's first client, to keep timestamps unique across processes. */
  readonly firstClient: number;
  readonly warmupMs: number;
  readonly durationMs: number;
}

type GenMsg =
  | { kind: 'ready' }
  | {
      kind: 'done';
      ok: number;
      other: number;
      timeouts: number;
      inWindow: number;
      cpuSec: number;
      hist: ReturnType<Histogram['toJSON']>;
    }
  | { kind: 'failed'; error: string };

function post(agent: Agent, port: number, pathname: string, payload: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({
      agent,
      hostname: '127.0.0.1',
      port,
      method: 'POST',
      pathname,
      confirmable: true,
    });
    const timer = setTimeout(() => reject(new Error('timeout')), REQUEST_TIMEOUT_MS);
    req.on('response', (res: IncomingMessage) => {
      clearTimeout(timer);
      resolve(res.code);
    });
    req.on('error', (err: Error) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end(payload);
  });
}

async function runGenerator(p: GenParams): Promise<void> {
  const sockets = p.tokens.map(() => createSocket('udp4'));
  const agents = sockets.map((socket) => new Agent({ type: 'udp4', socket }));
  process.send?.({ kind: 'ready' } as GenMsg);
  const [go] = (await once(process, 'message')) as [{ kind: 'go' }];
  if (go.kind !== 'go') throw new Error('expected go');

  const hist = new Histogram();
  let ok = 0;
  let other = 0;
  let timeouts = 0;
  let inWindow = 0;
  const t0 = performance.now();
  const from = t0 + p.warmupMs;
  const to = from + p.durationMs;
  let cpuAtFrom: NodeJS.CpuUsage | undefined;
  let cpuAtTo: NodeJS.CpuUsage | undefined;
  const base = Date.now() - 86_400_000;

  await Promise.all(
    p.tokens.map(async (token, i) => {
      const pathname = `/api/v1/${token}/telemetry`;
      // Unique ts per request across all clients of a device: a repeated (device, key, ts) is stored once.
      let ts = base + (p.firstClient + i) * 100_000_000;
      while (performance.now() < to) {
        const payload = `{"ts":${ts++},"values":{"temperature":${(20 + Math.random() * 5).toFixed(2)},"humidity":${ts % 100},"active":true}}`;
        const start = performance.now();
        let code: string;
        try {
          code = await post(agents[i], p.port, pathname, payload);
        } catch {
          timeouts++;
          continue;
        }
        const now = performance.now();
        if (code !== '2.01') {
          other++;
          continue;
        }
        ok++;
        if (now >= from && now < to) {
          cpuAtFrom ??= process.cpuUsage();
          inWindow++;
          hist.record(now - start);
        } else if (now >= to) cpuAtTo ??= process.cpuUsage();
      }
    }),
  );
  const a = cpuAtFrom ?? process.cpuUsage();
  const b = cpuAtTo ?? process.cpuUsage();
  for (const s of sockets) s.close();
  process.send?.({
    kind: 'done',
    ok,
    other,
    timeouts,
    inWindow,
    cpuSec: (b.user - a.user + b.system - a.system) / 1e6,
    hist: hist.toJSON(),
  } as GenMsg);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      gen: { type: 'boolean', default: false },
      clients: { type: 'string', default: '128' },
      devices: { type: 'string', default: '32' },
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      procs: { type: 'string', default: '2' },
      'no-build': { type: 'boolean', default: false },
      /** Extra `serve` flags, e.g. `--gateway-args="--telemetry-batch-wait-ms 0"`. */
      'gateway-args': { type: 'string', default: '' },
      /** Writes a V8 CPU profile of the gateway process into this directory. */
      'cpu-prof': { type: 'string' },
    },
  });
  if (values.gen) {
    try {
      await runGenerator(JSON.parse(process.env.BENCH_GEN ?? '{}') as GenParams);
    } catch (err) {
      process.send?.({ kind: 'failed', error: String(err) } as GenMsg);
      process.exitCode = 1;
    }
    return;
  }
  const clients = Number(values.clients);
  const deviceCount = Number(values.devices);
  const procs = Number(values.procs);
  const warmupMs = Number(values.warmup) * 1000;
  const durationMs = Number(values.duration) * 1000;
  if (!values['no-build']) buildBundle();
  console.log(
    `CoAP confirmable telemetry benchmark: ${clients} clients on ${deviceCount} devices, ` +
      `${warmupMs / 1000} s warm-up + ${durationMs / 1000} s measured, generator in ${procs} child process(es)`,
  );
  console.log(`  node ${process.version}, load average before: ${loadAverage()}`);

  const extra = values['gateway-args'].split(' ').filter((a) => a !== '');
  if (extra.length > 0) console.log(`  gateway flags: ${extra.join(' ')}`);
  const profDir = values['cpu-prof'];
  const gw = await startGatewayProcess(
    ['--telemetry-max-points', String(1e9), ...extra],
    profDir ? await profilerEnv(profDir) : {},
  );
  const children: ChildProcess[] = [];
  const kill = setTimeout(
    () => {
      for (const c of children) c.kill('SIGKILL');
    },
    warmupMs + durationMs + REQUEST_TIMEOUT_MS + 60_000,
  );
  try {
    const deviceTokens = await createDevices(gw.baseUrl, 'bench-coap', deviceCount);
    const tokens = Array.from({ length: clients }, (_, i) => deviceTokens[i % deviceCount]);
    const results: Array<Promise<Extract<GenMsg, { kind: 'done' }>>> = [];
    const readies: Array<Promise<unknown>> = [];
    const per = Math.ceil(clients / procs);
    for (let first = 0; first < clients; first += per) {
      const params: GenParams = {
        port: gw.proc.ports.coap,
        tokens: tokens.slice(first, first + per),
        firstClient: first,
        warmupMs,
        durationMs,
      };
      const child = fork(fileURLToPath(import.meta.url), ['--gen'], {
        env: { ...process.env, BENCH_GEN: JSON.stringify(params) },
        execArgv: ['--import', 'tsx'],
      });
      children.push(child);
      const message = (kind: GenMsg['kind']) =>
        new Promise<GenMsg>((resolve, reject) => {
          child.on('message', (m: GenMsg) => {
            if (m.kind === kind) resolve(m);
            else if (m.kind === 'failed') reject(new Error(`generator failed: ${m.error}`));
          });
          child.once('exit', (code) => reject(new Error(`generator exited with ${code}`)));
        });
      readies.push(message('ready'));
      results.push(message('done') as Promise<Extract<GenMsg, { kind: 'done' }>>);
    }
    await Promise.all(readies);
    for (const c of children) c.send({ kind: 'go' });
    await sleep(warmupMs);
    const srv0 = await cpuSeconds(gw.pid);
    const m0 = machineCpu();
    await sleep(durationMs);
    const srv1 = await cpuSeconds(gw.pid);
    const m1 = machineCpu();
    const done = await Promise.all(results);

    const hist = new Histogram();
    let ok = 0;
    let other = 0;
    let timeouts = 0;
    let inWindow = 0;
    let genCpu = 0;
    for (const d of done) {
      hist.merge(d.hist);
      ok += d.ok;
      other += d.other;
      timeouts += d.timeouts;
      inWindow += d.inWindow;
      genCpu += d.cpuSec;
    }
    const durationS = durationMs / 1000;
    const rate = inWindow / durationS;
    const serverCpu = srv1 - srv0;
    const otherCpu = Math.max(0, m1.busy - m0.busy - serverCpu - genCpu);
    const pct = (s: number) => ((100 * s) / durationS).toFixed(1);
    console.log(
      `  gateway: ${Math.round(rate).toLocaleString('en-US')} req/s` +
        `  latency p50 ${hist.quantile(0.5).toFixed(2)} ms, p99 ${hist.quantile(0.99).toFixed(2)} ms, max ${hist.max.toFixed(1)} ms`,
    );
    console.log(`    requests: ${ok} × 2.01, ${other} other codes, ${timeouts} timeouts/errors`);
    console.log(
      `    cpu in window: server ${pct(serverCpu)}%, generator ${pct(genCpu)}%, other processes ${pct(otherCpu)}% (200% = both cores)`,
    );
    if (profDir) {
      process.kill(gw.pid, 'SIGUSR2');
      console.log(`    cpu profile: ${join(profDir, 'gateway.cpuprofile')}`);
    }
    await sleep(profDir ? 2000 : 500);
    const points = storedPoints(gw.dataDir);
    // A timed-out request may still have been stored; only then can there be more points.
    const verified = points === KEYS_PER_MESSAGE * ok;
    console.log(
      `    stored points: ${points}, 3 × 2.01 = ${KEYS_PER_MESSAGE * ok} → ${verified ? 'OK' : 'MISMATCH'}`,
    );
    console.log(`  target ≥ 5,000 req/s: ${rate >= 5000 ? 'met' : 'MISSED'}`);
    console.log(`  load average after: ${loadAverage()}`);
    if (!verified) process.exitCode = 1;
  } finally {
    clearTimeout(kill);
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
    await gw.close();
  }
}

await main();
