import type { Migration } from '../migrator.js';

/**
 * User schedules (issue 14 §11, ThingsBoard PE's scheduler events): the event as sent, its
 * `schedule` and `configuration` as JSON text. Runs are not recorded: a run missed while the
 * gateway was down is not replayed.
 */
export const m010SchedulerEvents: Migration = {
  version: 10,
  name: 'scheduler-events',
  up(db) {
    db.exec(`
      CREATE TABLE scheduler_event (
        id               TEXT PRIMARY KEY,
        tenant_id        TEXT NOT NULL,
        name             TEXT NOT NULL,
        type             TEXT NOT NULL,
        schedule         TEXT NOT NULL,
        configuration    TEXT NOT NULL,
        additional_info  TEXT,
        enabled          INTEGER NOT NULL DEFAULT 1,
        created_time     INTEGER NOT NULL,
        version          INTEGER NOT NULL DEFAULT 1
      );
    `);
  },
};
