import type { PageQuery } from '../common/entity.js';
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
  /** Migration 005; absent in rows written before it. */
  phone?: string | null;
  version?: number;
}

export type UserFields = Pick<
  UserRow,
  'id' | 'customer_id' | 'email' | 'authority' | 'first_name' | 'last_name' | 'additional_info'
> & { phone: string | null };

export type TokenKind = 'ACTIVATE' | 'RESET';

export interface UserTokenRow {
  token_hash: string;
  user_id: string;
  kind: TokenKind;
  expires_at: number;
  created_time: number;
}

export const USER_SORT = ['createdTime', 'email', 'firstName', 'lastName'] as const;
export type UserSort = (typeof USER_SORT)[number];

const SORT_COLUMN: Record<UserSort, string> = {
  createdTime: 'created_time',
  email: 'email',
  firstName: 'first_name',
  lastName: 'last_name',
};

/** SQL for the `user` and `user_token` tables; statements are prepared once. */
export class UserStore {
  readonly #byId;
  readonly #byEmail;
  readonly #insert;
  readonly #countAdmins;
  readonly #update;
  readonly #delete;
  readonly #setEnabled;
  readonly #setPassword;
  readonly #deleteTokens;
  readonly #insertToken;
  readonly #tokenByHash;
  readonly #deleteToken;

  constructor(private readonly db: Db) {
    this.#byId = db.prepare<[string], UserRow>('SELECT * FROM user WHERE id = ?');
    this.#byEmail = db.prepare<[string], UserRow>('SELECT * FROM user WHERE email = ?');
    this.#insert = db.prepare<[UserRow]>(
      `INSERT INTO user (id, tenant_id, customer_id, email, authority, first_name, last_name,
         password_hash, enabled, additional_info, created_time, phone)
       VALUES (@id, @tenant_id, @customer_id, @email, @authority, @first_name, @last_name,
         @password_hash, @enabled, @additional_info, @created_time, @phone)`,
    );
    this.#countAdmins = db.prepare<[], { n: number }>(
      "SELECT count(*) AS n FROM user WHERE authority = 'TENANT_ADMIN'",
    );
    this.#update = db.prepare<[UserFields]>(
      `UPDATE user SET customer_id = @customer_id, email = @email, authority = @authority,
         first_name = @first_name, last_name = @last_name, phone = @phone,
         additional_info = @additional_info, version = version + 1
       WHERE id = @id`,
    );
    this.#delete = db.prepare<[string]>('DELETE FROM user WHERE id = ?');
    this.#setEnabled = db.prepare<[number, string]>(
      'UPDATE user SET enabled = ?, version = version + 1 WHERE id = ?',
    );
    this.#setPassword = db.prepare<[string, string]>(
      'UPDATE user SET password_hash = ?, enabled = 1 WHERE id = ?',
    );
    this.#deleteTokens = db.prepare<[string, TokenKind]>(
      'DELETE FROM user_token WHERE user_id = ? AND kind = ?',
    );
    this.#insertToken = db.prepare<[UserTokenRow]>(
      `INSERT INTO user_token (token_hash, user_id, kind, expires_at, created_time)
       VALUES (@token_hash, @user_id, @kind, @expires_at, @created_time)`,
    );
    this.#tokenByHash = db.prepare<[string, TokenKind], UserTokenRow>(
      'SELECT * FROM user_token WHERE token_hash = ? AND kind = ?',
    );
    this.#deleteToken = db.prepare<[string]>('DELETE FROM user_token WHERE token_hash = ?');
  }

  byId(id: string): UserRow | undefined {
    return this.#byId.get(id);
  }

  byEmail(email: string): UserRow | undefined {
    return this.#byEmail.get(email);
  }

  insert(row: UserRow): void {
    this.#insert.run({ ...row, phone: row.phone ?? null });
  }

  update(fields: UserFields): void {
    this.#update.run(fields);
  }

  delete(id: string): boolean {
    return this.#delete.run(id).changes > 0;
  }

  setEnabled(id: string, enabled: boolean): void {
    this.#setEnabled.run(enabled ? 1 : 0, id);
  }

  /**
   * Enabled users by authority, customer or id list (notification recipients); at most `limit`.
   * Every condition given must hold.
   */
  select(
    f: { authority?: Authority; customerId?: string; ids?: readonly string[] },
    limit: number,
  ): UserRow[] {
    const where = ['enabled = 1'];
    const args: unknown[] = [];
    if (f.authority) {
      where.push('authority = ?');
      args.push(f.authority);
    }
    if (f.customerId) {
      where.push('customer_id = ?');
      args.push(f.customerId);
    }
    if (f.ids) {
      where.push(`id IN (${f.ids.map(() => '?').join(',') || 'NULL'})`);
      args.push(...f.ids);
    }
    // @NOTE: the id list varies in length, so this statement is prepared per call; it runs once
    // per notification rule that fires, not per message.
    return this.db
      .prepare<unknown[], UserRow>(
        `SELECT * FROM user WHERE ${where.join(' AND ')} ORDER BY created_time LIMIT ${limit}`,
      )
      .all(...args);
  }

  countAdmins(): number {
    return this.#countAdmins.get()?.n ?? 0;
  }

  /** Replaces the user's token of this kind (at most one per kind). */
  putToken(row: UserTokenRow): void {
    this.db.transaction(() => {
      this.#deleteTokens.run(row.user_id, row.kind);
      this.#insertToken.run(row);
    })();
  }

  tokenByHash(hash: string, kind: TokenKind): UserTokenRow | undefined {
    return this.#tokenByHash.get(hash, kind);
  }

  deleteToken(hash: string): void {
    this.#deleteToken.run(hash);
  }

  /** Sets the password, enables the account and drops every activation/reset token, at once. */
  setPasswordAndEnable(userId: string, passwordHash: string): void {
    this.db.transaction(() => {
      this.#setPassword.run(passwordHash, userId);
      this.#deleteTokens.run(userId, 'ACTIVATE');
      this.#deleteTokens.run(userId, 'RESET');
    })();
  }

  page(
    q: PageQuery<UserSort>,
    filter: { customerId?: string } = {},
  ): { rows: UserRow[]; total: number } {
    const where: string[] = [];
    const params: Record<string, unknown> = {};
    if (q.textSearch) {
      where.push(
        `(lower(email) LIKE @search ESCAPE '\\' OR lower(coalesce(first_name, '')) LIKE @search ESCAPE '\\'
          OR lower(coalesce(last_name, '')) LIKE @search ESCAPE '\\')`,
      );
      params.search = `%${q.textSearch.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    }
    if (filter.customerId) {
      where.push('customer_id = @customerId');
      params.customerId = filter.customerId;
    }
    const clause = where.length ? ` WHERE ${where.join(' AND ')}` : '';
    const total = (
      this.db.prepare(`SELECT count(*) AS n FROM user${clause}`).get(params) as { n: number }
    ).n;
    const column = SORT_COLUMN[q.sortProperty ?? 'createdTime'];
    const rows = this.db
      .prepare(
        `SELECT * FROM user${clause} ORDER BY ${column} ${q.sortOrder}, id
         LIMIT @limit OFFSET @offset`,
      )
      .all({ ...params, limit: q.pageSize, offset: q.page * q.pageSize }) as UserRow[];
    return { rows, total };
  }
}
