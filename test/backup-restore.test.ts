import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { MIGRATIONS } from '../src/db/migrations/index.js';
import { migrate } from '../src/db/migrator.js';
import { DB_FILE } from '../src/db/open.js';
import { createLoggers } from '../src/logger.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { runGateway } from './helpers/process.js';

/** Every `n` value of the device's telemetry, read over REST. */
async function storedValues(t: TestGateway, deviceId: string): Promise<Set<number>> {
  const res = await t.api(
    `/api/plugins/telemetry/DEVICE/${deviceId}/values/timeseries?keys=n&startTs=0&endTs=${Date.now() + 1e9}&limit=100000`,
    { token: await t.adminToken() },
  );
  assert.equal(res.status, 200);
  const body = (await res.json()) as { n?: Array<{ value: string | number }> };
  return new Set((body.n ?? []).map((p) => Number(p.value)));
}

describe('backup and restore', () => {
  it('backs up under MQTT load; a restore holds every point acknowledged before', async (ctx) => {
    const work = await mkdtemp(join(tmpdir(), 'edge-gw-backup-'));
    ctx.after(() => rm(work, { recursive: true, force: true }));
    const t = await startGateway();
    const device = await createDevice(t, 'loaded');
    const client = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
    const acked: number[] = [];
    let stop = false;
    // Four publishers, each waiting for its PUBACK (QoS 1) before the next message.
    const publishers = Array.from({ length: 4 }, async (_, lane) => {
      for (let i = lane; !stop; i += 4) {
        await client.publishAsync(
          'v1/devices/me/telemetry',
          JSON.stringify({ ts: 1e12 + i, values: { n: i } }),
          {
            qos: 1,
          },
        );
        acked.push(i);
      }
    });
    try {
      while (acked.length < 300) await new Promise((r) => setTimeout(r, 20));
      const ackedBefore = [...acked];
      const cliFile = join(work, 'cli.db');
      const httpFile = join(work, 'http.db');
      const cli = await runGateway(['backup', cliFile, '--data-dir', t.dataDir]);
      assert.equal(cli.code, 0, cli.stderr);
      assert.match(cli.stdout, /backed up .* bytes/);
      const ackedDuringCli = acked.length - ackedBefore.length;
      const ackedBeforeHttp = [...acked];
      const res = await t.api('/api/admin/backup', { token: await t.adminToken() });
      assert.equal(res.status, 200);
      assert.match(
        res.headers.get('content-disposition') ?? '',
        /attachment; filename="edge-gateway-\d+T\d+Z\.db"/,
      );
      await writeFile(httpFile, Buffer.from(await res.arrayBuffer()));
      // Ingest went on while the copies were made.
      const ackedAfter = acked.length;
      assert.ok(
        ackedDuringCli > 0 || ackedAfter > ackedBeforeHttp.length,
        'publishes acknowledged during the backups',
      );
      // Only the tenant administrator downloads backups.
      assert.equal((await t.api('/api/admin/backup')).status, 401);
      // The streamed copy is not left behind in the data directory (removed once streamed).
      await waitFor(
        async () =>
          (await readdir(join(t.dataDir, 'backups')).catch(() => [])).every(
            (f) => !f.startsWith('.download'),
          ),
        30_000,
        'the streamed copy to be removed',
      );

      // A restore into the running gateway's data directory is refused.
      const refused = await runGateway(['restore', cliFile, '--data-dir', t.dataDir]);
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /in use: stop the gateway/);

      stop = true;
      await Promise.all(publishers);
      await client.endAsync();
      await t.close(false);

      for (const [file, before] of [
        [cliFile, ackedBefore],
        [httpFile, ackedBeforeHttp],
      ] as const) {
        const dataDir = join(work, `restored-${file === cliFile ? 'cli' : 'http'}`);
        const restored = await runGateway(['restore', file, '--data-dir', dataDir]);
        assert.equal(restored.code, 0, restored.stderr);
        assert.match(
          restored.stdout,
          new RegExp(`restored .* \\(schema version ${MIGRATIONS.length}\\)`),
        );
        const r = await startGateway({ dataDir });
        try {
          const values = await storedValues(r, device.id);
          const missing = before.filter((i) => !values.has(i));
          assert.deepEqual(
            missing,
            [],
            `${file}: acknowledged before the backup, missing after the restore`,
          );
        } finally {
          await r.close();
        }
      }
    } finally {
      stop = true;
      await Promise.allSettled(publishers);
      client.end(true);
      await t.close();
      await rm(t.dataDir, { recursive: true, force: true });
    }
  });

  it('restore checks the file: integrity and a schema version this build knows', async (ctx) => {
    const work = await mkdtemp(join(tmpdir(), 'edge-gw-restore-'));
    ctx.after(() => rm(work, { recursive: true, force: true }));
    const dataDir = join(work, 'data');

    const garbage = join(work, 'garbage.db');
    await writeFile(garbage, Buffer.alloc(8192, 7));
    const bad = await runGateway(['restore', garbage, '--data-dir', dataDir]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /restore failed: .*(not an SQLite database|not a database)/);

    const newer = join(work, 'newer.db');
    const db = new Database(newer);
    db.exec('CREATE TABLE x (a)');
    db.pragma(`user_version = ${MIGRATIONS.length + 1}`);
    db.close();
    const tooNew = await runGateway(['restore', newer, '--data-dir', dataDir]);
    assert.equal(tooNew.code, 1);
    assert.match(tooNew.stderr, /newer than this build knows/);

    const missing = await runGateway(['restore', join(work, 'nope.db'), '--data-dir', dataDir]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no such file/);
    assert.equal(existsSync(join(dataDir, DB_FILE)), false, 'nothing was replaced');

    const usage = await runGateway(['backup']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /usage: edge-gateway backup FILE/);
  });

  it('copies the database aside before a schema migration, keeping the last 3', async (ctx) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'edge-gw-premigrate-'));
    ctx.after(() => rm(dataDir, { recursive: true, force: true }));
    const log = createLoggers('silent').db;
    const older = MIGRATIONS.length - 1;
    for (let round = 0; round < 4; round++) {
      // A database one migration behind, with a row to find in the copy.
      await rm(join(dataDir, DB_FILE), { force: true });
      const db = new Database(join(dataDir, DB_FILE));
      db.pragma('journal_mode = WAL');
      migrate(db, MIGRATIONS.slice(0, older), log);
      db.prepare(
        "INSERT INTO tenant (id, title, created_time) VALUES ('00000000-0000-4000-8000-000000000001', ?, 0)",
      ).run(`round ${round}`);
      db.close();
      const t = await startGateway({ dataDir });
      try {
        assert.ok(
          t.logs.some((l) => l.msg === 'database copied before migration'),
          'the copy is logged',
        );
      } finally {
        await t.close();
      }
    }
    const copies = (await readdir(join(dataDir, 'backups'))).sort();
    assert.equal(copies.length, 3, copies.join(', '));
    for (const f of copies)
      assert.match(
        f,
        new RegExp(`^pre-migration-\\d+T\\d+Z-v${older}-to-v${MIGRATIONS.length}\\.db$`),
      );
    // The newest copy is the last round's database as it was before the migration.
    const copy = new Database(join(dataDir, 'backups', copies[2]), { readonly: true });
    try {
      assert.equal(copy.pragma('user_version', { simple: true }), older);
      assert.equal(
        (
          copy
            .prepare("SELECT title FROM tenant WHERE id = '00000000-0000-4000-8000-000000000001'")
            .get() as { title: string }
        ).title,
        'round 3',
      );
      assert.equal(copy.pragma('integrity_check', { simple: true }), 'ok');
    } finally {
      copy.close();
    }
    // A start without a migration copies nothing.
    const t = await startGateway({ dataDir });
    await t.close();
    assert.equal((await readdir(join(dataDir, 'backups'))).length, 3);
  });
});
