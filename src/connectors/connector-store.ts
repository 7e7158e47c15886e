import type { Db } from '../db/open.js';

export interface ConnectorRow {
  id: string;
  tenant_id: string;
  name: string;
  type: string;
  enabled: number;
  /** JSON text, as sent. */
  configuration: string;
  created_time: number;
  updated_time: number;
}

/** SQL for `connector` (migration 011); statements prepared once. */
export class ConnectorStore {
  readonly #all;
  readonly #byId;
  readonly #byName;
  readonly #insert;
  readonly #update;
  readonly #delete;
  readonly #count;

  constructor(db: Db) {
    this.#all = db.prepare<[], ConnectorRow>('SELECT * FROM connector ORDER BY created_time, id');
    this.#byId = db.prepare<[string], ConnectorRow>('SELECT * FROM connector WHERE id = ?');
    this.#byName = db.prepare<[string, string], ConnectorRow>(
      'SELECT * FROM connector WHERE tenant_id = ? AND name = ?',
    );
    this.#insert = db.prepare<[ConnectorRow]>(
      `INSERT INTO connector (id, tenant_id, name, type, enabled, configuration, created_time, updated_time)
       VALUES (@id, @tenant_id, @name, @type, @enabled, @configuration, @created_time, @updated_time)`,
    );
    this.#update = db.prepare<[ConnectorRow]>(
      `UPDATE connector SET name = @name, type = @type, enabled = @enabled,
         configuration = @configuration, updated_time = @updated_time WHERE id = @id`,
    );
    this.#delete = db.prepare<[string]>('DELETE FROM connector WHERE id = ?');
    this.#count = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM connector');
  }

  count(): number {
    return this.#count.get()?.n ?? 0;
  }

  all(): ConnectorRow[] {
    return this.#all.all();
  }

  byId(id: string): ConnectorRow | undefined {
    return this.#byId.get(id);
  }

  byName(tenantId: string, name: string): ConnectorRow | undefined {
    return this.#byName.get(tenantId, name);
  }

  insert(row: ConnectorRow): void {
    this.#insert.run(row);
  }

  update(row: ConnectorRow): void {
    this.#update.run(row);
  }

  delete(id: string): boolean {
    return this.#delete.run(id).changes > 0;
  }
}
