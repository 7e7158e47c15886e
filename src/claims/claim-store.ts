import type { Db } from '../db/open.js';

export interface ClaimRow {
  device_rid: number;
  secret_key: string;
  expiration_time: number;
  created_time: number;
}

/** SQL for pending device claims (one per device). */
export class ClaimStore {
  readonly #get;
  readonly #upsert;
  readonly #delete;
  readonly #deleteExpired;

  constructor(db: Db) {
    this.#get = db.prepare<[number], ClaimRow>('SELECT * FROM device_claim WHERE device_rid = ?');
    this.#upsert = db.prepare<[ClaimRow]>(
      `INSERT INTO device_claim (device_rid, secret_key, expiration_time, created_time)
       VALUES (@device_rid, @secret_key, @expiration_time, @created_time)
       ON CONFLICT (device_rid) DO UPDATE SET secret_key = excluded.secret_key,
         expiration_time = excluded.expiration_time, created_time = excluded.created_time`,
    );
    this.#delete = db.prepare<[number]>('DELETE FROM device_claim WHERE device_rid = ?');
    this.#deleteExpired = db.prepare<[number]>(
      'DELETE FROM device_claim WHERE expiration_time < ?',
    );
  }

  get(deviceRid: number): ClaimRow | undefined {
    return this.#get.get(deviceRid);
  }

  put(row: ClaimRow): void {
    this.#upsert.run(row);
  }

  delete(deviceRid: number): boolean {
    return this.#delete.run(deviceRid).changes > 0;
  }

  deleteExpired(now: number): number {
    return this.#deleteExpired.run(now).changes;
  }
}
