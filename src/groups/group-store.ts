import type { Db } from '../db/open.js';

export const GROUP_TYPES = ['DEVICE', 'DASHBOARD', 'CUSTOMER', 'USER'] as const;
export type GroupType = (typeof GROUP_TYPES)[number];

export interface GroupRow {
  id: string;
  type: GroupType;
  name: string;
  owner_type: 'TENANT' | 'CUSTOMER';
  owner_id: string;
  created_time: number;
}

/** A share of a group containing one entity: the group's owner and the level. */
export interface ShareOfEntityRow {
  owner_type: 'TENANT' | 'CUSTOMER';
  owner_id: string;
  read_else_write: number;
}

/** SQL of the entity-group tables (migration 007); the rules are in `group-service.ts`. */
export class GroupStore {
  readonly #insert;
  readonly #get;
  readonly #delete;
  readonly #ofOwner;
  readonly #sharedWith;
  readonly #members;
  readonly #addMember;
  readonly #removeMember;
  readonly #share;
  readonly #sharesOfEntity;

  constructor(private readonly db: Db) {
    this.#insert = db.prepare<[GroupRow]>(
      `INSERT INTO entity_group (id, type, name, owner_type, owner_id, created_time)
       VALUES (@id, @type, @name, @owner_type, @owner_id, @created_time)`,
    );
    this.#get = db.prepare<[string], GroupRow>('SELECT * FROM entity_group WHERE id = ?');
    this.#delete = db.prepare<[string]>('DELETE FROM entity_group WHERE id = ?');
    this.#ofOwner = db.prepare<[string, string], GroupRow>(
      'SELECT * FROM entity_group WHERE owner_id = ? AND type = ? ORDER BY name',
    );
    this.#sharedWith = db.prepare<[string, string], GroupRow>(
      `SELECT g.* FROM entity_group g JOIN entity_group_share s ON s.group_id = g.id
       WHERE s.customer_id = ? AND g.type = ? ORDER BY g.name`,
    );
    this.#members = db.prepare<[string], { entity_id: string }>(
      'SELECT entity_id FROM entity_group_member WHERE group_id = ? ORDER BY created_time, entity_id',
    );
    this.#addMember = db.prepare<[string, string, number]>(
      'INSERT OR IGNORE INTO entity_group_member (group_id, entity_id, created_time) VALUES (?, ?, ?)',
    );
    this.#removeMember = db.prepare<[string, string]>(
      'DELETE FROM entity_group_member WHERE group_id = ? AND entity_id = ?',
    );
    this.#share = db.prepare<[string, string, number, number]>(
      `INSERT INTO entity_group_share (group_id, customer_id, read_else_write, created_time)
       VALUES (?, ?, ?, ?)
       ON CONFLICT (group_id, customer_id) DO UPDATE SET read_else_write = excluded.read_else_write`,
    );
    this.#sharesOfEntity = db.prepare<[string, string, string], ShareOfEntityRow>(
      `SELECT g.owner_type, g.owner_id, s.read_else_write
       FROM entity_group_member m
       JOIN entity_group g ON g.id = m.group_id
       JOIN entity_group_share s ON s.group_id = m.group_id
       WHERE m.entity_id = ? AND g.type = ? AND s.customer_id = ?`,
    );
  }

  insert(row: GroupRow): void {
    this.#insert.run(row);
  }

  get(id: string): GroupRow | undefined {
    return this.#get.get(id);
  }

  delete(id: string): void {
    this.#delete.run(id);
  }

  ofOwner(ownerId: string, type: GroupType): GroupRow[] {
    return this.#ofOwner.all(ownerId, type);
  }

  sharedWith(customerId: string, type: GroupType): GroupRow[] {
    return this.#sharedWith.all(customerId, type);
  }

  members(groupId: string): string[] {
    return this.#members.all(groupId).map((r) => r.entity_id);
  }

  addMembers(groupId: string, ids: readonly string[], now: number): void {
    this.db.transaction(() => {
      for (const id of ids) this.#addMember.run(groupId, id, now);
    })();
  }

  removeMembers(groupId: string, ids: readonly string[]): void {
    this.db.transaction(() => {
      for (const id of ids) this.#removeMember.run(groupId, id);
    })();
  }

  share(groupId: string, customerId: string, readElseWrite: boolean, now: number): void {
    this.#share.run(groupId, customerId, readElseWrite ? 1 : 0, now);
  }

  sharesOfEntity(entityId: string, type: GroupType, customerId: string): ShareOfEntityRow[] {
    return this.#sharesOfEntity.all(entityId, type, customerId);
  }
}
