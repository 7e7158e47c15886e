/**
 * Authorization rules in one place (platform reference §6.1–6.2, CE `CustomerUserPermissions`).
 *
 * Two kinds of refusal: an operation the caller's authority may never do is 403; an entity
 * outside what the caller may see is 404, so that ids of other customers do not leak.
 * Devices: `deviceAccess` is the one decision; REST handlers call it through the assert helpers.
 */

import { ForbiddenError, NotFoundError } from '../errors.js';
import type { Principal } from './auth-service.js';

export function isTenantAdmin(principal: Principal): boolean {
  return principal.authority === 'TENANT_ADMIN';
}

/** 403 unless the caller is the tenant administrator. */
export function assertTenantAdmin(principal: Principal): void {
  if (!isTenantAdmin(principal)) throw new ForbiddenError();
}

/** The tenant admin reads every customer; a customer user only its own. */
export function canReadCustomer(principal: Principal, customerId: string): boolean {
  return isTenantAdmin(principal) || principal.customerId === customerId;
}

/** 404 (not 403) for a customer the caller may not see. */
export function assertCanReadCustomer(principal: Principal, customerId: string): void {
  if (!canReadCustomer(principal, customerId))
    throw new NotFoundError(`Customer with id [${customerId}] is not found`);
}

/** The user being checked: its id and customer (null for a tenant administrator). */
export interface UserRef {
  readonly id: string;
  readonly customerId: string | null;
}

/** The tenant admin reads every user; a customer user reads itself and users of its customer. */
export function canReadUser(principal: Principal, user: UserRef): boolean {
  if (isTenantAdmin(principal) || principal.userId === user.id) return true;
  return principal.customerId !== null && principal.customerId === user.customerId;
}

export function assertCanReadUser(principal: Principal, user: UserRef): void {
  if (!canReadUser(principal, user))
    throw new NotFoundError(`User with id [${user.id}] is not found`);
}

/** The tenant admin writes every user; a customer user only itself (404 if it cannot even see it). */
export function assertCanWriteUser(principal: Principal, user: UserRef): void {
  assertCanReadUser(principal, user);
  if (!isTenantAdmin(principal) && principal.userId !== user.id) throw new ForbiddenError();
}

/** An entity with attributes besides devices (the tenant, a customer, a user) as authorization sees it. */
export type OwnerRef =
  | { readonly type: 'TENANT'; readonly id: string }
  | { readonly type: 'CUSTOMER'; readonly id: string }
  | { readonly type: 'USER'; readonly id: string; readonly user: UserRef };

/**
 * The one decision on the attributes of the tenant, a customer or a user (CE permissions, §6.2),
 * for REST and WebSocket subscriptions alike: the tenant admin writes all of them; a customer user
 * writes its own user's (READ_ATTRIBUTES/WRITE_ATTRIBUTES on itself), reads its own customer's, and
 * nothing else (a peer user gives READ but not READ_ATTRIBUTES; the tenant gives no permission).
 */
export function ownerAttributeAccess(principal: Principal, owner: OwnerRef): Access {
  if (isTenantAdmin(principal)) return 'write';
  if (principal.authority !== 'CUSTOMER_USER') return 'none';
  if (owner.type === 'USER') return principal.userId === owner.id ? 'write' : 'none';
  if (owner.type === 'CUSTOMER') return canReadCustomer(principal, owner.id) ? 'read' : 'none';
  return 'none';
}

/**
 * REST refusals of `ownerAttributeAccess`: 404 for a customer or user the caller may not even see
 * (ids of others do not leak), 403 for the tenant, a peer user, or a write with read access.
 */
export function assertOwnerAttributeAccess(
  principal: Principal,
  owner: OwnerRef,
  op: 'read' | 'write',
): void {
  const access = ownerAttributeAccess(principal, owner);
  if (access === 'write' || (access === 'read' && op === 'read')) return;
  if (owner.type === 'CUSTOMER') assertCanReadCustomer(principal, owner.id);
  if (owner.type === 'USER') assertCanReadUser(principal, owner.user);
  throw new ForbiddenError();
}

/**
 * A dashboard as authorization sees it: the customers it is assigned to, and whether a DASHBOARD
 * group holding it is shared with the caller's customer (PE sharing, reference §6.3).
 */
export interface DashboardRef {
  readonly id: string;
  readonly customerIds: readonly string[];
  readonly sharedWithCaller?: boolean;
}

/**
 * The tenant admin reads every dashboard; a customer user those assigned to its customer or
 * shared with it through a group (read-only either way: dashboard writes are the tenant's).
 */
export function canReadDashboard(principal: Principal, dashboard: DashboardRef): boolean {
  if (isTenantAdmin(principal)) return true;
  if (principal.customerId === null) return false;
  return (
    dashboard.customerIds.includes(principal.customerId) || dashboard.sharedWithCaller === true
  );
}

/** 404 (not 403) for a dashboard the caller may not see, so that its id does not leak. */
export function assertCanReadDashboard(principal: Principal, dashboard: DashboardRef): void {
  if (!canReadDashboard(principal, dashboard))
    throw new NotFoundError(`Dashboard with id [${dashboard.id}] is not found`);
}

/** How far a caller may go with one entity: nothing (404), read only (403 on writes), or write. */
export type Access = 'none' | 'read' | 'write';

/** A device as authorization sees it: its id and owner (null when the tenant owns it). */
export interface DeviceRef {
  readonly id: string;
  readonly customerId: string | null;
}

/**
 * Access a customer user gets to a device through something other than ownership: shared entity
 * groups (PE "Sharing", platform reference §6.3), the best level of any DEVICE group holding the
 * device that is shared with the caller's customer (`GroupService.deviceShare`). The default
 * shares nothing (domain tests, callers without groups).
 */
export type SharedDeviceAccess = (principal: Principal, device: DeviceRef) => Access;

export const NOTHING_SHARED: SharedDeviceAccess = () => 'none';

/**
 * The one device decision (CE `CustomerUserPermissions`, reference §6.2): the tenant admin writes
 * every device; a customer user writes the devices its customer owns (read, read credentials,
 * attributes, telemetry, RPC, update) and what a shared group gives it (read or write); nothing
 * else.
 */
export function deviceAccess(
  principal: Principal,
  device: DeviceRef,
  shared: SharedDeviceAccess = NOTHING_SHARED,
): Access {
  if (isTenantAdmin(principal)) return 'write';
  if (principal.authority !== 'CUSTOMER_USER' || principal.customerId === null) return 'none';
  if (device.customerId === principal.customerId) return 'write';
  return shared(principal, device);
}

/**
 * Alarm assignment (ThingsBoard's `POST /api/alarm/{id}/assign/{userId}`): the assignee is an
 * enabled user the caller can read (a customer user: users of its own customer) who can see the
 * alarm's originator device.
 */
export function canAssignAlarmTo(
  caller: Principal,
  assignee: Principal & { readonly enabled: boolean },
  device: DeviceRef,
  shared: SharedDeviceAccess = NOTHING_SHARED,
): boolean {
  if (!assignee.enabled) return false;
  if (!canReadUser(caller, { id: assignee.userId, customerId: assignee.customerId })) return false;
  return deviceAccess(assignee, device, shared) !== 'none';
}

function deviceNotFound(id: string): NotFoundError {
  return new NotFoundError(`Device with id [${id}] is not found`);
}

/** 404 (not 403) for a device the caller may not see, so that its id does not leak. */
export function assertCanReadDevice(
  principal: Principal,
  device: DeviceRef,
  shared?: SharedDeviceAccess,
): void {
  if (deviceAccess(principal, device, shared) === 'none') throw deviceNotFound(device.id);
}

/** 404 for a device the caller may not see, 403 for one it may only read. */
export function assertCanWriteDevice(
  principal: Principal,
  device: DeviceRef,
  shared?: SharedDeviceAccess,
): void {
  const access = deviceAccess(principal, device, shared);
  if (access === 'none') throw deviceNotFound(device.id);
  if (access === 'read') throw new ForbiddenError();
}

/**
 * Device-management operations of the tenant only (create, delete, credentials change, owner
 * change, assign): 404 for a device the caller cannot see, 403 for one it can.
 */
export function assertCanManageDevice(
  principal: Principal,
  device: DeviceRef,
  shared?: SharedDeviceAccess,
): void {
  assertCanReadDevice(principal, device, shared);
  assertTenantAdmin(principal);
}

/** Claiming completes on the customer side only (reference §3.7: CUSTOMER_USER only). */
export function assertCanClaimDevices(principal: Principal): string {
  if (principal.authority !== 'CUSTOMER_USER' || principal.customerId === null)
    throw new ForbiddenError();
  return principal.customerId;
}
