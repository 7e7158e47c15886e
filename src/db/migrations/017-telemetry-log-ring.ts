import type { Migration } from '../migrator.js';

/**
 * The durable telemetry log as a ring rewritten in place (issue 19, docs/telemetry.md "The log
 * ring", `src/telemetry/telemetry-ring.ts`).
 *
 * - `ts_ring`: the slots, one row each, every blob of the same size; the store preallocates them
 *   at start (their number follows the open range's bound) and then only updates them.
 * - `ts_ring_tail`: the oldest seq a seal still needs (slots below it are free).
 * - `ts_log` becomes `ts_log_spill`: one row per message, as before, for a commit that does not
 *   fit the free ring; its rows keep their seq (the ring's seqs continue after them). The
 *   device delete trigger follows the rename.
 */
export const m017TelemetryLogRing: Migration = {
  version: 17,
  name: 'telemetry-log-ring',
  up(db) {
    db.exec(`
      ALTER TABLE ts_log RENAME TO ts_log_spill;
      CREATE TABLE ts_ring (
        slot INTEGER PRIMARY KEY,
        data BLOB NOT NULL
      );
      CREATE TABLE ts_ring_tail (
        id  INTEGER PRIMARY KEY CHECK (id = 1),
        seq INTEGER NOT NULL
      );
      INSERT INTO ts_ring_tail (id, seq) VALUES (1, 0);
    `);
  },
};
