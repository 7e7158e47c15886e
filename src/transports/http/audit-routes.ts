import { Hono } from 'hono';
import type { AuditService } from '../../audit/audit-service.js';
import { assertTenantAdmin } from '../../auth/authorization.js';
import { parsePageQuery } from '../../common/entity.js';
import { ValidationError } from '../../errors.js';
import { type HttpEnv, queryRecord } from './context.js';
import type { RequireUser } from './middleware.js';

function timeParam(raw: string | undefined, name: string): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d+$/.test(raw)) throw new ValidationError(`${name} must be epoch milliseconds`);
  return Number(raw);
}

/** `GET /api/audit/logs` (tenant administrator only), ThingsBoard's AuditLog paging. */
export function auditRoutes(deps: { audit: AuditService; requireUser: RequireUser }) {
  const app = new Hono<HttpEnv>();

  app.get('/audit/logs', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    const params = queryRecord(c);
    const q = parsePageQuery(params, ['createdTime'] as const);
    const actionTypes = params.actionTypes
      ?.split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    const filter = {
      startTime: timeParam(params.startTime, 'startTime'),
      endTime: timeParam(params.endTime, 'endTime'),
      actionTypes,
    };
    // ThingsBoard lists the newest first unless told otherwise.
    return c.json(
      deps.audit.list({ ...q, sortOrder: params.sortOrder ? q.sortOrder : 'DESC' }, filter),
    );
  });

  return app;
}
