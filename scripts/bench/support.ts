/**
 * Shared parts of the gateway benchmarks (`bench:mqtt`, `bench:mqtt-idle`, `bench:coap`, `bench:http`):
 * build and run the gateway bundle as its own process, create devices over REST, read a
 * process's RSS, and a mergeable latency histogram. Not a benchmark by itself.
 */

import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { type Config, configWith, type DeepPartial } from '../../src/config.js';
import { createGateway, type Gateway } from '../../src/gateway.js';
import { defaultRootChain } from '../../src/rules/default-root-chain.js';
import { decodeBlock, decodeLogRecord } from '../../src/telemetry/telemetry-block.js';
import { readLog } from '../../src/telemetry/telemetry-ring.js';
import {
  BUNDLE,
  type GatewayProcess,
  LOOPBACK_EPHEMERAL,
  PROJECT_ROOT,
  spawnGateway,
} from '../../test/helpers/process.js';

const ADMIN_EMAIL = 'bench@local';
const ADMIN_PASSWORD = 'bench-password-1';

export interface BenchGateway {
  readonly proc: GatewayProcess;
  readonly pid: number;
  readonly dataDir: string;
  readonly baseUrl: string;
  /**
   * SIGKILL: nothing queued gets flushed by a clean stop, so only what was committed before
   * stays in the SQLite file (`normal` durability survives a process crash).
   */
  crash(): Promise<void>;
  /** Stops the process (SIGTERM) and deletes the data directory unless `keepData`. */
  close(keepData?: boolean): Promise<void>;
}

/**
 * A gateway in the bench's own process (`createGateway`) on ephemeral loopback ports with a temp
 * data dir, for benches that read its services or bus directly; the admin is `adminToken`'s.
 * `stop()` stops it and deletes the data dir.
 */
export async function startGatewayInProcess(
  name: string,
  config: DeepPartial<Config> = {},
): Promise<{ gw: Gateway; stop(): Promise<void> }> {
  const dataDir = await mkdtemp(join(tmpdir(), `edge-gw-bench-${name}-`));
  const gw = createGateway(
    configWith({
      dataDir,
      bind: '127.0.0.1',
      logLevel: 'warn',
      ...config,
      http: { port: 0, ...config.http },
      // No listener on a fixed port: HTTPS off, MQTT over TLS on an ephemeral port.
      https: { enabled: false, port: 0, ...config.https },
      mqtt: { port: 0, tlsPort: 0, ...config.mqtt },
      coap: { port: 0, ...config.coap },
    }),
    { secrets: { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD }, env: {}, uiDir: null },
  );
  await gw.start();
  return {
    gw,
    async stop() {
      await gw.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** `node build.mjs`, so the bench runs the current sources as the shipped bundle. */
export function buildBundle(): void {
  const res = spawnSync(process.execPath, ['build.mjs'], { cwd: PROJECT_ROOT, stdio: 'inherit' });
  if (res.status !== 0) throw new Error(`node build.mjs failed with ${res.status}`);
}

/**
 * Starts `node dist/edge-gateway.mjs serve` on ephemeral loopback ports with a temp data dir.
 * @NOTE: `--log-level info` because the `ready` line (with the ports) is logged at info; nothing
 * is logged per message at info.
 */
export async function startGatewayProcess(
  extraArgs: readonly string[] = [],
  env: Record<string, string> = {},
  bundle?: string,
  /** Runs the bundle inside this memory cgroup (`--memory-limit`). */
  cgroup?: MemoryCgroup,
): Promise<BenchGateway> {
  const dataDir = await mkdtemp(join(tmpdir(), 'edge-gw-bench-'));
  let proc: GatewayProcess;
  try {
    proc = await spawnGateway(
      ['serve', '--data-dir', dataDir, ...LOOPBACK_EPHEMERAL, '--log-level', 'info', ...extraArgs],
      {
        env: { EDGE_ADMIN_EMAIL: ADMIN_EMAIL, EDGE_ADMIN_PASSWORD: ADMIN_PASSWORD, ...env },
        bundle,
        command: cgroup?.wrap([process.execPath, bundle ?? BUNDLE]),
      },
    );
  } catch (err) {
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
  const pid = proc.child.pid ?? 0;
  return {
    proc,
    pid,
    dataDir,
    baseUrl: `http://127.0.0.1:${proc.ports.http}`,
    async crash() {
      if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
      const exited = once(proc.child, 'exit');
      proc.child.kill('SIGKILL');
      await exited;
    },
    async close(keepData = false) {
      await proc.stop('SIGTERM', 20_000);
      if (!keepData) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export { BUNDLE };

/**
 * Env that makes the gateway profile itself from start-up until SIGUSR2 and then write a V8 CPU
 * profile into `dir` (`--cpu-prof` is not allowed in NODE_OPTIONS, so a preloaded module uses
 * node:inspector).
 */
export async function profilerEnv(dir: string): Promise<Record<string, string>> {
  const file = join(dir, 'gateway-profiler.mjs');
  await writeFile(
    file,
    `import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
const s = new Session();
s.connect();
s.post('Profiler.enable', () => s.post('Profiler.start'));
process.on('SIGUSR2', () => s.post('Profiler.stop', (err, res) => {
  if (!err) writeFileSync(${JSON.stringify(join(dir, 'gateway.cpuprofile'))}, JSON.stringify(res.profile));
}));
`,
  );
  return { NODE_OPTIONS: `--import=${pathToFileURL(file).href}` };
}

export async function adminToken(baseUrl: string): Promise<string> {
  const res = await fetch(`${baseUrl}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: ADMIN_EMAIL, password: ADMIN_PASSWORD }),
  });
  if (res.status !== 200) throw new Error(`admin login failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

/**
 * Creates `count` devices over REST (`POST /api/device?accessToken=...`), `parallel` requests at
 * a time, and returns their access tokens `${prefix}-${i}`.
 */
export async function createDevices(
  baseUrl: string,
  prefix: string,
  count: number,
  parallel = 8,
  /** More fields of each device (a `deviceProfileId`, ...). */
  extra: Record<string, unknown> = {},
): Promise<string[]> {
  const token = await adminToken(baseUrl);
  const tokens = Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const res = await fetch(
        `${baseUrl}/api/device?accessToken=${encodeURIComponent(tokens[i])}`,
        {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'X-Authorization': `Bearer ${token}` },
          body: JSON.stringify({ ...extra, name: `${prefix}-${i}` }),
        },
      );
      if (res.status !== 200)
        throw new Error(`create device failed: ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return tokens;
}

/** Resident set size of a process in MiB, from /proc/<pid>/status (VmRSS). */
export async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) / 1024;
}

/** CPU time (user + system) of a process in seconds, from /proc/<pid>/stat. */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): utime is 14th, stime 15th overall.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Latency histogram with 10 µs buckets up to 10 s (a last bucket holds the rest). */
export class Histogram {
  static readonly BUCKETS = 1_000_001;
  counts = new Map<number, number>();
  max = 0;
  total = 0;

  record(ms: number): void {
    const b = Math.min(Math.floor(ms * 100), Histogram.BUCKETS - 1);
    this.counts.set(b, (this.counts.get(b) ?? 0) + 1);
    this.total++;
    if (ms > this.max) this.max = ms;
  }

  toJSON(): { counts: Array<[number, number]>; max: number; total: number } {
    return { counts: [...this.counts], max: this.max, total: this.total };
  }

  merge(other: { counts: Array<[number, number]>; max: number; total: number }): void {
    for (const [b, n] of other.counts) this.counts.set(b, (this.counts.get(b) ?? 0) + n);
    this.total += other.total;
    if (other.max > this.max) this.max = other.max;
  }

  /** Upper edge of the bucket that holds the q-quantile, in ms. */
  quantile(q: number): number {
    if (this.total === 0) return Number.NaN;
    const want = Math.ceil(q * this.total);
    let seen = 0;
    for (const b of [...this.counts.keys()].sort((x, y) => x - y)) {
      seen += this.counts.get(b) ?? 0;
      if (seen >= want) return (b + 1) / 100;
    }
    return this.max;
  }
}

/** The 1, 5 and 15 minute load averages, to tell whether something else was running. */
export function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

/** Busy and total CPU time of the whole machine in seconds (all cores), from /proc/stat. */
export function machineCpu(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const idle = v[3] + v[4];
  return { busy: (total - idle) / 100, total: total / 100 };
}

/**
 * Committed telemetry points in a gateway's SQLite file, opened read-only: those sealed into
 * blocks and those still in the log (or, in a file of the former layout, in `ts_kv` and the
 * stage table).
 */
export function storedPoints(dataDir: string): number {
  const db = new Database(join(dataDir, 'edge-gateway.db'), {
    readonly: true,
    fileMustExist: true,
  });
  try {
    // One read transaction: a running gateway's seals move points from the log into blocks
    // between two statements otherwise.
    return db.transaction(() => countPoints(db))();
  } finally {
    db.close();
  }
}

function countPoints(db: Database.Database): number {
  const has = (t: string) =>
    db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?").get(t) !==
    undefined;
  if (!has('ts_block')) {
    return db
      .prepare('SELECT (SELECT count(*) FROM ts_kv) + (SELECT count(*) FROM ts_kv_stage)')
      .pluck()
      .get() as number;
  }
  let n = db.prepare('SELECT coalesce(sum(n), 0) FROM ts_block').pluck().get() as number;
  if (!has('ts_ring')) {
    // The log as a table of rows (before migration 17).
    const log = db.prepare('SELECT data FROM ts_log').pluck().all() as Buffer[];
    for (const data of log) n += decodeLogRecord(data).length;
    return n;
  }
  // The ring and its spill rows. After a SIGKILL between seals, a log record can hold points
  // of series already sealed into blocks (a seal keeps every record an open series still
  // needs); the gateway replays them and the next seal replaces the block's copy. Count each
  // (device, key, ts) once, as the gateway will read it.
  const open = new Map<string, { rid: number; keyId: number; ts: Set<number> }>();
  for (const entry of readLog(db))
    for (const p of decodeLogRecord(entry.data)) {
      const id = `${entry.rid}:${p.keyId}`;
      let series = open.get(id);
      if (!series) {
        series = { rid: entry.rid, keyId: p.keyId, ts: new Set() };
        open.set(id, series);
      }
      series.ts.add(p.ts);
    }
  const blocks = db.prepare(
    'SELECT data FROM ts_block WHERE device_rid = ? AND key_id = ? AND last_ts >= ? AND first_ts <= ?',
  );
  for (const { rid, keyId, ts } of open.values()) {
    n += ts.size;
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    for (const t of ts) {
      if (t < min) min = t;
      if (t > max) max = t;
    }
    for (const data of blocks.pluck().all(rid, keyId, min, max) as Buffer[])
      for (const v of decodeBlock(data)) if (ts.has(v.ts)) n--;
  }
  return n;
}

/**
 * Issue 14's benchmark chain: the default root chain with an extra script filter and script
 * transform in front, so that every message runs two scripts (a ThingsBoard export).
 */
export function rootWithScripts(): unknown {
  const P = 'org.thingsboard.rule.engine.';
  const chain = structuredClone(defaultRootChain) as {
    ruleChain: Record<string, unknown>;
    metadata: {
      firstNodeIndex: number;
      nodes: Array<Record<string, unknown>>;
      connections: Array<{ fromIndex: number; toIndex: number; type: string }>;
    };
  };
  chain.ruleChain.name = 'Root + scripts';
  const n = chain.metadata.nodes.length;
  chain.metadata.nodes.push(
    {
      type: `${P}filter.TbJsFilterNode`,
      name: 'Extra filter',
      configuration: { scriptLang: 'JS', jsScript: 'return msg.temperature > -100;' },
    },
    {
      type: `${P}transform.TbTransformMsgNode`,
      name: 'Extra transform',
      configuration: {
        scriptLang: 'JS',
        jsScript:
          'metadata.checked = "yes";\nreturn {msg: msg, metadata: metadata, msgType: msgType};',
      },
    },
  );
  chain.metadata.connections.push(
    { fromIndex: n, toIndex: n + 1, type: 'True' },
    { fromIndex: n + 1, toIndex: chain.metadata.firstNodeIndex, type: 'Success' },
  );
  chain.metadata.firstNodeIndex = n;
  return chain;
}

/** A memory cgroup a bench's child processes run in (`--memory-limit`), like a box with that RAM. */
export interface MemoryCgroup {
  /** The limit, as given (`1g`). */
  readonly label: string;
  /** `command` (program and its leading arguments) run inside the cgroup. */
  wrap(command: readonly string[]): string[];
  remove(): Promise<void>;
}

/**
 * A child of this process's own memory cgroup limited to `limit` (`512m`, `1g`, `2g`), so that what
 * runs in it stays under this process's limits too. V8 sizes its heap and young generation from
 * the memory Node sees, which is the cgroup's limit when one is set (`process.constrainedMemory()`),
 * so a gateway in a 1 GB cgroup sizes itself as on a 1 GB Pi. cgroup v1 (`memory` controller) or
 * v2; needs root.
 */
export async function memoryCgroup(limit: string): Promise<MemoryCgroup> {
  const m = /^(\d+)([mg])$/i.exec(limit);
  if (!m) throw new Error(`--memory-limit ${limit}: give megabytes or gigabytes (512m, 1g)`);
  const bytes = Number(m[1]) * 1024 ** (m[2].toLowerCase() === 'g' ? 3 : 2);
  const lines = readFileSync('/proc/self/cgroup', 'utf8').trim().split('\n');
  const v1 = lines.map((l) => l.split(':')).find((f) => f[1].split(',').includes('memory'));
  const dir = v1
    ? join('/sys/fs/cgroup/memory', v1[2], `edge-bench-${process.pid}-${limit}`)
    : join(
        '/sys/fs/cgroup',
        lines.find((l) => l.startsWith('0::'))?.slice(3) ?? '/',
        `edge-bench-${process.pid}-${limit}`,
      );
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, v1 ? 'memory.limit_in_bytes' : 'memory.max'), String(bytes));
  const procs = join(dir, 'cgroup.procs');
  return {
    label: limit,
    // The shell joins the cgroup, then becomes the program (same pid).
    wrap: (command) => ['/bin/sh', '-c', `echo $$ > ${procs} && exec "$@"`, 'sh', ...command],
    async remove() {
      // Empty once its processes have exited; a cgroup directory is removed with rmdir.
      await rmdir(dir).catch(() => undefined);
    },
  };
}

/**
 * Calls glibc's `malloc_trim(0)` inside a running process with gdb (`--malloc-trim`): what malloc
 * gives back to the system when asked, measured from outside without changing the gateway.
 */
export function mallocTrimByGdb(pid: number): void {
  const res = spawnSync('gdb', ['-p', String(pid), '-batch', '-ex', 'call (int)malloc_trim(0)'], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (!/\$1 = [01]/.test(res.stdout ?? '')) {
    throw new Error(`gdb could not call malloc_trim in ${pid}: ${res.stderr || res.stdout}`);
  }
}

/**
 * A `--variant 'name=WORDS'` of a bench: `NAME=value` words are environment variables, the other
 * words (flags) are left to the bench (NODE_OPTIONS, or `serve` flags).
 */
export function parseVariant(spec: string): {
  name: string;
  env: Record<string, string>;
  words: string[];
} {
  const eq = spec.indexOf('=');
  const words = spec
    .slice(eq + 1)
    .split(' ')
    .filter((w) => w !== '');
  const isEnv = (w: string) => /^[A-Z_]+=/.test(w);
  return {
    name: spec.slice(0, eq),
    env: Object.fromEntries(
      words.filter(isEnv).map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]),
    ),
    words: words.filter((w) => !isEnv(w)),
  };
}
