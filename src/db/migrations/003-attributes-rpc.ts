import type { Migration } from '../migrator.js';

/**
 * Attributes (three scopes per device, typed values) and persistent server-side RPC.
 * `attribute_kv.value` has no declared type so SQLite keeps each value's own storage class;
 * `type` says how to read it back. RPC rows keep the per-device integer `request_id` the device
 * saw, so a reply after a restart still finds its request.
 */
export const m003AttributesRpc: Migration = {
  version: 3,
  name: 'attributes-rpc',
  up(db) {
    db.exec(`
      CREATE TABLE attribute_kv (
        device_rid     INTEGER NOT NULL REFERENCES device(rid) ON DELETE CASCADE,
        scope          TEXT NOT NULL CHECK (scope IN ('CLIENT_SCOPE', 'SHARED_SCOPE', 'SERVER_SCOPE')),
        key            TEXT NOT NULL,
        type           TEXT NOT NULL CHECK (type IN ('BOOLEAN', 'LONG', 'DOUBLE', 'STRING', 'JSON')),
        value,
        last_update_ts INTEGER NOT NULL,
        PRIMARY KEY (device_rid, scope, key)
      ) WITHOUT ROWID;

      CREATE TABLE rpc (
        id              TEXT PRIMARY KEY,
        device_rid      INTEGER NOT NULL REFERENCES device(rid) ON DELETE CASCADE,
        request_id      INTEGER NOT NULL,
        oneway          INTEGER NOT NULL,
        method          TEXT NOT NULL,
        params          TEXT NOT NULL,
        status          TEXT NOT NULL CHECK (status IN
                          ('QUEUED', 'SENT', 'DELIVERED', 'SUCCESSFUL', 'TIMEOUT', 'EXPIRED', 'FAILED', 'DELETED')),
        expiration_time INTEGER NOT NULL,
        retries         INTEGER,
        response        TEXT,
        additional_info TEXT,
        created_time    INTEGER NOT NULL
      );
      CREATE INDEX rpc_device_status ON rpc(device_rid, status);
      CREATE INDEX rpc_device_request ON rpc(device_rid, request_id);
    `);
  },
};
