import { type Context, Hono } from 'hono';
import type { SharedDeviceAccess } from '../../auth/authorization.js';
import { requireUuid } from '../../common/entity.js';
import type { DeviceService } from '../../devices/device-service.js';
import { ValidationError } from '../../errors.js';
import { parseDeleteQuery, parseTimeseriesQuery } from '../../telemetry/telemetry-query.js';
import type { TelemetryService } from '../../telemetry/telemetry-service.js';
import { type HttpEnv, queryRecord, userSource } from './context.js';
import { type RequireUser, requireDevice } from './middleware.js';

/**
 * Time-series REST API of ThingsBoard (platform.md §3.8), mounted at `/api/plugins/telemetry`
 * beside the attribute routes, so middleware is attached per route, not with `use('*')`.
 * Devices only; access per `deviceAccess` (auth/authorization.ts): reads need read access,
 * saves and deletes write access.
 */
export function telemetryRoutes(deps: {
  telemetry: TelemetryService;
  devices: Pick<DeviceService, 'owner'>;
  requireUser: RequireUser;
  /** Access through shared groups (`deviceAccess`); nothing shared without it. */
  shared?: SharedDeviceAccess;
}) {
  const { telemetry } = deps;
  const app = new Hono<HttpEnv>();
  const user = deps.requireUser;
  const read = requireDevice(deps.devices, 'read', 'id', deps.shared);
  const write = requireDevice(deps.devices, 'write', 'id', deps.shared);
  const deviceId = (raw: string) => requireUuid(raw, 'deviceId');

  app.get('/DEVICE/:id/keys/timeseries', user, read, (c) =>
    c.json(telemetry.keys(deviceId(c.req.param('id')))),
  );

  app.get('/DEVICE/:id/values/timeseries', user, read, (c) =>
    c.json(telemetry.query(deviceId(c.req.param('id')), parseTimeseriesQuery(queryRecord(c)))),
  );

  app.delete('/DEVICE/:id/timeseries/delete', user, write, (c) => {
    telemetry.delete(
      deviceId(c.req.param('id')),
      parseDeleteQuery(queryRecord(c)),
      userSource(c.var.principal),
    );
    return c.body(null, 200);
  });

  // The scope (and the optional TTL) are ignored, as in ThingsBoard.
  const save = async (c: Context<HttpEnv>) => {
    const id = deviceId(c.req.param('id') ?? '');
    const text = await c.req.text();
    if (text.trim() === '') throw new ValidationError('Request body is required');
    await telemetry.save(id, text, userSource(c.var.principal));
    return c.body(null, 200);
  };
  app.post('/DEVICE/:id/timeseries/:scope', user, write, save);
  app.post('/DEVICE/:id/timeseries/:scope/:ttl', user, write, save);

  return app;
}
