#!/usr/bin/env node
import { resolve } from 'node:path';
import { ConfigError, helpText, loadConfig } from './config.js';
import { backupDataDir, restoreDataDir } from './db/backup.js';
import { MIGRATIONS } from './db/migrations/index.js';
import { createGateway } from './gateway.js';
import { isSingleExecutable, type SeaFiles, unpackSeaFiles } from './sea.js';
import { VERSION, versionLine } from './version.js';

/** Process entry: command line -> config -> gateway -> signals -> exit code. */
async function main(argv: readonly string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${helpText(VERSION)}\n`);
    return 0;
  }
  if (argv.includes('--version') || argv.includes('-v')) {
    process.stdout.write(`${versionLine()}\n`);
    return 0;
  }
  const [command, ...rest] = argv;
  if (command === 'backup' || command === 'restore') {
    const [file, ...flags] = rest;
    if (!file || file.startsWith('--')) {
      process.stderr.write(`edge-gateway: usage: edge-gateway ${command} FILE [--data-dir DIR]\n`);
      return 2;
    }
    const loaded = config(flags);
    if (!loaded) return 2;
    if (isSingleExecutable() && !unpack(loaded.config.cacheDir)) return 1;
    return await runDataCommand(command, resolve(file), loaded.config.dataDir);
  }
  if (command !== 'serve') {
    process.stderr.write(
      `edge-gateway: ${command === undefined ? 'missing command' : `unknown command ${command}`}; try 'edge-gateway serve' or --help\n`,
    );
    return 2;
  }

  const loaded = config(rest);
  if (!loaded) return 2;

  // The single executable writes the addon and the web page it carries to the cache folder.
  let sea: SeaFiles | undefined;
  if (isSingleExecutable()) {
    sea = unpack(loaded.config.cacheDir);
    if (!sea) return 1;
  }

  const gateway = createGateway(loaded.config, {
    secrets: loaded.secrets,
    ...(sea && {
      sqliteAddon: sea.sqliteAddon,
      uiDir: sea.uiDir,
      nativeAddonFile: sea.nativeAddonFile,
    }),
  });
  const log = gateway.loggers.gateway;
  if (sea) log.info({ cacheDir: sea.dir, written: sea.written }, 'executable files ready');
  const stopped = new Promise<void>((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      log.info({ signal }, 'signal received');
      // Last resort: a stop that hangs must not keep the unit from restarting.
      const limitMs = loaded.config.shutdownTimeoutMs;
      setTimeout(() => {
        log.error({ limitMs }, 'shutdown took longer than its limit; exiting');
        process.exit(1);
      }, limitMs).unref();
      gateway.stop().then(resolve, resolve);
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  });

  try {
    await gateway.start();
  } catch (err) {
    log.fatal(
      { err: { message: (err as Error).message, code: (err as NodeJS.ErrnoException).code } },
      `cannot start: ${(err as Error).message}; check the data directory (${loaded.config.dataDir}) and that the ports are free`,
    );
    return 1;
  }
  await stopped;
  return 0;
}

/** The configuration from flags and environment; undefined (reported) when invalid. */
function config(flags: readonly string[]): ReturnType<typeof loadConfig> | undefined {
  try {
    return loadConfig({ argv: flags, env: process.env });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`edge-gateway: ${err.message}\n`);
      return undefined;
    }
    throw err;
  }
}

/** The single executable's files in the cache folder; undefined (said on stderr) on failure. */
function unpack(cacheDir: string): SeaFiles | undefined {
  try {
    return unpackSeaFiles(cacheDir);
  } catch (err) {
    process.stderr.write(
      `edge-gateway: cannot write the executable's files to ${cacheDir}: ${(err as Error).message}; set --cache-dir (EDGE_CACHE_DIR) to a writable folder\n`,
    );
    return undefined;
  }
}

/**
 * `backup FILE`: a consistent copy of the database while the gateway runs (or not).
 * `restore FILE`: checks FILE and replaces the database of a stopped gateway.
 */
async function runDataCommand(
  command: 'backup' | 'restore',
  file: string,
  dataDir: string,
): Promise<number> {
  try {
    if (command === 'backup') {
      const r = await backupDataDir(dataDir, file);
      process.stdout.write(`backed up ${dataDir} to ${r.file} (${r.bytes} bytes)\n`);
    } else {
      const r = restoreDataDir(dataDir, file, MIGRATIONS.length);
      process.stdout.write(
        `restored ${file} (schema version ${r.schemaVersion}) into ${dataDir}${r.previous ? `; the replaced database is ${r.previous}` : ''}\n`,
      );
    }
    return 0;
  } catch (err) {
    process.stderr.write(`edge-gateway: ${command} failed: ${(err as Error).message}\n`);
    return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`edge-gateway: ${(err as Error).stack ?? err}\n`);
    process.exitCode = 1;
  },
);
