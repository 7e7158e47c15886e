import type { Migration } from '../migrator.js';

/**
 * Connectors (issue 17): a Modbus master or a serial line reader, with its configuration as the
 * JSON text the administrator sent (the IoT Gateway's format for Modbus). Devices a connector
 * creates are ordinary devices; nothing here refers to them.
 */
export const m011Connectors: Migration = {
  version: 11,
  name: 'connectors',
  up(db) {
    db.exec(`
      CREATE TABLE connector (
        id            TEXT PRIMARY KEY,
        tenant_id     TEXT NOT NULL REFERENCES tenant(id),
        name          TEXT NOT NULL,
        type          TEXT NOT NULL,
        enabled       INTEGER NOT NULL,
        configuration TEXT NOT NULL,
        created_time  INTEGER NOT NULL,
        updated_time  INTEGER NOT NULL
      );
      CREATE UNIQUE INDEX connector_name ON connector(tenant_id, name);
    `);
  },
};
