import type { Migration } from '../migrator.js';

/** A device profile's `defaultRuleChainId` (issue 14 §3): its devices' messages go to that chain. */
export const m015ProfileRuleChain: Migration = {
  version: 15,
  name: 'profile-rule-chain',
  up(db) {
    db.exec('ALTER TABLE device_profile ADD COLUMN default_rule_chain_id TEXT');
  },
};
