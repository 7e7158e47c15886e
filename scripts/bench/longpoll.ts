/**
 * Benchmark: N devices long-polling server-side RPC at once over HTTP (target: 1,000 polls cost
 * at most 50 MB of extra gateway memory). The gateway runs in this process; the clients run in a
 * child process so their sockets do not count. Usage:
 *   npm run bench:longpoll [-- --devices 1000]
 */

import { fork } from 'node:child_process';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startGatewayInProcess } from './support.js';

const MB = 1024 * 1024;

type ClientMsg = { kind: 'sent' } | { kind: 'done'; ok: number; other: number };

/** Child: opens one long poll per token and reports the status codes. */
function runClients(port: number, tokens: string[]): void {
  const agent = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  let ok = 0;
  let other = 0;
  const finish = () => {
    if (ok + other === tokens.length) process.send?.({ kind: 'done', ok, other } as ClientMsg);
  };
  for (const token of tokens) {
    const req = request(
      { host: '127.0.0.1', port, path: `/api/v1/${token}/rpc?timeout=120000`, agent },
      (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode === 200) ok++;
          else other++;
          finish();
        });
      },
    );
    req.on('error', () => {
      other++;
      finish();
    });
    req.end();
  }
  process.send?.({ kind: 'sent' } as ClientMsg);
}

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect) {
    collect();
    collect();
  }
}

function memory() {
  gc();
  const m = process.memoryUsage();
  return { rss: m.rss / MB, heap: m.heapUsed / MB, external: m.external / MB };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      devices: { type: 'string', default: '1000' },
      client: { type: 'string' },
    },
  });
  if (values.client !== undefined) {
    const tokens = JSON.parse(process.env.BENCH_TOKENS ?? '[]') as string[];
    runClients(Number(values.client), tokens);
    return;
  }
  const count = Number(values.devices);
  const { gw, stop } = await startGatewayInProcess('longpoll', { logLevel: 'error' });
  try {
    const { devices, rpc } = gw.services;
    const ids: string[] = [];
    const tokens: string[] = [];
    for (let i = 0; i < count; i++) {
      const token = `bench-token-${i}`;
      ids.push(devices.save({ name: `bench-${i}` }, { accessToken: token }).id.id);
      tokens.push(token);
    }
    // Warm up the HTTP path once so that lazily loaded code is not counted as poll cost.
    const warm = fork(fileURLToPath(import.meta.url), ['--client', String(gw.ports.http)], {
      env: { ...process.env, BENCH_TOKENS: JSON.stringify(tokens.slice(0, 10)) },
      execArgv: ['--import', 'tsx'],
    });
    await waitPolls(() => rpc.counts.polls, 10);
    for (const id of ids.slice(0, 10)) void rpc.call(id, { method: 'warm', params: {} }, true);
    await new Promise<void>((resolve) =>
      warm.on('message', (m: ClientMsg) => m.kind === 'done' && resolve()),
    );
    warm.kill();

    const before = memory();
    const started = Date.now();
    const child = fork(fileURLToPath(import.meta.url), ['--client', String(gw.ports.http)], {
      env: { ...process.env, BENCH_TOKENS: JSON.stringify(tokens) },
      execArgv: ['--import', 'tsx'],
    });
    const done = new Promise<{ ok: number; other: number }>((resolve) =>
      child.on('message', (m: ClientMsg) => {
        if (m.kind === 'done') resolve(m);
      }),
    );
    await waitPolls(() => rpc.counts.polls, count);
    const setupMs = Date.now() - started;
    // Let the sockets settle, then measure with everything parked.
    await new Promise((r) => setTimeout(r, 1000));
    const during = memory();
    const t0 = Date.now();
    for (const id of ids) void rpc.call(id, { method: 'ping', params: { n: 1 } }, true);
    const result = await done;
    const deliverMs = Date.now() - t0;
    child.kill();
    const leftover = rpc.counts;

    const fmt = (n: number) => n.toFixed(1);
    console.log(`long-poll benchmark: ${count} devices polling GET /api/v1/{token}/rpc`);
    console.log(
      `  node ${process.version}, gc exposed: ${Boolean((globalThis as { gc?: unknown }).gc)}`,
    );
    console.log(`  polls registered in ${setupMs} ms`);
    console.log(
      `  before: rss ${fmt(before.rss)} MB, heap ${fmt(before.heap)} MB, external ${fmt(before.external)} MB`,
    );
    console.log(
      `  during: rss ${fmt(during.rss)} MB, heap ${fmt(during.heap)} MB, external ${fmt(during.external)} MB`,
    );
    console.log(
      `  extra:  rss ${fmt(during.rss - before.rss)} MB, heap ${fmt(during.heap - before.heap)} MB` +
        ` (${fmt(((during.rss - before.rss) * 1024) / count)} KiB rss per poll)`,
    );
    console.log(
      `  delivered one RPC to every poll in ${deliverMs} ms: ${result.ok} x 200, ${result.other} other`,
    );
    console.log(`  left in memory after: ${JSON.stringify(leftover)}`);
    if (result.ok !== count) process.exitCode = 1;
  } finally {
    await stop();
  }
}

async function waitPolls(current: () => number, want: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (current() < want) {
    if (Date.now() > deadline) throw new Error(`only ${current()} of ${want} polls arrived`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

await main();
