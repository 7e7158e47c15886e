import type { Statement } from 'better-sqlite3';
import type { Db } from '../db/open.js';
import type { AttributeScope, KvType, KvValue, TypedAttributeKv } from './types.js';

export interface AttributeRow {
  key: string;
  type: KvType;
  value: bigint | number | string | null;
  last_update_ts: bigint;
}

/** How each type is kept in the untyped `value` column. */
export function encode(kv: KvValue): bigint | number | string {
  switch (kv.type) {
    case 'BOOLEAN':
      return kv.value ? 1 : 0;
    case 'LONG':
      return BigInt(kv.value as number | bigint);
    case 'DOUBLE':
      return kv.value as number;
    case 'STRING':
      return kv.value as string;
    case 'JSON':
      return JSON.stringify(kv.value);
  }
}

export function decode(row: AttributeRow): TypedAttributeKv {
  const lastUpdateTs = Number(row.last_update_ts);
  const base = { key: row.key, type: row.type, lastUpdateTs };
  switch (row.type) {
    case 'BOOLEAN':
      return { ...base, value: Number(row.value) !== 0 };
    case 'LONG': {
      const n = BigInt(row.value as bigint);
      return { ...base, value: Number.isSafeInteger(Number(n)) ? Number(n) : n };
    }
    case 'DOUBLE':
      return { ...base, value: Number(row.value) };
    case 'STRING':
      return { ...base, value: String(row.value) };
    case 'JSON':
      return { ...base, value: JSON.parse(String(row.value)) };
  }
}

/** SQL for `attribute_kv`. Integers are read as bigint so a LONG keeps all 64 bits. */
export class AttributeStore {
  readonly #upsert;
  /** Made once: `db.transaction()` builds several wrapper functions per call. */
  readonly #upsertAll;
  readonly #select;
  readonly #selectKeys;
  readonly #deleteKeys;
  #byKey: Statement<[AttributeScope, string], AttributeRow & { device_id: string }> | undefined;

  constructor(private readonly db: Db) {
    this.#upsert = db.prepare<
      [number, AttributeScope, string, KvType, bigint | number | string, number]
    >(
      `INSERT INTO attribute_kv (device_rid, scope, key, type, value, last_update_ts)
       VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (device_rid, scope, key)
       DO UPDATE SET type = excluded.type, value = excluded.value, last_update_ts = excluded.last_update_ts`,
    );
    this.#upsertAll = db.transaction(
      (rid: number, scope: AttributeScope, entries: ReadonlyMap<string, KvValue>, ts: number) => {
        for (const [key, kv] of entries) this.#upsert.run(rid, scope, key, kv.type, encode(kv), ts);
      },
    );
    this.#select = db
      .prepare<[number, AttributeScope], AttributeRow>(
        `SELECT key, type, value, last_update_ts FROM attribute_kv
         WHERE device_rid = ? AND scope = ? ORDER BY key`,
      )
      .safeIntegers(true);
    this.#selectKeys = db
      .prepare<[number, AttributeScope, string], AttributeRow>(
        `SELECT key, type, value, last_update_ts FROM attribute_kv
         WHERE device_rid = ? AND scope = ? AND key IN (SELECT value FROM json_each(?)) ORDER BY key`,
      )
      .safeIntegers(true);
    this.#deleteKeys = db.prepare<[number, AttributeScope, string], { key: string }>(
      `DELETE FROM attribute_kv
       WHERE device_rid = ? AND scope = ? AND key IN (SELECT value FROM json_each(?)) RETURNING key`,
    );
  }

  /** Writes all entries in one transaction. */
  upsert(
    rid: number,
    scope: AttributeScope,
    entries: ReadonlyMap<string, KvValue>,
    ts: number,
  ): void {
    this.#upsertAll(rid, scope, entries, ts);
  }

  get(rid: number, scope: AttributeScope, keys?: readonly string[]): TypedAttributeKv[] {
    const rows = keys
      ? this.#selectKeys.all(rid, scope, JSON.stringify(keys))
      : this.#select.all(rid, scope);
    return rows.map(decode);
  }

  /** One key of one scope across every device: `[device UUID, value]` pairs. */
  findByKey(scope: AttributeScope, key: string): Array<{ deviceId: string; kv: TypedAttributeKv }> {
    this.#byKey ??= this.db
      .prepare<[AttributeScope, string], AttributeRow & { device_id: string }>(
        `SELECT d.id AS device_id, a.key, a.type, a.value, a.last_update_ts
         FROM attribute_kv a JOIN device d ON d.rid = a.device_rid
         WHERE a.scope = ? AND a.key = ?`,
      )
      .safeIntegers(true);
    return this.#byKey.all(scope, key).map((row) => ({ deviceId: row.device_id, kv: decode(row) }));
  }

  /** Deletes the keys and returns those that existed. */
  delete(rid: number, scope: AttributeScope, keys: readonly string[]): string[] {
    return this.#deleteKeys.all(rid, scope, JSON.stringify(keys)).map((r) => r.key);
  }
}
