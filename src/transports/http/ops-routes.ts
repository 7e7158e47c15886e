import { createHash, timingSafeEqual } from 'node:crypto';
import { Hono, type MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import type { AuthService } from '../../auth/auth-service.js';
import { assertTenantAdmin } from '../../auth/authorization.js';
import { AuthenticationError } from '../../errors.js';
import type { HttpEnv } from './context.js';
import { errorBody, handleError } from './errors.js';

const BEARER = /^Bearer\s+(\S+)$/i;

/**
 * Operator access: a tenant administrator's JWT, or (for Prometheus, which cannot log in) the
 * configured scrape token, both as `Authorization: Bearer ...` or `X-Authorization`.
 */
export function requireOperator(
  auth: AuthService,
  scrapeToken?: string,
): MiddlewareHandler<HttpEnv> {
  const expected = scrapeToken ? digest(scrapeToken) : undefined;
  return async (c, next) => {
    const header = c.req.header('x-authorization') ?? c.req.header('authorization');
    const token = header ? BEARER.exec(header)?.[1] : undefined;
    if (!token) throw new AuthenticationError('Authentication failed: no bearer token');
    if (!expected || !timingSafeEqual(digest(token), expected)) {
      const principal = await auth.authenticate(token);
      assertTenantAdmin(principal);
      c.set('principal', principal);
    }
    await next();
  };
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

export interface MetricsSource {
  readonly contentType: string;
  text(): Promise<string>;
}

/** `GET /metrics`: the Prometheus text exposition. */
export function metricsRoutes(deps: {
  metrics: MetricsSource;
  requireOperator: MiddlewareHandler<HttpEnv>;
}) {
  const app = new Hono<HttpEnv>();
  app.get('/metrics', deps.requireOperator, async (c) => {
    const text = await deps.metrics.text();
    return c.body(text, 200, { 'content-type': deps.metrics.contentType });
  });
  return app;
}

/** A listener of its own for `/metrics` (`--metrics-port`), off the device-facing port. */
export function metricsApp(deps: Parameters<typeof metricsRoutes>[0] & { log: Logger }) {
  const app = new Hono<HttpEnv>();
  app.onError((err, c) => handleError(err, c, deps.log));
  app.notFound((c) => c.json(errorBody(404, `No handler for ${c.req.method} ${c.req.path}`), 404));
  app.route('/', metricsRoutes(deps));
  return app;
}
