/**
 * Benchmark: HTTP device telemetry (issue 4 target: ≥ 8,000 POSTs/s from 50 keep-alive
 * connections, 3 keys each, every request acknowledged only after its commit, p99 ≤ 25 ms).
 *
 * The gateway runs as the built bundle in its own process; autocannon drives it from this one.
 * Each connection posts for its own device with a unique `ts` per request, so every acknowledged
 * request must leave exactly 3 points in the SQLite file: the run counts them to prove that a 200
 * means committed, not just fast. Usage:
 *   npm run bench:http [-- --connections 50 --duration 10]
 */

import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import {
  buildBundle,
  createDevices,
  loadAverage,
  profilerEnv,
  rssMiB,
  startGatewayProcess,
  storedPoints,
} from './support.js';

const { values: args } = parseArgs({
  options: {
    connections: { type: 'string', default: '50' },
    duration: { type: 'string', default: '10' },
    // Writes a V8 CPU profile of the gateway (the measured run only) into this directory.
    'cpu-prof': { type: 'string' },
  },
});
const connections = Number(args.connections);
const duration = Number(args.duration);

async function main(): Promise<void> {
  buildBundle();
  const profDir = args['cpu-prof'];
  const gw = await startGatewayProcess([], profDir ? await profilerEnv(profDir) : {});
  try {
    const tokens = await createDevices(gw.baseUrl, 'http-bench', connections);
    const rssBefore = await rssMiB(gw.pid);
    let nextClient = 0;
    const tsBase = Date.UTC(2026, 0, 1);
    const run = (seconds: number) =>
      autocannon({
        url: gw.baseUrl,
        connections,
        duration: seconds,
        pipelining: 1,
        requests: [
          {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            // One device per connection, a unique ts per request (context lives per connection).
            setupRequest: (req, context) => {
              const ctx = context as { token?: string; n?: number; client?: number };
              if (ctx.token === undefined) {
                ctx.client = nextClient++;
                ctx.token = tokens[ctx.client % tokens.length];
                ctx.n = 0;
              }
              ctx.n = (ctx.n ?? 0) + 1;
              const n = ctx.n;
              const ts = tsBase + (ctx.client ?? 0) * 100_000_000 + n;
              return {
                ...req,
                path: `/api/v1/${ctx.token}/telemetry`,
                body: `{"ts":${ts},"values":{"temperature":${(20 + (n % 50) / 10).toFixed(1)},"humidity":${40 + (n % 20)},"running":true}}`,
              };
            },
          },
        ],
      });
    console.log(`warm-up 2 s, then ${duration} s with ${connections} keep-alive connections…`);
    await run(2);
    // Requests still in flight when the warm-up stopped are committed a moment later: wait for
    // them, so that they are not counted in the measured run.
    await new Promise((r) => setTimeout(r, 500));
    const warmPoints = storedPoints(gw.dataDir);
    const result = await run(duration);
    if (profDir) {
      process.kill(gw.pid, 'SIGUSR2');
      await new Promise((r) => setTimeout(r, 2000));
      console.log(`  cpu profile: ${join(profDir, 'gateway.cpuprofile')}`);
    }
    const points = storedPoints(gw.dataDir) - warmPoints;
    const ok = result['2xx'];
    const rssAfter = await rssMiB(gw.pid);
    const rate = ok / duration;
    console.log('HTTP telemetry (POST /api/v1/{token}/telemetry, 3 keys, 200 after commit)');
    console.log(`  requests/s:   ${rate.toFixed(0)} (target ≥ 8,000)`);
    console.log(
      `  latency ms:   p50 ${result.latency.p50}  p90 ${result.latency.p90}  p99 ${result.latency.p99} (target ≤ 25)  max ${result.latency.max}`,
    );
    console.log(
      `  2xx: ${ok}  non-2xx: ${result.non2xx}  errors: ${result.errors}  timeouts: ${result.timeouts}`,
    );
    // Requests in flight when autocannon stops may be committed without being counted.
    const stored = points >= 3 * ok && points <= 3 * (ok + connections);
    console.log(
      `  stored points: ${points}, 3 × 2xx = ${3 * ok} (+ at most ${3 * connections} in flight at the end) → ${stored ? 'OK: every acknowledged request is stored' : 'MISMATCH'}`,
    );
    console.log(
      `  gateway RSS:  ${rssBefore.toFixed(1)} MiB before, ${rssAfter.toFixed(1)} MiB after`,
    );
    console.log(`  load average: ${loadAverage()}`);
    if (!stored) process.exitCode = 1;
  } finally {
    await gw.close();
  }
}

await main();
