import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from 'pino';
import type { AuthService } from '../../auth/auth-service.js';
import type { SharedDeviceAccess } from '../../auth/authorization.js';
import type { DeviceProfileService } from '../../devices/device-profile-service.js';
import type { DeviceService } from '../../devices/device-service.js';
import { PayloadTooLargeError } from '../../errors.js';
import type { UserService } from '../../users/user-service.js';
import { authRoutes } from './auth-routes.js';
import { declaredLength, type HttpEnv } from './context.js';
import { deviceRoutes } from './device-routes.js';
import { errorBody, handleError } from './errors.js';
import { requireUser } from './middleware.js';
import { serveUi } from './static.js';

export interface HealthInfo {
  readonly ready: boolean;
  readonly status: string;
  readonly version: string;
  readonly uptimeMs: number;
  /** The database check, when the gateway has a database open. */
  readonly db?: { readonly status: 'UP' | 'DOWN'; readonly error?: string };
  /** The queue to the processing entry point (queued, processed, dropped, failed). */
  readonly messages?: object;
  /** Upstream sync (`GET /api/upstream/status`); the link being down does not make it DOWN. */
  readonly upstream?: object;
}

export interface HttpAppDeps {
  readonly log: Logger;
  readonly maxBodyBytes: number;
  readonly health: () => HealthInfo;
  readonly auth: AuthService;
  readonly users: UserService;
  readonly devices: DeviceService;
  readonly profiles: DeviceProfileService;
  /** Device access through shared groups; nothing shared without it. */
  readonly sharedDevices?: SharedDeviceAccess;
  /** Directory of the built UI; omitted when the gateway runs without one. */
  readonly uiDir?: string;
  /** Sub-apps that later domains mount under `/api`. */
  readonly apiRoutes?: ReadonlyArray<{ path: string; app: Hono<HttpEnv> }>;
  /** Routes that apply their own body limit (OTA upload); the global `/api/*` limit skips them. */
  readonly bodyLimitExempt?: ReadonlyArray<{ readonly method: string; readonly path: RegExp }>;
}

/** Builds the Hono app: one sub-app per domain, errors mapped in one `onError`. */
export function createHttpApp(deps: HttpAppDeps): Hono<HttpEnv> {
  const app = new Hono<HttpEnv>();
  const auth = requireUser(deps.auth);

  app.onError((err, c) => handleError(err, c, deps.log));
  app.notFound((c) => c.json(errorBody(404, `No handler for ${c.req.method} ${c.req.path}`), 404));

  const limit = bodyLimit({
    maxSize: deps.maxBodyBytes,
    onError: () => {
      throw new PayloadTooLargeError(`Request body is larger than ${deps.maxBodyBytes} bytes`);
    },
  });
  app.use('/api/*', (c, next) => {
    if (deps.bodyLimitExempt?.some((r) => r.method === c.req.method && r.path.test(c.req.path))) {
      return next();
    }
    // @NOTE: Hono's bodyLimit reads `c.req.raw.body`, which makes the Node adapter build a whole
    // Fetch Request per call (a fifth of the device API's CPU). A declared Content-Length is
    // checked here from the header; only chunked bodies go through bodyLimit's counting reader.
    const length = declaredLength(c.env?.incoming);
    if (length !== undefined) {
      if (length > deps.maxBodyBytes) {
        throw new PayloadTooLargeError(`Request body is larger than ${deps.maxBodyBytes} bytes`);
      }
      return next();
    }
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    return limit(c, next);
  });

  app.get('/healthz', (c) => {
    const h = deps.health();
    return c.json(
      {
        status: h.status,
        version: h.version,
        uptimeMs: h.uptimeMs,
        db: h.db,
        messages: h.messages,
        upstream: h.upstream,
      },
      h.ready ? 200 : 503,
    );
  });

  app.route('/api/auth', authRoutes({ auth: deps.auth, users: deps.users, requireUser: auth }));
  app.route(
    '/api',
    deviceRoutes({
      devices: deps.devices,
      profiles: deps.profiles,
      requireUser: auth,
      shared: deps.sharedDevices,
    }),
  );
  for (const r of deps.apiRoutes ?? []) app.route(r.path, r.app);

  if (deps.uiDir) {
    const ui = serveUi(deps.uiDir);
    app.get('*', (c) => (c.req.path.startsWith('/api/') ? c.notFound() : ui(c)));
  }
  return app;
}
