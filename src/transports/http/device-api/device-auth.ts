import type { MiddlewareHandler } from 'hono';
import type { ActivityService } from '../../../devices/activity-service.js';
import type { DeviceIdentity, DeviceService } from '../../../devices/device-service.js';
import type { IngestMeter } from '../../../metrics/metrics.js';
import { deviceApiMessageType } from '../../message-type.js';
import type { HttpEnv } from '../context.js';

export type DeviceAuth = MiddlewareHandler<HttpEnv>;

/** The device of an access token, counted as device activity; undefined for an unknown token. */
export type DeviceByToken = (token: string) => DeviceIdentity | undefined;

export function deviceByToken(deps: {
  devices: Pick<DeviceService, 'byAccessToken'>;
  activity: Pick<ActivityService, 'record'>;
}): DeviceByToken {
  return (token) => {
    const device = deps.devices.byAccessToken(token);
    if (device) deps.activity.record(device);
    return device;
  };
}

/**
 * Authenticates a device HTTP API request by the `:token` path segment. An unknown token gets
 * 401 with an empty body, as ThingsBoard answers. Sets `c.var.device` and counts the request as
 * device activity.
 */
export function deviceAuth(deps: {
  devices: DeviceService;
  activity: ActivityService;
  /** Counts each request the core accepted. */
  meter?: IngestMeter;
}): DeviceAuth {
  const byToken = deviceByToken(deps);
  return async (c, next) => {
    const token = c.req.param('token');
    const device = token ? byToken(token) : undefined;
    if (!device) return c.body(null, 401);
    c.set('device', device);
    await next();
    if (deps.meter && c.res.status < 400) {
      deps.meter('http', deviceApiMessageType(c.req.method, c.req.path));
    }
  };
}
