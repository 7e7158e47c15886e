import type { Db } from '../db/open.js';

export type OtaType = 'FIRMWARE' | 'SOFTWARE';

/** An `ota_package` row without its data. */
export interface OtaRow {
  id: string;
  tenant_id: string;
  device_profile_id: string;
  type: OtaType;
  title: string;
  version: string;
  tag: string | null;
  url: string | null;
  file_name: string | null;
  content_type: string | null;
  checksum_algorithm: string | null;
  checksum: string | null;
  data_size: number | null;
  additional_info: string | null;
  created_time: number;
}

export interface OtaStateRow {
  device_rid: number;
  type: OtaType;
  package_id: string | null;
  state: string | null;
  state_ts: number | null;
  error: string | null;
}

const INFO_COLUMNS = `id, tenant_id, device_profile_id, type, title, version, tag, url, file_name,
  content_type, checksum_algorithm, checksum, data_size, additional_info, created_time`;

export const OTA_SORT = ['createdTime', 'title', 'version', 'type', 'tag', 'dataSize'] as const;
export type OtaSort = (typeof OTA_SORT)[number];
const SORT_COLUMN: Record<OtaSort, string> = {
  createdTime: 'created_time',
  title: 'title',
  version: 'version',
  type: 'type',
  tag: 'tag',
  dataSize: 'data_size',
};

/**
 * SQL for OTA packages (file as a BLOB, read in slices with `substr`) and the per-device OTA state.
 * It also reads the `firmware_id`/`software_id` columns that migration 004 added to `device` and
 * `device_profile`, to find references and affected devices.
 */
export class OtaStore {
  readonly #byId;
  readonly #byTitle;
  readonly #insert;
  readonly #updateInfo;
  readonly #setData;
  readonly #slice;
  readonly #delete;
  readonly #deleteOfProfile;
  readonly #deviceRefs;
  readonly #profileRefs;
  readonly #devicesOfProfile;
  readonly #state;
  readonly #setApplied;
  readonly #setReported;

  constructor(private readonly db: Db) {
    this.#byId = db.prepare<[string], OtaRow>(
      `SELECT ${INFO_COLUMNS} FROM ota_package WHERE id = ?`,
    );
    this.#byTitle = db.prepare<[string, string, string], OtaRow>(
      `SELECT ${INFO_COLUMNS} FROM ota_package WHERE type = ? AND title = ? AND version = ?`,
    );
    this.#insert = db.prepare<[OtaRow]>(
      `INSERT INTO ota_package (${INFO_COLUMNS})
       VALUES (@id, @tenant_id, @device_profile_id, @type, @title, @version, @tag, @url, @file_name,
         @content_type, @checksum_algorithm, @checksum, @data_size, @additional_info, @created_time)`,
    );
    this.#updateInfo = db.prepare<[Pick<OtaRow, 'id' | 'tag' | 'url' | 'additional_info'>]>(
      'UPDATE ota_package SET tag = @tag, url = @url, additional_info = @additional_info WHERE id = @id',
    );
    this.#setData = db.prepare<
      [
        Pick<
          OtaRow,
          'id' | 'file_name' | 'content_type' | 'checksum_algorithm' | 'checksum' | 'data_size'
        > & {
          data: Buffer;
        },
      ]
    >(
      `UPDATE ota_package SET file_name = @file_name, content_type = @content_type,
         checksum_algorithm = @checksum_algorithm, checksum = @checksum, data_size = @data_size,
         data = @data
       WHERE id = @id AND data IS NULL`,
    );
    // SQLite substr() on a BLOB counts bytes from 1.
    this.#slice = db.prepare<[number, number, string], { part: Buffer | null }>(
      'SELECT substr(data, ?, ?) AS part FROM ota_package WHERE id = ?',
    );
    this.#delete = db.prepare<[string]>('DELETE FROM ota_package WHERE id = ?');
    this.#deleteOfProfile = db.prepare<[string]>(
      'DELETE FROM ota_package WHERE device_profile_id = ?',
    );
    this.#deviceRefs = db.prepare<[string, string], { n: number }>(
      'SELECT count(*) AS n FROM device WHERE firmware_id = ? OR software_id = ?',
    );
    this.#profileRefs = db.prepare<[string, string], { n: number }>(
      'SELECT count(*) AS n FROM device_profile WHERE firmware_id = ? OR software_id = ?',
    );
    this.#devicesOfProfile = db.prepare<[string], { id: string }>(
      'SELECT id FROM device WHERE device_profile_id = ?',
    );
    this.#state = db.prepare<[number, string], OtaStateRow>(
      'SELECT * FROM device_ota_state WHERE device_rid = ? AND type = ?',
    );
    this.#setApplied = db.prepare<[number, string, string | null, string | null, number]>(
      `INSERT INTO device_ota_state (device_rid, type, package_id, state, state_ts) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (device_rid, type) DO UPDATE SET package_id = excluded.package_id,
         state = excluded.state, state_ts = excluded.state_ts, error = NULL`,
    );
    this.#setReported = db.prepare<[number, string, string, number, string | null]>(
      `INSERT INTO device_ota_state (device_rid, type, state, state_ts, error) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (device_rid, type) DO UPDATE SET state = excluded.state,
         state_ts = excluded.state_ts, error = excluded.error`,
    );
  }

  byId(id: string): OtaRow | undefined {
    return this.#byId.get(id);
  }

  byTitle(type: OtaType, title: string, version: string): OtaRow | undefined {
    return this.#byTitle.get(type, title, version);
  }

  insert(row: OtaRow): void {
    this.#insert.run(row);
  }

  updateInfo(row: Pick<OtaRow, 'id' | 'tag' | 'url' | 'additional_info'>): void {
    this.#updateInfo.run(row);
  }

  /** Stores the file once; false when the package already has data. */
  setData(
    row: Pick<
      OtaRow,
      'id' | 'file_name' | 'content_type' | 'checksum_algorithm' | 'checksum' | 'data_size'
    > & {
      data: Buffer;
    },
  ): boolean {
    return this.#setData.run(row).changes > 0;
  }

  /** `length` bytes from byte `offset` (0-based); empty past the end. */
  slice(id: string, offset: number, length: number): Buffer {
    const part = this.#slice.get(offset + 1, length, id)?.part;
    return part ? Buffer.from(part) : Buffer.alloc(0);
  }

  delete(id: string): boolean {
    return this.#delete.run(id).changes > 0;
  }

  /** Deletes every package of a device profile (the profile is being deleted); returns how many. */
  deleteOfProfile(profileId: string): number {
    return this.#deleteOfProfile.run(profileId).changes;
  }

  deviceRefs(id: string): number {
    return this.#deviceRefs.get(id, id)?.n ?? 0;
  }

  profileRefs(id: string): number {
    return this.#profileRefs.get(id, id)?.n ?? 0;
  }

  devicesOfProfile(profileId: string): string[] {
    return this.#devicesOfProfile.all(profileId).map((r) => r.id);
  }

  page(
    q: {
      pageSize: number;
      page: number;
      textSearch?: string;
      sortProperty?: OtaSort;
      sortOrder: string;
    },
    filter: { profileId?: string; type?: OtaType; hasData?: boolean } = {},
  ): { rows: OtaRow[]; total: number } {
    const where: string[] = [];
    const params: Record<string, unknown> = {};
    if (q.textSearch) {
      where.push(`lower(title) LIKE @search ESCAPE '\\'`);
      params.search = `%${q.textSearch.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    }
    if (filter.profileId) {
      where.push('device_profile_id = @profileId');
      params.profileId = filter.profileId;
    }
    if (filter.type) {
      where.push('type = @type');
      params.type = filter.type;
    }
    if (filter.hasData) where.push('(data IS NOT NULL OR url IS NOT NULL)');
    const clause = where.length ? ` WHERE ${where.join(' AND ')}` : '';
    const total = (
      this.db.prepare(`SELECT count(*) AS n FROM ota_package${clause}`).get(params) as { n: number }
    ).n;
    const column = SORT_COLUMN[q.sortProperty ?? 'createdTime'];
    const order = q.sortOrder === 'DESC' ? 'DESC' : 'ASC';
    const rows = this.db
      .prepare(
        `SELECT ${INFO_COLUMNS} FROM ota_package${clause} ORDER BY ${column} ${order}, id ${order}
         LIMIT @limit OFFSET @offset`,
      )
      .all({ ...params, limit: q.pageSize, offset: q.page * q.pageSize }) as OtaRow[];
    return { rows, total };
  }

  state(deviceRid: number, type: OtaType): OtaStateRow | undefined {
    return this.#state.get(deviceRid, type);
  }

  setApplied(deviceRid: number, type: OtaType, packageId: string | null, now: number): void {
    this.#setApplied.run(deviceRid, type, packageId, packageId ? 'INITIATED' : null, now);
  }

  setReported(
    deviceRid: number,
    type: OtaType,
    state: string,
    ts: number,
    error: string | null,
  ): void {
    this.#setReported.run(deviceRid, type, state, ts, error);
  }
}
