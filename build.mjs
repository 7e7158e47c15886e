// Bundles the server into dist/edge-gateway.mjs and the web UI into dist/ui/.
// Native addons stay external: Node resolves them from node_modules beside the project at run
// time, so `node dist/edge-gateway.mjs` works from any working directory on this machine.
// The gateway's own addon (native/edge_native.c: RS-485 mode, malloc_trim) is compiled to
// dist/edge_native.node when a C compiler is there (scripts/native.mjs, cached); without one the
// gateway still runs and says those are not available.
// The single executable (dist/edge-gateway-linux-<arch>) is scripts/build-exe.mjs.
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as esbuild from 'esbuild';
import { buildUi } from './scripts/build-ui.mjs';
import { NATIVE, NODE_FLAGS, ROOT, serverOptions } from './scripts/esbuild.mjs';
import { compileNative, nodeHeaders } from './scripts/native.mjs';

const out = join(ROOT, 'dist');

// Only what this script writes: the executables and packages beside it stay.
await rm(join(out, 'edge-gateway.mjs'), { force: true });
await rm(join(out, 'ui'), { recursive: true, force: true });
await rm(join(out, 'edge_native.node'), { force: true });
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

const native =
  process.platform === 'linux'
    ? await compileNative({
        cc: process.env.CC ?? 'cc',
        headers: nodeHeaders(
          [process.arch, 'x64', 'arm64'].map((a) => join(ROOT, 'node_modules', `node-linux-${a}`)),
        ),
        arch: process.arch,
        out: join(out, 'edge_native.node'),
      })
    : { missing: `not Linux (${process.platform})` };
if (native.missing)
  console.warn(
    `dist/edge_native.node not built: ${native.missing}; RS-485 mode and malloc_trim will not be available`,
  );
console.log(
  `built dist/edge-gateway.mjs, dist/ui/${native.file ? ' and dist/edge_native.node' : ''}`,
);
