import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Principal } from '../../auth/auth-service.js';
import {
  assertCanReadCustomer,
  assertCanReadDashboard,
  assertTenantAdmin,
} from '../../auth/authorization.js';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import type { DashboardService } from '../../dashboards/dashboard-service.js';
import { DASHBOARD_SORT } from '../../dashboards/dashboard-store.js';
import type { Dashboard } from '../../dashboards/types.js';
import { NotFoundError, PayloadTooLargeError, ValidationError } from '../../errors.js';
import type { GroupService } from '../../groups/group-service.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import type { RequireUser } from './middleware.js';

/** Saving a dashboard takes the dashboard limit instead of the global `/api/*` body limit. */
export const DASHBOARD_SAVE_ROUTE = { method: 'POST', path: /^\/api\/dashboard\/?$/ } as const;

/** Room for the fields around configuration and image (title, ids, JSON whitespace). */
const ENVELOPE_BYTES = 64 * 1024;

/**
 * Dashboards on ThingsBoard's REST paths (platform.md §3.10), mounted at `/api`. Writes and the
 * tenant list are the tenant administrator's; a customer user reads the dashboards assigned to
 * its customer, and any other dashboard is 404 for it.
 */
export function dashboardRoutes(deps: {
  dashboards: DashboardService;
  requireUser: RequireUser;
  /** Dashboards shared with a customer through DASHBOARD groups are readable by its users. */
  groups?: Pick<GroupService, 'dashboardSharedWith'>;
}) {
  const { dashboards } = deps;
  const app = new Hono<HttpEnv>();
  const dashboardId = (raw: string | undefined) => requireUuid(raw, 'dashboardId');
  const customerId = (raw: string | undefined) => requireUuid(raw, 'customerId');
  const maxBody = dashboards.maxBytes + ENVELOPE_BYTES;

  /** The dashboard, or 404 when it does not exist or the caller may not see it. */
  const readable = (principal: Principal, id: string): Dashboard => {
    const found = dashboards.find(id);
    if (!found) throw new NotFoundError(`Dashboard with id [${id}] is not found`);
    assertCanReadDashboard(principal, {
      id,
      customerIds: found.assignedCustomers.map((a) => a.customerId.id),
      sharedWithCaller:
        principal.customerId !== null &&
        deps.groups?.dashboardSharedWith(principal.customerId, id) === true,
    });
    return found;
  };

  app.post(
    '/dashboard',
    deps.requireUser,
    bodyLimit({
      maxSize: maxBody,
      onError: () => {
        throw new PayloadTooLargeError(
          `Dashboard request is larger than ${maxBody} bytes (dashboards are limited to ${dashboards.maxBytes} bytes)`,
        );
      },
    }),
    async (c) => {
      assertTenantAdmin(c.var.principal);
      return c.json(dashboards.save(await readJson(c)));
    },
  );

  app.get('/dashboard/info/:id', deps.requireUser, (c) => {
    const { configuration: _c, ...info } = readable(
      c.var.principal,
      dashboardId(c.req.param('id')),
    );
    return c.json(info);
  });

  app.get('/dashboard/:id', deps.requireUser, (c) =>
    c.json(readable(c.var.principal, dashboardId(c.req.param('id')))),
  );

  app.delete('/dashboard/:id', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    dashboards.delete(dashboardId(c.req.param('id')));
    return c.body(null, 200);
  });

  app.get('/tenant/dashboards', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    const query = queryRecord(c);
    return c.json(
      dashboards.listTenant(parsePageQuery(query, DASHBOARD_SORT), {
        mobile: booleanParam(query.mobile, 'mobile'),
      }),
    );
  });

  app.get('/customer/:customerId/dashboards', deps.requireUser, (c) => {
    const id = customerId(c.req.param('customerId'));
    assertCanReadCustomer(c.var.principal, id);
    const query = queryRecord(c);
    return c.json(
      dashboards.listCustomer(id, parsePageQuery(query, DASHBOARD_SORT), {
        mobile: booleanParam(query.mobile, 'mobile'),
      }),
    );
  });

  app.post('/customer/:customerId/dashboard/:dashboardId', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(
      dashboards.assign(
        customerId(c.req.param('customerId')),
        dashboardId(c.req.param('dashboardId')),
      ),
    );
  });

  app.delete('/customer/:customerId/dashboard/:dashboardId', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(
      dashboards.unassign(
        customerId(c.req.param('customerId')),
        dashboardId(c.req.param('dashboardId')),
      ),
    );
  });

  return app;
}

function booleanParam(raw: string | undefined, name: string): boolean {
  if (raw === undefined || raw === '' || raw === 'false') return false;
  if (raw === 'true') return true;
  throw new ValidationError(`${name} must be true or false`);
}
