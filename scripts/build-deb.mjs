// Builds dist/edge-gateway_<version>_<arch>.deb with dpkg-deb from the single executable
// (npm run build:exe first):
//   /usr/bin/edge-gateway                         the executable
//   /lib/systemd/system/edge-gateway.service      the hardened unit (systemd/)
//   /etc/edge-gateway/edge-gateway.env            settings, a conffile, mode 0600
//   /usr/share/doc/edge-gateway/                  README.md, install.md
// The maintainer scripts (systemd/deb/) reload systemd and enable and start the service on
// install, stop it on removal and never touch /var/lib/edge-gateway.
//
//   node scripts/build-deb.mjs [--arch x64|arm64]     (default x64)
import { spawnSync } from 'node:child_process';
import { chmod, copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT } from './esbuild.mjs';

const i = process.argv.indexOf('--arch');
const arch = i > 0 ? process.argv[i + 1] : 'x64';
const debArch = { x64: 'amd64', arm64: 'arm64' }[arch];
if (!debArch) throw new Error(`--arch ${arch}: x64 or arm64`);
const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8'));
const exe = join(ROOT, 'dist', `edge-gateway-linux-${arch}`);
const stage = join(ROOT, 'dist', 'deb', arch);
const deb = join(ROOT, 'dist', `edge-gateway_${pkg.version}_${debArch}.deb`);

function run(command, args) {
  const r = spawnSync(command, args, { stdio: 'inherit' });
  if (r.status !== 0)
    throw new Error(`${command} ${args.join(' ')} failed (${r.status ?? r.signal})`);
}

async function put(from, to, mode) {
  await mkdir(join(stage, to, '..'), { recursive: true });
  await copyFile(from, join(stage, to));
  await chmod(join(stage, to), mode);
}

await rm(stage, { recursive: true, force: true });
await put(exe, 'usr/bin/edge-gateway', 0o755);
await put(
  join(ROOT, 'systemd', 'edge-gateway.service'),
  'lib/systemd/system/edge-gateway.service',
  0o644,
);
await put(join(ROOT, 'systemd', 'edge-gateway.env'), 'etc/edge-gateway/edge-gateway.env', 0o600);
await put(join(ROOT, 'README.md'), 'usr/share/doc/edge-gateway/README.md', 0o644);
await put(join(ROOT, 'docs', 'install.md'), 'usr/share/doc/edge-gateway/install.md', 0o644);
for (const script of ['postinst', 'prerm', 'postrm'])
  await put(join(ROOT, 'systemd', 'deb', script), `DEBIAN/${script}`, 0o755);
await writeFile(join(stage, 'DEBIAN', 'conffiles'), '/etc/edge-gateway/edge-gateway.env\n');
const du = spawnSync('du', ['-sk', join(stage, 'usr'), join(stage, 'lib'), join(stage, 'etc')], {
  encoding: 'utf8',
});
const installedKb = du.stdout
  .trim()
  .split('\n')
  .reduce((sum, line) => sum + Number(line.split('\t')[0]), 0);
await writeFile(
  join(stage, 'DEBIAN', 'control'),
  `Package: edge-gateway
Version: ${pkg.version}
Architecture: ${debArch}
Maintainer: edge-gateway maintainers <edge-gateway@localhost>
Installed-Size: ${installedKb}
Depends: libc6 (>= 2.28), libstdc++6
Recommends: systemd
Section: net
Priority: optional
Description: ${pkg.description}
 One executable (Node ${process.versions.node.split('.')[0]} with the gateway inside) run by systemd as a hardened
 service: ThingsBoard's device API over HTTP, MQTT and CoAP, telemetry in one SQLite file under
 /var/lib/edge-gateway. The first administrator's password is in the journal
 (journalctl -u edge-gateway).
`,
);
await chmod(join(stage, 'DEBIAN'), 0o755);
// gzip: xz took over ten minutes for the 131 MB executable on this loaded 2-core machine.
run('dpkg-deb', ['--root-owner-group', '-Zgzip', '-z6', '--build', stage, deb]);
console.log(`built ${deb.slice(ROOT.length + 1)}`);
