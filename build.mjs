// Bundles the server into dist/edge-gateway.mjs and the web UI into dist/ui/.
// Native addons stay external: Node resolves them from node_modules beside the project at run
// time, so `node dist/edge-gateway.mjs` works from any working directory on this machine.
// The single executable (dist/edge-gateway-linux-<arch>) is scripts/build-exe.mjs.
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as esbuild from 'esbuild';
import { buildUi } from './scripts/build-ui.mjs';
import { NATIVE, NODE_FLAGS, ROOT, serverOptions } from './scripts/esbuild.mjs';

const out = join(ROOT, 'dist');

// Only what this script writes: the executables and packages beside it stay.
await rm(join(out, 'edge-gateway.mjs'), { force: true });
await rm(join(out, 'ui'), { recursive: true, force: true });
await mkdir(join(out, 'ui'), { recursive: true });

await esbuild.build({
  ...serverOptions(),
  outfile: join(out, 'edge-gateway.mjs'),
  format: 'esm',
  external: NATIVE,
  sourcemap: 'linked',
  // CommonJS dependencies call require(); give the ESM bundle one.
  banner: {
    js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
  },
});

// Run as a program (`dist/edge-gateway.mjs serve`, npm start, the package's bin) it gets the V8
// flags through its #! line; `node dist/edge-gateway.mjs` runs without them.
const bundle = join(out, 'edge-gateway.mjs');
const source = await readFile(bundle, 'utf8');
if (!source.startsWith('#!/usr/bin/env node\n')) throw new Error('the bundle has no #! line');
await writeFile(
  bundle,
  NODE_FLAGS.length === 0
    ? source
    : `#!/usr/bin/env -S node ${NODE_FLAGS.join(' ')}\n${source.slice('#!/usr/bin/env node\n'.length)}`,
);

await buildUi(ROOT, join(out, 'ui'));
console.log('built dist/edge-gateway.mjs and dist/ui/');
