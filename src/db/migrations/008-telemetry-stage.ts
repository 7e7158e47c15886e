import type { Migration } from '../migrator.js';

/**
 * Telemetry staging (docs/telemetry.md, "Write path").
 *
 * `ts_kv_stage` is an append-only rowid table: a group commit appends its points at the end of
 * one B-tree, so it writes a few pages however many series the batch touches (a commit straight
 * into `ts_kv` rewrites one leaf page per series: ~200 pages for 150 points). Staged points are
 * moved into `ts_kv` in larger batches, off the acknowledgement path, and before any read of
 * `ts_kv`. `kind` is the value type (0 double, 1 long, 2 bool, 3 string, 4 JSON); `v` has no
 * type affinity, so values keep the storage class they were bound with.
 *
 * The device-delete trigger is recreated to clear the device's staged points as well.
 */
export const m008TelemetryStage: Migration = {
  version: 8,
  name: 'telemetry-stage',
  up(db) {
    db.exec(`
      CREATE TABLE ts_kv_stage (
        seq        INTEGER PRIMARY KEY,
        device_rid INTEGER NOT NULL,
        key_id     INTEGER NOT NULL,
        ts         INTEGER NOT NULL,
        kind       INTEGER NOT NULL,
        v
      );

      DROP TRIGGER device_delete_telemetry;
      CREATE TRIGGER device_delete_telemetry AFTER DELETE ON device BEGIN
        DELETE FROM ts_kv_stage WHERE device_rid = OLD.rid;
        DELETE FROM ts_kv WHERE device_rid = OLD.rid;
        DELETE FROM ts_kv_latest WHERE device_rid = OLD.rid;
        DELETE FROM ts_kv_chunk WHERE device_rid = OLD.rid;
      END;
    `);
  },
};
