import { type Context, Hono } from 'hono';
import { requireUuid } from '../../common/entity.js';
import { ForbiddenError, ValidationError } from '../../errors.js';
import { parseDeleteQuery, parseTimeseriesQuery } from '../../telemetry/telemetry-query.js';
import type { TelemetryService } from '../../telemetry/telemetry-service.js';
import { type HttpEnv, queryRecord } from './context.js';
import type { RequireUser } from './middleware.js';

/**
 * Time-series REST API of ThingsBoard (platform.md §3.8), mounted at `/api/plugins/telemetry`
 * beside the attribute routes, so middleware is attached per route, not with `use('*')`.
 * Devices only; TENANT_ADMIN only until customer access rules land.
 */
export function telemetryRoutes(deps: { telemetry: TelemetryService; requireUser: RequireUser }) {
  const { telemetry } = deps;
  const app = new Hono<HttpEnv>();
  const user = deps.requireUser;
  // @TODO(users issue): customer users get their own view through the authorization module.
  const tenantOnly: RequireUser = async (c, next) => {
    if (c.var.principal.authority !== 'TENANT_ADMIN') throw new ForbiddenError();
    await next();
  };
  const deviceId = (raw: string) => requireUuid(raw, 'deviceId');

  app.get('/DEVICE/:id/keys/timeseries', user, tenantOnly, (c) =>
    c.json(telemetry.keys(deviceId(c.req.param('id')))),
  );

  app.get('/DEVICE/:id/values/timeseries', user, tenantOnly, (c) =>
    c.json(telemetry.query(deviceId(c.req.param('id')), parseTimeseriesQuery(queryRecord(c)))),
  );

  app.delete('/DEVICE/:id/timeseries/delete', user, tenantOnly, (c) => {
    telemetry.delete(deviceId(c.req.param('id')), parseDeleteQuery(queryRecord(c)));
    return c.body(null, 200);
  });

  // The scope (and the optional TTL) are ignored, as in ThingsBoard.
  const save = async (c: Context<HttpEnv>) => {
    const id = deviceId(c.req.param('id') ?? '');
    const text = await c.req.text();
    if (text.trim() === '') throw new ValidationError('Request body is required');
    await telemetry.save(id, text);
    return c.body(null, 200);
  };
  app.post('/DEVICE/:id/timeseries/:scope', user, tenantOnly, save);
  app.post('/DEVICE/:id/timeseries/:scope/:ttl', user, tenantOnly, save);

  return app;
}
