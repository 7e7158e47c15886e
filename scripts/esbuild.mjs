// What build.mjs (the bundle run by node) and scripts/build-exe.mjs (the single executable)
// build alike: the server bundle's esbuild options (the web page: scripts/build-ui.mjs).
import { execFileSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Packages with native addons: the node bundle leaves them to node_modules. */
export const NATIVE = ['better-sqlite3', 'serialport', '@serialport/*'];

// mqtt-packet, Aedes and coap call the `debug` package several times per packet; even switched
// off, each call costs an arguments array (about 2 % of the gateway's CPU under MQTT load). The
// gateway logs through pino, so the bundle gets a `debug` that does nothing.
const debugOff = {
  name: 'debug-off',
  setup(build) {
    build.onResolve({ filter: /^debug$/ }, () => ({ path: 'debug', namespace: 'debug-off' }));
    build.onLoad({ filter: /.*/, namespace: 'debug-off' }, () => ({
      contents: `function noop() {}
function createDebug() {
  const debug = () => {};
  debug.enabled = false;
  debug.extend = createDebug;
  debug.log = noop;
  return debug;
}
createDebug.enable = noop;
createDebug.disable = () => '';
createDebug.enabled = () => false;
module.exports = createDebug;`,
      loader: 'js',
    }));
  },
};

// zod re-exports every language's error messages (`z.locales`, about 340 KiB of the bundle); the
// gateway uses English only, which zod configures itself from `locales/en.js`. A smaller bundle
// is less source and fewer functions held in memory at start (bench:idle).
const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(build) {
    build.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      args.importer.includes(`${join('node_modules', 'zod')}`)
        ? { path: join(dirname(args.importer), '..', 'locales', 'en.js'), namespace: 'zod-locales' }
        : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'zod-locales' }, (args) => ({
      contents: `export { default as en } from ${JSON.stringify(args.path)};`,
      loader: 'js',
      resolveDir: dirname(args.path),
    }));
  },
};

// V8 keeps a script's whole source in memory (functions compile from it lazily), as one byte per
// character when every character is ASCII and two otherwise. esbuild escapes non-ASCII in strings
// and identifiers but not in regular expression literals (a dependency's /['"`’]/ doubled the
// bundle's 4 MB in memory): those become \u escapes, which mean the same in a regular expression.
// The source map's columns after such a character on its line are off by 5 per character.
const asciiOnly = {
  name: 'ascii-only',
  setup(build) {
    build.onEnd(async (result) => {
      const file = build.initialOptions.outfile;
      if (result.errors.length > 0 || !file) return;
      const text = await readFile(file, 'utf8');
      const ascii = text.replace(
        /[\u0080-\uffff]/g,
        (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
      );
      if (ascii !== text) await writeFile(file, ascii);
    });
  },
};

/**
 * V8 flags the gateway runs with: the executable's `execArgv` (scripts/build-exe.mjs) and the
 * bundle's `#!` line (build.mjs). None by default: `--max-semi-space-size=1` saves 8.7 MB idle
 * and ~97 MB with 5,000 MQTT connections, but costs 78 % more server CPU per MQTT message
 * (47,613 → 27,143 msg/s, docs/benchmarks.md "Final quiet re-measure"), so it is an opt-in
 * (`NODE_OPTIONS=--max-semi-space-size=1`, docs/install.md) for boxes short of memory.
 */
export const NODE_FLAGS = [];

/** The commit `--version` prints: `git rev-parse`, `+dirty` with uncommitted changes. */
export function gitCommit() {
  const git = (...args) =>
    execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const head = git('rev-parse', '--short=12', 'HEAD').trim();
    return git('status', '--porcelain', '--untracked-files=no').trim() === ''
      ? head
      : `${head}+dirty`;
  } catch {
    return 'unknown';
  }
}

/** esbuild options of the server bundle (src/main.ts); callers add the output and format. */
export function serverOptions() {
  return {
    entryPoints: [join(ROOT, 'src/main.ts')],
    bundle: true,
    platform: 'node',
    target: 'node24',
    define: { EDGE_GIT_COMMIT: JSON.stringify(gitCommit()) },
    minifySyntax: true,
    // Without comments and indentation the source V8 holds is 4.2 MB instead of 5.4 MB; names are
    // kept, so stack traces still name functions (positions: the .map file).
    minifyWhitespace: true,
    legalComments: 'none',
    logLevel: 'warning',
    plugins: [debugOff, zodEnglishOnly, asciiOnly],
  };
}
