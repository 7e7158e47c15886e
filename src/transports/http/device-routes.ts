import { Hono } from 'hono';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import type { DeviceProfileService } from '../../devices/device-profile-service.js';
import type { DeviceService } from '../../devices/device-service.js';
import { DEVICE_SORT } from '../../devices/device-store.js';
import { ForbiddenError } from '../../errors.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import type { RequireUser } from './middleware.js';

/** Device management on ThingsBoard's REST paths (mounted at `/api`). */
export function deviceRoutes(deps: {
  devices: DeviceService;
  profiles: DeviceProfileService;
  requireUser: RequireUser;
}) {
  const { devices } = deps;
  const app = new Hono<HttpEnv>();
  // @NOTE: scoped paths, not '*': this app is mounted at /api, where a '*' middleware would also
  // run for the device API (/api/v1/{token}/...) and every sub-app mounted after it.
  for (const path of ['/device/*', '/tenant/*']) app.use(path, deps.requireUser);

  // @TODO(users issue): customer users get their own view through the authorization module.
  const tenantOnly = (authority: string) => {
    if (authority !== 'TENANT_ADMIN') throw new ForbiddenError();
  };

  app.post('/device', async (c) => {
    tenantOnly(c.var.principal.authority);
    const body = await readJson(c);
    return c.json(devices.save(body, { accessToken: c.req.query('accessToken') }));
  });

  app.get('/device/:id', (c) => c.json(devices.get(requireUuid(c.req.param('id'), 'deviceId'))));

  app.delete('/device/:id', (c) => {
    tenantOnly(c.var.principal.authority);
    devices.delete(requireUuid(c.req.param('id'), 'deviceId'));
    return c.body(null, 200);
  });

  app.get('/device/:id/credentials', (c) => {
    tenantOnly(c.var.principal.authority);
    return c.json(devices.credentials(requireUuid(c.req.param('id'), 'deviceId')));
  });

  app.post('/device/credentials', async (c) => {
    tenantOnly(c.var.principal.authority);
    return c.json(devices.updateCredentials(await readJson(c)));
  });

  app.get('/tenant/devices', (c) => {
    tenantOnly(c.var.principal.authority);
    // ThingsBoard overloads this path: with `deviceName` it returns that one device.
    const deviceName = c.req.query('deviceName');
    if (deviceName !== undefined) return c.json(devices.getByName(deviceName));
    return c.json(devices.list(parsePageQuery(queryRecord(c), DEVICE_SORT)));
  });

  return app;
}
