// Bundles the server into dist/edge-gateway.mjs and the web UI into dist/ui/.
// Native addons stay external: Node resolves them from node_modules beside the project at run
// time, so `node dist/edge-gateway.mjs` works from any working directory on this machine.
import { execFileSync } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { buildUi } from './scripts/build-ui.mjs';

const root = dirname(fileURLToPath(import.meta.url));
const out = join(root, 'dist');
const NATIVE = ['better-sqlite3', 'serialport', '@serialport/*'];

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

/** The commit `--version` prints: `git rev-parse`, `+dirty` with uncommitted changes. */
function gitCommit() {
  const git = (...args) =>
    execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const head = git('rev-parse', '--short=12', 'HEAD').trim();
    return git('status', '--porcelain', '--untracked-files=no').trim() === ''
      ? head
      : `${head}+dirty`;
  } catch {
    return 'unknown';
  }
}

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

await rm(out, { recursive: true, force: true });
await mkdir(join(out, 'ui'), { recursive: true });

await esbuild.build({
  entryPoints: [join(root, 'src/main.ts')],
  outfile: join(out, 'edge-gateway.mjs'),
  bundle: true,
  platform: 'node',
  target: 'node24',
  format: 'esm',
  define: { EDGE_GIT_COMMIT: JSON.stringify(gitCommit()) },
  external: NATIVE,
  minifySyntax: true,
  sourcemap: 'linked',
  legalComments: 'none',
  logLevel: 'warning',
  plugins: [debugOff, zodEnglishOnly],
  // CommonJS dependencies call require(); give the ESM bundle one.
  banner: {
    js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
  },
});

await buildUi(root, join(out, 'ui'));
console.log('built dist/edge-gateway.mjs and dist/ui/');
