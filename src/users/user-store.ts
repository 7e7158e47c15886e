import type { Db } from '../db/open.js';

export type Authority = 'TENANT_ADMIN' | 'CUSTOMER_USER';

export interface UserRow {
  id: string;
  tenant_id: string;
  customer_id: string | null;
  email: string;
  authority: Authority;
  first_name: string | null;
  last_name: string | null;
  password_hash: string | null;
  enabled: number;
  additional_info: string | null;
  created_time: number;
}

/** SQL for the `user` table; statements are prepared once. */
export class UserStore {
  readonly #byId;
  readonly #byEmail;
  readonly #insert;
  readonly #countAdmins;

  constructor(db: Db) {
    this.#byId = db.prepare<[string], UserRow>('SELECT * FROM user WHERE id = ?');
    this.#byEmail = db.prepare<[string], UserRow>('SELECT * FROM user WHERE email = ?');
    this.#insert = db.prepare<[UserRow]>(
      `INSERT INTO user (id, tenant_id, customer_id, email, authority, first_name, last_name,
         password_hash, enabled, additional_info, created_time)
       VALUES (@id, @tenant_id, @customer_id, @email, @authority, @first_name, @last_name,
         @password_hash, @enabled, @additional_info, @created_time)`,
    );
    this.#countAdmins = db.prepare<[], { n: number }>(
      "SELECT count(*) AS n FROM user WHERE authority = 'TENANT_ADMIN'",
    );
  }

  byId(id: string): UserRow | undefined {
    return this.#byId.get(id);
  }

  byEmail(email: string): UserRow | undefined {
    return this.#byEmail.get(email);
  }

  insert(row: UserRow): void {
    this.#insert.run(row);
  }

  countAdmins(): number {
    return this.#countAdmins.get()?.n ?? 0;
  }
}
