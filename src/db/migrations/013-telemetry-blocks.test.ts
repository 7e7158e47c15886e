import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { pino } from 'pino';
import { decodeBlock } from '../../telemetry/telemetry-block.js';
import { migrate } from '../migrator.js';
import { openDb } from '../open.js';
import { MIGRATIONS } from './index.js';

const log = pino({ level: 'silent' });
const HOUR = 3_600_000;

it('migration 013 turns ts_kv and the stage table into blocks, the last write winning', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'edge-m013-'));
  const db = openDb({ dataDir: dir, durability: 'normal' });
  try {
    migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 13),
      log,
    );
    db.exec(`
      INSERT INTO ts_key (id, key) VALUES (1, 'a'), (2, 'b');
      INSERT INTO ts_kv (device_rid, key_id, ts, dbl_v, long_v, str_v) VALUES
        (7, 1, 1000, 1.5, NULL, NULL), (7, 1, 2000, NULL, 5, NULL), (7, 1, ${HOUR + 5}, NULL, 9223372036854775807, NULL),
        (7, 2, ${2 * HOUR}, NULL, NULL, 'x');
      INSERT INTO ts_kv_chunk (device_rid, chunk, key_id, points) VALUES (7, 0, 1, 2), (7, 1, 1, 1), (7, 2, 2, 1);
      INSERT INTO ts_kv_stage (seq, device_rid, key_id, ts, kind, v) VALUES
        (1, 7, 1, 2000, 3, 'over'), (2, 7, 2, ${2.5 * HOUR}, 2, 1);
    `);
    // Through 013 only: migration 017 renames ts_log (tested in telemetry-ring.test.ts).
    migrate(
      db,
      MIGRATIONS.filter((m) => m.version <= 13),
      log,
    );
    const byKey = new Map<number, Array<[number, string, unknown]>>();
    for (const b of db
      .prepare(
        'SELECT key_id, chunk, n, first_ts, last_ts, data FROM ts_block ORDER BY key_id, chunk',
      )
      .all() as Array<{
      key_id: number;
      chunk: number;
      n: number;
      first_ts: number;
      last_ts: number;
      data: Buffer;
    }>) {
      const points = decodeBlock(b.data);
      assert.equal(points.length, b.n);
      assert.equal(points[0].ts, b.first_ts);
      assert.equal(points[points.length - 1].ts, b.last_ts);
      for (const p of points) {
        assert.equal(Math.floor(p.ts / HOUR), b.chunk, 'one block per hour chunk');
        byKey.set(b.key_id, [...(byKey.get(b.key_id) ?? []), [p.ts, p.kind, p.value]]);
      }
    }
    assert.deepEqual(byKey.get(1), [
      [1000, 'double', 1.5],
      [2000, 'string', 'over'],
      [HOUR + 5, 'long', 9223372036854775807n],
    ]);
    assert.deepEqual(byKey.get(2), [
      [2 * HOUR, 'string', 'x'],
      [2.5 * HOUR, 'bool', true],
    ]);
    const latest = db
      .prepare('SELECT key_id, ts, bool_v, str_v FROM ts_kv_latest ORDER BY key_id')
      .all();
    assert.deepEqual(latest, [
      { key_id: 1, ts: 2000, bool_v: null, str_v: 'over' },
      { key_id: 2, ts: 2.5 * HOUR, bool_v: 1, str_v: null },
    ]);
    const tables = db
      .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE 'ts_%'")
      .pluck()
      .all();
    assert.deepEqual([...tables].sort(), ['ts_block', 'ts_key', 'ts_kv_latest', 'ts_log']);
  } finally {
    db.close();
    await rm(dir, { recursive: true, force: true });
  }
});
