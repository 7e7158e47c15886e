import type { MiddlewareHandler } from 'hono';
import type { ActivityService } from '../../../devices/activity-service.js';
import type { DeviceService } from '../../../devices/device-service.js';
import type { HttpEnv } from '../context.js';

export type DeviceAuth = MiddlewareHandler<HttpEnv>;

/**
 * Authenticates a device HTTP API request by the `:token` path segment. An unknown token gets
 * 401 with an empty body, as ThingsBoard answers. Sets `c.var.device` and counts the request as
 * device activity.
 */
export function deviceAuth(deps: {
  devices: DeviceService;
  activity: ActivityService;
}): DeviceAuth {
  return async (c, next) => {
    const token = c.req.param('token');
    const device = token ? deps.devices.byAccessToken(token) : undefined;
    if (!device) return c.body(null, 401);
    c.set('device', device);
    deps.activity.record(device);
    await next();
  };
}
