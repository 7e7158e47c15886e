import type { PageQuery } from '../common/entity.js';
import type { Db } from '../db/open.js';

export interface DashboardRow {
  id: string;
  tenant_id: string;
  title: string;
  image: string | null;
  mobile_hide: number;
  mobile_order: number | null;
  /** JSON text; null when the dashboard has no configuration. */
  configuration: string | null;
  created_time: number;
  version: number;
}

/** A row without its configuration (lists and infos never read the document). */
export type DashboardInfoRow = Omit<DashboardRow, 'configuration'>;

/** One assignment with what `assignedCustomers` shows of the customer. */
export interface AssignmentRow {
  dashboard_id: string;
  customer_id: string;
  title: string;
  is_public: number;
}

export const DASHBOARD_SORT = ['createdTime', 'title', 'name'] as const;
export type DashboardSort = (typeof DASHBOARD_SORT)[number];

const SORT_COLUMN: Record<DashboardSort, string> = {
  createdTime: 'd.created_time',
  title: 'd.title',
  name: 'd.title',
};

const INFO_COLUMNS =
  'd.id, d.tenant_id, d.title, d.image, d.mobile_hide, d.mobile_order, d.created_time, d.version';

/** SQL for `dashboard` and `dashboard_customer`; reads `customer` for titles and existence. */
export class DashboardStore {
  readonly #byId;
  readonly #insert;
  readonly #update;
  readonly #delete;
  readonly #assignments;
  readonly #assign;
  readonly #unassign;
  readonly #customer;

  constructor(private readonly db: Db) {
    this.#byId = db.prepare<[string], DashboardRow>('SELECT * FROM dashboard WHERE id = ?');
    this.#insert = db.prepare<[DashboardRow]>(
      `INSERT INTO dashboard (id, tenant_id, title, image, mobile_hide, mobile_order, configuration,
         created_time, version)
       VALUES (@id, @tenant_id, @title, @image, @mobile_hide, @mobile_order, @configuration,
         @created_time, @version)`,
    );
    this.#update = db.prepare<
      [
        Pick<
          DashboardRow,
          'id' | 'title' | 'image' | 'mobile_hide' | 'mobile_order' | 'configuration'
        >,
      ]
    >(
      `UPDATE dashboard SET title = @title, image = @image, mobile_hide = @mobile_hide,
         mobile_order = @mobile_order, configuration = @configuration, version = version + 1
       WHERE id = @id`,
    );
    this.#delete = db.prepare<[string]>('DELETE FROM dashboard WHERE id = ?');
    // @NOTE: json_valid guards json_extract, which throws on text that is not JSON.
    this.#assignments = db.prepare<[string], AssignmentRow>(
      `SELECT dc.dashboard_id, dc.customer_id, c.title,
         CASE WHEN json_valid(c.additional_info)
           THEN coalesce(json_extract(c.additional_info, '$.isPublic'), 0) ELSE 0 END AS is_public
       FROM dashboard_customer dc JOIN customer c ON c.id = dc.customer_id
       WHERE dc.dashboard_id IN (SELECT value FROM json_each(?))
       ORDER BY c.title, c.id`,
    );
    this.#assign = db.prepare<[string, string, number]>(
      `INSERT INTO dashboard_customer (dashboard_id, customer_id, created_time) VALUES (?, ?, ?)
       ON CONFLICT DO NOTHING`,
    );
    this.#unassign = db.prepare<[string, string]>(
      'DELETE FROM dashboard_customer WHERE dashboard_id = ? AND customer_id = ?',
    );
    this.#customer = db.prepare<[string], { id: string }>('SELECT id FROM customer WHERE id = ?');
  }

  byId(id: string): DashboardRow | undefined {
    return this.#byId.get(id);
  }

  insert(row: DashboardRow): void {
    this.#insert.run(row);
  }

  update(
    row: Pick<
      DashboardRow,
      'id' | 'title' | 'image' | 'mobile_hide' | 'mobile_order' | 'configuration'
    >,
  ): void {
    this.#update.run(row);
  }

  delete(id: string): boolean {
    return this.#delete.run(id).changes > 0;
  }

  /** Assignments of the given dashboards, ordered by customer title. */
  assignments(dashboardIds: readonly string[]): AssignmentRow[] {
    if (dashboardIds.length === 0) return [];
    return this.#assignments.all(JSON.stringify(dashboardIds));
  }

  /** False when the assignment existed already. */
  assign(dashboardId: string, customerId: string, now: number): boolean {
    return this.#assign.run(dashboardId, customerId, now).changes > 0;
  }

  /** False when there was no such assignment. */
  unassign(dashboardId: string, customerId: string): boolean {
    return this.#unassign.run(dashboardId, customerId).changes > 0;
  }

  customerExists(id: string): boolean {
    return this.#customer.get(id) !== undefined;
  }

  /**
   * One page of dashboard infos. `customerId` keeps the dashboards assigned to that customer;
   * `mobile` keeps those not hidden on mobile and orders by `mobileOrder` first, as ThingsBoard's
   * `?mobile=true` does.
   */
  page(
    q: PageQuery<DashboardSort>,
    filter: { customerId?: string; mobile?: boolean } = {},
  ): { rows: DashboardInfoRow[]; total: number } {
    const where: string[] = [];
    const params: Record<string, unknown> = {};
    let join = '';
    if (filter.customerId) {
      join =
        ' JOIN dashboard_customer dc ON dc.dashboard_id = d.id AND dc.customer_id = @customerId';
      params.customerId = filter.customerId;
    }
    if (q.textSearch) {
      where.push(`lower(d.title) LIKE @search ESCAPE '\\'`);
      params.search = `%${q.textSearch.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    }
    if (filter.mobile) where.push('d.mobile_hide = 0');
    const clause = `${join}${where.length ? ` WHERE ${where.join(' AND ')}` : ''}`;
    const total = (
      this.db.prepare(`SELECT count(*) AS n FROM dashboard d${clause}`).get(params) as {
        n: number;
      }
    ).n;
    const column = SORT_COLUMN[q.sortProperty ?? 'createdTime'];
    const order = filter.mobile
      ? `d.mobile_order IS NULL, d.mobile_order, ${column} ${q.sortOrder}`
      : `${column} ${q.sortOrder}`;
    const rows = this.db
      .prepare(
        `SELECT ${INFO_COLUMNS} FROM dashboard d${clause} ORDER BY ${order}, d.id ${q.sortOrder}
         LIMIT @limit OFFSET @offset`,
      )
      .all({ ...params, limit: q.pageSize, offset: q.page * q.pageSize }) as DashboardInfoRow[];
    return { rows, total };
  }
}
