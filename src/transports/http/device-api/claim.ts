import { Hono } from 'hono';
import type { DeviceMessageService } from '../../../messages/device-message-service.js';
import { type HttpEnv, readBody } from '../context.js';
import type { DeviceAuth } from './device-auth.js';

/**
 * `POST /api/v1/{token}/claim` (device-api.md §5.1), mounted at `/api/v1`. The body is optional
 * (`{"secretKey","durationMs"}`); the answer is 200 with an empty body whatever became of the
 * claim, as in ThingsBoard. Malformed JSON or wrongly typed fields are 400.
 */
export function claimApi(deps: { deviceAuth: DeviceAuth; messages: DeviceMessageService }) {
  const app = new Hono<HttpEnv>();
  app.post('/:token/claim', deps.deviceAuth, async (c) => {
    deps.messages.claim(c.var.device, await readBody(c));
    return c.body(null, 200);
  });
  return app;
}
