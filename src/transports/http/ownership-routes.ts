import { Hono } from 'hono';
import {
  assertCanClaimDevices,
  assertCanManageDevice,
  assertCanReadCustomer,
  assertCanWriteDevice,
  assertTenantAdmin,
  type SharedDeviceAccess,
} from '../../auth/authorization.js';
import type { ClaimService } from '../../claims/claim-service.js';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import type { CustomerService } from '../../customers/customer-service.js';
import type { DashboardService } from '../../dashboards/dashboard-service.js';
import type { DeviceService } from '../../devices/device-service.js';
import { DEVICE_SORT } from '../../devices/device-store.js';
import { NotFoundError, ValidationError } from '../../errors.js';
import { actorOf } from '../../users/user-service.js';
import { type HttpEnv, queryRecord } from './context.js';
import type { RequireUser } from './middleware.js';

/**
 * Device ownership on ThingsBoard's REST paths (mounted at `/api`): the PE owner change
 * (platform reference §6.3), CE assign/unassign and the customer's device list (§3.6), and the
 * customer side of claiming (§3.7, device-api.md §5.2). Decisions come from `auth/authorization`;
 * the device domain does the work.
 */
export function ownershipRoutes(deps: {
  devices: DeviceService;
  customers: CustomerService;
  claims: ClaimService;
  dashboards: DashboardService;
  requireUser: RequireUser;
  /** Access through shared groups: 403 rather than 404 on a device shared with the caller. */
  shared?: SharedDeviceAccess;
}) {
  const { devices, customers, claims, dashboards, requireUser, shared } = deps;
  const app = new Hono<HttpEnv>();

  // Customer side of claiming (§5.2). Registered before `/customer/:customerId/device/:deviceId`,
  // which a device named "device" would otherwise shadow.
  app.post('/customer/device/:deviceName/claim', requireUser, async (c) => {
    const principal = c.var.principal;
    const customerId = assertCanClaimDevices(principal);
    const text = await c.req.text();
    let body: unknown;
    if (text.trim() !== '') {
      try {
        body = JSON.parse(text);
      } catch (err) {
        throw new ValidationError(`Invalid JSON body: ${(err as Error).message}`, { cause: err });
      }
    }
    const { secretKey } = claims.parseRequest(body);
    const result = claims.claimByCustomer(c.req.param('deviceName'), secretKey, (deviceId) => {
      devices.setOwner(deviceId, customerId, actorOf(principal), 'ASSIGNED_TO_CUSTOMER');
    });
    if (result.response !== 'SUCCESS') return c.json(result.response, 400);
    return c.json({ device: devices.get(result.deviceId), response: 'SUCCESS' });
  });

  // Re-claim (§5.2): the owner gives the device back to the tenant; 200 with an empty body.
  app.delete('/customer/device/:deviceName/claim', requireUser, (c) => {
    const principal = c.var.principal;
    const owner = devices.ownerByName(c.req.param('deviceName'));
    assertCanWriteDevice(principal, owner);
    if (owner.customerId !== null)
      devices.setOwner(owner.id, null, actorOf(principal), 'UNASSIGNED_FROM_CUSTOMER');
    return c.body(null, 200);
  });

  // CE assign (§3.6): returns the Device.
  app.post('/customer/:customerId/device/:deviceId', requireUser, (c) => {
    const principal = c.var.principal;
    const customerId = requireUuid(c.req.param('customerId'), 'customerId');
    const owner = devices.owner(requireUuid(c.req.param('deviceId'), 'deviceId'));
    assertCanManageDevice(principal, owner, shared);
    return c.json(
      devices.setOwner(owner.id, customerId, actorOf(principal), 'ASSIGNED_TO_CUSTOMER'),
    );
  });

  // CE unassign (§3.6): 400 for a device the tenant owns.
  app.delete('/customer/device/:deviceId', requireUser, (c) => {
    const principal = c.var.principal;
    const owner = devices.owner(requireUuid(c.req.param('deviceId'), 'deviceId'));
    assertCanManageDevice(principal, owner, shared);
    if (owner.customerId === null)
      throw new ValidationError("Device isn't assigned to any customer!");
    return c.json(devices.setOwner(owner.id, null, actorOf(principal), 'UNASSIGNED_FROM_CUSTOMER'));
  });

  // The devices a customer owns: the tenant admin for any customer, a customer user for its own.
  app.get('/customer/:customerId/devices', requireUser, (c) => {
    const customerId = requireUuid(c.req.param('customerId'), 'customerId');
    assertCanReadCustomer(c.var.principal, customerId);
    if (!customers.exists(customerId))
      throw new NotFoundError(`Customer with id [${customerId}] is not found`);
    return c.json(devices.listByCustomer(customerId, parsePageQuery(queryRecord(c), DEVICE_SORT)));
  });

  // PE owner change (§6.3): to a customer or back to the tenant; 200 with an empty body.
  app.post(
    '/owner/:ownerType{CUSTOMER|TENANT}/:ownerId/:entityType/:entityId',
    requireUser,
    (c) => {
      const principal = c.var.principal;
      const ownerId = requireUuid(c.req.param('ownerId'), 'ownerId');
      const entityType = c.req.param('entityType');
      const entityId = requireUuid(c.req.param('entityId'), 'entityId');
      // A device the caller cannot see is 404, one it can see but not manage 403.
      if (entityType === 'DEVICE')
        assertCanManageDevice(principal, devices.owner(entityId), shared);
      else assertTenantAdmin(principal);
      let customerId: string | null = null;
      if (c.req.param('ownerType') === 'CUSTOMER') customerId = ownerId;
      else if (ownerId !== principal.tenantId)
        throw new NotFoundError(`Tenant with id [${ownerId}] is not found`);
      if (entityType === 'DEVICE') {
        devices.setOwner(entityId, customerId, actorOf(principal), 'CHANGE_OWNER');
      } else if (entityType === 'DASHBOARD') {
        // @NOTE: dashboards keep CE's assignment list (one dashboard, many customers); an owner
        // change leaves the new owner as the only assignment, or none for the tenant.
        dashboards.setOwner(entityId, customerId);
      } else {
        throw new ValidationError(`Owner change is not supported for entity type ${entityType}`);
      }
      return c.body(null, 200);
    },
  );

  return app;
}
