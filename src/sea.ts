import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { getAsset, getRawAsset, isSea } from 'node:sea';
import { loadAddon, type SqliteAddon } from './db/sqlite-addon.js';

/**
 * The single executable (scripts/build-exe.mjs) carries the files the bundle finds in
 * node_modules and dist/ otherwise: the native addons of better-sqlite3 and serialport and our
 * own (edge_native.node),
 * better-sqlite3's JavaScript (for the checkpoint worker), and the web page. At start they are written to the cache folder (once per
 * build: files already there with the right SHA-256 are kept) and the addon is loaded with
 * `process.dlopen`, which needs a file.
 */

/** The asset that lists the others; build-exe.mjs writes it. */
export const MANIFEST_ASSET = 'manifest.json';

export interface SeaManifest {
  /** Names this build's files: the folder under the cache folder. */
  readonly id: string;
  readonly files: ReadonlyArray<{ readonly name: string; readonly sha256: string }>;
}

export interface SeaFiles {
  readonly sqliteAddon: SqliteAddon;
  readonly uiDir: string;
  /** The gateway's own addon (native/edge_native.c), loaded by gateway.ts. */
  readonly nativeAddonFile: string;
  /** Where the files are, and how many had to be written now. */
  readonly dir: string;
  readonly written: number;
}

/** True when this process is the single executable. */
export function isSingleExecutable(): boolean {
  return isSea();
}

function sha256(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

function holds(file: string, hash: string): boolean {
  try {
    return sha256(readFileSync(file)) === hash;
  } catch {
    return false;
  }
}

/** Writes the carried files under `cacheDir` and loads the SQLite addon. Throws on I/O errors. */
export function unpackSeaFiles(cacheDir: string): SeaFiles {
  const manifest = JSON.parse(getAsset(MANIFEST_ASSET, 'utf8')) as SeaManifest;
  const dir = join(cacheDir, manifest.id);
  let written = 0;
  for (const { name, sha256: hash } of manifest.files) {
    const file = join(dir, name);
    if (holds(file, hash)) continue;
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    const data = new Uint8Array(getRawAsset(name));
    if (sha256(data) !== hash) throw new Error(`the executable's asset ${name} is damaged`);
    // Another start may write the same file: each writes its own and renames it into place.
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, data, { mode: name.endsWith('.node') ? 0o700 : 0o600 });
    renameSync(tmp, file);
    written++;
  }
  // Files of earlier builds (an upgrade) are not needed any more.
  for (const entry of readdirSync(cacheDir, { withFileTypes: true })) {
    if (entry.isDirectory() && /^[0-9a-f]{16}$/.test(entry.name) && entry.name !== manifest.id)
      rmSync(join(cacheDir, entry.name), { recursive: true, force: true });
  }
  const bindingFile = join(dir, 'better_sqlite3.node');
  // Every other `new Database()` (backup, restore, the copy before a migration) gets the addon
  // from better-sqlite3's binding module, which scripts/build-exe.mjs points at this variable;
  // serialport's binding module loads its addon from the other one when a port is opened.
  process.env.EDGE_SQLITE_ADDON_FILE = bindingFile;
  process.env.EDGE_SERIALPORT_ADDON_FILE = join(dir, 'serialport.node');
  return {
    sqliteAddon: {
      binding: loadAddon(bindingFile),
      bindingFile,
      moduleFile: join(dir, 'better-sqlite3.cjs'),
    },
    uiDir: join(dir, 'ui'),
    nativeAddonFile: join(dir, 'edge_native.node'),
    dir,
    written,
  };
}
