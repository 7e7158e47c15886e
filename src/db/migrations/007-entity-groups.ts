import type { Migration } from '../migrator.js';

/**
 * Entity groups and their sharing (platform.md §6.3).
 *
 * - `entity_group`: custom groups only. The `All` group of each owner and type is virtual, computed
 *   from ownership, so there are no rows to keep in sync when entities are created, deleted or
 *   change owner.
 * - `entity_group_member`: entity ids of one group; the entity type is the group's type. No
 *   foreign key to the entity (four tables): readers skip ids that no longer exist.
 * - `entity_group_share`: a group shared with all users of a customer, read-only
 *   (`read_else_write` 1) or for writing (0). Deleting the group or the customer removes it.
 */
export const m007EntityGroups: Migration = {
  version: 7,
  name: 'entity-groups',
  up(db) {
    db.exec(`
      CREATE TABLE entity_group (
        id            TEXT PRIMARY KEY,
        type          TEXT NOT NULL CHECK (type IN ('DEVICE', 'DASHBOARD', 'CUSTOMER', 'USER')),
        name          TEXT NOT NULL,
        owner_type    TEXT NOT NULL CHECK (owner_type IN ('TENANT', 'CUSTOMER')),
        owner_id      TEXT NOT NULL,
        created_time  INTEGER NOT NULL,
        UNIQUE (owner_id, type, name)
      );

      CREATE TABLE entity_group_member (
        group_id      TEXT NOT NULL REFERENCES entity_group(id) ON DELETE CASCADE,
        entity_id     TEXT NOT NULL,
        created_time  INTEGER NOT NULL,
        PRIMARY KEY (group_id, entity_id)
      ) WITHOUT ROWID;
      CREATE INDEX entity_group_member_entity ON entity_group_member(entity_id, group_id);

      CREATE TABLE entity_group_share (
        group_id        TEXT NOT NULL REFERENCES entity_group(id) ON DELETE CASCADE,
        customer_id     TEXT NOT NULL REFERENCES customer(id) ON DELETE CASCADE,
        read_else_write INTEGER NOT NULL,
        created_time    INTEGER NOT NULL,
        PRIMARY KEY (group_id, customer_id)
      ) WITHOUT ROWID;
      CREATE INDEX entity_group_share_customer ON entity_group_share(customer_id, group_id);
    `);
  },
};
