import type { Db } from '../db/open.js';
import type { GroupType } from './group-store.js';

type OwnerStatement = ReturnType<typeof ownerStatement>;
type OwnedStatement = ReturnType<typeof ownedStatement>;

function ownerStatement(db: Db, sql: string) {
  return db.prepare<[string], { owner: string | null }>(sql);
}

function ownedStatement(db: Db, sql: string) {
  return db.prepare<[string | null], { id: string }>(sql);
}

/**
 * Who owns an entity of a group type, and what one owner owns: what the virtual `All` groups and
 * the "members belong to the group owner" rule are computed from. `null` is the tenant.
 *
 * @NOTE: read-only queries on owner columns of tables other domains own (device, user, customer,
 * dashboard). Going through four services would need a page walk for each `All` listing; these
 * statements only read, and a schema change of those columns must update them.
 * Dashboards and customers have no owner column here: the tenant owns them all (a dashboard
 * "owned" by a customer through owner change is a tenant dashboard assigned to it).
 */
export class EntityOwners {
  readonly #owner: Record<GroupType, OwnerStatement>;
  readonly #owned: Record<GroupType, OwnedStatement>;

  constructor(db: Db) {
    this.#owner = {
      DEVICE: ownerStatement(db, 'SELECT customer_id AS owner FROM device WHERE id = ?'),
      USER: ownerStatement(db, 'SELECT customer_id AS owner FROM user WHERE id = ?'),
      CUSTOMER: ownerStatement(db, 'SELECT NULL AS owner FROM customer WHERE id = ?'),
      DASHBOARD: ownerStatement(db, 'SELECT NULL AS owner FROM dashboard WHERE id = ?'),
    };
    this.#owned = {
      DEVICE: ownedStatement(
        db,
        'SELECT id FROM device WHERE customer_id IS ? ORDER BY created_time, id',
      ),
      USER: ownedStatement(
        db,
        'SELECT id FROM user WHERE customer_id IS ? ORDER BY created_time, id',
      ),
      CUSTOMER: ownedStatement(
        db,
        'SELECT id FROM customer WHERE ? IS NULL ORDER BY created_time, id',
      ),
      DASHBOARD: ownedStatement(
        db,
        'SELECT id FROM dashboard WHERE ? IS NULL ORDER BY created_time, id',
      ),
    };
  }

  /** The owner's customer id (null = tenant), or undefined when no such entity exists. */
  ownerOf(type: GroupType, id: string): string | null | undefined {
    const row = this.#owner[type].get(id);
    return row ? row.owner : undefined;
  }

  /** Ids of the entities of `type` that `customerId` (null = tenant) owns: its `All` group. */
  owned(type: GroupType, customerId: string | null): string[] {
    return this.#owned[type].all(customerId).map((r) => r.id);
  }
}
