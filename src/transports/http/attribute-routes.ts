import { Hono } from 'hono';
import {
  type AttributeService,
  checkKeys,
  isAttributeScope,
} from '../../attributes/attribute-service.js';
import { parseTypedObject } from '../../attributes/kv-value.js';
import { attributeListJson } from '../../attributes/payloads.js';
import { ATTRIBUTE_SCOPES, type AttributeScope } from '../../attributes/types.js';
import type { SharedDeviceAccess } from '../../auth/authorization.js';
import { requireUuid } from '../../common/entity.js';
import type { DeviceService } from '../../devices/device-service.js';
import { ValidationError } from '../../errors.js';
import { type HttpEnv, userSource } from './context.js';
import { jsonText } from './device-api/long-poll.js';
import { type RequireUser, requireDevice } from './middleware.js';

function scopeOf(
  raw: string,
  allowed: readonly AttributeScope[] = ATTRIBUTE_SCOPES,
): AttributeScope {
  if (!isAttributeScope(raw) || !allowed.includes(raw)) {
    throw new ValidationError(`Invalid scope: ${raw}`);
  }
  return raw;
}

function keysOf(raw: string | undefined): string[] | undefined {
  return raw === undefined || raw === '' ? undefined : raw.split(',');
}

/**
 * Attribute REST API of ThingsBoard (platform.md §3.8), mounted at `/api/plugins/telemetry`
 * beside the telemetry routes. Devices only; access per `deviceAccess` (auth/authorization.ts):
 * reads need read access, saves and deletes write access.
 */
export function attributeRoutes(deps: {
  attributes: AttributeService;
  devices: Pick<DeviceService, 'owner'>;
  requireUser: RequireUser;
  /** Access through shared groups (`deviceAccess`); nothing shared without it. */
  shared?: SharedDeviceAccess;
}) {
  const { attributes } = deps;
  const app = new Hono<HttpEnv>();
  const user = deps.requireUser;
  const read = requireDevice(deps.devices, 'read', 'id', deps.shared);
  const write = requireDevice(deps.devices, 'write', 'id', deps.shared);

  // Attribute key names, all scopes or one (duplicates across scopes appear once).
  app.get('/DEVICE/:id/keys/attributes', user, read, (c) => {
    const id = requireUuid(c.req.param('id'), 'entityId');
    const keys = ATTRIBUTE_SCOPES.flatMap((scope) => attributes.get(id, scope).map((kv) => kv.key));
    return c.json([...new Set(keys)]);
  });

  app.get('/DEVICE/:id/keys/attributes/:scope', user, read, (c) => {
    const id = requireUuid(c.req.param('id'), 'entityId');
    const scope = scopeOf(c.req.param('scope'));
    return c.json(attributes.get(id, scope).map((kv) => kv.key));
  });

  app.get('/DEVICE/:id/values/attributes', user, read, (c) => {
    const id = requireUuid(c.req.param('id'), 'entityId');
    const keys = keysOf(c.req.query('keys'));
    const all = ATTRIBUTE_SCOPES.flatMap((scope) => attributes.get(id, scope, keys));
    return jsonText(c, attributeListJson(all));
  });

  app.get('/DEVICE/:id/values/attributes/:scope', user, read, (c) => {
    const id = requireUuid(c.req.param('id'), 'entityId');
    const scope = scopeOf(c.req.param('scope'));
    return jsonText(c, attributeListJson(attributes.get(id, scope, keysOf(c.req.query('keys')))));
  });

  // Only the server side writes SHARED/SERVER scope; CLIENT_SCOPE -> 400 "Invalid scope".
  const save = user;
  const saveHandler = [
    save,
    write,
    async (c: Parameters<typeof user>[0]) => {
      const id = requireUuid(c.req.param('id'), 'entityId');
      const scope = scopeOf(c.req.param('scope') ?? '', ['SHARED_SCOPE', 'SERVER_SCOPE']);
      const text = await c.req.text();
      if (text.trim() === '') throw new ValidationError('Request body is required');
      // @NOTE: REST values keep their JSON types; only device payloads cast numeric strings.
      const values = parseTypedObject(text, { cast: false });
      checkKeys(values.keys());
      if (values.size === 0) throw new ValidationError('No attributes data found in request body!');
      attributes.saveTyped(id, scope, values, userSource(c.var.principal));
      return c.body(null, 200);
    },
  ] as const;
  app.post('/DEVICE/:id/attributes/:scope', ...saveHandler);
  app.post('/DEVICE/:id/:scope', ...saveHandler);

  app.delete('/DEVICE/:id/:scope', user, write, async (c) => {
    const id = requireUuid(c.req.param('id'), 'entityId');
    const scope = scopeOf(c.req.param('scope'));
    const keys = keysOf(c.req.query('keys'));
    if (!keys) throw new ValidationError('keys is required');
    await attributes.delete(id, scope, keys, userSource(c.var.principal));
    return c.body(null, 200);
  });

  return app;
}
