import type { Migration } from '../migrator.js';

/**
 * Tenant, customers, users, device profiles, devices and credentials. Devices keep an integer
 * `rid` besides their UUID so that high-volume tables (telemetry) reference them compactly.
 */
export const m001Initial: Migration = {
  version: 1,
  name: 'initial',
  up(db) {
    db.exec(`
      CREATE TABLE setting (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
      ) WITHOUT ROWID;

      CREATE TABLE tenant (
        id           TEXT PRIMARY KEY,
        title        TEXT NOT NULL,
        created_time INTEGER NOT NULL
      );

      CREATE TABLE customer (
        id              TEXT PRIMARY KEY,
        tenant_id       TEXT NOT NULL REFERENCES tenant(id),
        title           TEXT NOT NULL UNIQUE,
        email           TEXT,
        additional_info TEXT,
        created_time    INTEGER NOT NULL
      );

      CREATE TABLE user (
        id              TEXT PRIMARY KEY,
        tenant_id       TEXT NOT NULL REFERENCES tenant(id),
        customer_id     TEXT REFERENCES customer(id) ON DELETE CASCADE,
        email           TEXT NOT NULL UNIQUE,
        authority       TEXT NOT NULL CHECK (authority IN ('TENANT_ADMIN', 'CUSTOMER_USER')),
        first_name      TEXT,
        last_name       TEXT,
        password_hash   TEXT,
        enabled         INTEGER NOT NULL DEFAULT 1,
        additional_info TEXT,
        created_time    INTEGER NOT NULL
      );

      CREATE TABLE device_profile (
        id                      TEXT PRIMARY KEY,
        tenant_id               TEXT NOT NULL REFERENCES tenant(id),
        name                    TEXT NOT NULL UNIQUE,
        description             TEXT,
        type                    TEXT NOT NULL DEFAULT 'DEFAULT',
        transport_type          TEXT NOT NULL DEFAULT 'DEFAULT',
        provision_type          TEXT NOT NULL DEFAULT 'DISABLED',
        provision_device_key    TEXT UNIQUE,
        provision_device_secret TEXT,
        is_default              INTEGER NOT NULL DEFAULT 0,
        profile_data            TEXT NOT NULL,
        created_time            INTEGER NOT NULL
      );
      CREATE UNIQUE INDEX device_profile_one_default ON device_profile(is_default) WHERE is_default = 1;

      CREATE TABLE device (
        rid               INTEGER PRIMARY KEY,
        id                TEXT NOT NULL UNIQUE,
        tenant_id         TEXT NOT NULL REFERENCES tenant(id),
        customer_id       TEXT REFERENCES customer(id) ON DELETE SET NULL,
        name              TEXT NOT NULL UNIQUE,
        label             TEXT,
        device_profile_id TEXT NOT NULL REFERENCES device_profile(id),
        additional_info   TEXT,
        created_time      INTEGER NOT NULL,
        version           INTEGER NOT NULL DEFAULT 1
      );
      CREATE INDEX device_customer ON device(customer_id);
      CREATE INDEX device_profile_idx ON device(device_profile_id);
      CREATE INDEX device_created ON device(created_time);

      CREATE TABLE device_credentials (
        id                TEXT PRIMARY KEY,
        device_rid        INTEGER NOT NULL UNIQUE REFERENCES device(rid) ON DELETE CASCADE,
        credentials_type  TEXT NOT NULL,
        credentials_id    TEXT NOT NULL UNIQUE,
        credentials_value TEXT,
        created_time      INTEGER NOT NULL
      );
    `);
  },
};
