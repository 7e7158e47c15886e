import { Hono } from 'hono';
import { type AttributeService, parseKeyList } from '../../../attributes/attribute-service.js';
import { deviceAttributesJson, sharedUpdateJson } from '../../../attributes/payloads.js';
import type { DeviceMessageService } from '../../../messages/device-message-service.js';
import { type HttpEnv, readBody } from '../context.js';
import type { DeviceAuth } from './device-auth.js';
import { jsonText, pollEnded, pollTimeout } from './long-poll.js';

/** Device attribute API (reference device-api.md §2), mounted at `/api/v1`. */
export function deviceAttributeRoutes(deps: {
  deviceAuth: DeviceAuth;
  attributes: AttributeService;
  messages: DeviceMessageService;
}) {
  const { attributes } = deps;
  const auth = deps.deviceAuth;
  const app = new Hono<HttpEnv>();

  // §2.1: a single JSON object, typed as §1.2 (numeric strings cast); 200 with an empty body.
  app.post('/:token/attributes', auth, async (c) => {
    deps.messages.postAttributes(c.var.device, await readBody(c));
    return c.body(null, 200);
  });

  app.get('/:token/attributes', auth, (c) => {
    const res = attributes.forDevice(c.var.device, {
      clientKeys: parseKeyList(c.req.query('clientKeys'), 'clientKeys'),
      sharedKeys: parseKeyList(c.req.query('sharedKeys'), 'sharedKeys'),
    });
    return jsonText(c, deviceAttributesJson(res));
  });

  // §2.3: the first shared-attribute change, then the poll ends.
  app.get('/:token/attributes/updates', auth, async (c) => {
    const timeoutMs = pollTimeout(c.req.query('timeout'));
    const outcome = await attributes.waitForUpdate(c.var.device.id, {
      timeoutMs,
      signal: c.req.raw.signal,
    });
    if (outcome.kind !== 'value') return pollEnded(c, outcome);
    return jsonText(c, sharedUpdateJson(outcome.value));
  });

  return app;
}
