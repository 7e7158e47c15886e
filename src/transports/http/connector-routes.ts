import { Hono } from 'hono';
import { requireUuid } from '../../common/entity.js';
import type { ConnectorService } from '../../connectors/connector-service.js';
import { PayloadTooLargeError } from '../../errors.js';
import { type HttpEnv, readJson } from './context.js';
import { type RequireUser, requireTenantAdmin } from './middleware.js';

/**
 * A plant's Modbus configuration outgrows the general body limit (100 slaves of 20 entries is
 * about 200 KB): this route reads up to the connector service's own bound (1 MB).
 */
export const CONNECTOR_SAVE_ROUTE = { method: 'POST', path: /^\/api\/connector\/?$/ } as const;
const MAX_CONNECTOR_BYTES = 1024 * 1024;

/**
 * Connectors (issue 17), mounted at `/api`: create or update (`POST /connector`), list, get,
 * delete and the running status with per-device counters. Tenant administrator only.
 */
export function connectorRoutes(deps: { connectors: ConnectorService; requireUser: RequireUser }) {
  const { connectors } = deps;
  const app = new Hono<HttpEnv>();
  const user = deps.requireUser;
  const admin = requireTenantAdmin;
  const connectorId = (raw: string | undefined) => requireUuid(raw, 'connectorId');

  app.post('/connector', user, admin, async (c) => {
    const length = Number(c.req.header('content-length') ?? 0);
    if (length > MAX_CONNECTOR_BYTES) {
      throw new PayloadTooLargeError(`Request body is larger than ${MAX_CONNECTOR_BYTES} bytes`);
    }
    return c.json(await connectors.save(await readJson(c)));
  });
  app.get('/connectors', user, admin, (c) => c.json(connectors.list()));
  app.get('/connector/:id', user, admin, (c) =>
    c.json(connectors.get(connectorId(c.req.param('id')))),
  );
  app.get('/connector/:id/status', user, admin, (c) =>
    c.json(connectors.status(connectorId(c.req.param('id')))),
  );
  app.delete('/connector/:id', user, admin, async (c) => {
    await connectors.delete(connectorId(c.req.param('id')));
    return c.body(null, 200);
  });
  return app;
}
