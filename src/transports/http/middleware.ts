import type { MiddlewareHandler } from 'hono';
import type { AuthService } from '../../auth/auth-service.js';
import {
  assertCanReadDevice,
  assertCanWriteDevice,
  assertTenantAdmin,
  type SharedDeviceAccess,
} from '../../auth/authorization.js';
import { requireUuid } from '../../common/entity.js';
import type { DeviceService } from '../../devices/device-service.js';
import { AuthenticationError } from '../../errors.js';
import type { HttpEnv } from './context.js';

export type RequireUser = MiddlewareHandler<HttpEnv>;

const BEARER = /^Bearer\s+(\S+)$/i;

/**
 * Authenticates a user request from `X-Authorization: Bearer <jwt>` (ThingsBoard's header) or
 * the standard `Authorization: Bearer <jwt>`; 401 otherwise.
 */
export function requireUser(auth: AuthService): RequireUser {
  return async (c, next) => {
    const header = c.req.header('x-authorization') ?? c.req.header('authorization');
    const match = header ? BEARER.exec(header) : null;
    if (!match)
      throw new AuthenticationError('Authentication failed: no bearer token in X-Authorization');
    c.set('principal', await auth.authenticate(match[1]));
    await next();
  };
}

/** Lets only the tenant administrator through (after `requireUser`); 403 for anyone else. */
export const requireTenantAdmin: MiddlewareHandler<HttpEnv> = async (c, next) => {
  assertTenantAdmin(c.var.principal);
  await next();
};

/**
 * Checks the caller's access to the device named by the route parameter `param` (after
 * `requireUser`): `read` -> 404 for a device it may not see; `write` -> also 403 when it may only
 * read. The decision itself is `deviceAccess` in `auth/authorization.ts`; `shared` adds what
 * shared groups give the caller.
 */
export function requireDevice(
  devices: Pick<DeviceService, 'owner'>,
  level: 'read' | 'write',
  param = 'id',
  shared?: SharedDeviceAccess,
): RequireUser {
  return async (c, next) => {
    const device = devices.owner(requireUuid(c.req.param(param), 'deviceId'));
    if (level === 'read') assertCanReadDevice(c.var.principal, device, shared);
    else assertCanWriteDevice(c.var.principal, device, shared);
    await next();
  };
}
