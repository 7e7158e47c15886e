import type { Migration } from '../migrator.js';

/**
 * Device claiming, provisioning state and OTA packages.
 *
 * - `device_claim`: the device side of a claim (one pending claim per device). The customer side
 *   (users issue) reads it, checks `device.customer_id IS NULL`, assigns and deletes the row.
 * - `device_provision`: devices that completed provisioning (ThingsBoard keeps this as the server
 *   attribute `provisionState = "provisioned"`).
 * - `ota_package`: package info plus the file as a BLOB; devices and profiles point at a package
 *   through `firmware_id` / `software_id`.
 * - `device_ota_state`: per device and package type, the package whose `fw_*`/`sw_*` shared
 *   attributes were last written and the latest state the device reported (`fw_state`).
 */
export const m004ClaimProvisionOta: Migration = {
  version: 4,
  name: 'claim-provision-ota',
  up(db) {
    db.exec(`
      CREATE TABLE device_claim (
        device_rid      INTEGER PRIMARY KEY REFERENCES device(rid) ON DELETE CASCADE,
        secret_key      TEXT NOT NULL,
        expiration_time INTEGER NOT NULL,
        created_time    INTEGER NOT NULL
      );

      CREATE TABLE device_provision (
        device_rid   INTEGER PRIMARY KEY REFERENCES device(rid) ON DELETE CASCADE,
        state        TEXT NOT NULL,
        profile_id   TEXT NOT NULL,
        created_time INTEGER NOT NULL
      );

      CREATE TABLE ota_package (
        id                 TEXT PRIMARY KEY,
        tenant_id          TEXT NOT NULL REFERENCES tenant(id),
        device_profile_id  TEXT NOT NULL REFERENCES device_profile(id),
        type               TEXT NOT NULL CHECK (type IN ('FIRMWARE', 'SOFTWARE')),
        title              TEXT NOT NULL,
        version            TEXT NOT NULL,
        tag                TEXT,
        url                TEXT,
        file_name          TEXT,
        content_type       TEXT,
        checksum_algorithm TEXT,
        checksum           TEXT,
        data_size          INTEGER,
        data               BLOB,
        additional_info    TEXT,
        created_time       INTEGER NOT NULL,
        UNIQUE (type, title, version)
      );
      CREATE INDEX ota_package_profile ON ota_package(device_profile_id, type);

      ALTER TABLE device ADD COLUMN firmware_id TEXT REFERENCES ota_package(id);
      ALTER TABLE device ADD COLUMN software_id TEXT REFERENCES ota_package(id);
      ALTER TABLE device_profile ADD COLUMN firmware_id TEXT REFERENCES ota_package(id);
      ALTER TABLE device_profile ADD COLUMN software_id TEXT REFERENCES ota_package(id);
      CREATE INDEX device_firmware ON device(firmware_id);
      CREATE INDEX device_software ON device(software_id);

      CREATE TABLE device_ota_state (
        device_rid  INTEGER NOT NULL REFERENCES device(rid) ON DELETE CASCADE,
        type        TEXT NOT NULL CHECK (type IN ('FIRMWARE', 'SOFTWARE')),
        package_id  TEXT,
        state       TEXT,
        state_ts    INTEGER,
        error       TEXT,
        PRIMARY KEY (device_rid, type)
      ) WITHOUT ROWID;
    `);
  },
};
