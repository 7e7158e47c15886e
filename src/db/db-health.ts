import type { Logger } from 'pino';
import type { Db } from './open.js';

export interface DbHealthDeps {
  readonly db: Db;
  readonly log: Logger;
  /** How long the write check waits for the write lock (default 200 ms). */
  readonly lockWaitMs?: number;
}

export interface DbCheck {
  readonly ok: boolean;
  /** What failed: `read`, `write` or `commit`, with SQLite's message. */
  readonly error?: string;
}

/**
 * Whether the database answers and can be written: `select 1`, then the write lock taken and
 * given back (`BEGIN IMMEDIATE; ROLLBACK`: nothing reaches the SD card), and no failed telemetry
 * commit since the last one that succeeded (a full disk or a card gone read-only shows there,
 * since taking the lock writes nothing).
 */
export class DbHealth {
  readonly #deps: DbHealthDeps;
  #commitError: string | undefined;
  #failing = false;

  constructor(deps: DbHealthDeps) {
    this.#deps = deps;
  }

  /** Feed of the telemetry writer: each commit's outcome. */
  readonly commit = (_ms: number, ok: boolean): void => {
    this.#commitError = ok ? undefined : 'a telemetry commit failed';
  };

  check(): DbCheck {
    const result = this.#check();
    if (!result.ok && !this.#failing)
      this.#deps.log.error({ error: result.error }, 'database check failed');
    if (result.ok && this.#failing) this.#deps.log.info('database check passes again');
    this.#failing = !result.ok;
    return result;
  }

  #check(): DbCheck {
    const { db } = this.#deps;
    if (!db.open) return { ok: false, error: 'read: the database is closed' };
    try {
      db.prepare('SELECT 1').pluck().get();
    } catch (err) {
      return { ok: false, error: `read: ${(err as Error).message}` };
    }
    if (db.inTransaction) return { ok: true };
    const busy = db.pragma('busy_timeout', { simple: true }) as number;
    db.pragma(`busy_timeout = ${this.#deps.lockWaitMs ?? 200}`);
    try {
      db.exec('BEGIN IMMEDIATE');
      db.exec('ROLLBACK');
    } catch (err) {
      return { ok: false, error: `write: ${(err as Error).message}` };
    } finally {
      db.pragma(`busy_timeout = ${busy}`);
    }
    if (this.#commitError) return { ok: false, error: `commit: ${this.#commitError}` };
    return { ok: true };
  }
}
