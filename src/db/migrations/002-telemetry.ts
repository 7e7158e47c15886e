import type { Migration } from '../migrator.js';

/**
 * Telemetry: a key dictionary, the time series, the latest value per series and the per-chunk
 * point counts that drive ring-buffer eviction (docs/telemetry.md).
 *
 * - `ts_kv` is WITHOUT ROWID, clustered on (device_rid, key_id, ts): one B-tree, no separate
 *   index, about 30 bytes per numeric point. Exactly one of the value columns is set.
 *   `dbl_v` has REAL affinity, so integral doubles are stored as small integers on disk and
 *   still read back as REAL.
 * - `ts_kv_chunk` counts points per (device, hour chunk, key). Eviction finds the oldest chunk
 *   through `ts_kv_chunk_age` instead of a time index on `ts_kv`, which would cost ~15 bytes
 *   per point.
 * - A trigger removes a deleted device's telemetry in the same transaction as the device row.
 */
export const m002Telemetry: Migration = {
  version: 2,
  name: 'telemetry',
  up(db) {
    db.exec(`
      CREATE TABLE ts_key (
        id  INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE
      );

      CREATE TABLE ts_kv (
        device_rid INTEGER NOT NULL,
        key_id     INTEGER NOT NULL,
        ts         INTEGER NOT NULL,
        dbl_v      REAL,
        long_v     INTEGER,
        bool_v     INTEGER,
        str_v      TEXT,
        json_v     TEXT,
        PRIMARY KEY (device_rid, key_id, ts)
      ) WITHOUT ROWID;

      CREATE TABLE ts_kv_latest (
        device_rid INTEGER NOT NULL,
        key_id     INTEGER NOT NULL,
        ts         INTEGER NOT NULL,
        dbl_v      REAL,
        long_v     INTEGER,
        bool_v     INTEGER,
        str_v      TEXT,
        json_v     TEXT,
        PRIMARY KEY (device_rid, key_id)
      ) WITHOUT ROWID;

      CREATE TABLE ts_kv_chunk (
        device_rid INTEGER NOT NULL,
        chunk      INTEGER NOT NULL,
        key_id     INTEGER NOT NULL,
        points     INTEGER NOT NULL,
        PRIMARY KEY (device_rid, chunk, key_id)
      ) WITHOUT ROWID;
      CREATE INDEX ts_kv_chunk_age ON ts_kv_chunk(chunk);

      CREATE TRIGGER device_delete_telemetry AFTER DELETE ON device BEGIN
        DELETE FROM ts_kv WHERE device_rid = OLD.rid;
        DELETE FROM ts_kv_latest WHERE device_rid = OLD.rid;
        DELETE FROM ts_kv_chunk WHERE device_rid = OLD.rid;
      END;
    `);
  },
};
