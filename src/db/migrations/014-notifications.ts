import type { Migration } from '../migrator.js';

/**
 * The notification center (issue 14 §7-10, platform.md §8): targets, templates and rules as
 * ThingsBoard's JSON, the users' inboxes (`notification`, WEB delivery), the outbox of EMAIL,
 * SMS and webhook deliveries (written in the same commit as the alarm that caused them, STYLE
 * §12) and the system settings (`mail`, `sms`) of `/api/admin/settings/{key}`.
 */
export const m014Notifications: Migration = {
  version: 14,
  name: 'notifications',
  up(db) {
    db.exec(`
      CREATE TABLE notification_target (
        id             TEXT PRIMARY KEY,
        tenant_id      TEXT NOT NULL,
        name           TEXT NOT NULL,
        configuration  TEXT NOT NULL,
        description    TEXT,
        created_time   INTEGER NOT NULL
      );

      CREATE TABLE notification_template (
        id                 TEXT PRIMARY KEY,
        tenant_id          TEXT NOT NULL,
        name               TEXT NOT NULL,
        notification_type  TEXT NOT NULL,
        configuration      TEXT NOT NULL,
        created_time       INTEGER NOT NULL
      );

      CREATE TABLE notification_rule (
        id                 TEXT PRIMARY KEY,
        tenant_id          TEXT NOT NULL,
        name               TEXT NOT NULL,
        enabled            INTEGER NOT NULL DEFAULT 1,
        template_id        TEXT NOT NULL REFERENCES notification_template(id),
        trigger_type       TEXT NOT NULL,
        trigger_config     TEXT NOT NULL,
        recipients_config  TEXT NOT NULL,
        additional_config  TEXT,
        created_time       INTEGER NOT NULL
      );

      CREATE TABLE notification (
        rid            INTEGER PRIMARY KEY,
        id             TEXT NOT NULL UNIQUE,
        recipient_id   TEXT NOT NULL,
        rule_id        TEXT,
        type           TEXT NOT NULL,
        subject        TEXT,
        text           TEXT NOT NULL,
        info           TEXT,
        status         TEXT NOT NULL CHECK (status IN ('SENT', 'READ')),
        created_time   INTEGER NOT NULL
      );
      CREATE INDEX notification_recipient ON notification(recipient_id, rid);
      CREATE INDEX notification_unread ON notification(recipient_id) WHERE status = 'SENT';

      CREATE TABLE notification_outbox (
        rid            INTEGER PRIMARY KEY,
        id             TEXT NOT NULL UNIQUE,
        method         TEXT NOT NULL,
        channel        TEXT NOT NULL,
        recipient      TEXT NOT NULL,
        rule_id        TEXT,
        alarm_id       TEXT,
        clear_statuses TEXT,
        payload        TEXT NOT NULL,
        status         TEXT NOT NULL CHECK (status IN ('PENDING', 'SENT', 'FAILED', 'CANCELLED')),
        attempts       INTEGER NOT NULL DEFAULT 0,
        next_at        INTEGER NOT NULL,
        last_error     TEXT,
        history        TEXT NOT NULL DEFAULT '[]',
        created_time   INTEGER NOT NULL,
        done_time      INTEGER
      );
      CREATE INDEX notification_outbox_due ON notification_outbox(next_at, rid)
        WHERE status = 'PENDING';

      CREATE TABLE admin_settings (
        key         TEXT PRIMARY KEY,
        json_value  TEXT NOT NULL,
        updated     INTEGER NOT NULL
      );
    `);
  },
};
