import type { Migration } from '../migrator.js';

/**
 * Ad-hoc notification requests (`POST /api/notification/request`, issue 14 §7) are kept so that
 * `GET /api/notification/requests` and `GET|DELETE /api/notification/request/{id}` can show and
 * remove them, as ThingsBoard's `NotificationRequestInfo`. A bounded table: past
 * `EDGE_NOTIFY_REQUESTS_MAX` the oldest row goes (counted). Inbox entries and outbox rows carry
 * the request's id, so its status and per-method stats follow its deliveries, and deleting it
 * removes its inbox entries and cancels what is still undelivered.
 */
export const m018NotificationRequests: Migration = {
  version: 18,
  name: 'notification-requests',
  up(db) {
    db.exec(`
      CREATE TABLE notification_request (
        rid               INTEGER PRIMARY KEY,
        id                TEXT NOT NULL UNIQUE,
        tenant_id         TEXT NOT NULL,
        template_id       TEXT,
        template_name     TEXT,
        template          TEXT,
        targets           TEXT NOT NULL,
        info              TEXT,
        delivery_methods  TEXT NOT NULL,
        sender_id         TEXT,
        sending_delay_sec INTEGER NOT NULL DEFAULT 0,
        stats             TEXT NOT NULL,
        created_time      INTEGER NOT NULL
      );
      ALTER TABLE notification ADD COLUMN request_id TEXT;
      ALTER TABLE notification_outbox ADD COLUMN request_id TEXT;
      CREATE INDEX notification_by_request ON notification(request_id)
        WHERE request_id IS NOT NULL;
      CREATE INDEX notification_outbox_by_request ON notification_outbox(request_id, status)
        WHERE request_id IS NOT NULL;
    `);
  },
};
