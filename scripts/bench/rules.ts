/**
 * Benchmark of issue 14's rule-engine targets, in one process (run side by side, so a loaded
 * machine slows both the same way):
 *
 * 1. Script node call: the median and p99 of one script filter call (QuickJS sandbox, a
 *    telemetry message of 3 keys in, a boolean out). Target: median ≤ 50 µs.
 * 2. Engine throughput: committed telemetry messages handed to the entry point and run through
 *    (a) the default root chain and (b) the default root chain with an extra script filter and
 *    script transform in front, each until every queue is empty. Messages/s of each.
 *
 * 3. MQTT ingest (the issue's target: ≥ 5,000 telemetry msg/s with the chain of 2b, ≤ 25 %
 *    below no chain): `bench:mqtt --rules`, run after the two above (skip with `--no-mqtt`). The
 *    gateway runs as the built bundle; rounds alternate an empty root chain and the chain of 2b
 *    on one gateway, so the machine's load hits both alike.
 *
 * Usage: npm run bench:rules [-- --messages 20000 --calls 20000 --no-mqtt
 *                                --publishers 20 --duration 5 --rounds 2 --rate 0]
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { GatewayMsg } from '../../src/messages/types.js';
import { loadAverage, rootWithScripts, startGatewayInProcess } from './support.js';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '20000' },
    calls: { type: 'string', default: '20000' },
    'no-mqtt': { type: 'boolean', default: false },
    publishers: { type: 'string', default: '20' },
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '2' },
    /** Passed to bench:mqtt --rules: messages/s offered in all (0: as fast as acknowledged). */
    rate: { type: 'string', default: '0' },
  },
});
const MESSAGES = Number(values.messages);
const CALLS = Number(values.calls);

const { gw, stop } = await startGatewayInProcess('rules', {
  rules: { queueSize: MESSAGES + 1 },
});
try {
  const { rules, devices } = gw.services;
  const device = devices.save({ name: 'bench-device' });
  const msg = (i: number): GatewayMsg => ({
    id: randomUUID(),
    type: 'POST_TELEMETRY_REQUEST',
    originator: { entityType: 'DEVICE', id: device.id.id },
    metadata: { deviceName: 'bench-device', deviceType: 'default', ts: String(Date.now()) },
    data: { temperature: 20 + (i % 10), humidity: 40 + (i % 7), status: 'ok' },
    ts: Date.now(),
    committed: true,
  });

  // 1. One script call (the sandbox loads on first use; here before the timing).
  await rules.scripts.ready();
  const script = rules.scripts.compile('return msg.temperature > 20;', [
    'msg',
    'metadata',
    'msgType',
  ]);
  const args = [
    JSON.stringify(msg(0).data),
    JSON.stringify(msg(0).metadata),
    '"POST_TELEMETRY_REQUEST"',
  ];
  for (let i = 0; i < 2000; i++) script.invoke(args);
  const times = new Float64Array(CALLS);
  for (let i = 0; i < CALLS; i++) {
    const t0 = process.hrtime.bigint();
    script.invoke(args);
    times[i] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  script.dispose();
  times.sort();
  const at = (q: number) => times[Math.min(CALLS - 1, Math.floor(q * CALLS))]?.toFixed(1);
  console.log(
    `script filter call, QuickJS: median ${at(0.5)} µs, p99 ${at(0.99)} µs (${CALLS} calls)`,
  );

  // The same call as the script nodes make it (values in, the interpreter when it can).
  const fast = rules.scripts.compile(
    'return msg.temperature > 20;',
    ['msg', 'metadata', 'msgType'],
    {
      fast: true,
    },
  );
  const values = [msg(0).data, msg(0).metadata, 'POST_TELEMETRY_REQUEST'];
  for (let i = 0; i < 2000; i++) fast.call(values);
  for (let i = 0; i < CALLS; i++) {
    const t0 = process.hrtime.bigint();
    fast.call(values);
    times[i] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  const path = fast.fast ? 'interpreter' : `QuickJS (${fast.deferredReason})`;
  fast.dispose();
  times.sort();
  console.log(
    `script filter call, ${path}: median ${at(0.5)} µs, p99 ${at(0.99)} µs (${CALLS} calls)`,
  );

  // 2. Engine throughput, default chain vs default chain + script filter + script transform.
  const scriptedId = (await rules.chains.import(rootWithScripts())).id.id;
  const defaultId = rules.chains.definitions().find((c) => c.root)?.id ?? '';

  // The thread's CPU time per message as well as the rate: on a loaded machine the rate says
  // how much CPU the bench got, the CPU time what a message costs.
  const cpuUs = () => {
    const u = process.threadCpuUsage();
    return u.user + u.system;
  };
  const run = async (chainId: string): Promise<[number, number]> => {
    rules.chains.makeRoot(chainId);
    const started = performance.now();
    const cpu0 = cpuUs();
    for (let i = 0; i < MESSAGES; i++) rules.engine.process(msg(i));
    await rules.engine.idle(300_000);
    return [MESSAGES / ((performance.now() - started) / 1000), (cpuUs() - cpu0) / MESSAGES];
  };
  const results: Record<string, Array<[number, number]>> = { default: [], scripts: [] };
  for (let round = 0; round < 3; round++) {
    results.default?.push(await run(defaultId));
    results.scripts?.push(await run(scriptedId));
  }
  const fmt = (xs: Array<[number, number]> = []) =>
    `${xs.map(([r]) => Math.round(r).toLocaleString('en')).join(', ')} msg/s; CPU ${xs.map(([, c]) => c.toFixed(1)).join(', ')} µs per message`;
  console.log(
    `default root chain:             ${fmt(results.default)} (${MESSAGES} msgs x 3 rounds)`,
  );
  console.log(`root + script filter/transform: ${fmt(results.scripts)}`);
  const stats = rules.engine.stats();
  console.log(
    `failed ${stats.chains.reduce((a, c) => a + c.failed, 0)}, dropped ${stats.chains.reduce((a, c) => a + c.dropped, 0)}; load average ${loadAverage()}`,
  );
} finally {
  await stop();
}

if (!values['no-mqtt']) {
  const args = [
    '--rules',
    '--publishers',
    values.publishers,
    '--duration',
    values.duration,
    '--rate',
    values.rate,
  ];
  const mqtt = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      fileURLToPath(new URL('./mqtt.ts', import.meta.url)),
      ...args,
      '--rounds',
      values.rounds,
    ],
    { stdio: 'inherit' },
  );
  if (mqtt.status !== 0) process.exitCode = 1;
}
