import type { MiddlewareHandler } from 'hono';
import type { DeviceService } from '../../../devices/device-service.js';
import type { HttpEnv } from '../context.js';

/**
 * Authenticates a device HTTP API request by the `:token` path segment. An unknown token gets
 * 401 with an empty body, as ThingsBoard answers. Sets `c.var.device`.
 */
export function deviceAuth(devices: DeviceService): MiddlewareHandler<HttpEnv> {
  return async (c, next) => {
    const token = c.req.param('token');
    const device = token ? devices.byAccessToken(token) : undefined;
    if (!device) return c.body(null, 401);
    c.set('device', device);
    await next();
  };
}
