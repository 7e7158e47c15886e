import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import { endianness } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { DB_FILE, type Db } from './open.js';
import type { SqliteAddon } from './sqlite-addon.js';

export interface CheckpointerDeps {
  readonly db: Db;
  readonly dataDir: string;
  readonly log: Logger;
  /** The native addon when it is not in node_modules (the single executable). */
  readonly addon?: SqliteAddon;
  /**
   * Checkpoint as soon as the WAL holds this much not yet checkpointed (default 32 MiB, ~8,000
   * pages); the gateway's connection finishes the checkpoint once the WAL holds this much in all.
   */
  readonly walBytes?: number;
  /** Otherwise checkpoint whatever the WAL holds this long after the last checkpoint. */
  readonly maxAgeMs?: number;
  /** How often the worker (and, while there is none, the main thread) reads the WAL's frame counts. */
  readonly pollMs?: number;
  /** The worker ends after this long without new frames (default 60 s). */
  readonly idleStopMs?: number;
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
 * Reads the WAL's frame counts from the wal-index header at the start of the -shm file
 * (sqlite.org/walformat.html), in native byte order: mxFrame (frames in the WAL since it last
 * started over) at byte 16, nBackfill (those already in the database file) at byte 96. Read
 * without locks: only a trigger. Plain JavaScript: its source also goes into the worker.
 */
function walFrameReader(file: string, fs: typeof import('node:fs'), le: boolean) {
  const header = Buffer.alloc(100);
  let fd: number | undefined;
  return (close?: boolean): { total: number; pending: number } | undefined => {
    if (close) {
      if (fd !== undefined) fs.closeSync(fd);
      fd = undefined;
      return undefined;
    }
    try {
      fd ??= fs.openSync(`${file}-shm`, 'r');
      if (fs.readSync(fd, header, 0, 100, 0) < 100) return undefined;
    } catch {
      return undefined;
    }
    const total = le ? header.readUInt32LE(16) : header.readUInt32BE(16);
    const backfilled = le ? header.readUInt32LE(96) : header.readUInt32BE(96);
    return { total, pending: total - backfilled };
  };
}

/**
 * The worker: its own connection to the database file, and PASSIVE checkpoints, which neither
 * wait for nor block the gateway's writer (SQLite lets one connection checkpoint while another
 * appends to the WAL). Plain CommonJS, as `eval` workers are.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { endianness } = require('node:os');
const Database = require(workerData.sqlite);
let nativeBinding;
if (workerData.binding) {
  const addon = { exports: {} };
  process.dlopen(addon, workerData.binding);
  nativeBinding = addon.exports;
}
const db = new Database(workerData.file, { nativeBinding });
db.pragma('cache_size = -512');
const walFrames = Math.ceil(workerData.walBytes / workerData.pageSize);
const frames = (${walFrameReader.toString()})(workerData.file, require('node:fs'), endianness() === 'LE');
// Started for frames that already waited (see Checkpointer): the first look checkpoints them.
let lastCheckpoint = workerData.due ? 0 : Date.now();
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
  #poll: NodeJS.Timeout | undefined;
  #frames: ((close?: boolean) => { total: number; pending: number } | undefined) | undefined;
  #pageSize = 4096;
  /** When the main thread first saw frames not yet checkpointed (0: none). */
  #pendingSince = 0;
  /** The worker's last sign of work: frames changed or were pending. */
  #busyAt = 0;
  #lastTotal = -1;
  #failed = false;
  #autocheckpoint = 0;
  #checkpoints = 0;
  #finished = 0;

  constructor(deps: CheckpointerDeps) {
    this.#deps = deps;
  }

  /** A worker thread runs now. */
  get running(): boolean {
    return this.#worker !== undefined;
  }

  /** Checkpoints done so far. */
  get checkpoints(): number {
    return this.#checkpoints;
  }

  /** Checkpoints that the gateway's connection finished after the worker. */
  get finished(): number {
    return this.#finished;
  }

  /**
   * Turns SQLite's auto-checkpoints off and watches the WAL from the main thread (a 100-byte read
   * per poll). The worker thread, an isolate of its own (about 11 MB of RSS, bench:idle), starts
   * only once frames wait for a checkpoint (a full WAL, or frames older than the age limit), and
   * ends after `idleStopMs` without new frames: an idle box holds no worker.
   */
  start(): void {
    const { db, dataDir } = this.#deps;
    this.#autocheckpoint = db.pragma('wal_autocheckpoint', { simple: true }) as number;
    db.pragma('wal_autocheckpoint = 0');
    this.#pageSize = db.pragma('page_size', { simple: true }) as number;
    this.#frames = walFrameReader(join(dataDir, DB_FILE), fs, endianness() === 'LE');
    this.#poll = setInterval(() => this.#look(), this.#deps.pollMs ?? 500);
    this.#poll.unref();
  }

  #look(): void {
    if (this.#failed) return;
    const f = this.#frames?.();
    const now = Date.now();
    if (this.#worker) {
      if (f && (f.pending > 0 || f.total !== this.#lastTotal)) this.#busyAt = now;
      if (f) this.#lastTotal = f.total;
      if (now - this.#busyAt >= (this.#deps.idleStopMs ?? 60_000)) void this.#stopWorker();
      return;
    }
    if (!f || f.pending <= 0) {
      this.#pendingSince = 0;
      return;
    }
    this.#pendingSince ||= now;
    const walBytes = this.#deps.walBytes ?? 32 * 1024 * 1024;
    const aged = now - this.#pendingSince >= (this.#deps.maxAgeMs ?? 10_000);
    if (aged || f.pending * this.#pageSize >= walBytes) this.#startWorker(aged);
  }

  #startWorker(due: boolean): void {
    const { db, dataDir, log, addon } = this.#deps;
    const sqlite = addon?.moduleFile ?? createRequire(import.meta.url).resolve('better-sqlite3');
    this.#busyAt = Date.now();
    this.#pendingSince = 0;
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      // It allocates next to nothing: small heaps keep its memory low on a Pi.
      resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2, stackSizeMb: 1 },
      workerData: {
        sqlite,
        binding: addon?.bindingFile,
        file: join(dataDir, DB_FILE),
        walBytes: this.#deps.walBytes ?? 32 * 1024 * 1024,
        pageSize: db.pragma('page_size', { simple: true }),
        maxAgeMs: this.#deps.maxAgeMs ?? 10_000,
        pollMs: this.#deps.pollMs ?? 500,
        tailFrames: 256,
        due,
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
      this.#failed = true;
      this.#restore();
    });
    this.#worker = worker;
    log.debug('checkpoint worker started');
  }

  /** Ends the worker and its connection; the gateway's own close then checkpoints the rest. */
  async stop(): Promise<void> {
    if (this.#poll) clearInterval(this.#poll);
    this.#poll = undefined;
    this.#frames?.(true);
    await this.#stopWorker();
    this.#restore();
  }

  async #stopWorker(): Promise<void> {
    const worker = this.#worker;
    if (!worker) return;
    this.#worker = undefined;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage('stop');
    const timeout = setTimeout(() => void worker.terminate(), 5000);
    await exited;
    clearTimeout(timeout);
    this.#deps.log.debug('checkpoint worker stopped');
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
