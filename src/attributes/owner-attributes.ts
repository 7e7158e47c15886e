import type { Db } from '../db/open.js';
import type { EventBus } from '../events.js';
import type { EntityRef, MsgType } from '../messages/types.js';
import { type AttributeRow, decode, encode } from './attribute-store.js';
import type { KvType, KvValue, TypedAttributeKv } from './types.js';

/** The entities that have attributes besides devices: the tenant, its customers and users. */
export type OwnerType = 'CUSTOMER' | 'TENANT' | 'USER';
export type OwnerScope = 'SERVER_SCOPE' | 'SHARED_SCOPE';

/**
 * Server- and shared-scope attributes of customers, the tenant and users (ThingsBoard keeps
 * attributes on every entity). Alarm rules read them as dynamic thresholds (`CURRENT_CUSTOMER`,
 * `CURRENT_TENANT`, platform.md §1.5), dashboard key filters also the user's (`CURRENT_USER`).
 * Saves commit, then `ownerAttributes.updated` goes out. A deleted user or customer takes its
 * attributes along (triggers of migration 020).
 */
export class OwnerAttributeService {
  readonly #upsert;
  readonly #select;
  readonly #delete;
  readonly #saveAll;

  constructor(
    private readonly deps: {
      db: Db;
      bus: EventBus;
      /** After commit: the `ATTRIBUTES_UPDATED`/`ATTRIBUTES_DELETED` message of the change. */
      submit?: (msg: {
        type: MsgType;
        originator: EntityRef;
        metadata: Record<string, string>;
        data: unknown;
      }) => void;
      now?: () => number;
    },
  ) {
    const { db } = deps;
    this.#upsert = db.prepare<[OwnerType, string, OwnerScope, string, KvType, unknown, number]>(
      `INSERT INTO owner_attribute_kv (entity_type, entity_id, scope, key, type, value, last_update_ts)
       VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (entity_type, entity_id, scope, key)
       DO UPDATE SET type = excluded.type, value = excluded.value, last_update_ts = excluded.last_update_ts`,
    );
    this.#select = db
      .prepare<[OwnerType, string, OwnerScope], AttributeRow>(
        `SELECT key, type, value, last_update_ts FROM owner_attribute_kv
         WHERE entity_type = ? AND entity_id = ? AND scope = ? ORDER BY key`,
      )
      .safeIntegers(true);
    this.#delete = db.prepare<[OwnerType, string, OwnerScope, string], { key: string }>(
      `DELETE FROM owner_attribute_kv WHERE entity_type = ? AND entity_id = ? AND scope = ?
       AND key IN (SELECT value FROM json_each(?)) RETURNING key`,
    );
    this.#saveAll = db.transaction(
      (
        type: OwnerType,
        id: string,
        scope: OwnerScope,
        values: ReadonlyMap<string, KvValue>,
        ts: number,
      ) => {
        for (const [key, kv] of values)
          this.#upsert.run(type, id, scope, key, kv.type, encode(kv), ts);
      },
    );
  }

  get(
    type: OwnerType,
    id: string,
    scope: OwnerScope,
    keys?: readonly string[],
  ): TypedAttributeKv[] {
    const all = this.#select.all(type, id, scope).map(decode);
    return keys ? all.filter((kv) => keys.includes(kv.key)) : all;
  }

  /** One attribute's value from the server scope, or undefined. */
  value(type: OwnerType, id: string, key: string): unknown {
    return this.get(type, id, 'SERVER_SCOPE', [key])[0]?.value;
  }

  save(type: OwnerType, id: string, scope: OwnerScope, values: ReadonlyMap<string, KvValue>): void {
    this.#saveAll(type, id, scope, values, this.deps.now?.() ?? Date.now());
    this.deps.bus.emit('ownerAttributes.updated', {
      entityType: type,
      entityId: id,
      scope,
      keys: [...values.keys()],
    });
    // The alarm engine re-evaluates the thresholds it read from here (platform.md §3.8: REST
    // saves emit ATTRIBUTES_UPDATED); `Number` for LONG values held as bigint.
    const data: Record<string, unknown> = {};
    for (const [key, kv] of values)
      data[key] = typeof kv.value === 'bigint' ? Number(kv.value) : kv.value;
    this.deps.submit?.({
      type: 'ATTRIBUTES_UPDATED',
      originator: { entityType: type, id },
      metadata: { scope },
      data,
    });
  }

  delete(type: OwnerType, id: string, scope: OwnerScope, keys: readonly string[]): void {
    const deleted = this.#delete.all(type, id, scope, JSON.stringify(keys)).map((r) => r.key);
    if (deleted.length === 0) return;
    this.deps.bus.emit('ownerAttributes.updated', {
      entityType: type,
      entityId: id,
      scope,
      keys: deleted,
    });
    this.deps.submit?.({
      type: 'ATTRIBUTES_DELETED',
      originator: { entityType: type, id },
      metadata: { scope },
      data: { attributes: deleted },
    });
  }
}
