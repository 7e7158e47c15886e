import { createHash, timingSafeEqual } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { Hono, type MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import type { AuthService } from '../../auth/auth-service.js';
import { assertTenantAdmin } from '../../auth/authorization.js';
import { AuthenticationError, ConflictError } from '../../errors.js';
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

/**
 * `GET /api/admin/backup` (tenant administrator): a consistent copy of the database, made while
 * ingest goes on and streamed as a file; one at a time.
 */
export function backupRoutes(deps: {
  requireUser: MiddlewareHandler<HttpEnv>;
  /** Writes a consistent copy of the database to `file`. */
  backup: (file: string) => Promise<unknown>;
  /** Directory for the copy while it is streamed (beside the database: it may be large). */
  tmpDir: string;
  log: Logger;
}) {
  const app = new Hono<HttpEnv>();
  let running = false;
  app.get('/admin/backup', deps.requireUser, async (c) => {
    assertTenantAdmin(c.var.principal);
    if (running) throw new ConflictError('A backup is already running');
    running = true;
    const name = `edge-gateway-${new Date().toISOString().replace(/[-:.]/g, '')}.db`;
    const file = join(deps.tmpDir, `.download-${process.pid}-${name}`);
    try {
      await mkdir(deps.tmpDir, { recursive: true, mode: 0o750 });
      await deps.backup(file);
    } catch (err) {
      running = false;
      throw err;
    }
    const { size } = await stat(file);
    const stream = createReadStream(file);
    stream.once('close', () => {
      running = false;
      rm(file, { force: true }).catch((err: unknown) =>
        deps.log.warn({ err, file }, 'cannot remove a streamed backup'),
      );
    });
    deps.log.info({ bytes: size }, 'backup streamed');
    return c.body(Readable.toWeb(stream) as ReadableStream, 200, {
      'content-type': 'application/vnd.sqlite3',
      'content-length': String(size),
      'content-disposition': `attachment; filename="${name}"`,
    });
  });
  return app;
}

/** `GET /api/system/info` (no login: the certificate is what every client is shown anyway). */
export interface SystemInfo {
  readonly version: string;
  readonly https: {
    readonly port: number;
    readonly fingerprint256: string;
    readonly selfSigned: boolean;
    readonly subjectAltName: string;
    readonly validTo: string;
  } | null;
}

export function systemRoutes(deps: { info: () => SystemInfo }) {
  const app = new Hono<HttpEnv>();
  app.get('/system/info', (c) => c.json(deps.info()));
  return app;
}
