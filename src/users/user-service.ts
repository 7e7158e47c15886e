import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { type EntityId, entityId, NULL_UUID } from '../common/entity.js';
import type { Secrets } from '../config.js';
import type { Db } from '../db/open.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { generatePassword, hashPassword, verifyPassword } from './password.js';
import { type Authority, type UserRow, UserStore } from './user-store.js';

export const INITIAL_ADMIN_FILE = 'initial-admin.txt';
const DEFAULT_ADMIN_EMAIL = 'admin@edge.local';

export interface User {
  readonly id: EntityId<'USER'>;
  readonly createdTime: number;
  readonly tenantId: EntityId<'TENANT'>;
  readonly customerId: EntityId<'CUSTOMER'>;
  readonly email: string;
  readonly name: string;
  readonly authority: Authority;
  readonly firstName: string | null;
  readonly lastName: string | null;
  readonly additionalInfo: unknown;
}

export interface UserServiceDeps {
  readonly db: Db;
  readonly tenants: TenantService;
  readonly secrets: Secrets;
  readonly dataDir: string;
  readonly log: Logger;
}

export class UserService {
  readonly #store: UserStore;

  constructor(private readonly deps: UserServiceDeps) {
    this.#store = new UserStore(deps.db);
  }

  /**
   * Creates the tenant administrator on first start: from EDGE_ADMIN_EMAIL/EDGE_ADMIN_PASSWORD,
   * or with a generated password that is logged once and written to a 0600 file.
   */
  async bootstrapAdmin(): Promise<void> {
    if (this.#store.countAdmins() > 0) return;
    const email = this.deps.secrets.adminEmail ?? DEFAULT_ADMIN_EMAIL;
    const generated = this.deps.secrets.adminPassword === undefined;
    const password = this.deps.secrets.adminPassword ?? generatePassword();
    this.#store.insert({
      id: randomUUID(),
      tenant_id: this.deps.tenants.id,
      customer_id: null,
      email,
      authority: 'TENANT_ADMIN',
      first_name: null,
      last_name: null,
      password_hash: await hashPassword(password),
      enabled: 1,
      additional_info: null,
      created_time: Date.now(),
    });
    if (generated) {
      const file = join(this.deps.dataDir, INITIAL_ADMIN_FILE);
      writeFileSync(file, `email: ${email}\npassword: ${password}\n`, { mode: 0o600 });
      // @NOTE: the one place a secret is logged, on purpose: the operator has no other way to
      // learn a generated password when the data directory is not readable to them.
      this.deps.log.warn(
        { email, initialPassword: password, file },
        'created tenant administrator with a generated password; change it after the first login',
      );
    } else {
      this.deps.log.info({ email }, 'created tenant administrator');
    }
  }

  /** Returns the user when email and password match an enabled account, else undefined. */
  async verifyCredentials(email: string, password: string): Promise<UserRow | undefined> {
    const row = this.#store.byEmail(email);
    if (!row?.password_hash) {
      // @NOTE: hash anyway so a missing account takes as long as a wrong password.
      await verifyPassword(password, DUMMY_HASH);
      return undefined;
    }
    return (await verifyPassword(password, row.password_hash)) ? row : undefined;
  }

  row(id: string): UserRow | undefined {
    return this.#store.byId(id);
  }

  toUser(row: UserRow): User {
    return {
      id: entityId('USER', row.id),
      createdTime: row.created_time,
      tenantId: entityId('TENANT', row.tenant_id),
      customerId: entityId('CUSTOMER', row.customer_id ?? NULL_UUID),
      email: row.email,
      name: row.email,
      authority: row.authority,
      firstName: row.first_name,
      lastName: row.last_name,
      additionalInfo: row.additional_info === null ? {} : JSON.parse(row.additional_info),
    };
  }
}

const DUMMY_HASH =
  'scrypt$32768$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=';
