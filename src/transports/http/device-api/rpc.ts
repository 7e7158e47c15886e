import { Hono } from 'hono';
import { nonNegativeInt } from '../../../common/limits.js';
import { ValidationError } from '../../../errors.js';
import type { DeviceMessageService } from '../../../messages/device-message-service.js';
import type { ClientRpcService } from '../../../rpc/client-rpc.js';
import type { RpcService } from '../../../rpc/rpc-service.js';
import { type HttpEnv, readBody, readJson } from '../context.js';
import type { DeviceAuth } from './device-auth.js';
import { jsonText, pollEnded, pollTimeout } from './long-poll.js';

/** Device RPC API (reference device-api.md §3.3 and §4), mounted at `/api/v1`. */
export function deviceRpcRoutes(deps: {
  deviceAuth: DeviceAuth;
  rpc: RpcService;
  clientRpc: ClientRpcService;
  messages: DeviceMessageService;
}) {
  const { rpc, clientRpc } = deps;
  const auth = deps.deviceAuth;
  const app = new Hono<HttpEnv>();

  // §3.3: the first pending or new request; DELIVERED once the response is written.
  app.get('/:token/rpc', auth, async (c) => {
    const timeoutMs = pollTimeout(c.req.query('timeout'));
    const deviceId = c.var.device.id;
    const outcome = await rpc.poll(deviceId, { timeoutMs, signal: c.req.raw.signal });
    if (outcome.kind !== 'value') return pollEnded(c, outcome);
    const res = c.json(outcome.value);
    rpc.delivered(deviceId, outcome.value.id);
    return res;
  });

  // §3.3: any body, forwarded as text; 200 also for unknown ids; non-integer id -> 400.
  app.post('/:token/rpc/:id', auth, async (c) => {
    const id = nonNegativeInt(c.req.param('id'), 'RPC id');
    const body = (await readBody(c)).toString('utf8');
    if (body === '') throw new ValidationError('Request body is required');
    rpc.reply(c.var.device.id, id, body);
    return c.body(null, 200);
  });

  // §4: client-side RPC. `timeout` (ms, like the long polls) is our extension; default 60 s.
  app.post('/:token/rpc', auth, async (c) => {
    const timeoutMs = c.req.query('timeout')
      ? pollTimeout(c.req.query('timeout'))
      : clientRpc.defaultTimeoutMs;
    const body = await readJson(c);
    // §4: TB answers 500 for a missing `params`; our contract makes bad input a 400.
    if (typeof body !== 'object' || body === null || !('params' in body)) {
      throw new ValidationError('Invalid rpc request: method and params are required');
    }
    const outcome = await deps.messages.toServerRpc(c.var.device, body, {
      timeoutMs,
      signal: c.req.raw.signal,
    });
    if (outcome.kind !== 'value') return pollEnded(c, outcome);
    return jsonText(c, outcome.value);
  });

  return app;
}
