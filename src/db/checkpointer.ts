import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { DB_FILE, type Db } from './open.js';

export interface CheckpointerDeps {
  readonly db: Db;
  readonly dataDir: string;
  readonly log: Logger;
  /**
   * Checkpoint as soon as the WAL holds this much not yet checkpointed (default 32 MiB, ~8,000
   * pages); the gateway's connection finishes the checkpoint once the WAL holds this much in all.
   */
  readonly walBytes?: number;
  /** Otherwise checkpoint whatever the WAL holds this long after the last checkpoint. */
  readonly maxAgeMs?: number;
  /** How often the worker reads the WAL's frame counts. */
  readonly pollMs?: number;
}

/** What the worker reports after each checkpoint. */
interface CheckpointReport {
  readonly type: 'checkpoint' | 'error';
  readonly busy?: number;
  readonly log?: number;
  readonly checkpointed?: number;
  readonly ms?: number;
  /** The WAL holds `walBytes` of frames since it last started over: the gateway finishes. */
  readonly full?: boolean;
  readonly message?: string;
}

/**
 * The worker: its own connection to the database file, and PASSIVE checkpoints, which neither
 * wait for nor block the gateway's writer (SQLite lets one connection checkpoint while another
 * appends to the WAL). Plain CommonJS, as `eval` workers are.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { openSync, readSync } = require('node:fs');
const { endianness } = require('node:os');
const Database = require(workerData.sqlite);
const db = new Database(workerData.file);
db.pragma('cache_size = -512');
const walFrames = Math.ceil(workerData.walBytes / workerData.pageSize);
// The wal-index header at the start of the -shm file (sqlite.org/walformat.html), in native byte
// order: mxFrame (frames in the WAL since it last started over) at byte 16, nBackfill (those
// already in the database file) at byte 96. Read without locks: only a trigger.
const header = Buffer.alloc(100);
const u32 = endianness() === 'LE' ? (at) => header.readUInt32LE(at) : (at) => header.readUInt32BE(at);
let shm;
function frames() {
  try {
    shm ??= openSync(workerData.file + '-shm', 'r');
    if (readSync(shm, header, 0, 100, 0) < 100) return undefined;
  } catch {
    return undefined;
  }
  const total = u32(16);
  return { total, pending: total - u32(96) };
}
let lastCheckpoint = Date.now();
// After a checkpoint of a full WAL, the gateway's connection copies the tail: wait for it.
let waiting = false;
function look() {
  if (waiting) return;
  const f = frames();
  // Nothing new since the last checkpoint; else wait for a full WAL or the age limit.
  if (!f || f.pending <= 0) return;
  if (f.pending < walFrames && Date.now() - lastCheckpoint < workerData.maxAgeMs) return;
  const t = performance.now();
  try {
    let [r] = db.pragma('wal_checkpoint(PASSIVE)');
    // The writer appended frames meanwhile: copy those too, while the tail keeps shrinking.
    for (let pass = 0; pass < 4; pass++) {
      const [next] = db.pragma('wal_checkpoint(PASSIVE)');
      const added = next.log - r.log;
      r = next;
      if (added <= workerData.tailFrames) break;
    }
    lastCheckpoint = Date.now();
    // The WAL holds a full WAL's frames since it last started over: it does not by itself.
    const full = r.log >= walFrames;
    waiting = full;
    parentPort.postMessage({ type: 'checkpoint', ...r, full, ms: performance.now() - t });
  } catch (err) {
    parentPort.postMessage({ type: 'error', message: String(err && err.message || err) });
  }
}
const timer = setInterval(look, workerData.pollMs);
parentPort.on('message', (m) => {
  if (m === 'finished') waiting = false;
  if (m !== 'stop') return;
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

/**
 * Runs SQLite's WAL checkpoints on a worker thread, so that copying pages from the WAL into the
 * database file (and its fsync) never stalls the event loop inside a commit, as SQLite's own
 * auto-checkpoint would (tens of milliseconds for a large WAL). While it runs, the gateway's
 * connection has `wal_autocheckpoint` off; if the worker fails, it is switched back on.
 */
export class Checkpointer {
  readonly #deps: CheckpointerDeps;
  #worker: Worker | undefined;
  #autocheckpoint = 0;
  #checkpoints = 0;
  #finished = 0;

  constructor(deps: CheckpointerDeps) {
    this.#deps = deps;
  }

  /** Checkpoints done so far. */
  get checkpoints(): number {
    return this.#checkpoints;
  }

  /** Checkpoints that the gateway's connection finished after the worker. */
  get finished(): number {
    return this.#finished;
  }

  start(): void {
    const { db, dataDir, log } = this.#deps;
    const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');
    this.#autocheckpoint = db.pragma('wal_autocheckpoint', { simple: true }) as number;
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      // It allocates next to nothing: small heaps keep its memory low on a Pi.
      resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2, stackSizeMb: 1 },
      workerData: {
        sqlite,
        file: join(dataDir, DB_FILE),
        walBytes: this.#deps.walBytes ?? 32 * 1024 * 1024,
        pageSize: db.pragma('page_size', { simple: true }),
        maxAgeMs: this.#deps.maxAgeMs ?? 10_000,
        pollMs: this.#deps.pollMs ?? 500,
        tailFrames: 256,
      },
    });
    worker.unref();
    worker.on('message', (m: CheckpointReport) => {
      if (m.type === 'error') {
        log.warn({ error: m.message }, 'wal checkpoint failed');
        return;
      }
      this.#checkpoints++;
      log.debug(
        { frames: m.log, checkpointed: m.checkpointed, busy: m.busy, ms: m.ms },
        'wal checkpoint',
      );
      if (m.full) {
        this.#finish();
        this.#worker?.postMessage('finished');
      }
    });
    worker.on('error', (err) => {
      log.error({ err }, 'checkpoint worker failed; checkpoints go back into commits');
      this.#restore();
    });
    this.#worker = worker;
    db.pragma('wal_autocheckpoint = 0');
  }

  /** Ends the worker and its connection; the gateway's own close then checkpoints the rest. */
  async stop(): Promise<void> {
    const worker = this.#worker;
    if (!worker) return;
    this.#worker = undefined;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage('stop');
    const timeout = setTimeout(() => void worker.terminate(), 5000);
    await exited;
    clearTimeout(timeout);
    this.#restore();
  }

  /**
   * SQLite starts the WAL file over only when a write begins with every frame already in the
   * database file. Under steady writes the writer always appends frames while the worker copies,
   * so the WAL would grow without end (gigabytes in bench:storage). After a checkpoint of a full
   * WAL, the gateway's connection copies the few frames left (the worker did the bulk, down to
   * a short tail), and its next commit starts the WAL from the beginning.
   */
  #finish(): void {
    const { db, log } = this.#deps;
    if (!db.open) return;
    try {
      const t = performance.now();
      const [r] = db.pragma('wal_checkpoint(PASSIVE)') as Array<Record<string, number>>;
      this.#finished++;
      log.debug({ ...r, ms: performance.now() - t }, 'wal checkpoint finished');
    } catch (err) {
      log.warn({ err }, 'wal checkpoint failed');
    }
  }

  #restore(): void {
    this.#worker = undefined;
    if (this.#deps.db.open) this.#deps.db.pragma(`wal_autocheckpoint = ${this.#autocheckpoint}`);
  }
}
