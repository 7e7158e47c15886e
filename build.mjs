// Bundles the server into dist/edge-gateway.mjs and the web UI into dist/ui/.
// Native addons stay external: Node resolves them from node_modules beside the project at run
// time, so `node dist/edge-gateway.mjs` works from any working directory on this machine.
import { copyFile, mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const root = dirname(fileURLToPath(import.meta.url));
const out = join(root, 'dist');
const NATIVE = ['better-sqlite3', 'serialport', '@serialport/*'];

await rm(out, { recursive: true, force: true });
await mkdir(join(out, 'ui'), { recursive: true });

await esbuild.build({
  entryPoints: [join(root, 'src/main.ts')],
  outfile: join(out, 'edge-gateway.mjs'),
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  external: NATIVE,
  minifySyntax: true,
  sourcemap: 'linked',
  legalComments: 'none',
  logLevel: 'warning',
  // CommonJS dependencies call require(); give the ESM bundle one.
  banner: {
    js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
  },
});

await esbuild.build({
  entryPoints: [join(root, 'ui/main.tsx')],
  outfile: join(out, 'ui/app.js'),
  bundle: true,
  platform: 'browser',
  target: 'es2020',
  format: 'esm',
  minify: true,
  jsx: 'automatic',
  jsxImportSource: 'preact',
  logLevel: 'warning',
});
await copyFile(join(root, 'ui/index.html'), join(out, 'ui/index.html'));
await copyFile(join(root, 'ui/style.css'), join(out, 'ui/style.css'));
console.log('built dist/edge-gateway.mjs and dist/ui/');
