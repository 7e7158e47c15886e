import { Hono } from 'hono';
import { ValidationError } from '../../../errors.js';
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
    const text = (await readBody(c)).toString('utf8');
    let body: unknown;
    if (text.trim() !== '') {
      try {
        body = JSON.parse(text);
      } catch (err) {
        throw new ValidationError(`Invalid JSON body: ${(err as Error).message}`, { cause: err });
      }
    }
    deps.messages.claim(c.var.device, body);
    return c.body(null, 200);
  });
  return app;
}
