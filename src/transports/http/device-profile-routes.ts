import { Hono } from 'hono';
import { parsePageQuery } from '../../common/entity.js';
import { type DeviceProfileService, PROFILE_SORT } from '../../devices/device-profile-service.js';
import { ForbiddenError } from '../../errors.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import type { RequireUser } from './middleware.js';

/**
 * Device profile management (platform.md §3.5), mounted at `/api`: create/update with the
 * provisioning strategy and OTA assignment, and the paged list. `GET /api/deviceProfile/{id}` and
 * `GET /api/deviceProfileInfo/default` live in device-routes.ts.
 */
export function deviceProfileRoutes(deps: {
  profiles: DeviceProfileService;
  requireUser: RequireUser;
}) {
  const app = new Hono<HttpEnv>();
  const admin = (authority: string) => {
    if (authority !== 'TENANT_ADMIN') throw new ForbiddenError();
  };

  app.post('/deviceProfile', deps.requireUser, async (c) => {
    admin(c.var.principal.authority);
    return c.json(deps.profiles.save(await readJson(c)));
  });

  app.get('/deviceProfiles', deps.requireUser, (c) => {
    admin(c.var.principal.authority);
    return c.json(deps.profiles.list(parsePageQuery(queryRecord(c), PROFILE_SORT)));
  });

  return app;
}
