// Compiles the gateway's own Node-API addon (native/edge_native.c: RS-485 ioctls, malloc_trim)
// with a plain C compiler, no node-gyp: one file, `cc -shared -fPIC` against Node 24's headers
// (the include/node folder of the npm package node-linux-<arch>; node_api.h and uv.h are the
// same for every Linux processor). Cached by source, headers' Node version, compiler and arch
// under node_modules/.cache/edge-gateway: a rebuild copies it.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { copyFile, mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT } from './esbuild.mjs';

export const NATIVE_SOURCE = join(ROOT, 'native', 'edge_native.c');
const CACHE = join(ROOT, 'node_modules', '.cache', 'edge-gateway');

/** The compiler's `--version` first line, or undefined when it is not there. */
function compilerVersion(cc) {
  const r = spawnSync(cc, ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.split('\n')[0] : undefined;
}

/** Node 24's headers folder (include/node) from an installed node-linux-<arch> package. */
export function nodeHeaders(packageDirs) {
  for (const dir of packageDirs) {
    const include = join(dir, 'include', 'node');
    if (existsSync(join(include, 'node_api.h'))) return include;
  }
  return undefined;
}

/**
 * Compiles native/edge_native.c with `cc` (x64: $CC or cc; arm64: aarch64-linux-gnu-gcc) into
 * `out`. Returns `{ file }`, or `{ missing }` saying what is missing (no compiler, no headers);
 * a compile error throws.
 */
export async function compileNative({ cc, headers, arch, out }) {
  const version = compilerVersion(cc);
  if (!version) return { missing: `no C compiler (${cc})` };
  if (!headers) return { missing: 'no Node headers (node_modules/node-linux-*/include/node)' };
  const source = readFileSync(NATIVE_SOURCE);
  const nodeVersion =
    /#define NODE_MAJOR_VERSION (\d+)[\s\S]*?#define NODE_MINOR_VERSION (\d+)[\s\S]*?#define NODE_PATCH_VERSION (\d+)/
      .exec(readFileSync(join(headers, 'node_version.h'), 'utf8'))
      ?.slice(1)
      .join('.');
  const key = createHash('sha256')
    .update(`${source}\n${nodeVersion}\n${version}\n${arch}`)
    .digest('hex')
    .slice(0, 16);
  const cached = join(CACHE, `edge_native-${arch}-${key}.node`);
  if (!existsSync(cached)) {
    await mkdir(CACHE, { recursive: true });
    const tmp = `${cached}.${process.pid}.tmp`;
    const r = spawnSync(
      cc,
      [
        '-shared',
        '-fPIC',
        '-O2',
        '-Wall',
        '-Wextra',
        '-fvisibility=hidden',
        '-s',
        '-I',
        headers,
        '-o',
        tmp,
        NATIVE_SOURCE,
      ],
      { encoding: 'utf8' },
    );
    if (r.status !== 0) {
      await rm(tmp, { force: true });
      throw new Error(`${cc} could not compile ${NATIVE_SOURCE}:\n${r.stderr}`);
    }
    await rename(tmp, cached);
  }
  await copyFile(cached, out);
  return { file: out };
}
