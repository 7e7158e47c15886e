import { encodeBlock } from '../../telemetry/telemetry-block.js';
import { decode, type StoredValue, type ValueRow } from '../../telemetry/telemetry-store.js';
import type { Migration } from '../migrator.js';

const CHUNK_MS = 3_600_000;

/**
 * Telemetry as a durable log and compressed blocks (issue 19, docs/telemetry.md).
 *
 * - `ts_log`: one row per device per commit (a compact record of its points), appended at the
 *   end of one B-tree, no secondary index. The open range of every series is rebuilt from it
 *   at start.
 * - `ts_block`: closed ranges, one compressed block per (seal, device, key, hour chunk). The
 *   key starts with the seal's segment id, so a seal appends its blocks at the end of the
 *   B-tree instead of rewriting one page per series. `ts_block_age` finds the oldest chunk for
 *   eviction.
 *
 * Existing data is converted: staged points are merged into `ts_kv` as the old code's exact
 * move did (the last written wins), then `ts_kv` is encoded into blocks (segment 0), and the
 * row tables are dropped. `ts_kv_latest` stays as it is.
 */
export const m013TelemetryBlocks: Migration = {
  version: 13,
  name: 'telemetry-blocks',
  up(db) {
    db.exec(`
      CREATE TABLE ts_log (
        seq        INTEGER PRIMARY KEY,
        device_rid INTEGER NOT NULL,
        data       BLOB NOT NULL
      );

      CREATE TABLE ts_block (
        seg        INTEGER NOT NULL,
        device_rid INTEGER NOT NULL,
        key_id     INTEGER NOT NULL,
        chunk      INTEGER NOT NULL,
        n          INTEGER NOT NULL,
        first_ts   INTEGER NOT NULL,
        last_ts    INTEGER NOT NULL,
        data       BLOB NOT NULL,
        PRIMARY KEY (seg, device_rid, key_id, chunk)
      ) WITHOUT ROWID;
      CREATE INDEX ts_block_age ON ts_block(chunk);
    `);
    const staged = `device_rid, key_id, ts, CASE kind WHEN 0 THEN v END, CASE kind WHEN 1 THEN v END,
      CASE kind WHEN 2 THEN v END, CASE kind WHEN 3 THEN v END, CASE kind WHEN 4 THEN v END`;
    const values = 'ts, dbl_v, long_v, bool_v, str_v, json_v';
    const set = `dbl_v = excluded.dbl_v, long_v = excluded.long_v, bool_v = excluded.bool_v,
      str_v = excluded.str_v, json_v = excluded.json_v`;
    db.exec(`
      INSERT INTO ts_kv (device_rid, key_id, ${values})
        SELECT ${staged} FROM ts_kv_stage ORDER BY device_rid, key_id, ts, seq
        ON CONFLICT (device_rid, key_id, ts) DO UPDATE SET ${set};
      INSERT INTO ts_kv_latest (device_rid, key_id, ${values})
        SELECT ${staged} FROM (
          SELECT *, row_number() OVER (PARTITION BY device_rid, key_id ORDER BY ts DESC, seq DESC) AS r
          FROM ts_kv_stage) WHERE r = 1
        ON CONFLICT (device_rid, key_id) DO UPDATE SET ts = excluded.ts, ${set}
        WHERE excluded.ts >= ts_kv_latest.ts;
    `);
    const insert = db.prepare(
      `INSERT INTO ts_block (seg, device_rid, key_id, chunk, n, first_ts, last_ts, data)
       VALUES (0, ?, ?, ?, ?, ?, ?, ?)`,
    );
    let run: StoredValue[] = [];
    let at = { rid: -1, key: -1, chunk: -1 };
    const flush = () => {
      if (run.length === 0) return;
      insert.run(
        at.rid,
        at.key,
        at.chunk,
        run.length,
        run[0].ts,
        run[run.length - 1].ts,
        encodeBlock(run),
      );
      run = [];
    };
    // Pages in primary-key order (a statement cannot stay open while the blocks are inserted).
    const page = db
      .prepare(
        `SELECT device_rid AS rid, key_id AS key, ${values} FROM ts_kv
         WHERE (device_rid, key_id, ts) > (?, ?, ?) ORDER BY device_rid, key_id, ts LIMIT 50000`,
      )
      .safeIntegers(true);
    let after: [bigint, bigint, bigint] = [-1n, -1n, -1n];
    for (;;) {
      const rows = page.all(...after) as Array<ValueRow & { rid: bigint; key: bigint }>;
      if (rows.length === 0) break;
      for (const r of rows) {
        const v = decode(r);
        const rid = Number(r.rid);
        const key = Number(r.key);
        const chunk = Math.floor(v.ts / CHUNK_MS);
        if (rid !== at.rid || key !== at.key || chunk !== at.chunk) {
          flush();
          at = { rid, key, chunk };
        }
        run.push(v);
      }
      const last = rows[rows.length - 1];
      after = [last.rid, last.key, last.ts];
    }
    flush();
    db.exec(`
      DROP TRIGGER device_delete_telemetry;
      DROP TABLE ts_kv_stage;
      DROP TABLE ts_kv;
      DROP TABLE ts_kv_chunk;
      CREATE TRIGGER device_delete_telemetry AFTER DELETE ON device BEGIN
        DELETE FROM ts_log WHERE device_rid = OLD.rid;
        DELETE FROM ts_block WHERE device_rid = OLD.rid;
        DELETE FROM ts_kv_latest WHERE device_rid = OLD.rid;
      END;
    `);
  },
};
