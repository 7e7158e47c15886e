import { Hono } from 'hono';
import { assertTenantAdmin } from '../../auth/authorization.js';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import { type DeviceProfileService, PROFILE_SORT } from '../../devices/device-profile-service.js';
import { ValidationError } from '../../errors.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import type { RequireUser } from './middleware.js';

/**
 * Device profile management (platform.md §3.5), mounted at `/api`: create/update with the
 * provisioning strategy, alarm rules and OTA assignment, get, delete, set default, the paged
 * lists and names. Full profiles are the tenant administrator's; infos are readable by customer
 * users too, as in ThingsBoard.
 */
export function deviceProfileRoutes(deps: {
  profiles: DeviceProfileService;
  requireUser: RequireUser;
}) {
  const { profiles } = deps;
  const app = new Hono<HttpEnv>();
  const profileId = (raw: string | undefined) => requireUuid(raw, 'deviceProfileId');

  app.post('/deviceProfile', deps.requireUser, async (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(await profiles.saveLoading(await readJson(c)));
  });

  app.get('/deviceProfiles', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(profiles.list(parsePageQuery(queryRecord(c), PROFILE_SORT)));
  });

  // @NOTE: registered before `/deviceProfile/:id`, which would take "names" for an id.
  app.get('/deviceProfile/names', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(profiles.names(booleanParam(c.req.query('activeOnly'), 'activeOnly')));
  });

  app.get('/deviceProfile/:id', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(profiles.get(profileId(c.req.param('id'))));
  });

  app.delete('/deviceProfile/:id', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    profiles.delete(profileId(c.req.param('id')));
    return c.body(null, 200);
  });

  app.post('/deviceProfile/:id/default', deps.requireUser, (c) => {
    assertTenantAdmin(c.var.principal);
    return c.json(profiles.setDefault(profileId(c.req.param('id'))));
  });

  app.get('/deviceProfileInfos', deps.requireUser, (c) => {
    const query = queryRecord(c);
    return c.json(
      profiles.listInfos(parsePageQuery(query, PROFILE_SORT), {
        transportType: query.transportType || undefined,
      }),
    );
  });

  app.get('/deviceProfileInfo/:id', deps.requireUser, (c) => {
    const id = c.req.param('id');
    return c.json(id === 'default' ? profiles.defaultInfo() : profiles.info(profileId(id)));
  });

  return app;
}

function booleanParam(raw: string | undefined, name: string): boolean {
  if (raw === undefined || raw === '' || raw === 'false') return false;
  if (raw === 'true') return true;
  throw new ValidationError(`${name} must be true or false`);
}
