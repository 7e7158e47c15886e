import type { Statement } from 'better-sqlite3';
import type { PageQuery } from '../common/entity.js';
import type { Db } from '../db/open.js';

export interface DeviceRow {
  rid: number;
  id: string;
  tenant_id: string;
  customer_id: string | null;
  name: string;
  label: string | null;
  device_profile_id: string;
  additional_info: string | null;
  /** OTA assignment (migration 004); written by `setOtaPackages`. */
  firmware_id?: string | null;
  software_id?: string | null;
  created_time: number;
  version: number;
}

/** A device row joined with its profile name (the `type` of ThingsBoard's Device JSON). */
export interface DeviceView extends DeviceRow {
  profile_name: string;
}

export interface CredentialsRow {
  id: string;
  device_rid: number;
  credentials_type: string;
  credentials_id: string;
  credentials_value: string | null;
  created_time: number;
}

export const DEVICE_SORT = ['createdTime', 'name', 'deviceProfileName', 'label', 'type'] as const;
export type DeviceSort = (typeof DEVICE_SORT)[number];

const SORT_COLUMN: Record<DeviceSort, string> = {
  createdTime: 'd.created_time',
  name: 'd.name',
  deviceProfileName: 'p.name',
  type: 'p.name',
  label: 'd.label',
};

const VIEW = `SELECT d.*, p.name AS profile_name FROM device d JOIN device_profile p ON p.id = d.device_profile_id`;
/**
 * One device by a bound key: the profile name by a subquery, not a join. better-sqlite3 builds
 * SQLite with STAT4, which re-prepares a join whose plan may depend on a bound value on every
 * run (and better-sqlite3 then builds its row factory anew): about 25 µs per lookup instead of
 * 3 µs, on the hot path of every message (rule engine, upstream).
 */
const ONE = `SELECT d.*, (SELECT p.name FROM device_profile p WHERE p.id = d.device_profile_id) AS profile_name
  FROM device d`;

/** SQL for devices and their credentials. */
export class DeviceStore {
  readonly #byId;
  readonly #byName;
  readonly #byToken;
  readonly #byCredentials;
  readonly #insert;
  readonly #update;
  readonly #delete;
  readonly #setCustomer;
  #setOta: Statement<[string | null, string | null, number]> | undefined;
  readonly #creds;
  readonly #insertCreds;
  readonly #updateCreds;

  #idsOfProfile: Statement<[string], { id: string }> | undefined;

  constructor(private readonly db: Db) {
    this.#byId = db.prepare<[string], DeviceView>(`${ONE} WHERE d.id = ?`);
    this.#byName = db.prepare<[string], DeviceView>(`${ONE} WHERE d.name = ?`);
    this.#byToken = db.prepare<[string], DeviceView>(
      `${ONE} WHERE d.rid = (SELECT c.device_rid FROM device_credentials c
         WHERE c.credentials_id = ? AND c.credentials_type = 'ACCESS_TOKEN')`,
    );
    this.#byCredentials = db.prepare<[string, string], DeviceView & { cred_value: string | null }>(
      `SELECT d.*, p.name AS profile_name, c.credentials_value AS cred_value
       FROM device d JOIN device_profile p ON p.id = d.device_profile_id
       JOIN device_credentials c ON c.device_rid = d.rid
       WHERE c.credentials_id = ? AND c.credentials_type = ?`,
    );
    this.#insert = db.prepare<[Omit<DeviceRow, 'rid'>]>(
      `INSERT INTO device (id, tenant_id, customer_id, name, label, device_profile_id, additional_info,
         created_time, version)
       VALUES (@id, @tenant_id, @customer_id, @name, @label, @device_profile_id, @additional_info,
         @created_time, @version)`,
    );
    this.#update = db.prepare<
      [Pick<DeviceRow, 'id' | 'name' | 'label' | 'device_profile_id' | 'additional_info'>]
    >(
      `UPDATE device SET name = @name, label = @label, device_profile_id = @device_profile_id,
         additional_info = @additional_info, version = version + 1
       WHERE id = @id`,
    );
    this.#delete = db.prepare<[string]>('DELETE FROM device WHERE id = ?');
    this.#setCustomer = db.prepare<[string | null, string]>(
      'UPDATE device SET customer_id = ?, version = version + 1 WHERE id = ?',
    );
    this.#creds = db.prepare<[number], CredentialsRow>(
      'SELECT * FROM device_credentials WHERE device_rid = ?',
    );
    this.#insertCreds = db.prepare<[CredentialsRow]>(
      `INSERT INTO device_credentials (id, device_rid, credentials_type, credentials_id, credentials_value, created_time)
       VALUES (@id, @device_rid, @credentials_type, @credentials_id, @credentials_value, @created_time)`,
    );
    this.#updateCreds = db.prepare<
      [
        Pick<
          CredentialsRow,
          'device_rid' | 'credentials_type' | 'credentials_id' | 'credentials_value'
        >,
      ]
    >(
      `UPDATE device_credentials SET credentials_type = @credentials_type, credentials_id = @credentials_id,
         credentials_value = @credentials_value
       WHERE device_rid = @device_rid`,
    );
  }

  byId(id: string): DeviceView | undefined {
    return this.#byId.get(id);
  }

  byName(name: string): DeviceView | undefined {
    return this.#byName.get(name);
  }

  /** Ids of every device of one profile (the alarm engine applies a profile's rules to them). */
  idsOfProfile(profileId: string): string[] {
    this.#idsOfProfile ??= this.db.prepare<[string], { id: string }>(
      'SELECT id FROM device WHERE device_profile_id = ?',
    );
    return this.#idsOfProfile.all(profileId).map((r) => r.id);
  }

  byAccessToken(token: string): DeviceView | undefined {
    return this.#byToken.get(token);
  }

  /** A device by the id of its credentials of the given type, with the stored credential value. */
  byCredentialsId(
    credentialsId: string,
    type: string,
  ): { view: DeviceView; credentialsValue: string | null } | undefined {
    const row = this.#byCredentials.get(credentialsId, type);
    if (!row) return undefined;
    const { cred_value, ...view } = row;
    return { view, credentialsValue: cred_value };
  }

  insert(row: Omit<DeviceRow, 'rid'>): number {
    return Number(this.#insert.run(row).lastInsertRowid);
  }

  update(
    row: Pick<DeviceRow, 'id' | 'name' | 'label' | 'device_profile_id' | 'additional_info'>,
  ): void {
    this.#update.run(row);
  }

  setCustomer(id: string, customerId: string | null): void {
    this.#setCustomer.run(customerId, id);
  }

  setOtaPackages(rid: number, firmwareId: string | null, softwareId: string | null): void {
    // Prepared on first use: the columns come with migration 004.
    this.#setOta ??= this.db.prepare<[string | null, string | null, number]>(
      'UPDATE device SET firmware_id = ?, software_id = ? WHERE rid = ?',
    );
    this.#setOta.run(firmwareId, softwareId, rid);
  }

  delete(id: string): boolean {
    return this.#delete.run(id).changes > 0;
  }

  credentials(rid: number): CredentialsRow | undefined {
    return this.#creds.get(rid);
  }

  insertCredentials(row: CredentialsRow): void {
    this.#insertCreds.run(row);
  }

  updateCredentials(
    row: Pick<
      CredentialsRow,
      'device_rid' | 'credentials_type' | 'credentials_id' | 'credentials_value'
    >,
  ): void {
    this.#updateCreds.run(row);
  }

  tokenInUse(token: string, exceptRid?: number): boolean {
    const row = this.db
      .prepare<[string], { device_rid: number }>(
        'SELECT device_rid FROM device_credentials WHERE credentials_id = ?',
      )
      .get(token);
    return row !== undefined && row.device_rid !== exceptRid;
  }

  page(
    q: PageQuery<DeviceSort>,
    filter: { customerId?: string } = {},
  ): { rows: DeviceView[]; total: number } {
    const where: string[] = [];
    const params: Record<string, unknown> = {};
    if (q.textSearch) {
      where.push(`lower(d.name) LIKE @search ESCAPE '\\'`);
      params.search = `%${q.textSearch.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    }
    if (filter.customerId) {
      where.push('d.customer_id = @customerId');
      params.customerId = filter.customerId;
    }
    const clause = where.length ? ` WHERE ${where.join(' AND ')}` : '';
    const total = (
      this.db.prepare(`SELECT count(*) AS n FROM device d${clause}`).get(params) as { n: number }
    ).n;
    const column = SORT_COLUMN[q.sortProperty ?? 'createdTime'];
    const rows = this.db
      .prepare(
        `${VIEW}${clause} ORDER BY ${column} ${q.sortOrder}, d.rid ${q.sortOrder} LIMIT @limit OFFSET @offset`,
      )
      .all({ ...params, limit: q.pageSize, offset: q.page * q.pageSize }) as DeviceView[];
    return { rows, total };
  }
}
