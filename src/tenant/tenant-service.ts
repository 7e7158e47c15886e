import { randomUUID } from 'node:crypto';
import type { Db } from '../db/open.js';

export interface Tenant {
  readonly id: string;
  readonly title: string;
  readonly createdTime: number;
}

/** The gateway is one tenant. Its row is created on first start and never changes id. */
export class TenantService {
  #tenant: Tenant | undefined;

  constructor(private readonly deps: { db: Db }) {}

  /** Creates the tenant on first start; later starts load it. */
  init(now = Date.now()): Tenant {
    const row = this.deps.db.prepare('SELECT id, title, created_time FROM tenant LIMIT 1').get() as
      | { id: string; title: string; created_time: number }
      | undefined;
    if (row) {
      this.#tenant = { id: row.id, title: row.title, createdTime: row.created_time };
    } else {
      this.#tenant = { id: randomUUID(), title: 'Tenant', createdTime: now };
      this.deps.db
        .prepare('INSERT INTO tenant (id, title, created_time) VALUES (?, ?, ?)')
        .run(this.#tenant.id, this.#tenant.title, now);
    }
    return this.#tenant;
  }

  get tenant(): Tenant {
    if (!this.#tenant) throw new Error('TenantService.init() has not run');
    return this.#tenant;
  }

  get id(): string {
    return this.tenant.id;
  }
}
