import { getConnInfo } from '@hono/node-server/conninfo';
import { Hono } from 'hono';
import type { AuthService } from '../../auth/auth-service.js';
import type { UserService } from '../../users/user-service.js';
import { type HttpEnv, readJson } from './context.js';
import type { RequireUser } from './middleware.js';

/** `/api/auth/*`: login, token refresh and the current user, on ThingsBoard's paths. */
export function authRoutes(deps: {
  auth: AuthService;
  users: UserService;
  requireUser: RequireUser;
}) {
  const app = new Hono<HttpEnv>();

  app.post('/login', async (c) => {
    const body = (await readJson(c)) as { username?: unknown; password?: unknown } | null;
    const address = getConnInfo(c).remote.address ?? 'unknown';
    return c.json(await deps.auth.login(body?.username, body?.password, address));
  });

  app.post('/token', async (c) => {
    const body = (await readJson(c)) as { refreshToken?: unknown } | null;
    return c.json(await deps.auth.refresh(body?.refreshToken));
  });

  app.get('/user', deps.requireUser, (c) => {
    const row = deps.users.row(c.var.principal.userId);
    // requireUser has just checked that the account exists.
    return c.json(row ? deps.users.toUser(row) : null);
  });

  app.post('/logout', deps.requireUser, (c) => {
    deps.auth.logout(c.var.principal);
    return c.body(null, 200);
  });

  return app;
}
