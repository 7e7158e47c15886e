import { Hono } from 'hono';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import { ForbiddenError, NotFoundError, UnavailableError, ValidationError } from '../../errors.js';
import type { RpcService } from '../../rpc/rpc-service.js';
import { RPC_SORT } from '../../rpc/rpc-store.js';
import { RPC_STATUSES, type RpcStatus } from '../../rpc/types.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import { jsonText } from './device-api/long-poll.js';
import { errorBody } from './errors.js';
import type { RequireUser } from './middleware.js';

/** Server-side RPC REST API v2 (platform.md §3.9), mounted at `/api/rpc`. */
export function rpcRoutes(deps: { rpc: RpcService; requireUser: RequireUser }) {
  const { rpc } = deps;
  const app = new Hono<HttpEnv>();
  const user = deps.requireUser;
  // @TODO(users issue): customer users get their own view through the authorization module.
  const tenantOnly: typeof user = async (c, next) => {
    if (c.var.principal.authority !== 'TENANT_ADMIN') throw new ForbiddenError();
    await next();
  };

  app.post('/:kind{oneway|twoway}/:deviceId', user, tenantOnly, async (c) => {
    const deviceId = requireUuid(c.req.param('deviceId'), 'deviceId');
    const body = await readJson(c);
    const result = await rpc.call(deviceId, body, c.req.param('kind') === 'oneway');
    switch (result.kind) {
      case 'persisted':
        return c.json({ rpcId: result.rpcId });
      case 'delivered':
        return c.body(null, 200);
      case 'reply':
        try {
          JSON.parse(result.body);
        } catch {
          // §3.1: a reply that is not JSON -> 406.
          return c.json(errorBody(406, `Device reply is not valid JSON: ${result.body}`), 406);
        }
        return jsonText(c, result.body);
      // §3.1 (v2): timeout and "never sent" are both 504 with an empty body.
      case 'timeout':
      case 'expired':
        return c.body(null, 504);
      case 'closed':
        if (result.reason === 'deleted')
          throw new NotFoundError(`Device [${deviceId}] was deleted`);
        throw new UnavailableError('Gateway is stopping');
    }
  });

  app.get('/persistent/:rpcId', user, tenantOnly, (c) =>
    c.json(rpc.get(requireUuid(c.req.param('rpcId'), 'rpcId'))),
  );

  app.get('/persistent/device/:deviceId', user, tenantOnly, (c) => {
    const deviceId = requireUuid(c.req.param('deviceId'), 'deviceId');
    const q = parsePageQuery(queryRecord(c), RPC_SORT);
    const status = c.req.query('rpcStatus') || undefined;
    if (status !== undefined && !(RPC_STATUSES as readonly string[]).includes(status)) {
      throw new ValidationError(`rpcStatus must be one of ${RPC_STATUSES.join(', ')}`);
    }
    return c.json(rpc.list(deviceId, q, status as RpcStatus | undefined));
  });

  app.delete('/persistent/:rpcId', user, tenantOnly, (c) => {
    rpc.delete(requireUuid(c.req.param('rpcId'), 'rpcId'));
    return c.body(null, 200);
  });

  return app;
}
