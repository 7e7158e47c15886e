import { Hono } from 'hono';
import type { DeviceMessageService } from '../../../messages/device-message-service.js';
import { type HttpEnv, readJson } from '../context.js';

/**
 * `POST /api/v1/provision` (device-api.md §6.4), mounted at `/api/v1`, no token. Always 200 with
 * `{status, credentialsType, credentialsValue}` or `{status, errorMsg}`; an unparsable body or a
 * missing key/secret field is 400 (ThingsBoard: 500).
 */
export function provisionApi(deps: { messages: DeviceMessageService }) {
  const app = new Hono<HttpEnv>();
  app.post('/provision', async (c) => c.json(deps.messages.provision(await readJson(c)), 200));
  return app;
}
