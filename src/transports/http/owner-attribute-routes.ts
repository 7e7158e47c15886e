import { Hono } from 'hono';
import { checkKeys } from '../../attributes/attribute-service.js';
import { parseTypedObject } from '../../attributes/kv-value.js';
import type {
  OwnerAttributeService,
  OwnerScope,
  OwnerType,
} from '../../attributes/owner-attributes.js';
import { attributeListJson } from '../../attributes/payloads.js';
import type { Principal } from '../../auth/auth-service.js';
import { assertOwnerAttributeAccess, type OwnerRef } from '../../auth/authorization.js';
import { requireUuid } from '../../common/entity.js';
import { NotFoundError, ValidationError } from '../../errors.js';
import type { HttpEnv } from './context.js';
import { jsonText } from './device-api/long-poll.js';
import type { RequireUser } from './middleware.js';

const SCOPES: readonly OwnerScope[] = ['SERVER_SCOPE', 'SHARED_SCOPE'];

function scopeOf(raw: string | undefined): OwnerScope {
  if (!SCOPES.includes(raw as OwnerScope)) throw new ValidationError(`Invalid scope: ${raw}`);
  return raw as OwnerScope;
}

const NAMES: Record<OwnerType, string> = { TENANT: 'Tenant', CUSTOMER: 'Customer', USER: 'User' };

/**
 * Attributes of customers, the tenant and users (platform.md §3.8 paths with `CUSTOMER`/`TENANT`/
 * `USER`), mounted at `/api/plugins/telemetry`: the dynamic values of alarm rules and dashboard
 * filters live there. A customer user reads its own customer's attributes; only the tenant
 * administrator writes them. User attributes follow ThingsBoard CE's user permissions (§6.2): the
 * tenant administrator reads and writes any user's, a customer user only its own (a peer it may
 * see is 403: CE allows only READ of peers, not READ_ATTRIBUTES). The decision is
 * `ownerAttributeAccess`, which WebSocket attribute subscriptions take too.
 */
export function ownerAttributeRoutes(deps: {
  attributes: OwnerAttributeService;
  /** The tenant, customer or user with this id, or undefined. */
  ownerRef: (type: OwnerType, id: string) => OwnerRef | undefined;
  requireUser: RequireUser;
}) {
  const { attributes } = deps;
  const app = new Hono<HttpEnv>();
  const user = deps.requireUser;
  /** The entity a path names, after checking that the caller may `op` its attributes. */
  const target = (
    type: string,
    raw: string,
    p: Principal,
    op: 'read' | 'write',
  ): { type: OwnerType; id: string } => {
    const id = requireUuid(raw, 'entityId');
    const ref = deps.ownerRef(type as OwnerType, id);
    if (!ref) throw new NotFoundError(`${NAMES[type as OwnerType]} with id [${id}] is not found`);
    assertOwnerAttributeAccess(p, ref, op);
    return { type: ref.type, id };
  };
  const owner = ':type{CUSTOMER|TENANT|USER}/:id';
  const keysOf = (raw: string | undefined) => (raw ? raw.split(',') : undefined);
  const read = (c: Parameters<RequireUser>[0]) =>
    target(c.req.param('type') ?? '', c.req.param('id') ?? '', c.var.principal, 'read');

  app.get(`/${owner}/values/attributes`, user, (c) => {
    const t = read(c);
    const keys = keysOf(c.req.query('keys'));
    return jsonText(
      c,
      attributeListJson(SCOPES.flatMap((s) => attributes.get(t.type, t.id, s, keys))),
    );
  });
  app.get(`/${owner}/values/attributes/:scope`, user, (c) => {
    const t = read(c);
    const scope = scopeOf(c.req.param('scope'));
    return jsonText(
      c,
      attributeListJson(attributes.get(t.type, t.id, scope, keysOf(c.req.query('keys')))),
    );
  });
  app.get(`/${owner}/keys/attributes`, user, (c) => {
    const t = read(c);
    return c.json(SCOPES.flatMap((s) => attributes.get(t.type, t.id, s).map((kv) => kv.key)));
  });
  app.get(`/${owner}/keys/attributes/:scope`, user, (c) => {
    const t = read(c);
    const scope = scopeOf(c.req.param('scope'));
    return c.json(attributes.get(t.type, t.id, scope).map((kv) => kv.key));
  });
  const save = async (c: Parameters<RequireUser>[0]) => {
    const p = c.var.principal;
    const t = target(c.req.param('type') ?? '', c.req.param('id') ?? '', p, 'write');
    const scope = scopeOf(c.req.param('scope'));
    const text = await c.req.text();
    if (text.trim() === '') throw new ValidationError('Request body is required');
    const values = parseTypedObject(text, { cast: false });
    checkKeys(values.keys());
    if (values.size === 0) throw new ValidationError('No attributes data found in request body!');
    attributes.save(t.type, t.id, scope, values);
    return c.body(null, 200);
  };
  app.post(`/${owner}/attributes/:scope`, user, save);
  app.post(`/${owner}/:scope{SERVER_SCOPE|SHARED_SCOPE}`, user, save);
  app.delete(`/${owner}/:scope{SERVER_SCOPE|SHARED_SCOPE}`, user, (c) => {
    const p = c.var.principal;
    const t = target(c.req.param('type'), c.req.param('id'), p, 'write');
    const keys = keysOf(c.req.query('keys'));
    if (!keys) throw new ValidationError('keys is required');
    attributes.delete(t.type, t.id, scopeOf(c.req.param('scope')), keys);
    return c.body(null, 200);
  });
  return app;
}
