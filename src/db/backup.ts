import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { ConflictError, ValidationError } from '../errors.js';
import { DB_FILE, type Db } from './open.js';

/** Where the gateway keeps its own copies (before a migration, during a download). */
export const BACKUP_DIR = 'backups';
/** Copies made before a schema migration that are kept, newest first. */
export const PRE_MIGRATION_KEEP = 3;

export interface BackupResult {
  readonly file: string;
  readonly bytes: number;
  readonly pages: number;
}

/** Pages per step of an in-process backup: each step is a short pause of the event loop. */
const STEP_PAGES = 256;

/**
 * A consistent copy of an open database with SQLite's online backup API, written to a temporary
 * name beside `file` and renamed into place when complete.
 *
 * `db` is the gateway's own connection: the copy goes in steps of a few hundred pages between
 * turns of the event loop, so ingest goes on (one step is shorter than a commit); pages that a
 * commit changes meanwhile are updated in the copy by SQLite (same connection), which therefore
 * holds everything committed before it completes.
 */
export async function backupOpenDb(db: Db, file: string): Promise<BackupResult> {
  return await backupTo(db, file, () => STEP_PAGES);
}

/**
 * A consistent copy of the database in `dataDir` from another process (the `backup` command),
 * while the gateway may run. All pages are copied in one step, inside one read transaction: in
 * WAL mode that is a snapshot, and it neither waits for nor blocks the gateway's commits (a
 * step-wise copy from a second connection would start over after each of them).
 */
export async function backupDataDir(dataDir: string, file: string): Promise<BackupResult> {
  const source = join(dataDir, DB_FILE);
  if (!existsSync(source)) throw new ValidationError(`no database at ${source}`);
  const db = new Database(source, { fileMustExist: true, timeout: 5000 });
  try {
    return await backupTo(db, file, () => 0x7fffffff);
  } finally {
    db.close();
  }
}

async function backupTo(db: Db, file: string, step: () => number): Promise<BackupResult> {
  const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.partial`);
  rmSync(tmp, { force: true });
  try {
    const r = await db.backup(tmp, { progress: step });
    // The copy carries the source's WAL mode in its header; a backup is one self-contained
    // file, which readers open without creating -wal and -shm files beside it.
    const copy = new Database(tmp, { fileMustExist: true });
    try {
      copy.pragma('journal_mode = DELETE');
    } finally {
      copy.close();
    }
    renameSync(tmp, file);
    return { file, bytes: statSync(file).size, pages: r.totalPages };
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

export interface CheckedBackup {
  readonly schemaVersion: number;
}

/**
 * Checks that `file` is a gateway database this build can open: SQLite's `integrity_check`
 * passes and its schema version is not newer than `latestVersion`.
 */
export function checkBackup(file: string, latestVersion: number): CheckedBackup {
  if (!existsSync(file)) throw new ValidationError(`no such file: ${file}`);
  let db: Db;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw new ValidationError(`${file} is not an SQLite database: ${(err as Error).message}`);
  }
  try {
    let lines: string[];
    try {
      const rows = db.pragma('integrity_check') as Array<{ integrity_check: string }>;
      lines = rows.map((r) => r.integrity_check);
    } catch (err) {
      throw new ValidationError(`${file} is not an SQLite database: ${(err as Error).message}`);
    }
    if (lines.length !== 1 || lines[0] !== 'ok') {
      throw new ValidationError(`${file} fails integrity_check: ${lines.slice(0, 5).join('; ')}`);
    }
    const schemaVersion = db.pragma('user_version', { simple: true }) as number;
    if (schemaVersion === 0) throw new ValidationError(`${file} holds no gateway schema`);
    if (schemaVersion > latestVersion) {
      throw new ValidationError(
        `${file} has schema version ${schemaVersion}, newer than this build knows (${latestVersion}); restore it with a newer edge-gateway`,
      );
    }
    return { schemaVersion };
  } finally {
    db.close();
  }
}

export interface RestoreResult extends CheckedBackup {
  /** The database that was replaced, kept aside; undefined when the data dir had none. */
  readonly previous?: string;
}

/**
 * Replaces the database of a stopped gateway with a checked backup. Refuses while any process
 * has the database open (an exclusive lock cannot be taken). The replaced database is kept in
 * `backups/` so a wrong restore can be undone.
 */
export function restoreDataDir(
  dataDir: string,
  file: string,
  latestVersion: number,
  now = new Date(),
): RestoreResult {
  const checked = checkBackup(file, latestVersion);
  const target = join(dataDir, DB_FILE);
  mkdirSync(join(dataDir, BACKUP_DIR), { recursive: true, mode: 0o750 });
  const staged = join(dataDir, `.${DB_FILE}.restore`);
  rmSync(staged, { force: true });
  // A copy through SQLite (not a file copy): the backup may itself be in WAL mode.
  const src = new Database(file, { readonly: true, fileMustExist: true });
  try {
    src.exec(`VACUUM INTO '${staged.replaceAll("'", "''")}'`);
  } finally {
    src.close();
  }
  let previous: string | undefined;
  if (existsSync(target)) {
    assertNotInUse(target);
    previous = join(dataDir, BACKUP_DIR, `before-restore-${stamp(now)}.db`);
    renameSync(target, previous);
  }
  // The WAL and shared-memory files of the replaced database must not meet the new one.
  rmSync(`${target}-wal`, { force: true });
  rmSync(`${target}-shm`, { force: true });
  renameSync(staged, target);
  return { ...checked, previous };
}

/**
 * Throws ConflictError while a gateway (or any process) has the database open. Taking the
 * exclusive lock also checkpoints the WAL into the file, and closing removes the WAL.
 */
function assertNotInUse(target: string): void {
  const db = new Database(target, { fileMustExist: true, timeout: 0 });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
    db.pragma('wal_checkpoint(TRUNCATE)');
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_BUSY') {
      throw new ConflictError(
        `the database ${target} is in use: stop the gateway (systemctl stop edge-gateway) before a restore`,
      );
    }
    throw err;
  } finally {
    db.close();
  }
}

/**
 * Before a schema migration: a copy of the database as it is (same connection, before the
 * first migration runs) in `backups/`, keeping the newest `PRE_MIGRATION_KEEP`.
 */
export async function copyBeforeMigration(
  db: Db,
  dataDir: string,
  fromVersion: number,
  toVersion: number,
  now = new Date(),
): Promise<BackupResult> {
  const dir = join(dataDir, BACKUP_DIR);
  mkdirSync(dir, { recursive: true, mode: 0o750 });
  const file = join(dir, `pre-migration-${stamp(now)}-v${fromVersion}-to-v${toVersion}.db`);
  const result = await backupOpenDb(db, file);
  const old = readdirSync(dir)
    .filter((f) => f.startsWith('pre-migration-') && f.endsWith('.db'))
    .sort()
    .reverse()
    .slice(PRE_MIGRATION_KEEP);
  for (const f of old) rmSync(join(dir, f), { force: true });
  return result;
}

/** `20261123T201500123Z`: sorts by time, safe in file names. */
function stamp(d: Date): string {
  return d.toISOString().replace(/[-:.]/g, '');
}
