import { Hono } from 'hono';
import {
  assertCanManageDevice,
  assertCanReadDevice,
  assertCanWriteDevice,
  assertTenantAdmin,
  type SharedDeviceAccess,
} from '../../auth/authorization.js';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import type { DeviceProfileService } from '../../devices/device-profile-service.js';
import type { DeviceService } from '../../devices/device-service.js';
import { DEVICE_SORT } from '../../devices/device-store.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import type { RequireUser } from './middleware.js';

/** Device management on ThingsBoard's REST paths (mounted at `/api`). */
export function deviceRoutes(deps: {
  devices: DeviceService;
  profiles: DeviceProfileService;
  requireUser: RequireUser;
  /** Access through shared groups (`deviceAccess`); nothing shared without it. */
  shared?: SharedDeviceAccess;
}) {
  const { devices, shared } = deps;
  const app = new Hono<HttpEnv>();
  // @NOTE: scoped paths, not '*': this app is mounted at /api, where a '*' middleware would also
  // run for the device API (/api/v1/{token}/...) and every sub-app mounted after it.
  for (const path of ['/device/*', '/tenant/*']) app.use(path, deps.requireUser);

  // Access rules: `auth/authorization.ts` (reference §6.2). Create, delete and credentials
  // changes are the tenant's; a customer user reads and updates the devices it may write.
  const owner = (raw: string | undefined) => devices.owner(requireUuid(raw, 'deviceId'));

  app.post('/device', async (c) => {
    const principal = c.var.principal;
    const body = await readJson(c);
    const accessToken = c.req.query('accessToken');
    const id = (body as { id?: { id?: unknown } } | null)?.id?.id;
    if (typeof id === 'string' && accessToken === undefined) {
      assertCanWriteDevice(principal, owner(id), shared);
    } else {
      assertTenantAdmin(principal);
    }
    return c.json(devices.save(body, { accessToken }));
  });

  app.get('/device/:id', (c) => {
    const device = owner(c.req.param('id'));
    assertCanReadDevice(c.var.principal, device, shared);
    return c.json(devices.get(device.id));
  });

  app.delete('/device/:id', (c) => {
    const device = owner(c.req.param('id'));
    assertCanManageDevice(c.var.principal, device, shared);
    devices.delete(device.id);
    return c.body(null, 200);
  });

  // READ_CREDENTIALS is part of what a customer user may do with its own device (§6.2). It needs
  // write access: the token lets its holder write telemetry as the device, which a read-only
  // share must not allow (PE's read-only group role has no READ_CREDENTIALS).
  app.get('/device/:id/credentials', (c) => {
    const device = owner(c.req.param('id'));
    assertCanWriteDevice(c.var.principal, device, shared);
    return c.json(devices.credentials(device.id));
  });

  app.post('/device/credentials', async (c) => {
    const principal = c.var.principal;
    const body = await readJson(c);
    const id = (body as { deviceId?: { id?: unknown } } | null)?.deviceId?.id;
    if (typeof id === 'string' && principal.authority !== 'TENANT_ADMIN')
      assertCanManageDevice(principal, owner(id), shared);
    assertTenantAdmin(principal);
    return c.json(devices.updateCredentials(body));
  });

  app.get('/tenant/devices', (c) => {
    assertTenantAdmin(c.var.principal);
    // ThingsBoard overloads this path: with `deviceName` it returns that one device.
    const deviceName = c.req.query('deviceName');
    if (deviceName !== undefined) return c.json(devices.getByName(deviceName));
    return c.json(devices.list(parsePageQuery(queryRecord(c), DEVICE_SORT)));
  });

  return app;
}
