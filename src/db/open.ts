import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Durability } from '../config.js';
import type { SqliteAddon } from './sqlite-addon.js';

export type Db = Database.Database;

export const DB_FILE = 'edge-gateway.db';

export interface OpenOptions {
  readonly dataDir: string;
  readonly durability: Durability;
  /** The native addon when it is not in node_modules (the single executable). */
  readonly addon?: SqliteAddon;
}

/**
 * Opens the one SQLite file of the gateway. WAL lets readers run beside the single writer;
 * synchronous=NORMAL survives a process crash, FULL also survives power loss.
 */
export function openDb(opts: OpenOptions): Db {
  mkdirSync(opts.dataDir, { recursive: true, mode: 0o750 });
  const db = new Database(
    join(opts.dataDir, DB_FILE),
    // @NOTE: better-sqlite3 also takes the loaded addon object; its types know only a path.
    opts.addon ? { nativeBinding: opts.addon.binding as unknown as string } : undefined,
  );
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${opts.durability === 'full' ? 'FULL' : 'NORMAL'}`);
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  // @NOTE: checkpoint the WAL every ~40 MB (10,000 pages) instead of every 4 MB: fewer, larger
  // writes to the SD card. The gateway turns this off and checkpoints on a worker thread
  // instead (db/checkpointer.ts), which starts the WAL over at about 32 MiB. journal_size_limit
  // truncates the file back only after a burst beyond 64 MiB: a truncation runs inside the
  // commit that starts the WAL over (≈ 20 ms for 24 MiB, 99 ms for 117 MiB in bench:http).
  db.pragma('wal_autocheckpoint = 10000');
  db.pragma(`journal_size_limit = ${64 * 1024 * 1024}`);
  // A bigger page cache and in-memory temp tables keep aggregation queries off the SD card.
  db.pragma('cache_size = -16000');
  db.pragma('temp_store = MEMORY');
  return db;
}
