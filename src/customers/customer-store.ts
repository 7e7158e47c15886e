import type { PageQuery } from '../common/entity.js';
import type { Db } from '../db/open.js';

export interface CustomerRow {
  id: string;
  tenant_id: string;
  title: string;
  email: string | null;
  phone: string | null;
  country: string | null;
  state: string | null;
  city: string | null;
  address: string | null;
  address2: string | null;
  zip: string | null;
  external_id: string | null;
  additional_info: string | null;
  created_time: number;
  version: number;
}

export type CustomerFields = Omit<CustomerRow, 'tenant_id' | 'created_time' | 'version'>;

export const CUSTOMER_SORT = ['createdTime', 'title', 'email', 'country', 'city'] as const;
export type CustomerSort = (typeof CUSTOMER_SORT)[number];

const SORT_COLUMN: Record<CustomerSort, string> = {
  createdTime: 'created_time',
  title: 'title',
  email: 'email',
  country: 'country',
  city: 'city',
};

/** SQL for the `customer` table. */
export class CustomerStore {
  readonly #byId;
  readonly #byTitle;
  readonly #insert;
  readonly #update;
  readonly #delete;
  readonly #countUsers;

  constructor(private readonly db: Db) {
    this.#byId = db.prepare<[string], CustomerRow>('SELECT * FROM customer WHERE id = ?');
    this.#byTitle = db.prepare<[string, string], CustomerRow>(
      'SELECT * FROM customer WHERE tenant_id = ? AND title = ?',
    );
    this.#insert = db.prepare<[CustomerRow]>(
      `INSERT INTO customer (id, tenant_id, title, email, phone, country, state, city, address,
         address2, zip, external_id, additional_info, created_time, version)
       VALUES (@id, @tenant_id, @title, @email, @phone, @country, @state, @city, @address,
         @address2, @zip, @external_id, @additional_info, @created_time, @version)`,
    );
    this.#update = db.prepare<[CustomerFields]>(
      `UPDATE customer SET title = @title, email = @email, phone = @phone, country = @country,
         state = @state, city = @city, address = @address, address2 = @address2, zip = @zip,
         external_id = @external_id, additional_info = @additional_info, version = version + 1
       WHERE id = @id`,
    );
    this.#delete = db.prepare<[string]>('DELETE FROM customer WHERE id = ?');
    this.#countUsers = db.prepare<[string], { n: number }>(
      'SELECT count(*) AS n FROM user WHERE customer_id = ?',
    );
  }

  byId(id: string): CustomerRow | undefined {
    return this.#byId.get(id);
  }

  byTitle(tenantId: string, title: string): CustomerRow | undefined {
    return this.#byTitle.get(tenantId, title);
  }

  insert(row: CustomerRow): void {
    this.#insert.run(row);
  }

  update(fields: CustomerFields): void {
    this.#update.run(fields);
  }

  delete(id: string): boolean {
    return this.#delete.run(id).changes > 0;
  }

  countUsers(id: string): number {
    return this.#countUsers.get(id)?.n ?? 0;
  }

  page(q: PageQuery<CustomerSort>): { rows: CustomerRow[]; total: number } {
    const params: Record<string, unknown> = {};
    let clause = '';
    if (q.textSearch) {
      clause = ` WHERE lower(title) LIKE @search ESCAPE '\\'`;
      params.search = `%${q.textSearch.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    }
    const total = (
      this.db.prepare(`SELECT count(*) AS n FROM customer${clause}`).get(params) as { n: number }
    ).n;
    const column = SORT_COLUMN[q.sortProperty ?? 'createdTime'];
    const rows = this.db
      .prepare(
        `SELECT * FROM customer${clause} ORDER BY ${column} ${q.sortOrder}, id
         LIMIT @limit OFFSET @offset`,
      )
      .all({ ...params, limit: q.pageSize, offset: q.page * q.pageSize }) as CustomerRow[];
    return { rows, total };
  }
}
