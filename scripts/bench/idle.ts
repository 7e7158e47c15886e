/**
 * bench:idle: memory of an idle gateway with an empty database, and the time from start to
 * ready, beside the parts that make it up, in alternating runs (the machine is shared: only
 * figures of one run compare):
 * - `node`: a bare Node process (an interval keeps it alive);
 * - `node + worker`: the same with one eval worker thread under the checkpointer's heap limits;
 * - `floor`: the least any gateway on this Node can hold: only what its listeners need, no app
 *   code (http, https, tls, net, dgram, zlib and crypto loaded; better-sqlite3 with an empty WAL
 *   database; one HTTP, one HTTPS, one TLS and one plain TCP listener for MQTT, one UDP socket for
 *   CoAP, on the gateway's P-256 kind of certificate made by `openssl`);
 * - `modules`: the bundle evaluated (`--version`, kept alive): every module the gateway imports;
 * - `gateway`: `serve` on an empty database, second start (the TLS certificate exists);
 * - `gateway --https false`: the same without the HTTPS and MQTT-over-TLS listeners;
 * - `baseline gateway`: another build's bundle (`--baseline path/to/edge-gateway.mjs`);
 * - `executable`: the single executable (`--exe dist/edge-gateway-linux-x64`, npm run build:exe),
 *   its files already in its cache folder (second start);
 * - `baseline executable`: another build's (`--baseline-exe path`);
 * - `gateway VARIANT`: the same with NODE_OPTIONS from `--variant 'name=flags'` (repeatable; words
 *   like `MALLOC_ARENA_MAX=2` go to its environment instead);
 * - `gateway, 1g cgroup`: the gateway in a memory cgroup of that size (`--memory-limit 1g`,
 *   repeatable; root), sized by V8 as on a box with that much memory (support.ts memoryCgroup).
 * RSS is read from /proc after `--idle` seconds (default 5), with the anonymous and file-backed
 * parts and the thread count; the gateway's V8 heap comes from its /metrics. `--malloc-trim` then
 * calls glibc's malloc_trim(0) in each process with gdb and reads its RSS again.
 *
 * Run: npm run bench:idle [-- --runs 3 --idle 5 --variant 'semi=--max-semi-space-size=1'
 *   --exe dist/edge-gateway-linux-x64]
 */

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import {
  BUNDLE,
  LOOPBACK_EPHEMERAL,
  PROJECT_ROOT,
  spawnGateway,
} from '../../test/helpers/process.js';
import { opensslCertificate } from '../../test/helpers/tls.js';
import {
  buildBundle,
  loadAverage,
  mallocTrimByGdb,
  memoryCgroup,
  parseVariant,
} from './support.js';

interface Sample {
  readonly rss: number;
  readonly anon: number;
  readonly file: number;
  readonly threads: number;
  readonly heapUsed?: number;
  readonly heapTotal?: number;
  readonly readyMs?: number;
  /** RSS after glibc's malloc_trim(0) was called in it (`--malloc-trim`). */
  readonly rssTrimmed?: number;
}

const MiB = 1024 * 1024;

async function proc(pid: number): Promise<Omit<Sample, 'heapUsed' | 'heapTotal' | 'readyMs'>> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1] ?? 0) / 1024;
  const threads = Number(/^Threads:\s+(\d+)$/m.exec(status)?.[1] ?? 0);
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile') + kb('RssShmem'), threads };
}

/** A node process running `code`, measured after `idleMs`. */
async function nodeProcess(
  code: string,
  idleMs: number,
  env: Record<string, string> = {},
  trimMalloc = false,
): Promise<Sample> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
    cwd: PROJECT_ROOT,
    stdio: 'ignore',
    env: { PATH: process.env.PATH ?? '', ...env },
  });
  try {
    await sleep(idleMs);
    const sample = await proc(child.pid ?? 0);
    return trimMalloc ? { ...sample, rssTrimmed: await trimmed(child.pid ?? 0) } : sample;
  } finally {
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }
}

/** RSS after glibc's malloc_trim(0) in `pid` (gdb). */
async function trimmed(pid: number): Promise<number> {
  mallocTrimByGdb(pid);
  await sleep(500);
  return (await proc(pid)).rss;
}

/**
 * The floor program: Node's modules the gateway's listeners use, SQLite on an empty WAL database
 * and the listeners themselves, with nothing of the gateway. Its files live in `dir`.
 */
function floorProgram(dir: string): string {
  const { key, cert } = opensslCertificate(dir, '/CN=localhost', 'DNS:localhost', 'p256');
  return `import http from 'node:http'; import https from 'node:https'; import tls from 'node:tls';
import net from 'node:net'; import dgram from 'node:dgram'; import 'node:zlib'; import 'node:crypto';
import { readFileSync } from 'node:fs'; import { createRequire } from 'node:module';
const Database = createRequire(${JSON.stringify(join(PROJECT_ROOT, 'package.json'))})('better-sqlite3');
const db = new Database(${JSON.stringify(join(dir, 'floor.db'))});
db.pragma('journal_mode = WAL');
db.exec('create table if not exists t (k integer primary key, v blob)');
const pair = { key: readFileSync(${JSON.stringify(key)}), cert: readFileSync(${JSON.stringify(cert)}) };
const ok = (_req, res) => res.end('ok');
http.createServer(ok).listen(0, '127.0.0.1');
https.createServer(pair, ok).listen(0, '127.0.0.1');
net.createServer((s) => s.resume()).listen(0, '127.0.0.1');
tls.createServer(pair, (s) => s.resume()).listen(0, '127.0.0.1');
dgram.createSocket('udp4').on('message', () => {}).bind(0, '127.0.0.1');`;
}

async function gateway(
  idleMs: number,
  env: Record<string, string>,
  args: readonly string[] = [],
  baseline?: string,
  command?: readonly string[],
  trimMalloc = false,
): Promise<Sample> {
  const start = async (dataDir: string) => {
    const started = performance.now();
    const proc = await spawnGateway(
      ['serve', '--data-dir', dataDir, ...LOOPBACK_EPHEMERAL, '--log-level', 'info', ...args],
      {
        env: { EDGE_ADMIN_EMAIL: 'bench@local', EDGE_ADMIN_PASSWORD: 'bench-password-1', ...env },
        bundle: baseline,
        command,
        // A loaded machine (load average 30) can take far longer than the default 20 s.
        timeoutMs: 120_000,
      },
    );
    return { proc, ms: performance.now() - started };
  };
  // The first start generates the TLS certificate and migrates; a box runs on later starts.
  const dataDir = await mkdtemp(join(tmpdir(), 'edge-gw-idle-'));
  await (await start(dataDir)).proc.stop();
  const { proc: p, ms: readyMs } = await start(dataDir);
  const gw = {
    pid: p.child.pid ?? 0,
    baseUrl: `http://127.0.0.1:${p.ports.http}`,
    close: async () => {
      await p.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  try {
    await sleep(idleMs);
    const sample = await proc(gw.pid);
    const rssTrimmed = trimMalloc ? await trimmed(gw.pid) : undefined;
    const login = await fetch(`${gw.baseUrl}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'bench@local', password: 'bench-password-1' }),
    });
    const { token } = (await login.json()) as { token: string };
    const text = await (
      await fetch(`${gw.baseUrl}/metrics`, { headers: { authorization: `Bearer ${token}` } })
    ).text();
    const metric = (name: string) =>
      Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0) / MiB;
    return {
      ...sample,
      heapUsed: metric('nodejs_heap_size_used_bytes'),
      heapTotal: metric('nodejs_heap_size_total_bytes'),
      readyMs,
      rssTrimmed,
    };
  } finally {
    await gw.close();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '3' },
      idle: { type: 'string', default: '5' },
      variant: { type: 'string', multiple: true, default: [] },
      baseline: { type: 'string' },
      exe: { type: 'string' },
      'baseline-exe': { type: 'string' },
      'memory-limit': { type: 'string', multiple: true, default: [] },
      'malloc-trim': { type: 'boolean', default: false },
      'no-build': { type: 'boolean', default: false },
    },
  });
  if (!values['no-build']) buildBundle();
  const floorDir = await mkdtemp(join(tmpdir(), 'edge-floor-'));
  const floor = floorProgram(floorDir);
  const cgroups = await Promise.all((values['memory-limit'] ?? []).map(memoryCgroup));
  const idleMs = Number(values.idle) * 1000;
  // 'name=--flag VAR=value': NAME=value words go to the environment, the rest to NODE_OPTIONS.
  const variants = (values.variant ?? []).map((spec) => {
    const { name, env, words } = parseVariant(spec);
    return { name, env: words.length > 0 ? { ...env, NODE_OPTIONS: words.join(' ') } : env };
  });
  console.log(
    `Idle memory benchmark: ${values.runs} alternating runs, measured after ${values.idle} s idle`,
  );
  console.log(`  node ${process.version}, load average before: ${loadAverage()}`);

  const keepAlive = 'setInterval(() => {}, 1000);';
  const worker = `${keepAlive} import { Worker } from 'node:worker_threads';
new Worker('setInterval(() => {}, 1000)', { eval: true,
  resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2, stackSizeMb: 1 } });`;
  const modules = `${keepAlive} process.argv = [process.execPath, 'bundle', '--version'];
await import(${JSON.stringify(BUNDLE)});`;
  const rows = new Map<string, Sample[]>();
  const add = (name: string, s: Sample) => rows.set(name, [...(rows.get(name) ?? []), s]);
  const mt = values['malloc-trim'];
  for (let run = 0; run < Number(values.runs); run++) {
    add('node', await nodeProcess(keepAlive, idleMs, {}, mt));
    add('node + worker', await nodeProcess(worker, idleMs, {}, mt));
    add('floor (listeners and SQLite, no app code)', await nodeProcess(floor, idleMs, {}, mt));
    add('modules', await nodeProcess(modules, idleMs, {}, mt));
    add('gateway', await gateway(idleMs, {}, [], undefined, undefined, mt));
    add(
      'gateway --https false',
      await gateway(idleMs, {}, ['--https', 'false'], undefined, undefined, mt),
    );
    if (values.baseline)
      add('baseline gateway', await gateway(idleMs, {}, [], values.baseline, undefined, mt));
    if (values['baseline-exe'])
      add(
        'baseline executable',
        await gateway(idleMs, {}, [], undefined, [resolve(values['baseline-exe'])], mt),
      );
    if (values.exe)
      add('executable', await gateway(idleMs, {}, [], undefined, [resolve(values.exe)], mt));
    for (const v of variants)
      add(`gateway ${v.name}`, await gateway(idleMs, v.env, [], undefined, undefined, mt));
    for (const cg of cgroups)
      add(
        `gateway, ${cg.label} cgroup`,
        await gateway(idleMs, {}, [], undefined, cg.wrap([process.execPath, BUNDLE]), mt),
      );
  }
  await rm(floorDir, { recursive: true, force: true });
  for (const cg of cgroups) await cg.remove();

  const f = (n: number | undefined) => (n === undefined ? '' : n.toFixed(1));
  const trimCol = mt ? ' RSS MB after malloc_trim(0) |' : '';
  console.log(
    `\n| Process | RSS MB (per run) | anon / file MB | threads | V8 heap used / total MB | start to ready ms |${trimCol}`,
  );
  console.log(`| --- | --- | --- | --- | --- | --- |${mt ? ' --- |' : ''}`);
  for (const [name, samples] of rows) {
    const last = samples[samples.length - 1];
    const trimmedRss = mt ? ` ${samples.map((s) => f(s.rssTrimmed)).join(', ')} |` : '';
    console.log(
      `| ${name} | ${samples.map((s) => f(s.rss)).join(', ')} | ${f(last.anon)} / ${f(last.file)} | ${last.threads} | ${last.heapUsed === undefined ? '' : `${f(last.heapUsed)} / ${f(last.heapTotal)}`} | ${samples.map((s) => (s.readyMs === undefined ? '' : s.readyMs.toFixed(0))).join(', ')} |${trimmedRss}`,
    );
  }
  const gw = rows.get('gateway') ?? [];
  const median = [...gw].sort((a, b) => a.rss - b.rss)[Math.floor(gw.length / 2)];
  console.log(
    `\n  gateway idle RSS (median) ${f(median?.rss)} MB: target ≤ 50 MB ${median && median.rss <= 50 ? 'met' : 'MISSED'}`,
  );
  console.log(`  load average after: ${loadAverage()}`);
}

await main();
