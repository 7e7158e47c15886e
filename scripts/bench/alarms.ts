/**
 * Benchmark of issue 13: the alarm engine under device load. Usage:
 *   npm run bench:alarms [-- --devices 1000 --rate 5000 --duration 20 --warmup 3 --procs 2
 *                            --probes 100 --bundle dist/edge-gateway.mjs --no-build
 *                            --before /path/to/main/edge-gateway.mjs]
 *
 * 1. Ingest, same gateway process, same devices, one run: `--devices` MQTT devices (in `--procs`
 *    generator child processes) publish QoS 1 telemetry at `--rate` msg/s in total, first with no
 *    alarm rules (phase A), then after their profile got 3 rules (one SIMPLE, one DURATION, one
 *    REPEATING; phase B). The readings move the DURATION and REPEATING states (about 1 in 10
 *    matches) without raising alarms. Each phase reports the acknowledged rate, PUBACK latency and
 *    the gateway's CPU per 1,000 messages; the target is a rate drop ≤ 15 %.
 * 2. Alarm visibility, during phase B: `--probes` other devices each send one reading that raises
 *    the SIMPLE alarm; from its PUBACK (sent after the commit) the bench polls
 *    `GET /api/alarm/DEVICE/{id}` until the alarm is there. Target p99 ≤ 5 ms. Between the publish
 *    and its PUBACK, pairs of REST reads (telemetry, then alarms) count how often the reading was
 *    visible before its alarm: the commit → alarm window, measured rather than assumed.
 *    `--before <bundle>` runs another build first with the same arguments (side by side).
 * 3. Rule-state memory, in this process: a gateway made with `createGateway`, the same profile
 *    and device count, every device given readings that leave DURATION and REPEATING progress;
 *    the V8 heap after a full GC, before and after. Target ≤ 20 MB.
 */

import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { connect, type MqttClient } from 'mqtt';
import { numeric, rule } from '../../test/helpers/alarms.js';
import {
  buildBundle,
  cpuSeconds,
  createDevices,
  Histogram,
  loadAverage,
  startGatewayInProcess,
  startGatewayProcess,
} from './support.js';

const TOPIC = 'v1/devices/me/telemetry';
const ADMIN = { username: 'bench@local', password: 'bench-password-1' };

/** One SIMPLE, one DURATION, one REPEATING rule. */
export const BENCH_ALARMS = [
  {
    id: 'hot',
    alarmType: 'High temperature',
    createRules: { CRITICAL: rule([numeric('temperature', 'GREATER', 30)]) },
    clearRule: rule([numeric('temperature', 'LESS_OR_EQUAL', 25)]),
  },
  {
    id: 'humid',
    alarmType: 'Humid for 10 minutes',
    createRules: {
      MAJOR: rule([numeric('humidity', 'GREATER', 80)], {
        type: 'DURATION',
        unit: 'MINUTES',
        predicate: { defaultValue: 10, userValue: null, dynamicValue: null },
      }),
    },
  },
  {
    id: 'shaky',
    alarmType: 'Vibration',
    createRules: {
      WARNING: rule([numeric('vibration', 'GREATER', 5)], {
        type: 'REPEATING',
        predicate: { defaultValue: 1000, userValue: null, dynamicValue: null },
      }),
    },
  },
];

/** A reading that raises nothing: 1 in 10 humid, 1 in 10 shaky (rule state moves). */
function reading(i: number): string {
  const humidity = i % 10 === 0 ? 85 : 50;
  const vibration = i % 10 === 5 ? 7 : 1;
  return `{"temperature":${20 + (i % 5)},"humidity":${humidity},"vibration":${vibration}}`;
}

interface GenParams {
  readonly port: number;
  readonly tokens: string[];
  /** Messages per second of this generator. */
  readonly rate: number;
  readonly phases: ReadonlyArray<{ readonly warmupMs: number; readonly durationMs: number }>;
}

type GenMsg =
  | { kind: 'ready' }
  | { kind: 'phase'; acked: number; errors: number; hist: ReturnType<Histogram['toJSON']> }
  | { kind: 'failed'; error: string };

async function runGenerator(p: GenParams): Promise<void> {
  const send = (m: GenMsg) => process.send?.(m);
  const clients: MqttClient[] = [];
  for (const token of p.tokens) {
    clients.push(
      await new Promise<MqttClient>((resolve, reject) => {
        const c = connect({
          host: '127.0.0.1',
          port: p.port,
          username: token,
          clientId: token,
          reconnectPeriod: 0,
          connectTimeout: 30_000,
        });
        c.once('connect', () => resolve(c));
        c.once('error', reject);
      }),
    );
  }
  send({ kind: 'ready' });
  for (;;) {
    const [m] = (await once(process, 'message')) as [
      { kind: 'phase'; index: number } | { kind: 'end' },
    ];
    if (m.kind === 'end') break;
    const phase = p.phases[m.index];
    const hist = new Histogram();
    let acked = 0;
    let errors = 0;
    let i = 0;
    const start = performance.now();
    const measureFrom = start + phase.warmupMs;
    const end = measureFrom + phase.durationMs;
    const pending: Array<Promise<void>> = [];
    // Paced: message n is due at start + n / rate, spread over the clients in turn.
    while (performance.now() < end) {
      const due = start + (i * 1000) / p.rate;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
      const c = clients[i % clients.length];
      const sentAt = performance.now();
      const n = i++;
      pending.push(
        c.publishAsync(TOPIC, reading(n), { qos: 1 }).then(
          () => {
            if (sentAt >= measureFrom) {
              acked++;
              hist.record(performance.now() - sentAt);
            }
          },
          () => {
            errors++;
          },
        ),
      );
      if (pending.length > 10_000) await Promise.all(pending.splice(0, 5000));
    }
    await Promise.all(pending);
    send({ kind: 'phase', acked, errors, hist: hist.toJSON() });
  }
  await Promise.all(clients.map((c) => c.endAsync()));
}

if (process.argv.includes('--gen')) {
  try {
    await runGenerator(JSON.parse(process.env.BENCH_GEN ?? '{}') as GenParams);
  } catch (err) {
    process.send?.({ kind: 'failed', error: String(err) });
  }
  process.exit(0);
}

async function login(baseUrl: string): Promise<string> {
  const res = await fetch(`${baseUrl}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(ADMIN),
  });
  return ((await res.json()) as { token: string }).token;
}

async function setDefaultProfileAlarms(
  baseUrl: string,
  token: string,
  alarms: unknown,
): Promise<void> {
  const headers = { 'content-type': 'application/json', 'X-Authorization': `Bearer ${token}` };
  const info = await fetch(`${baseUrl}/api/deviceProfileInfo/default`, { headers });
  const { id } = (await info.json()) as { id: { id: string } };
  const full = (await (
    await fetch(`${baseUrl}/api/deviceProfile/${id.id}`, { headers })
  ).json()) as {
    profileData: Record<string, unknown>;
  };
  const res = await fetch(`${baseUrl}/api/deviceProfile`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ ...full, profileData: { ...full.profileData, alarms } }),
  });
  if (res.status !== 200) throw new Error(`profile update: ${res.status} ${await res.text()}`);
}

async function deviceId(baseUrl: string, token: string, name: string): Promise<string> {
  const res = await fetch(`${baseUrl}/api/tenant/devices?deviceName=${encodeURIComponent(name)}`, {
    headers: { 'X-Authorization': `Bearer ${token}` },
  });
  return ((await res.json()) as { id: { id: string } }).id.id;
}

interface ProbeResult {
  /** PUBACK → a REST read that shows the alarm. */
  readonly visible: Histogram;
  /** The same REST read of a device without alarms: what the HTTP round trip alone costs. */
  readonly rest: Histogram;
  /**
   * In the gateway: the alarm's `createdTime` minus its `startTs` (the server time the reading
   * was received, before its group commit), ms resolution: an upper bound of commit → alarm.
   */
  readonly server: Histogram;
  /** Probes whose first read after the PUBACK already showed the alarm. */
  readonly firstRead: number;
  /** Probes whose alarm was not visible within PROBE_GIVE_UP_MS (dropped on the way). */
  readonly missing: number;
  /**
   * Commit → alarm visible, measured over REST: between the publish and its PUBACK, pairs of
   * reads (the reading's telemetry, then the device's alarms). `committed`: pairs whose first
   * read already showed the reading; `withoutAlarm`: of those, pairs whose second read (later)
   * still showed no alarm — the reading was committed and visible before its alarm.
   */
  readonly pairs: { committed: number; withoutAlarm: number; total: number };
}

/** A probe whose alarm is not visible after this long is counted as missing. */
const PROBE_GIVE_UP_MS = 10_000;

/** Phase B's probes: one alarm-raising reading each, then REST polls until it is visible. */
async function probe(
  baseUrl: string,
  port: number,
  token: string,
  probes: Array<{ token: string; id: string }>,
  quietId: string,
  spreadMs: number,
): Promise<ProbeResult> {
  const visible = new Histogram();
  const rest = new Histogram();
  const server = new Histogram();
  let firstRead = 0;
  let missing = 0;
  const pairs = { committed: 0, withoutAlarm: 0, total: 0 };
  const gap = spreadMs / Math.max(1, probes.length);
  const readingVisible = async (id: string) => {
    const res = await fetch(
      `${baseUrl}/api/plugins/telemetry/DEVICE/${id}/values/timeseries?keys=temperature`,
      { headers: { 'X-Authorization': `Bearer ${token}` } },
    );
    const body = (await res.json()) as { temperature?: Array<{ value: unknown }> };
    return body.temperature?.[0]?.value != null;
  };
  const read = async (id: string) => {
    const res = await fetch(`${baseUrl}/api/alarm/DEVICE/${id}?pageSize=1&page=0`, {
      headers: { 'X-Authorization': `Bearer ${token}` },
    });
    const { data } = (await res.json()) as {
      data: Array<{ createdTime: number; startTs: number }>;
    };
    return data[0];
  };
  for (const p of probes) {
    const c = await new Promise<MqttClient>((resolve, reject) => {
      const cl = connect({
        host: '127.0.0.1',
        port,
        username: p.token,
        clientId: p.token,
        reconnectPeriod: 0,
      });
      cl.once('connect', () => resolve(cl));
      cl.once('error', reject);
    });
    let pubacked = false;
    const publishing = c
      .publishAsync(TOPIC, '{"temperature":35,"humidity":50,"vibration":1}', { qos: 1 })
      .then(() => {
        pubacked = true;
      });
    while (!pubacked) {
      const visible = await readingVisible(p.id);
      const alarm = await read(p.id);
      pairs.total++;
      if (visible) pairs.committed++;
      if (visible && !alarm) pairs.withoutAlarm++;
    }
    await publishing;
    const acked = performance.now();
    for (let tries = 0; ; tries++) {
      const alarm = await read(p.id);
      if (alarm) {
        if (tries === 0) firstRead++;
        server.record(alarm.createdTime - alarm.startTs);
        break;
      }
      if (performance.now() - acked > PROBE_GIVE_UP_MS) {
        missing++;
        break;
      }
    }
    if (performance.now() - acked <= PROBE_GIVE_UP_MS) visible.record(performance.now() - acked);
    await c.endAsync();
    const t0 = performance.now();
    await read(quietId);
    rest.record(performance.now() - t0);
    await sleep(gap);
  }
  return { visible, rest, server, firstRead, missing, pairs };
}

async function ingest(opts: {
  devices: number;
  rate: number;
  durationMs: number;
  warmupMs: number;
  procs: number;
  probes: number;
  bundle?: string;
  build: boolean;
  label: string;
}): Promise<void> {
  if (opts.build) buildBundle();
  console.log(`  ${opts.label}: ${opts.bundle ?? 'this build'}, load average ${loadAverage()}`);
  const gw = await startGatewayProcess([], {}, opts.bundle);
  const children: ChildProcess[] = [];
  try {
    const { baseUrl } = gw;
    const port = gw.proc.ports.mqtt;
    console.log(`  creating ${opts.devices} devices + ${opts.probes} probes ...`);
    const tokens = await createDevices(baseUrl, 'alarm-bench', opts.devices, 8);
    const probeTokens = await createDevices(baseUrl, 'alarm-probe', opts.probes + 1, 8);
    const admin = await login(baseUrl);
    const probes = await Promise.all(
      probeTokens.map(async (t) => ({ token: t, id: await deviceId(baseUrl, admin, t) })),
    );
    const quiet = probes.pop() as { id: string };
    const phases = [
      { warmupMs: opts.warmupMs, durationMs: opts.durationMs },
      { warmupMs: opts.warmupMs, durationMs: opts.durationMs },
    ];
    const slices = Array.from({ length: opts.procs }, (_, k) =>
      tokens.filter((_, i) => i % opts.procs === k),
    );
    const inbox = new Map<ChildProcess, GenMsg[]>();
    const waiters = new Map<ChildProcess, (m: GenMsg) => void>();
    const next = (c: ChildProcess) =>
      new Promise<GenMsg>((resolve) => {
        const q = inbox.get(c) ?? [];
        const m = q.shift();
        if (m) resolve(m);
        else waiters.set(c, resolve);
      });
    for (const slice of slices) {
      const params: GenParams = { port, tokens: slice, rate: opts.rate / opts.procs, phases };
      const child = fork(fileURLToPath(import.meta.url), ['--gen'], {
        env: { ...process.env, BENCH_GEN: JSON.stringify(params) },
        execArgv: ['--import', 'tsx'],
      });
      children.push(child);
      inbox.set(child, []);
      child.on('message', (m: GenMsg) => {
        const w = waiters.get(child);
        if (w) {
          waiters.delete(child);
          w(m);
        } else inbox.get(child)?.push(m);
      });
    }
    for (const m of await Promise.all(children.map(next)))
      if (m.kind !== 'ready') throw new Error(`generator: ${JSON.stringify(m)}`);

    const results: Array<{ rate: number; cpuPerK: number; hist: Histogram; errors: number }> = [];
    let probed: ProbeResult | undefined;
    for (const [index, phase] of phases.entries()) {
      if (index === 1) await setDefaultProfileAlarms(baseUrl, admin, BENCH_ALARMS);
      for (const c of children) c.send({ kind: 'phase', index });
      await sleep(phase.warmupMs);
      const cpu0 = await cpuSeconds(gw.pid);
      const probing =
        index === 1
          ? probe(baseUrl, port, admin, probes, quiet.id, phase.durationMs * 0.8)
          : Promise.resolve(undefined);
      const done = await Promise.all(children.map(next));
      const cpu1 = await cpuSeconds(gw.pid);
      probed = (await probing) ?? probed;
      const hist = new Histogram();
      let acked = 0;
      let errors = 0;
      for (const m of done) {
        if (m.kind !== 'phase') throw new Error(`generator: ${JSON.stringify(m)}`);
        hist.merge(m.hist);
        acked += m.acked;
        errors += m.errors;
      }
      const rate = acked / (phase.durationMs / 1000);
      results.push({ rate, cpuPerK: ((cpu1 - cpu0) / acked) * 1000, hist, errors });
    }
    for (const c of children) c.send({ kind: 'end' });
    const [a, b] = results;
    const line = (label: string, r: (typeof results)[number]) =>
      console.log(
        `  ${label}: ${r.rate.toFixed(0)} msg/s acked (offered ${opts.rate}), PUBACK p50 ` +
          `${r.hist.quantile(0.5).toFixed(2)} ms p99 ${r.hist.quantile(0.99).toFixed(2)} ms, ` +
          `gateway CPU ${r.cpuPerK.toFixed(3)} s per 1,000 msgs, errors ${r.errors}`,
      );
    line('A, no rules   ', a);
    line('B, 3 rules    ', b);
    const drop = 1 - b.rate / a.rate;
    const cpuMore = b.cpuPerK / a.cpuPerK - 1;
    console.log(
      `  ingest drop ${(drop * 100).toFixed(1)} % (target ≤ 15 %: ${drop <= 0.15 ? 'met' : 'MISSED'}); ` +
        `gateway CPU per message +${(cpuMore * 100).toFixed(1)} %`,
    );
    console.log(`  queues after phase B: ${await queueFigures(baseUrl, admin)}`);
    if (probed) {
      const { visible, rest, server, firstRead, missing, pairs } = probed;
      const p99 = visible.quantile(0.99);
      console.log(
        `  alarm visible over REST after the PUBACK (${visible.total} probes): p50 ` +
          `${visible.quantile(0.5).toFixed(2)} ms, p99 ${p99.toFixed(2)} ms, max ` +
          `${visible.max.toFixed(2)} ms (target p99 ≤ 5 ms: ${p99 <= 5 ? 'met' : 'MISSED'}); ` +
          `shown by the first read in ${firstRead}/${visible.total}; ${missing} not visible ` +
          `within ${PROBE_GIVE_UP_MS / 1000} s; one REST read alone: p50 ` +
          `${rest.quantile(0.5).toFixed(2)} ms, p99 ${rest.quantile(0.99).toFixed(2)} ms; in the ` +
          `gateway, reading received → alarm committed: p50 ${server.quantile(0.5).toFixed(0)} ms, ` +
          `p99 ${server.quantile(0.99).toFixed(0)} ms, max ${server.max.toFixed(0)} ms`,
      );
      console.log(
        `  commit → alarm visible, over REST before the PUBACK: ${pairs.total} read pairs, ` +
          `${pairs.committed} showed the reading committed, ${pairs.withoutAlarm} of those had ` +
          `no alarm yet (0 = the alarm is visible as soon as the reading is)`,
      );
    }
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    await gw.close();
  }
}

/** Drops on the road from commit to alarm, from `/metrics`: message queue and rule chains. */
async function queueFigures(baseUrl: string, token: string): Promise<string> {
  const text = await (
    await fetch(`${baseUrl}/metrics`, { headers: { 'X-Authorization': `Bearer ${token}` } })
  ).text();
  const pick = (re: RegExp) =>
    text
      .split('\n')
      .filter((l) => re.test(l))
      .map((l) => l.replace(/^edge_/, ''))
      .join(', ');
  return [
    pick(/^edge_message_queue\{state="(dropped|failed)"\}/),
    pick(/^edge_rule_chain_dropped_total/),
  ].join('; ');
}

/** Rule-state memory: V8 heap after GC, before and after every device has rule state. */
async function memory(devices: number): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc (npm run bench:alarms does)');
  const { gw, stop } = await startGatewayInProcess('alarm-mem');
  try {
    const s = gw.services;
    const profile = s.profiles.save({
      name: 'Bench alarms',
      type: 'DEFAULT',
      profileData: { alarms: BENCH_ALARMS },
    });
    const ids: string[] = [];
    for (let i = 0; i < devices; i++) {
      ids.push(s.devices.save({ name: `mem-${i}`, deviceProfileId: { id: profile.id.id } }).id.id);
    }
    const heap = async () => {
      await sleep(50);
      gc();
      gc();
      return process.memoryUsage().heapUsed / 1024 / 1024;
    };
    const before = await heap();
    const now = Date.now();
    // Two readings per device: a DURATION in progress and a REPEATING count of 2.
    for (const [k, values] of [
      { temperature: 22, humidity: 85, vibration: 7 },
      { temperature: 23, humidity: 86, vibration: 8 },
    ].entries()) {
      await Promise.all(ids.map((id) => s.telemetry.save(id, { ts: now + k, values })));
    }
    s.telemetry.flush();
    await sleep(500);
    const after = await heap();
    const stats = s.alarmEngine.stats;
    console.log(
      `  rule-state memory: ${stats.devices} device states × ${BENCH_ALARMS.length} rules, ` +
        `heap ${before.toFixed(1)} → ${after.toFixed(1)} MiB: ${(after - before).toFixed(1)} MiB ` +
        `(target ≤ 20 MB: ${after - before <= 20 ? 'met' : 'MISSED'})`,
    );
  } finally {
    await stop();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      devices: { type: 'string', default: '1000' },
      rate: { type: 'string', default: '5000' },
      duration: { type: 'string', default: '20' },
      warmup: { type: 'string', default: '3' },
      procs: { type: 'string', default: '2' },
      probes: { type: 'string', default: '100' },
      /** Another build of the gateway (e.g. main's), to compare side by side. */
      bundle: { type: 'string' },
      /** A build to run first with the same arguments (before/after side by side in one run). */
      before: { type: 'string' },
      'no-build': { type: 'boolean', default: false },
      'no-memory': { type: 'boolean', default: false },
    },
  });
  const devices = Number(values.devices);
  console.log(`bench:alarms ${new Date().toISOString()}, load average before: ${loadAverage()}`);
  if (!values['no-memory']) await memory(devices);
  const run = {
    devices,
    rate: Number(values.rate),
    durationMs: Number(values.duration) * 1000,
    warmupMs: Number(values.warmup) * 1000,
    procs: Number(values.procs),
    probes: Number(values.probes),
  };
  if (values.before) await ingest({ ...run, bundle: values.before, build: false, label: 'before' });
  await ingest({
    ...run,
    bundle: values.bundle,
    build: !values['no-build'] && !values.bundle,
    label: values.before ? 'after' : 'gateway',
  });
  console.log(`  load average after: ${loadAverage()}`);
}

await main();
