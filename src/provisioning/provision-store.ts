import type { Db } from '../db/open.js';

/** SQL for the provisioning state of devices (ThingsBoard's `provisionState` server attribute). */
export class ProvisionStore {
  readonly #get;
  readonly #put;
  readonly #delete;

  constructor(db: Db) {
    this.#get = db.prepare<[number], { state: string }>(
      'SELECT state FROM device_provision WHERE device_rid = ?',
    );
    this.#put = db.prepare<[number, string, string, number]>(
      `INSERT INTO device_provision (device_rid, state, profile_id, created_time) VALUES (?, ?, ?, ?)
       ON CONFLICT (device_rid) DO UPDATE SET state = excluded.state,
         profile_id = excluded.profile_id, created_time = excluded.created_time`,
    );
    this.#delete = db.prepare<[number]>('DELETE FROM device_provision WHERE device_rid = ?');
  }

  state(deviceRid: number): string | undefined {
    return this.#get.get(deviceRid)?.state;
  }

  markProvisioned(deviceRid: number, profileId: string): void {
    this.#put.run(deviceRid, 'provisioned', profileId, Date.now());
  }

  clear(deviceRid: number): boolean {
    return this.#delete.run(deviceRid).changes > 0;
  }
}
