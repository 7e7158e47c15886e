import { type Context, Hono } from 'hono';
import type { AuditService } from '../../audit/audit-service.js';
import type { AuditFilter } from '../../audit/audit-store.js';
import {
  assertCanManageDevice,
  assertTenantAdmin,
  type SharedDeviceAccess,
} from '../../auth/authorization.js';
import { ENTITY_TYPES, parsePageQuery, requireUuid } from '../../common/entity.js';
import type { DeviceService } from '../../devices/device-service.js';
import { ValidationError } from '../../errors.js';
import { type HttpEnv, queryRecord } from './context.js';
import type { RequireUser } from './middleware.js';

function timeParam(raw: string | undefined, name: string): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d+$/.test(raw)) throw new ValidationError(`${name} must be epoch milliseconds`);
  return Number(raw);
}

/**
 * ThingsBoard's AuditLog paging: `GET /api/audit/logs` and its `/entity/{entityType}/{entityId}`,
 * `/customer/{customerId}` and `/user/{userId}` variants, all for the tenant administrator only
 * (a device the caller cannot see is 404 first, as every device route says).
 */
export function auditRoutes(deps: {
  audit: AuditService;
  devices: Pick<DeviceService, 'owner'>;
  requireUser: RequireUser;
  shared?: SharedDeviceAccess;
}) {
  const app = new Hono<HttpEnv>();

  /** One page of the log under `only` plus the query's time and action filters, newest first. */
  const page = (c: Context<HttpEnv>, only: AuditFilter = {}) => {
    assertTenantAdmin(c.var.principal);
    const params = queryRecord(c);
    const q = parsePageQuery(params, ['createdTime'] as const);
    const actionTypes = params.actionTypes
      ?.split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    const filter = {
      ...only,
      startTime: timeParam(params.startTime, 'startTime'),
      endTime: timeParam(params.endTime, 'endTime'),
      actionTypes,
    };
    // ThingsBoard lists the newest first unless told otherwise.
    return c.json(
      deps.audit.list({ ...q, sortOrder: params.sortOrder ? q.sortOrder : 'DESC' }, filter),
    );
  };

  app.get('/audit/logs', deps.requireUser, (c) => page(c));

  app.get('/audit/logs/entity/:entityType/:entityId', deps.requireUser, (c) => {
    const entityType = c.req.param('entityType');
    if (!(ENTITY_TYPES as readonly string[]).includes(entityType))
      throw new ValidationError(`Unknown entity type: ${entityType}`);
    const id = requireUuid(c.req.param('entityId'), 'entityId');
    if (entityType === 'DEVICE')
      assertCanManageDevice(c.var.principal, deps.devices.owner(id), deps.shared);
    return page(c, { entity: { entityType, id } });
  });

  app.get('/audit/logs/customer/:customerId', deps.requireUser, (c) =>
    page(c, { customerId: requireUuid(c.req.param('customerId'), 'customerId') }),
  );

  app.get('/audit/logs/user/:userId', deps.requireUser, (c) =>
    page(c, { userId: requireUuid(c.req.param('userId'), 'userId') }),
  );

  return app;
}
