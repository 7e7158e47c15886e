import type { Migration } from '../migrator.js';

/**
 * Dashboards as stored JSON documents (platform.md §3.10, §5) and their customer assignments.
 *
 * - `dashboard`: the DashboardInfo fields as columns (listed and sorted without reading the
 *   document) and `configuration` as JSON text, kept as the client sent it.
 * - `dashboard_customer`: ThingsBoard CE assigns a dashboard to many customers. Deleting either
 *   side removes the assignment.
 */
export const m006Dashboards: Migration = {
  version: 6,
  name: 'dashboards',
  up(db) {
    db.exec(`
      CREATE TABLE dashboard (
        id            TEXT PRIMARY KEY,
        tenant_id     TEXT NOT NULL REFERENCES tenant(id),
        title         TEXT NOT NULL,
        image         TEXT,
        mobile_hide   INTEGER NOT NULL DEFAULT 0,
        mobile_order  INTEGER,
        configuration TEXT,
        created_time  INTEGER NOT NULL,
        version       INTEGER NOT NULL DEFAULT 1
      );
      CREATE INDEX dashboard_created ON dashboard(created_time);
      CREATE INDEX dashboard_title ON dashboard(title);

      CREATE TABLE dashboard_customer (
        dashboard_id  TEXT NOT NULL REFERENCES dashboard(id) ON DELETE CASCADE,
        customer_id   TEXT NOT NULL REFERENCES customer(id) ON DELETE CASCADE,
        created_time  INTEGER NOT NULL,
        PRIMARY KEY (dashboard_id, customer_id)
      ) WITHOUT ROWID;
      CREATE INDEX dashboard_customer_customer ON dashboard_customer(customer_id, dashboard_id);
    `);
  },
};
