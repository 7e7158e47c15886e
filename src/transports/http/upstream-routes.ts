import { Hono } from 'hono';
import { assertTenantAdmin } from '../../auth/authorization.js';
import { ValidationError } from '../../errors.js';
import type { UpstreamService } from '../../upstream/upstream-service.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import type { RequireUser } from './middleware.js';

function intParam(raw: string | undefined, name: string, fallback: number, max: number): number {
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) > max) {
    throw new ValidationError(`${name} must be an integer from 0 to ${max}`);
  }
  return Number(raw);
}

/**
 * Upstream sync (tenant administrator only, docs/upstream.md): `GET /api/upstream/status`, the
 * messages the cloud refused (`GET /api/upstream/rejected?pageSize=&page=`, newest first), the
 * settings in effect (`GET /api/upstream/settings`, secrets shown only as set or not), saved
 * and applied at once (`POST`, a partial update) or forgotten (`DELETE`: the config file,
 * environment and flags apply again).
 */
export function upstreamRoutes(deps: { upstream: UpstreamService; requireUser: RequireUser }) {
  const app = new Hono<HttpEnv>();
  app.get('/upstream/status', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(deps.upstream.status());
  });
  app.get('/upstream/rejected', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    const q = queryRecord(c);
    const pageSize = intParam(q.pageSize, 'pageSize', 100, 1000);
    const page = intParam(q.page, 'page', 0, 1_000_000);
    const { total, rows } = deps.upstream.outbox.rejected(pageSize, page * pageSize);
    return c.json({
      data: rows,
      totalElements: total,
      totalPages: pageSize === 0 ? 0 : Math.ceil(total / pageSize),
      hasNext: (page + 1) * pageSize < total,
    });
  });
  app.get('/upstream/settings', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(deps.upstream.settings());
  });
  app.post('/upstream/settings', deps.requireUser, async (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(deps.upstream.saveSettings(await readJson(c)));
  });
  app.delete('/upstream/settings', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(deps.upstream.resetSettings());
  });
  return app;
}
