import type { Migration } from '../migrator.js';

/**
 * Alarms (platform.md §2), their comments, the alarm engine's per-device rule state (§1.9) and
 * server-scope attributes of customers and the tenant (dynamic thresholds, §1.5).
 *
 * - `alarm`: at most one uncleared alarm per (originator, type), enforced by a partial unique
 *   index (§2.3). The originator is a device; deleting it deletes its alarms, as ThingsBoard does.
 * - `alarm_rule_state`: one row per device and profile alarm rule id, JSON state
 *   (`{eventCount, lastEventTs, duration}` per create severity and for the clear rule, plus the
 *   last evaluated data ts), written in the same transaction as the alarm change it causes.
 * - `owner_attribute_kv`: typed values like `attribute_kv`, keyed by owner entity.
 */
export const m012Alarms: Migration = {
  version: 12,
  name: 'alarms',
  up(db) {
    db.exec(`
      CREATE TABLE alarm (
        id                       TEXT PRIMARY KEY,
        created_time             INTEGER NOT NULL,
        tenant_id                TEXT NOT NULL,
        customer_id              TEXT,
        type                     TEXT NOT NULL,
        originator_type          TEXT NOT NULL DEFAULT 'DEVICE',
        originator_id            TEXT NOT NULL REFERENCES device(id) ON DELETE CASCADE,
        severity                 TEXT NOT NULL CHECK (severity IN
                                   ('CRITICAL', 'MAJOR', 'MINOR', 'WARNING', 'INDETERMINATE')),
        acknowledged             INTEGER NOT NULL DEFAULT 0,
        cleared                  INTEGER NOT NULL DEFAULT 0,
        start_ts                 INTEGER NOT NULL,
        end_ts                   INTEGER NOT NULL,
        ack_ts                   INTEGER NOT NULL DEFAULT 0,
        clear_ts                 INTEGER NOT NULL DEFAULT 0,
        assign_ts                INTEGER NOT NULL DEFAULT 0,
        assignee_id              TEXT REFERENCES user(id) ON DELETE SET NULL,
        details                  TEXT,
        propagate                INTEGER NOT NULL DEFAULT 0,
        propagate_to_owner       INTEGER NOT NULL DEFAULT 0,
        propagate_to_tenant      INTEGER NOT NULL DEFAULT 0,
        propagate_relation_types TEXT
      );
      CREATE UNIQUE INDEX alarm_one_active ON alarm(originator_id, type) WHERE cleared = 0;
      CREATE INDEX alarm_originator_created ON alarm(originator_id, created_time);
      CREATE INDEX alarm_created ON alarm(created_time);
      CREATE INDEX alarm_cleared_ts ON alarm(clear_ts) WHERE cleared = 1;

      CREATE TABLE alarm_comment (
        id           TEXT PRIMARY KEY,
        alarm_id     TEXT NOT NULL REFERENCES alarm(id) ON DELETE CASCADE,
        created_time INTEGER NOT NULL,
        user_id      TEXT,
        type         TEXT NOT NULL CHECK (type IN ('SYSTEM', 'OTHER')),
        comment      TEXT NOT NULL
      );
      CREATE INDEX alarm_comment_alarm ON alarm_comment(alarm_id, created_time);

      CREATE TABLE alarm_rule_state (
        device_id  TEXT NOT NULL REFERENCES device(id) ON DELETE CASCADE,
        rule_id    TEXT NOT NULL,
        state      TEXT NOT NULL,
        PRIMARY KEY (device_id, rule_id)
      ) WITHOUT ROWID;

      CREATE TABLE owner_attribute_kv (
        entity_type    TEXT NOT NULL CHECK (entity_type IN ('TENANT', 'CUSTOMER')),
        entity_id      TEXT NOT NULL,
        scope          TEXT NOT NULL CHECK (scope IN ('SERVER_SCOPE', 'SHARED_SCOPE')),
        key            TEXT NOT NULL,
        type           TEXT NOT NULL CHECK (type IN ('BOOLEAN', 'LONG', 'DOUBLE', 'STRING', 'JSON')),
        value,
        last_update_ts INTEGER NOT NULL,
        PRIMARY KEY (entity_type, entity_id, scope, key)
      ) WITHOUT ROWID;
    `);
  },
};
