import type { Statement } from 'better-sqlite3';
import type { PageQuery } from '../common/entity.js';
import type { Db } from '../db/open.js';

export interface RuleChainRow {
  id: string;
  tenant_id: string;
  name: string;
  type: 'CORE' | 'EDGE';
  root: number;
  debug_mode: number;
  /** JSON text or null. */
  configuration: string | null;
  additional_info: string | null;
  first_node_index: number | null;
  /** JSON array of stored nodes (see `StoredNode`). */
  nodes: string;
  /** JSON array of `{fromIndex, toIndex, type}`. */
  connections: string;
  created_time: number;
  version: number;
}

export const RULE_CHAIN_SORT = ['createdTime', 'name', 'root', 'type'] as const;
export type RuleChainSort = (typeof RULE_CHAIN_SORT)[number];

const SORT_COLUMN: Record<RuleChainSort, string> = {
  createdTime: 'created_time',
  name: 'name',
  root: 'root',
  type: 'type',
};

/** SQL for `rule_chain`. */
export class RuleChainStore {
  readonly #byId;
  readonly #insert;
  readonly #update;
  readonly #updateMetadata;
  readonly #delete;
  readonly #root;
  readonly #clearRoot;
  readonly #setRoot;
  readonly #all;
  readonly #count;

  constructor(private readonly db: Db) {
    this.#byId = db.prepare<[string], RuleChainRow>('SELECT * FROM rule_chain WHERE id = ?');
    this.#insert = db.prepare<[RuleChainRow]>(
      `INSERT INTO rule_chain (id, tenant_id, name, type, root, debug_mode, configuration,
         additional_info, first_node_index, nodes, connections, created_time, version)
       VALUES (@id, @tenant_id, @name, @type, @root, @debug_mode, @configuration,
         @additional_info, @first_node_index, @nodes, @connections, @created_time, @version)`,
    );
    this.#update = db.prepare<
      [Pick<RuleChainRow, 'id' | 'name' | 'debug_mode' | 'configuration' | 'additional_info'>]
    >(
      `UPDATE rule_chain SET name = @name, debug_mode = @debug_mode, configuration = @configuration,
         additional_info = @additional_info, version = version + 1 WHERE id = @id`,
    );
    this.#updateMetadata = db.prepare<
      [Pick<RuleChainRow, 'id' | 'first_node_index' | 'nodes' | 'connections'>]
    >(
      `UPDATE rule_chain SET first_node_index = @first_node_index, nodes = @nodes,
         connections = @connections, version = version + 1 WHERE id = @id`,
    );
    this.#delete = db.prepare<[string]>('DELETE FROM rule_chain WHERE id = ?');
    this.#root = db.prepare<[string, string], RuleChainRow>(
      'SELECT * FROM rule_chain WHERE tenant_id = ? AND type = ? AND root = 1',
    );
    this.#clearRoot = db.prepare<[string, string]>(
      'UPDATE rule_chain SET root = 0, version = version + 1 WHERE tenant_id = ? AND type = ? AND root = 1',
    );
    this.#setRoot = db.prepare<[string]>(
      'UPDATE rule_chain SET root = 1, version = version + 1 WHERE id = ?',
    );
    this.#all = db.prepare<[], RuleChainRow>('SELECT * FROM rule_chain ORDER BY created_time, id');
    this.#count = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM rule_chain');
  }

  byId(id: string): RuleChainRow | undefined {
    return this.#byId.get(id);
  }

  root(tenantId: string, type: string): RuleChainRow | undefined {
    return this.#root.get(tenantId, type);
  }

  all(): RuleChainRow[] {
    return this.#all.all();
  }

  count(): number {
    return this.#count.get()?.n ?? 0;
  }

  insert(row: RuleChainRow): void {
    this.#insert.run(row);
  }

  update(
    row: Pick<RuleChainRow, 'id' | 'name' | 'debug_mode' | 'configuration' | 'additional_info'>,
  ): void {
    this.#update.run(row);
  }

  updateMetadata(
    row: Pick<RuleChainRow, 'id' | 'first_node_index' | 'nodes' | 'connections'>,
  ): void {
    this.#updateMetadata.run(row);
  }

  delete(id: string): void {
    this.#delete.run(id);
  }

  /** Makes `id` the only root chain of its tenant and type, in one transaction. */
  makeRoot(id: string, tenantId: string, type: string): void {
    this.db.transaction(() => {
      this.#clearRoot.run(tenantId, type);
      this.#setRoot.run(id);
    })();
  }

  /** Statements of `page`, one per sort column and order (prepared on first use). */
  readonly #pages = new Map<
    string,
    { rows: Statement<unknown[], RuleChainRow>; count: Statement<unknown[], { n: number }> }
  >();

  page(
    tenantId: string,
    type: string,
    q: PageQuery<RuleChainSort>,
  ): { rows: RuleChainRow[]; total: number } {
    const column = SORT_COLUMN[q.sortProperty ?? 'createdTime'];
    const key = `${column} ${q.sortOrder}`;
    let stmts = this.#pages.get(key);
    if (!stmts) {
      const where = "tenant_id = ? AND type = ? AND (? IS NULL OR name LIKE ? ESCAPE '\\')";
      stmts = {
        rows: this.db.prepare<unknown[], RuleChainRow>(
          `SELECT * FROM rule_chain WHERE ${where} ORDER BY ${key}, id LIMIT ? OFFSET ?`,
        ),
        count: this.db.prepare<unknown[], { n: number }>(
          `SELECT count(*) AS n FROM rule_chain WHERE ${where}`,
        ),
      };
      this.#pages.set(key, stmts);
    }
    const search = q.textSearch ? `%${q.textSearch.replace(/[\\%_]/g, (c) => `\\${c}`)}%` : null;
    const args = [tenantId, type, search, search];
    const rows = stmts.rows.all(...args, q.pageSize, q.page * q.pageSize);
    return { rows, total: stmts.count.get(...args)?.n ?? 0 };
  }
}
