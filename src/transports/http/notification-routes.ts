import { type Context, Hono } from 'hono';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import type { Notifications } from '../../notifications/notifications.js';
import type { RetentionSettings } from '../../settings/retention-settings.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import { type RequireUser, requireTenantAdmin } from './middleware.js';

/**
 * The notification center on ThingsBoard's paths (platform.md §8), mounted at `/api`: targets,
 * templates and rules (tenant administrator), ad-hoc requests (kept: list, get, delete), every
 * user's own inbox, and the outbox deliveries with their attempts (ours:
 * `GET /api/notification/deliveries`).
 */
export function notificationRoutes(deps: {
  notifications: Notifications;
  requireUser: RequireUser;
}) {
  const n = deps.notifications.service;
  const app = new Hono<HttpEnv>();
  const user = deps.requireUser;
  const admin = requireTenantAdmin;
  const page = (c: Context<HttpEnv>) =>
    parsePageQuery(queryRecord(c), ['createdTime', 'name'] as const);

  interface Crud {
    save(body: unknown): unknown;
    get(id: string): unknown;
    list(q: ReturnType<typeof page>): unknown;
    del(id: string): void;
  }
  const kinds: Array<[string, Crud]> = [
    [
      'target',
      {
        save: (b) => n.saveTarget(b),
        get: (id) => n.getTarget(id),
        list: (q) => n.listTargets(q),
        del: (id) => n.deleteTarget(id),
      },
    ],
    [
      'template',
      {
        save: (b) => n.saveTemplate(b),
        get: (id) => n.getTemplate(id),
        list: (q) => n.listTemplates(q),
        del: (id) => n.deleteTemplate(id),
      },
    ],
    [
      'rule',
      {
        save: (b) => n.saveRule(b),
        get: (id) => n.getRule(id),
        list: (q) => n.listRules(q),
        del: (id) => n.deleteRule(id),
      },
    ],
  ];
  for (const [kind, api] of kinds) {
    const id = (raw: string | undefined) => requireUuid(raw, `${kind}Id`);
    app.post(`/notification/${kind}`, user, admin, async (c) =>
      c.json(api.save(await readJson(c))),
    );
    app.get(`/notification/${kind}s`, user, admin, (c) => c.json(api.list(page(c))));
    app.get(`/notification/${kind}/:id`, user, admin, (c) =>
      c.json(api.get(id(c.req.param('id')))),
    );
    app.delete(`/notification/${kind}/:id`, user, admin, (c) => {
      api.del(id(c.req.param('id')));
      return c.body(null, 200);
    });
  }

  // Ad-hoc requests, kept (bounded) with their status and per-method stats.
  app.post('/notification/request', user, admin, async (c) =>
    c.json(n.send(await readJson(c), c.var.principal.userId)),
  );
  app.get('/notification/requests', user, admin, (c) =>
    c.json(n.listRequests(parsePageQuery(queryRecord(c), ['createdTime'] as const))),
  );
  app.get('/notification/request/:id', user, admin, (c) =>
    c.json(n.getRequest(requireUuid(c.req.param('id'), 'requestId'))),
  );
  app.delete('/notification/request/:id', user, admin, (c) => {
    n.deleteRequest(requireUuid(c.req.param('id'), 'requestId'));
    return c.body(null, 200);
  });
  app.get('/notification/deliveries', user, admin, (c) =>
    c.json(n.deliveries(page(c), c.req.query('status') || undefined)),
  );
  app.get('/notification/stats', user, admin, (c) =>
    c.json({ ...n.stats(), ...deps.notifications.sender.stats() }),
  );

  // The inbox: every user reads and marks only their own notifications.
  app.get('/notifications', user, (c) =>
    c.json(n.inbox(c.var.principal.userId, page(c), c.req.query('unreadOnly') === 'true')),
  );
  app.get('/notifications/unread/count', user, (c) =>
    c.json(n.unreadCount(c.var.principal.userId)),
  );
  app.put('/notifications/read', user, (c) => {
    n.markAllRead(c.var.principal.userId);
    return c.body(null, 200);
  });
  app.put('/notification/:id/read', user, (c) => {
    n.markRead(c.var.principal.userId, requireUuid(c.req.param('id'), 'notificationId'));
    return c.body(null, 200);
  });
  app.delete('/notification/:id', user, (c) => {
    n.deleteNotification(c.var.principal.userId, requireUuid(c.req.param('id'), 'notificationId'));
    return c.body(null, 200);
  });
  return app;
}

/**
 * System settings (`/api/admin/settings/{mail|sms|retention}`) and the "send test message" endpoints,
 * for the tenant administrator (the gateway has no system administrator).
 */
export function adminSettingsRoutes(deps: {
  notifications: Notifications;
  retention: RetentionSettings;
  requireUser: RequireUser;
}) {
  const { settings } = deps.notifications;
  const app = new Hono<HttpEnv>();
  const user = deps.requireUser;
  const admin = requireTenantAdmin;
  app.post('/admin/settings/testMail', user, admin, async (c) => {
    await deps.notifications.testMail(await readJson(c), c.var.principal.email);
    return c.body(null, 200);
  });
  app.post('/admin/settings/testSms', user, admin, async (c) => {
    await deps.notifications.testSms(await readJson(c));
    return c.body(null, 200);
  });
  // Retention (docs/telemetry.md "Retention settings"): our own key, same shape.
  app.get('/admin/settings/retention', user, admin, (c) => c.json(deps.retention.get()));
  app.get('/admin/settings/:key', user, admin, (c) => c.json(settings.get(c.req.param('key'))));
  app.post('/admin/settings', user, admin, async (c) => {
    const body = await readJson(c);
    const b = body as { key?: unknown; jsonValue?: unknown } | null;
    if (b?.key === 'retention') return c.json(deps.retention.save(b.jsonValue));
    return c.json(settings.save(body));
  });
  return app;
}
