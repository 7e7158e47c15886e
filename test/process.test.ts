import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import pkg from '../package.json' with { type: 'json' };
import { LOOPBACK_EPHEMERAL, runGateway, spawnGateway } from './helpers/process.js';

describe('the edge-gateway command', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-gw-proc-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('prints --help and --version and exits 0', async () => {
    const help = await runGateway(['--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /Usage: edge-gateway serve/);
    assert.match(help.stdout, /--telemetry-max-points/);
    const version = await runGateway(['--version']);
    assert.equal(version.code, 0);
    assert.match(
      version.stdout.trim(),
      new RegExp(
        `^edge-gateway ${pkg.version} \\(node ${process.version}, commit [0-9a-f]{12}(\\+dirty)?\\)$`,
      ),
    );
  });

  it('exits 2 with one line naming every bad flag, and on an unknown command', async () => {
    const bad = await runGateway(['serve', '--http-port', 'x', '--nope', '--log-level', 'loud'], {
      env: { EDGE_MQTT_PORT: '99999' },
    });
    assert.equal(bad.code, 2);
    const lines = bad.stderr.trim().split('\n');
    assert.equal(lines.length, 1, bad.stderr);
    for (const word of ['--http-port', '--nope', '--log-level', 'EDGE_MQTT_PORT'])
      assert.ok(lines[0].includes(word), word);
    const unknown = await runGateway(['start']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command start/);
  });

  it('creates an administrator with a generated password on first start, logged once and saved 0600', async () => {
    const dataDir = join(dir, 'first-start');
    // Started from another working directory: the bundle resolves its native addons itself.
    const gw = await spawnGateway(['serve', '--data-dir', dataDir, ...LOOPBACK_EPHEMERAL], {
      cwd: tmpdir(),
    });
    try {
      const file = join(dataDir, 'initial-admin.txt');
      assert.equal((await stat(file)).mode & 0o777, 0o600);
      const text = await readFile(file, 'utf8');
      const email = /email: (\S+)/.exec(text)?.[1];
      const password = /password: (\S+)/.exec(text)?.[1];
      assert.ok(email && password && password.length >= 16);
      const mentions = gw.lines.filter((l) => JSON.stringify(l).includes(password));
      assert.equal(mentions.length, 1, 'the generated password is logged exactly once');

      const base = `http://127.0.0.1:${gw.ports.http}`;
      const health = await fetch(`${base}/healthz`);
      assert.equal(health.status, 200);
      const h = (await health.json()) as { status: string; version: string; uptimeMs: number };
      assert.equal(h.status, 'UP');
      assert.equal(h.version, pkg.version);
      assert.ok(h.uptimeMs >= 0);
      const login = await fetch(`${base}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: email, password }),
      });
      assert.equal(login.status, 200);
      const { token } = (await login.json()) as { token: string };
      assert.ok(!JSON.stringify(gw.lines).includes(token), 'tokens are never logged');
      const page = await fetch(`${base}/`);
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<div id="app">/);
    } finally {
      assert.equal(await gw.stop('SIGTERM'), 0);
    }
    // A second start keeps the first administrator and does not log a new password.
    const again = await spawnGateway(['serve', '--data-dir', dataDir, ...LOOPBACK_EPHEMERAL]);
    try {
      assert.ok(!again.lines.some((l) => 'initialPassword' in l));
    } finally {
      assert.equal(await again.stop('SIGINT'), 0);
    }
  });

  it('uses EDGE_ADMIN_EMAIL and EDGE_ADMIN_PASSWORD when set and writes no password file', async () => {
    const dataDir = join(dir, 'env-admin');
    const gw = await spawnGateway(['serve', '--data-dir', dataDir, ...LOOPBACK_EPHEMERAL], {
      env: { EDGE_ADMIN_EMAIL: 'ops@plant.example', EDGE_ADMIN_PASSWORD: 'correct-horse-9' },
    });
    try {
      await assert.rejects(stat(join(dataDir, 'initial-admin.txt')));
      const res = await fetch(`http://127.0.0.1:${gw.ports.http}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'ops@plant.example', password: 'correct-horse-9' }),
      });
      assert.equal(res.status, 200);
      assert.ok(!JSON.stringify(gw.lines).includes('correct-horse-9'));
    } finally {
      await gw.stop();
    }
  });

  it('stops on SIGTERM with exit code 0 within 5 s, and logs each port it chose', async () => {
    const gw = await spawnGateway([
      'serve',
      '--data-dir',
      join(dir, 'sigterm'),
      ...LOOPBACK_EPHEMERAL,
    ]);
    const listening = gw.lines.filter((l) => l.msg === 'listening');
    assert.deepEqual(listening.map((l) => l.transport).sort(), [
      'coap',
      'http',
      'https',
      'mqtt',
      'mqtts',
    ]);
    for (const l of listening) assert.ok((l.port as number) > 0);
    const started = Date.now();
    const code = await gw.stop('SIGTERM');
    assert.equal(code, 0);
    assert.ok(Date.now() - started < 5000);
    assert.ok(gw.lines.some((l) => l.msg === 'stopped'));
  });

  it('refuses to start against a newer schema, and on a busy port, with exit 1 and a clear line', async () => {
    const dataDir = join(dir, 'newer');
    const first = await spawnGateway(['serve', '--data-dir', dataDir, ...LOOPBACK_EPHEMERAL]);
    await first.stop();
    const db = new Database(join(dataDir, 'edge-gateway.db'));
    db.pragma('user_version = 999');
    db.close();
    const newer = await runGateway(['serve', '--data-dir', dataDir, ...LOOPBACK_EPHEMERAL]);
    assert.equal(newer.code, 1);
    assert.match(newer.stdout, /schema version 999 is newer than this build knows/);

    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as { port: number }).port;
    try {
      const busy = await runGateway([
        'serve',
        '--data-dir',
        join(dir, 'busy'),
        ...LOOPBACK_EPHEMERAL,
        '--mqtt-port',
        String(port),
      ]);
      assert.equal(busy.code, 1);
      assert.match(busy.stdout, /cannot start: .*EADDRINUSE/);
    } finally {
      blocker.close();
    }
  });
});
