import { Hono } from 'hono';
import type { Principal } from '../../auth/auth-service.js';
import {
  assertCanReadDevice,
  assertCanWriteDevice,
  type SharedDeviceAccess,
} from '../../auth/authorization.js';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import type { DeviceService } from '../../devices/device-service.js';
import { NotFoundError, UnavailableError, ValidationError } from '../../errors.js';
import type { RpcService } from '../../rpc/rpc-service.js';
import { RPC_SORT } from '../../rpc/rpc-store.js';
import { RPC_STATUSES, type RpcStatus } from '../../rpc/types.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import { jsonText } from './device-api/long-poll.js';
import { errorBody } from './errors.js';
import { type RequireUser, requireDevice } from './middleware.js';

/**
 * Server-side RPC REST API v2 (platform.md §3.9), mounted at `/api/rpc`. Sending and deleting
 * need write access to the device (RPC_CALL), reading persistent RPCs read access; a persistent
 * RPC of a device the caller cannot see is 404.
 */
export function rpcRoutes(deps: {
  rpc: RpcService;
  devices: Pick<DeviceService, 'owner'>;
  requireUser: RequireUser;
  /** Access through shared groups (`deviceAccess`); nothing shared without it. */
  shared?: SharedDeviceAccess;
}) {
  const { rpc } = deps;
  const app = new Hono<HttpEnv>();
  const user = deps.requireUser;
  const { devices, shared } = deps;
  // The RPC of a device the caller cannot see is reported missing, not forbidden.
  const persistent = (rpcId: string, principal: Principal) => {
    const found = rpc.get(rpcId);
    try {
      assertCanReadDevice(principal, devices.owner(found.deviceId.id), shared);
    } catch (err) {
      if (err instanceof NotFoundError)
        throw new NotFoundError(`Rpc with id [${rpcId}] is not found`);
      throw err;
    }
    return found;
  };

  app.post(
    '/:kind{oneway|twoway}/:deviceId',
    user,
    requireDevice(devices, 'write', 'deviceId', shared),
    async (c) => {
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
    },
  );

  app.get('/persistent/:rpcId', user, (c) =>
    c.json(persistent(requireUuid(c.req.param('rpcId'), 'rpcId'), c.var.principal)),
  );

  app.get(
    '/persistent/device/:deviceId',
    user,
    requireDevice(devices, 'read', 'deviceId', shared),
    (c) => {
      const deviceId = requireUuid(c.req.param('deviceId'), 'deviceId');
      const q = parsePageQuery(queryRecord(c), RPC_SORT);
      const status = c.req.query('rpcStatus') || undefined;
      if (status !== undefined && !(RPC_STATUSES as readonly string[]).includes(status)) {
        throw new ValidationError(`rpcStatus must be one of ${RPC_STATUSES.join(', ')}`);
      }
      return c.json(rpc.list(deviceId, q, status as RpcStatus | undefined));
    },
  );

  app.delete('/persistent/:rpcId', user, (c) => {
    const found = persistent(requireUuid(c.req.param('rpcId'), 'rpcId'), c.var.principal);
    assertCanWriteDevice(c.var.principal, devices.owner(found.deviceId.id), shared);
    rpc.delete(found.id.id);
    return c.body(null, 200);
  });

  return app;
}
