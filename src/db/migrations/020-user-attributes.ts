import type { Migration } from '../migrator.js';

/**
 * Users get attributes, as every ThingsBoard entity has (platform.md §3.8, `USER`): a dashboard's
 * key filters read the signed-in user's with `CURRENT_USER` (docs/websocket.md).
 *
 * - `owner_attribute_kv` is rebuilt with `USER` in its `entity_type` CHECK (SQLite cannot alter a
 *   CHECK); every stored row is copied as it is.
 * - Deleting a user deletes its attributes, and deleting a customer its customer's attributes.
 *   Triggers, because users also go by `ON DELETE CASCADE` when their customer is deleted, which
 *   no service code sees.
 */
export const m020UserAttributes: Migration = {
  version: 20,
  name: 'user-attributes',
  up(db) {
    db.exec(`
      CREATE TABLE owner_attribute_kv_new (
        entity_type    TEXT NOT NULL CHECK (entity_type IN ('TENANT', 'CUSTOMER', 'USER')),
        entity_id      TEXT NOT NULL,
        scope          TEXT NOT NULL CHECK (scope IN ('SERVER_SCOPE', 'SHARED_SCOPE')),
        key            TEXT NOT NULL,
        type           TEXT NOT NULL CHECK (type IN ('BOOLEAN', 'LONG', 'DOUBLE', 'STRING', 'JSON')),
        value,
        last_update_ts INTEGER NOT NULL,
        PRIMARY KEY (entity_type, entity_id, scope, key)
      ) WITHOUT ROWID;
      INSERT INTO owner_attribute_kv_new
        (entity_type, entity_id, scope, key, type, value, last_update_ts)
        SELECT entity_type, entity_id, scope, key, type, value, last_update_ts
        FROM owner_attribute_kv;
      DROP TABLE owner_attribute_kv;
      ALTER TABLE owner_attribute_kv_new RENAME TO owner_attribute_kv;

      CREATE TRIGGER user_attributes_deleted AFTER DELETE ON user BEGIN
        DELETE FROM owner_attribute_kv WHERE entity_type = 'USER' AND entity_id = old.id;
      END;
      CREATE TRIGGER customer_attributes_deleted AFTER DELETE ON customer BEGIN
        DELETE FROM owner_attribute_kv WHERE entity_type = 'CUSTOMER' AND entity_id = old.id;
      END;
    `);
  },
};
