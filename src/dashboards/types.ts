/** Dashboard JSON as ThingsBoard serializes it (platform.md §3.10, §5). */

import type { EntityId } from '../common/entity.js';

/** ThingsBoard's `ShortCustomerInfo`: one entry of `assignedCustomers`. */
export interface ShortCustomerInfo {
  readonly customerId: EntityId<'CUSTOMER'>;
  readonly title: string;
  /** The customer's `additionalInfo.isPublic` (ThingsBoard's "Public" customer). */
  readonly public: boolean;
}

/** A dashboard without its configuration: what lists return. */
export interface DashboardInfo {
  readonly id: EntityId<'DASHBOARD'>;
  readonly createdTime: number;
  readonly tenantId: EntityId<'TENANT'>;
  readonly title: string;
  /** Read-only, always equal to `title` (platform.md §0). */
  readonly name: string;
  readonly image: string | null;
  readonly mobileHide: boolean;
  readonly mobileOrder: number | null;
  readonly assignedCustomers: readonly ShortCustomerInfo[];
  /** Optimistic locking (ThingsBoard ≥ 3.8): +1 on every save. */
  readonly version: number;
}

/**
 * The dashboard document (`widgets`, `states`, `entityAliases`, `filters`, `timewindow`,
 * `settings`, ...), stored as the client sent it. Only the parts listed here are checked on save.
 */
export interface DashboardConfiguration {
  readonly description?: string | null;
  readonly widgets?: Readonly<Record<string, unknown>> | readonly unknown[];
  readonly states?: Readonly<Record<string, DashboardState>>;
  readonly entityAliases?: Readonly<Record<string, EntityAlias>>;
  readonly [key: string]: unknown;
}

export interface DashboardState {
  readonly name?: string;
  readonly root?: boolean;
  readonly layouts?: Readonly<Record<string, unknown>>;
  readonly [key: string]: unknown;
}

export interface EntityAlias {
  readonly id?: string;
  readonly alias?: string;
  readonly filter: { readonly type: string; readonly [key: string]: unknown };
  readonly [key: string]: unknown;
}

export interface Dashboard extends DashboardInfo {
  readonly configuration: DashboardConfiguration | null;
}
