import { Hono } from 'hono';
import { assertCanReadCustomer, assertTenantAdmin } from '../../auth/authorization.js';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import type { CustomerService } from '../../customers/customer-service.js';
import { CUSTOMER_SORT } from '../../customers/customer-store.js';
import { actorOf } from '../../users/user-service.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import type { RequireUser } from './middleware.js';

/** Customers on ThingsBoard's REST paths (mounted at `/api`); platform reference §3.6. */
export function customerRoutes(deps: { customers: CustomerService; requireUser: RequireUser }) {
  const { customers, requireUser } = deps;
  const app = new Hono<HttpEnv>();

  app.post('/customer', requireUser, async (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(customers.save(await readJson(c), actorOf(c.var.principal)));
  });

  app.get('/customer/:id', requireUser, (c) => {
    const id = requireUuid(c.req.param('id'), 'customerId');
    assertCanReadCustomer(c.var.principal, id);
    return c.json(customers.get(id));
  });

  app.delete('/customer/:id', requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    customers.delete(requireUuid(c.req.param('id'), 'customerId'), actorOf(c.var.principal));
    return c.body(null, 200);
  });

  app.get('/customers', requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(customers.list(parsePageQuery(queryRecord(c), CUSTOMER_SORT)));
  });

  return app;
}
