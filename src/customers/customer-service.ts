import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { AuditActor, AuditService } from '../audit/audit-service.js';
import {
  type EntityId,
  entityId,
  type PageData,
  type PageQuery,
  pageData,
} from '../common/entity.js';
import { validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { type CustomerRow, type CustomerSort, CustomerStore } from './customer-store.js';

/** ThingsBoard's Customer JSON (platform reference §3.6). */
export interface Customer {
  readonly id: EntityId<'CUSTOMER'>;
  readonly createdTime: number;
  readonly tenantId: EntityId<'TENANT'>;
  readonly title: string;
  readonly name: string;
  readonly email: string | null;
  readonly phone: string | null;
  readonly country: string | null;
  readonly state: string | null;
  readonly city: string | null;
  readonly address: string | null;
  readonly address2: string | null;
  readonly zip: string | null;
  readonly additionalInfo: unknown;
  readonly externalId: EntityId<'CUSTOMER'> | null;
  readonly version: number;
}

const text = z.string().max(255).nullish();

const customerBody = z.object({
  id: z.object({ id: z.string().uuid() }).nullish(),
  title: z.string().trim().min(1, 'must not be empty').max(255),
  email: z.string().trim().email().max(255).nullish().or(z.literal('')),
  phone: text,
  country: text,
  state: text,
  city: text,
  address: text,
  address2: text,
  zip: text,
  externalId: z.object({ id: z.string().uuid() }).nullish(),
  additionalInfo: z.record(z.string(), z.unknown()).nullish(),
  version: z.number().int().nullish(),
});

export interface CustomerServiceDeps {
  readonly db: Db;
  readonly tenants: TenantService;
  readonly audit: AuditService;
}

/** Customers of the tenant. Title is unique per tenant. */
export class CustomerService {
  readonly #store: CustomerStore;

  constructor(private readonly deps: CustomerServiceDeps) {
    this.#store = new CustomerStore(deps.db);
  }

  /** Creates (no `id`) or updates (with `id`) a customer: ThingsBoard's `POST /api/customer`. */
  save(body: unknown, actor: AuditActor): Customer {
    const input = validate(customerBody, body, 'customer');
    const tenantId = this.deps.tenants.id;
    const fields = {
      title: input.title,
      email: input.email || null,
      phone: input.phone ?? null,
      country: input.country ?? null,
      state: input.state ?? null,
      city: input.city ?? null,
      address: input.address ?? null,
      address2: input.address2 ?? null,
      zip: input.zip ?? null,
      external_id: input.externalId?.id.toLowerCase() ?? null,
      additional_info: input.additionalInfo ? JSON.stringify(input.additionalInfo) : null,
    };
    const sameTitle = this.#store.byTitle(tenantId, input.title);
    if (input.id) {
      const id = input.id.id.toLowerCase();
      const existing = this.#row(id);
      if (input.version != null && input.version !== existing.version) {
        throw new ConflictError(
          `Customer was updated by another request (version ${existing.version}, got ${input.version})`,
        );
      }
      if (sameTitle && sameTitle.id !== id) throw duplicateTitle();
      this.#store.update({ id, ...fields });
      const customer = this.get(id);
      this.#audit('UPDATED', customer, actor);
      return customer;
    }
    if (sameTitle) throw duplicateTitle();
    const id = randomUUID();
    this.#store.insert({
      id,
      tenant_id: tenantId,
      ...fields,
      created_time: Date.now(),
      version: 1,
    });
    const customer = this.get(id);
    this.#audit('ADDED', customer, actor);
    return customer;
  }

  get(id: string): Customer {
    return toCustomer(this.#row(id));
  }

  exists(id: string): boolean {
    return this.#store.byId(id) !== undefined;
  }

  /**
   * Deletes a customer. Its users go with it (`user.customer_id ON DELETE CASCADE`, their tokens
   * cascade from the user); its devices stay with the tenant, unassigned (`ON DELETE SET NULL`).
   */
  delete(id: string, actor: AuditActor): void {
    const row = this.#row(id);
    const deletedUsers = this.#store.countUsers(id);
    this.#store.delete(id);
    this.deps.audit.record({
      actionType: 'DELETED',
      entityId: entityId('CUSTOMER', id),
      entityName: row.title,
      user: actor,
      actionData: { deletedUsers },
    });
  }

  list(q: PageQuery<CustomerSort>): PageData<Customer> {
    const { rows, total } = this.#store.page(q);
    return pageData(rows.map(toCustomer), total, q);
  }

  #row(id: string): CustomerRow {
    const row = this.#store.byId(id);
    if (!row) throw new NotFoundError(`Customer with id [${id}] is not found`);
    return row;
  }

  #audit(actionType: 'ADDED' | 'UPDATED', customer: Customer, actor: AuditActor): void {
    this.deps.audit.record({
      actionType,
      entityId: customer.id,
      entityName: customer.title,
      user: actor,
    });
  }
}

function duplicateTitle(): ValidationError {
  return new ValidationError('Customer with such title already exists!');
}

function toCustomer(row: CustomerRow): Customer {
  return {
    id: entityId('CUSTOMER', row.id),
    createdTime: row.created_time,
    tenantId: entityId('TENANT', row.tenant_id),
    title: row.title,
    name: row.title,
    email: row.email,
    phone: row.phone,
    country: row.country,
    state: row.state,
    city: row.city,
    address: row.address,
    address2: row.address2,
    zip: row.zip,
    additionalInfo: row.additional_info === null ? {} : JSON.parse(row.additional_info),
    externalId: row.external_id ? entityId('CUSTOMER', row.external_id) : null,
    version: row.version,
  };
}
