/**
 * Benchmark of issue 5: 5,000 idle MQTT connections held by the gateway with its RSS ≤ 200 MB (issue 5), ≤ 150 MB (issue 18).
 * Usage (the npm script raises `ulimit -n`):
 *   npm run bench:mqtt-idle [-- --connections 5000 --hold 10]
 *
 * The gateway runs as the built bundle in its own process; one device per connection is created
 * over REST (a device has one MQTT session at a time). This process opens the connections from
 * 127.0.0.1 (mqtt.js, MQTT 3.1.1, keep-alive 60 s), `--parallel` CONNECTs at a time, holds them
 * for `--hold` seconds and reads the gateway's VmRSS from /proc before and after.
 *
 * Side by side in one run (the machine is shared): `--baseline path/to/edge-gateway.mjs` runs
 * another build's bundle first, `--variant 'name=NODE_OPTIONS flags'` (repeatable) this bundle
 * with those V8/Node flags, e.g. `--variant 'semi1=--max-semi-space-size=1'`; `--memory-limit 1g`
 * (repeatable; root) this bundle in a memory cgroup of that size, which V8 sizes its heap from as
 * on a box with that much memory (support.ts memoryCgroup). `--env NAME=value` (repeatable) goes to
 * every gateway's environment (`EDGE_MEMORY_TRIM_AFTER_MB=32`). `--malloc-trim` then calls glibc's
 * `malloc_trim(0)` in the gateway with gdb and prints its RSS after (what malloc keeps but would
 * give back).
 */

import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { connect, type MqttClient } from 'mqtt';
import {
  buildBundle,
  createDevices,
  loadAverage,
  type MemoryCgroup,
  mallocTrimByGdb,
  memoryCgroup,
  rssMiB,
  startGatewayProcess,
} from './support.js';

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function open(port: number, token: string, i: number): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const c = connect({
      host: '127.0.0.1',
      port,
      protocolVersion: 4,
      clientId: `idle-${i}`,
      username: token,
      clean: true,
      keepalive: 60,
      reconnectPeriod: 0,
      connectTimeout: 30_000,
    });
    c.once('connect', () => resolve(c));
    c.once('error', (err) => {
      c.end(true);
      reject(err);
    });
  });
}

interface Variant {
  readonly name: string;
  readonly bundle?: string;
  readonly env: Record<string, string>;
  readonly cgroup?: MemoryCgroup;
}

/** One gateway holding `count` idle connections; true when the target is met. */
async function run(
  v: Variant,
  count: number,
  holdMs: number,
  parallel: number,
  trimMalloc: boolean,
): Promise<boolean> {
  console.log(`\n  ${v.name}:`);
  const gw = await startGatewayProcess([], v.env, v.bundle, v.cgroup);
  const clients: MqttClient[] = [];
  try {
    const atStart = await rssMiB(gw.pid);
    const t0 = Date.now();
    const tokens = await createDevices(gw.baseUrl, 'bench-idle', count, 8);
    console.log(
      `  ${count} devices created over REST in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
    );
    await sleep(2000);
    const before = await rssMiB(gw.pid);

    const t1 = Date.now();
    let next = 0;
    let failed = 0;
    const opener = async () => {
      while (next < count) {
        const i = next++;
        try {
          clients.push(await open(gw.proc.ports.mqtt, tokens[i], i));
        } catch {
          failed++;
        }
      }
    };
    await Promise.all(Array.from({ length: parallel }, opener));
    const connectS = (Date.now() - t1) / 1000;
    console.log(
      `  ${clients.length} connected (${failed} failed) in ${connectS.toFixed(1)} s (${parallel} CONNECTs at a time)`,
    );
    await sleep(holdMs);
    const during = await rssMiB(gw.pid);
    const open_ = clients.filter((c) => c.connected).length;

    const f = (n: number) => n.toFixed(1);
    console.log(`  gateway RSS: at start ${f(atStart)} MB, with ${count} devices ${f(before)} MB`);
    console.log(
      `  gateway RSS with ${open_} idle connections after ${holdMs / 1000} s: ${f(during)} MB` +
        ` (+${f(during - before)} MB, ${f(((during - before) * 1024) / Math.max(1, open_))} KiB per connection)`,
    );
    if (trimMalloc) {
      mallocTrimByGdb(gw.pid);
      await sleep(1000);
      const after = await rssMiB(gw.pid);
      console.log(`  gateway RSS after malloc_trim(0): ${f(after)} MB (${f(after - during)} MB)`);
    }
    const met = open_ === count && during <= 150;
    console.log(
      `  target (${count} connections, RSS ≤ 150 MB, issue 18): ${met ? 'met' : 'MISSED'}`,
    );
    return met;
  } finally {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await gw.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      connections: { type: 'string', default: '5000' },
      hold: { type: 'string', default: '10' },
      parallel: { type: 'string', default: '200' },
      baseline: { type: 'string' },
      variant: { type: 'string', multiple: true, default: [] },
      'memory-limit': { type: 'string', multiple: true, default: [] },
      env: { type: 'string', multiple: true, default: [] },
      'malloc-trim': { type: 'boolean', default: false },
      'no-build': { type: 'boolean', default: false },
    },
  });
  const count = Number(values.connections);
  const holdMs = Number(values.hold) * 1000;
  const parallel = Number(values.parallel);
  if (!values['no-build']) buildBundle();
  console.log(`MQTT idle connections benchmark: ${count} connections held ${holdMs / 1000} s`);
  console.log(`  node ${process.version}, load average before: ${loadAverage()}`);
  const env = Object.fromEntries(
    (values.env ?? []).map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]),
  );
  const cgroups = await Promise.all((values['memory-limit'] ?? []).map(memoryCgroup));
  const variants: Variant[] = [
    ...(values.baseline
      ? [{ name: `baseline ${values.baseline}`, bundle: resolve(values.baseline), env }]
      : []),
    { name: 'this build', env },
    ...(values.variant ?? []).map((v) => {
      const eq = v.indexOf('=');
      return {
        name: `this build, ${v.slice(0, eq)}`,
        env: { ...env, NODE_OPTIONS: v.slice(eq + 1) },
      };
    }),
    ...cgroups.map((cgroup) => ({ name: `this build, ${cgroup.label} cgroup`, env, cgroup })),
  ];
  let met = true;
  for (const v of variants)
    met = (await run(v, count, holdMs, parallel, values['malloc-trim'])) && met;
  for (const cg of cgroups) await cg.remove();
  console.log(`\n  load average after: ${loadAverage()}`);
  if (!met) process.exitCode = 1;
}

await main();
