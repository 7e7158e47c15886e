#!/usr/bin/env node
import { ConfigError, helpText, loadConfig } from './config.js';
import { createGateway } from './gateway.js';
import { VERSION } from './version.js';

/** Process entry: command line -> config -> gateway -> signals -> exit code. */
async function main(argv: readonly string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${helpText(VERSION)}\n`);
    return 0;
  }
  if (argv.includes('--version') || argv.includes('-v')) {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const [command, ...flags] = argv;
  if (command !== 'serve') {
    process.stderr.write(
      `edge-gateway: ${command === undefined ? 'missing command' : `unknown command ${command}`}; try 'edge-gateway serve' or --help\n`,
    );
    return 2;
  }

  let loaded: ReturnType<typeof loadConfig>;
  try {
    loaded = loadConfig({ argv: flags, env: process.env });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`edge-gateway: ${err.message}\n`);
      return 2;
    }
    throw err;
  }

  const gateway = createGateway(loaded.config, { secrets: loaded.secrets });
  const log = gateway.loggers.gateway;
  const stopped = new Promise<void>((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      log.info({ signal }, 'signal received');
      // Last resort: a stop that hangs must not keep the unit from restarting.
      setTimeout(() => {
        log.error('shutdown took longer than 5 s; exiting');
        process.exit(1);
      }, 5000).unref();
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

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`edge-gateway: ${(err as Error).stack ?? err}\n`);
    process.exitCode = 1;
  },
);
