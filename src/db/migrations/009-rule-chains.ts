import type { Migration } from '../migrator.js';

/**
 * Rule chains (rule-engine reference §1): one row per chain, its nodes and connections as the
 * JSON arrays of ThingsBoard's `RuleChainMetaData` (node ids inside). A chain is always read and
 * written whole, so the nodes need no table of their own. At most one root chain per type.
 */
export const m009RuleChains: Migration = {
  version: 9,
  name: 'rule-chains',
  up(db) {
    db.exec(`
      CREATE TABLE rule_chain (
        id                TEXT PRIMARY KEY,
        tenant_id         TEXT NOT NULL,
        name              TEXT NOT NULL,
        type              TEXT NOT NULL CHECK (type IN ('CORE', 'EDGE')),
        root              INTEGER NOT NULL DEFAULT 0,
        debug_mode        INTEGER NOT NULL DEFAULT 0,
        configuration     TEXT,
        additional_info   TEXT,
        first_node_index  INTEGER,
        nodes             TEXT NOT NULL DEFAULT '[]',
        connections       TEXT NOT NULL DEFAULT '[]',
        created_time      INTEGER NOT NULL,
        version           INTEGER NOT NULL DEFAULT 1
      );
      CREATE UNIQUE INDEX rule_chain_root ON rule_chain(tenant_id, type) WHERE root = 1;
      CREATE INDEX rule_chain_name ON rule_chain(tenant_id, name);
    `);
  },
};
