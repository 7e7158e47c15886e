import type { Migration } from '../migrator.js';

/**
 * Upstream sync (docs/upstream.md): the outbox of messages for the cloud, written in the same
 * commit as the data they carry, and what the cloud refused.
 *
 * - `upstream_outbox`: one row per message (a device's telemetry payload or client attributes),
 *   `seq` the send order; `kind` 1 telemetry (`data` the gateway API's array
 *   `[{"ts","values"}]`), 2 attributes (`data` an object), 3 claim. A row is deleted once the
 *   cloud's PUBACK for the publish that carried it arrives (rows of a deleted device are dropped).
 * - `upstream_rejected`: messages the cloud refused more than the retry bound, set aside with
 *   the reason (readable over REST), bounded by the service.
 * - `upstream_counter`: totals kept across restarts (sent, dropped at the bound, rejected).
 */
export const m016Upstream: Migration = {
  version: 16,
  name: 'upstream',
  up(db) {
    db.exec(`
      CREATE TABLE upstream_outbox (
        seq  INTEGER PRIMARY KEY AUTOINCREMENT,
        rid  INTEGER NOT NULL,
        kind INTEGER NOT NULL,
        ts   INTEGER NOT NULL,
        data TEXT NOT NULL
      );
      CREATE TABLE upstream_rejected (
        id          INTEGER PRIMARY KEY,
        device_name TEXT NOT NULL,
        kind        INTEGER NOT NULL,
        ts          INTEGER NOT NULL,
        data        TEXT NOT NULL,
        reason      TEXT NOT NULL,
        rejected_ts INTEGER NOT NULL
      );
      CREATE TABLE upstream_counter (
        name  TEXT PRIMARY KEY,
        value INTEGER NOT NULL
      ) WITHOUT ROWID;
      INSERT INTO upstream_counter (name, value)
        VALUES ('sent', 0), ('dropped', 0), ('rejected', 0);
    `);
  },
};
