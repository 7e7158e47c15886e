// Bundles the web UI (ui/) into `outDir`: one entry with the shell and the sign-in page, every
// other page a lazily loaded chunk, hashed file names under assets/ (served with a one-year cache),
// index.html written with the hashed names, and a gzip and a brotli copy of every asset (served
// precompressed). Prints the sizes and fails when the initial load is over the budget.
import { readFile, writeFile } from 'node:fs/promises';
import { basename, join, relative } from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';

/** Issue 15 item 7: the initial load (JS + CSS, gzipped) stays at or under 150 KB. */
export const INITIAL_BUDGET_BYTES = 150 * 1024;

const gzipSize = (buf) => gzipSync(buf, { level: 9 }).length;
const kb = (n) => `${(n / 1024).toFixed(1)} KB`;

export async function buildUi(root, outDir) {
  const result = await esbuild.build({
    entryPoints: { app: join(root, 'ui/main.tsx'), style: join(root, 'ui/style.css') },
    outdir: join(outDir, 'assets'),
    entryNames: '[name]-[hash]',
    chunkNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    bundle: true,
    splitting: true,
    platform: 'browser',
    target: 'es2020',
    format: 'esm',
    minify: true,
    jsx: 'automatic',
    jsxImportSource: 'preact',
    legalComments: 'none',
    metafile: true,
    absWorkingDir: root,
    logLevel: 'warning',
  });
  const outputs = result.metafile.outputs;
  const name = (path) => relative(outDir, join(root, path)).split('\\').join('/');
  const entry = (suffix, ext) =>
    Object.keys(outputs).find(
      (p) => outputs[p].entryPoint?.endsWith(suffix) && p.endsWith(ext) && !p.endsWith('.map'),
    );
  const appJs = entry('ui/main.tsx', '.js');
  const styleCss = entry('ui/style.css', '.css');
  if (!appJs || !styleCss) throw new Error('UI build: entry outputs not found');

  // The initial load: the entry, every chunk it imports statically (recursively), the CSS.
  const initial = new Set([styleCss]);
  const visit = (p) => {
    if (initial.has(p)) return;
    initial.add(p);
    for (const imp of outputs[p].imports) if (imp.kind === 'import-statement') visit(imp.path);
  };
  visit(appJs);

  const template = await readFile(join(root, 'ui/index.html'), 'utf8');
  const html = template
    .replace('/style.css', `/${name(styleCss)}`)
    .replace('/app.js', `/${name(appJs)}`)
    .replace(
      '</head>',
      `${[...initial]
        .filter((p) => p !== appJs && p.endsWith('.js'))
        .map((p) => `  <link rel="modulepreload" href="/${name(p)}" />\n`)
        .join('')}  </head>`,
    );
  await writeFile(join(outDir, 'index.html'), html);

  let initialGz = 0;
  const rows = [];
  for (const p of Object.keys(outputs)) {
    if (p.endsWith('.map')) continue;
    const body = await readFile(join(root, p));
    await writeFile(`${join(root, p)}.gz`, gzipSync(body, { level: 9 }));
    await writeFile(
      `${join(root, p)}.br`,
      brotliCompressSync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }),
    );
    const gz = gzipSize(body);
    if (initial.has(p)) initialGz += gz;
    rows.push(
      `  ${initial.has(p) ? '*' : ' '} ${basename(p).padEnd(34)} ${kb(body.length).padStart(9)} ${kb(gz).padStart(9)} gz`,
    );
  }
  console.log(`web UI (* = initial load):\n${rows.sort().join('\n')}`);
  console.log(`web UI initial load: ${kb(initialGz)} gzipped (budget ${kb(INITIAL_BUDGET_BYTES)})`);
  if (initialGz > INITIAL_BUDGET_BYTES) {
    throw new Error(
      `web UI initial load ${kb(initialGz)} gzipped is over the budget of ${kb(INITIAL_BUDGET_BYTES)}`,
    );
  }
}
