import type { Migration } from '../migrator.js';

/**
 * Customers and users as ThingsBoard shows them, user activation/reset tokens and the audit log.
 *
 * - `customer` gains ThingsBoard's contact fields and an optimistic-locking `version`.
 * - `user` gains `phone` and `version`. A user with `password_hash IS NULL` is not activated yet.
 * - `user_token`: activation and password-reset tokens, stored as sha256 hex only (a database copy
 *   does not give working links). At most one token per user and kind.
 * - `audit_log`: security events (platform reference §0 ids; ThingsBoard ActionType names). The
 *   integer rowid keeps it append-only and lets the service prune the oldest rows cheaply.
 */
export const m005CustomersUsers: Migration = {
  version: 5,
  name: 'customers-users',
  up(db) {
    db.exec(`
      ALTER TABLE customer ADD COLUMN phone TEXT;
      ALTER TABLE customer ADD COLUMN country TEXT;
      ALTER TABLE customer ADD COLUMN state TEXT;
      ALTER TABLE customer ADD COLUMN city TEXT;
      ALTER TABLE customer ADD COLUMN address TEXT;
      ALTER TABLE customer ADD COLUMN address2 TEXT;
      ALTER TABLE customer ADD COLUMN zip TEXT;
      ALTER TABLE customer ADD COLUMN external_id TEXT;
      ALTER TABLE customer ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
      CREATE INDEX customer_created ON customer(created_time);

      ALTER TABLE user ADD COLUMN phone TEXT;
      ALTER TABLE user ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
      CREATE INDEX user_customer ON user(customer_id);
      CREATE INDEX user_created ON user(created_time);

      CREATE TABLE user_token (
        token_hash   TEXT PRIMARY KEY,
        user_id      TEXT NOT NULL REFERENCES user(id) ON DELETE CASCADE,
        kind         TEXT NOT NULL CHECK (kind IN ('ACTIVATE', 'RESET')),
        expires_at   INTEGER NOT NULL,
        created_time INTEGER NOT NULL,
        UNIQUE (user_id, kind)
      ) WITHOUT ROWID;

      CREATE TABLE audit_log (
        rid                    INTEGER PRIMARY KEY,
        id                     TEXT NOT NULL UNIQUE,
        created_time           INTEGER NOT NULL,
        tenant_id              TEXT NOT NULL,
        customer_id            TEXT,
        entity_type            TEXT,
        entity_id              TEXT,
        entity_name            TEXT,
        user_id                TEXT,
        user_name              TEXT,
        action_type            TEXT NOT NULL,
        action_data            TEXT,
        action_status          TEXT NOT NULL CHECK (action_status IN ('SUCCESS', 'FAILURE')),
        action_failure_details TEXT
      );
      CREATE INDEX audit_log_created ON audit_log(created_time);
    `);
  },
};
