import type { Context } from 'hono';
import { Hono } from 'hono';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import { ValidationError } from '../../errors.js';
import type { UserService } from '../../users/user-service.js';
import { USER_SORT } from '../../users/user-store.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import type { RequireUser } from './middleware.js';

/** A boolean query parameter: `true`/`false`, or the default when absent. */
function boolParam(c: Context, name: string, fallback?: boolean): boolean {
  const raw = c.req.query(name);
  if (raw === undefined && fallback !== undefined) return fallback;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  throw new ValidationError(`${name} must be true or false`);
}

/** Links are built from the address the administrator used to reach the gateway. */
function baseUrl(c: Context): string {
  return new URL(c.req.url).origin;
}

/** Users on ThingsBoard's REST paths (mounted at `/api`); platform reference §3.2–3.3. */
export function userRoutes(deps: { users: UserService; requireUser: RequireUser }) {
  const { users, requireUser } = deps;
  const app = new Hono<HttpEnv>();
  const userId = (c: Context) => requireUuid(c.req.param('id'), 'userId');

  app.post('/user', requireUser, async (c) => {
    const sendActivationMail = boolParam(c, 'sendActivationMail', true);
    return c.json(
      users.save(await readJson(c), c.var.principal, { sendActivationMail, baseUrl: baseUrl(c) }),
    );
  });

  app.get('/user/:id', requireUser, (c) => c.json(users.get(userId(c), c.var.principal)));

  app.delete('/user/:id', requireUser, (c) => {
    users.delete(userId(c), c.var.principal);
    return c.body(null, 200);
  });

  app.get('/users', requireUser, (c) =>
    c.json(users.list(parsePageQuery(queryRecord(c), USER_SORT), c.var.principal)),
  );

  app.get('/customer/:customerId/users', requireUser, (c) => {
    const customerId = requireUuid(c.req.param('customerId'), 'customerId');
    const q = parsePageQuery(queryRecord(c), USER_SORT);
    return c.json(users.listByCustomer(customerId, q, c.var.principal));
  });

  app.post('/user/:id/userCredentialsEnabled', requireUser, (c) => {
    const enabled = boolParam(c, 'userCredentialsEnabled', true);
    users.setCredentialsEnabled(userId(c), enabled, c.var.principal);
    return c.body(null, 200);
  });

  app.get('/user/:id/activationLink', requireUser, (c) =>
    c.text(users.activationLink(userId(c), c.var.principal, baseUrl(c)).value),
  );
  app.get('/user/:id/activationLinkInfo', requireUser, (c) =>
    c.json(users.activationLink(userId(c), c.var.principal, baseUrl(c))),
  );

  // @NOTE: not a ThingsBoard endpoint. ThingsBoard only mails reset links; until the gateway can
  // send mail, the tenant administrator reads the link here and hands it over.
  app.get('/user/:id/passwordResetLink', requireUser, (c) =>
    c.text(users.passwordResetLink(userId(c), c.var.principal, baseUrl(c)).value),
  );

  return app;
}
