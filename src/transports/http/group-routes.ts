import { Hono } from 'hono';
import { assertTenantAdmin } from '../../auth/authorization.js';
import { pageData, parsePageQuery, requireUuid } from '../../common/entity.js';
import type { GroupService } from '../../groups/group-service.js';
import { actorOf } from '../../users/user-service.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import type { RequireUser } from './middleware.js';

/**
 * Entity groups on ThingsBoard PE's REST paths (platform.md §6.3), mounted at `/api`. Writes are
 * the tenant administrator's (403 for others); a customer user reads its customer's groups and
 * the groups shared with its customer, and any other group is 404 for it.
 */
export function groupRoutes(deps: { groups: GroupService; requireUser: RequireUser }) {
  const { groups, requireUser } = deps;
  const app = new Hono<HttpEnv>();
  const groupId = (raw: string | undefined) => requireUuid(raw, 'entityGroupId');

  app.post('/entityGroup', requireUser, async (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(groups.create(await readJson(c), actorOf(c.var.principal)));
  });

  app.get('/entityGroups/:groupType', requireUser, (c) =>
    c.json(groups.list(c.req.param('groupType'), c.var.principal)),
  );

  app.get('/entityGroup/:id', requireUser, (c) =>
    c.json(groups.get(groupId(c.req.param('id')), c.var.principal)),
  );

  app.delete('/entityGroup/:id', requireUser, (c) => {
    const id = groupId(c.req.param('id'));
    groups.get(id, c.var.principal);
    assertTenantAdmin(c.var.principal);
    groups.delete(id, actorOf(c.var.principal));
    return c.body(null, 200);
  });

  // PE answers a page of ShortEntityView; this gateway gives the ids (names: the entity's GET).
  app.get('/entityGroup/:id/entities', requireUser, (c) => {
    const q = parsePageQuery(queryRecord(c), []);
    const all = groups.entities(groupId(c.req.param('id')), c.var.principal);
    const page = all.slice(q.page * q.pageSize, (q.page + 1) * q.pageSize);
    return c.json(
      pageData(
        page.map((id) => ({ id })),
        all.length,
        q,
      ),
    );
  });

  for (const [path, action] of [
    ['addEntities', 'add'],
    ['deleteEntities', 'remove'],
  ] as const) {
    app.post(`/entityGroup/:id/${path}`, requireUser, async (c) => {
      const id = groupId(c.req.param('id'));
      groups.get(id, c.var.principal);
      assertTenantAdmin(c.var.principal);
      const body = await readJson(c);
      if (action === 'add') groups.addEntities(id, body, actorOf(c.var.principal));
      else groups.removeEntities(id, body, actorOf(c.var.principal));
      return c.body(null, 200);
    });
  }

  app.post('/entityGroup/:id/share', requireUser, async (c) => {
    const id = groupId(c.req.param('id'));
    groups.get(id, c.var.principal);
    assertTenantAdmin(c.var.principal);
    groups.share(id, await readJson(c), actorOf(c.var.principal));
    return c.body(null, 200);
  });

  return app;
}
