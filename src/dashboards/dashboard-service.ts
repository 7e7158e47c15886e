import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import { entityId, type PageData, type PageQuery, pageData } from '../common/entity.js';
import { exceedsJsonDepth, validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import { ConflictError, NotFoundError, PayloadTooLargeError, ValidationError } from '../errors.js';
import type { TenantService } from '../tenant/tenant-service.js';
import {
  type AssignmentRow,
  type DashboardInfoRow,
  type DashboardRow,
  type DashboardSort,
  DashboardStore,
} from './dashboard-store.js';
import type {
  Dashboard,
  DashboardConfiguration,
  DashboardInfo,
  ShortCustomerInfo,
} from './types.js';

/**
 * Largest dashboard accepted: configuration plus image, as stored JSON text. ThingsBoard
 * dashboards are typically 10–200 KiB; an embedded base64 image adds to that.
 */
export const DEFAULT_MAX_DASHBOARD_BYTES = 1024 * 1024;

/** Nesting limit of a dashboard document; real ones stay below 15 levels. */
export const MAX_DASHBOARD_DEPTH = 64;

const idRef = z.object({ id: z.uuid('must be a UUID') });
const plainObject = z.looseObject({});

const stateSchema = z.looseObject({
  name: z.string().nullable().optional(),
  root: z.boolean().nullable().optional(),
  layouts: z.record(z.string(), plainObject).nullable().optional(),
});

const aliasSchema = z.looseObject({
  id: z.string().optional(),
  alias: z.string().optional(),
  filter: z.looseObject({
    type: z.string().trim().min(1, 'filter.type must not be empty'),
    resolveMultiple: z.boolean().nullable().optional(),
  }),
});

/**
 * The parts of the document this gateway and the UI rely on (platform.md §5): `widgets` is a map
 * keyed by widget id (old exports: an array), exactly one state is the root, every alias has a
 * filter type. Everything else is kept as sent.
 */
const configurationSchema = z
  .looseObject({
    description: z.string().nullable().optional(),
    widgets: z
      .union([z.record(z.string(), plainObject), z.array(plainObject)], {
        error: 'must be a map of widget id to widget, or an array of widgets',
      })
      .nullable()
      .optional(),
    states: z.record(z.string(), stateSchema).nullable().optional(),
    entityAliases: z.record(z.string(), aliasSchema).nullable().optional(),
    filters: plainObject.nullable().optional(),
    timewindow: plainObject.nullable().optional(),
    settings: plainObject.nullable().optional(),
  })
  .superRefine((c, ctx) => {
    if (!c.states) return;
    const roots = Object.keys(c.states).filter((k) => c.states?.[k]?.root === true);
    if (roots.length !== 1) {
      ctx.addIssue({
        code: 'custom',
        path: ['states'],
        message:
          roots.length === 0
            ? 'exactly one state must have "root": true, found none'
            : `exactly one state must have "root": true, found ${roots.length} (${roots.join(', ')})`,
      });
    }
  });

const dashboardBody = z.looseObject({
  id: idRef.nullable().optional(),
  title: z.string().trim().min(1, 'Dashboard title should be specified!').max(255),
  image: z.string().nullable().optional(),
  mobileHide: z.boolean().nullable().optional(),
  mobileOrder: z.number().int('must be an integer').nullable().optional(),
  configuration: configurationSchema.nullable().optional(),
  version: z.number().int().nullable().optional(),
});

export interface DashboardServiceDeps {
  readonly db: Db;
  readonly tenants: TenantService;
  readonly log: Logger;
  /** Largest stored dashboard (configuration + image) in bytes; default 1 MiB. */
  readonly maxBytes?: number;
}

/**
 * Dashboards as stored JSON documents (platform.md §3.10): ThingsBoard's create/update, get,
 * delete, tenant and customer lists, and CE's assignment to many customers. Access rules are the
 * transport's (auth/authorization.ts); this service only checks data.
 */
export class DashboardService {
  readonly #store: DashboardStore;
  readonly maxBytes: number;

  constructor(private readonly deps: DashboardServiceDeps) {
    this.#store = new DashboardStore(deps.db);
    this.maxBytes = deps.maxBytes ?? DEFAULT_MAX_DASHBOARD_BYTES;
  }

  /**
   * `POST /api/dashboard`: creates (no `id`) or updates (with `id`; unknown → 404) a dashboard.
   * A `version` that is not the stored one is a concurrent edit (409). `assignedCustomers` in the
   * body is ignored: assignments change only through assign/unassign.
   */
  save(body: unknown): Dashboard {
    if (exceedsJsonDepth(body, MAX_DASHBOARD_DEPTH))
      throw new ValidationError(
        `Invalid dashboard: nested deeper than ${MAX_DASHBOARD_DEPTH} levels`,
      );
    const input = validate(dashboardBody, body, 'dashboard');
    const configuration = input.configuration ? JSON.stringify(input.configuration) : null;
    const image = input.image ?? null;
    const size = Buffer.byteLength(configuration ?? '') + Buffer.byteLength(image ?? '');
    if (size > this.maxBytes) {
      throw new PayloadTooLargeError(
        `Dashboard is ${size} bytes (configuration + image); at most ${this.maxBytes} bytes are accepted`,
      );
    }
    const fields = {
      title: input.title,
      image,
      mobile_hide: input.mobileHide ? 1 : 0,
      mobile_order: input.mobileOrder ?? null,
      configuration,
    };

    if (input.id) {
      const id = input.id.id.toLowerCase();
      const existing = this.#store.byId(id);
      if (!existing) throw notFound(id);
      if (typeof input.version === 'number' && input.version !== existing.version) {
        throw new ConflictError(
          `Dashboard was already changed by someone else (version ${existing.version}, request has ${input.version})`,
        );
      }
      this.#store.update({ id, ...fields });
      return this.get(id);
    }

    const row: DashboardRow = {
      id: randomUUID(),
      tenant_id: this.deps.tenants.id,
      created_time: Date.now(),
      version: 1,
      ...fields,
    };
    this.#store.insert(row);
    this.deps.log.info({ dashboardId: row.id, title: row.title }, 'dashboard created');
    return this.get(row.id);
  }

  get(id: string): Dashboard {
    const found = this.find(id);
    if (!found) throw notFound(id);
    return found;
  }

  find(id: string): Dashboard | undefined {
    const row = this.#store.byId(id);
    if (!row) return undefined;
    const info = this.#infos([row])[0] as DashboardInfo;
    return {
      ...info,
      configuration:
        row.configuration === null
          ? null
          : (JSON.parse(row.configuration) as DashboardConfiguration),
    };
  }

  delete(id: string): void {
    if (!this.#store.delete(id)) throw notFound(id);
    this.deps.log.info({ dashboardId: id }, 'dashboard deleted');
  }

  /** `GET /api/tenant/dashboards`. */
  listTenant(
    q: PageQuery<DashboardSort>,
    opts: { mobile?: boolean } = {},
  ): PageData<DashboardInfo> {
    const { rows, total } = this.#store.page(q, { mobile: opts.mobile });
    return pageData(this.#infos(rows), total, q);
  }

  /** `GET /api/customer/{customerId}/dashboards`: the dashboards assigned to that customer. */
  listCustomer(
    customerId: string,
    q: PageQuery<DashboardSort>,
    opts: { mobile?: boolean } = {},
  ): PageData<DashboardInfo> {
    this.#checkCustomer(customerId);
    const { rows, total } = this.#store.page(q, { customerId, mobile: opts.mobile });
    return pageData(this.#infos(rows), total, q);
  }

  /** Assigns a dashboard to one more customer; assigning twice changes nothing (as ThingsBoard). */
  assign(customerId: string, dashboardId: string): Dashboard {
    this.#checkCustomer(customerId);
    if (!this.#store.byId(dashboardId)) throw notFound(dashboardId);
    if (this.#store.assign(dashboardId, customerId, Date.now()))
      this.deps.log.info({ dashboardId, customerId }, 'dashboard assigned');
    return this.get(dashboardId);
  }

  /** Removes one customer's assignment; a missing assignment changes nothing (as ThingsBoard). */
  unassign(customerId: string, dashboardId: string): Dashboard {
    this.#checkCustomer(customerId);
    if (!this.#store.byId(dashboardId)) throw notFound(dashboardId);
    if (this.#store.unassign(dashboardId, customerId))
      this.deps.log.info({ dashboardId, customerId }, 'dashboard unassigned');
    return this.get(dashboardId);
  }

  /**
   * The PE owner change for a dashboard (platform reference §6.3) on CE's assignment list: a
   * customer owner leaves that customer as the only assignment; the tenant (null) removes them all.
   */
  setOwner(dashboardId: string, customerId: string | null): Dashboard {
    if (customerId !== null) this.#checkCustomer(customerId);
    const current = this.get(dashboardId).assignedCustomers.map((a) => a.customerId.id);
    this.deps.db.transaction(() => {
      for (const other of current) {
        if (other !== customerId) this.#store.unassign(dashboardId, other);
      }
      if (customerId !== null) this.#store.assign(dashboardId, customerId, Date.now());
    })();
    this.deps.log.info({ dashboardId, customerId }, 'dashboard owner changed');
    return this.get(dashboardId);
  }

  #checkCustomer(customerId: string): void {
    if (!this.#store.customerExists(customerId))
      throw new NotFoundError(`Customer with id [${customerId}] is not found`);
  }

  /** Infos of the rows, with their assigned customers read in one query. */
  #infos(rows: readonly DashboardInfoRow[]): DashboardInfo[] {
    const byDashboard = new Map<string, ShortCustomerInfo[]>();
    for (const a of this.#store.assignments(rows.map((r) => r.id))) {
      let list = byDashboard.get(a.dashboard_id);
      if (!list) {
        list = [];
        byDashboard.set(a.dashboard_id, list);
      }
      list.push(toShortCustomer(a));
    }
    return rows.map((r) => toInfo(r, byDashboard.get(r.id) ?? []));
  }
}

function notFound(id: string): NotFoundError {
  return new NotFoundError(`Dashboard with id [${id}] is not found`);
}

function toShortCustomer(a: AssignmentRow): ShortCustomerInfo {
  return {
    customerId: entityId('CUSTOMER', a.customer_id),
    title: a.title,
    public: a.is_public === 1,
  };
}

function toInfo(row: DashboardInfoRow, assignedCustomers: ShortCustomerInfo[]): DashboardInfo {
  return {
    id: entityId('DASHBOARD', row.id),
    createdTime: row.created_time,
    tenantId: entityId('TENANT', row.tenant_id),
    title: row.title,
    name: row.title,
    image: row.image,
    mobileHide: row.mobile_hide === 1,
    mobileOrder: row.mobile_order,
    assignedCustomers,
    version: row.version,
  };
}
