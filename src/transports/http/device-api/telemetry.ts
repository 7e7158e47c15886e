import { Hono } from 'hono';
import type { TelemetryService } from '../../../telemetry/telemetry-service.js';
import { type HttpEnv, readBody } from '../context.js';
import type { DeviceAuth } from './device-auth.js';

/** Device telemetry upload (reference device-api.md §1), mounted at `/api/v1`. */
export function deviceTelemetryRoutes(deps: {
  deviceAuth: DeviceAuth;
  telemetry: TelemetryService;
}) {
  const { telemetry } = deps;
  const app = new Hono<HttpEnv>();

  // §1.3: 200 with an empty body, here only once the points are committed. A bad payload is 400
  // with a JSON error naming the problem (ThingsBoard answers 500; see §12).
  app.post('/:token/telemetry', deps.deviceAuth, async (c) => {
    await telemetry.ingest(c.var.device, await readBody(c));
    return c.body(null, 200);
  });

  return app;
}
