import type { Logger } from 'pino';
import { MigrationError } from '../errors.js';
import type { Db } from './open.js';

export interface Migration {
  /** 1, 2, 3 … in the order they run; stored in `PRAGMA user_version`. */
  readonly version: number;
  readonly name: string;
  up(db: Db): void;
}

/**
 * Brings the schema to the newest version this build knows, one transaction per migration.
 * Refuses a database whose schema is newer than the build (a downgrade would corrupt it).
 */
export function migrate(db: Db, migrations: readonly Migration[], log: Logger): number {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) throw new MigrationError(`migration list out of order at ${m.name}`);
  });
  const latest = migrations.length;
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > latest) {
    throw new MigrationError(
      `database schema version ${current} is newer than this build knows (${latest}); run a newer edge-gateway`,
    );
  }
  for (const m of migrations.slice(current)) {
    try {
      db.transaction(() => {
        m.up(db);
        db.pragma(`user_version = ${m.version}`);
      })();
    } catch (err) {
      throw new MigrationError(
        `migration ${m.version} (${m.name}) failed: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
    log.info({ version: m.version, migration: m.name }, 'migration applied');
  }
  return latest;
}
