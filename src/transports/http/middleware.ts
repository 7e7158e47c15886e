import type { MiddlewareHandler } from 'hono';
import type { AuthService } from '../../auth/auth-service.js';
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
