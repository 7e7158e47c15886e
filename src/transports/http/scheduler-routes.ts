import { Hono } from 'hono';
import { requireUuid } from '../../common/entity.js';
import { MAX_JOBS, type Scheduler } from '../../scheduler/scheduler.js';
import type { SchedulerEventService } from '../../scheduler/scheduler-event-service.js';
import { type HttpEnv, readJson } from './context.js';
import { type RequireUser, requireTenantAdmin } from './middleware.js';

/**
 * Scheduler events on ThingsBoard PE's paths (issue 14 §11), mounted at `/api`, for the tenant
 * administrator: create or update, get, list, delete; and (ours) `GET /api/scheduler/jobs`, every
 * job armed on the scheduler host with its next run, and `POST /api/scheduler/nextRuns`, the next
 * runs of an unsaved schedule.
 */
export function schedulerRoutes(deps: {
  events: SchedulerEventService;
  scheduler: Scheduler;
  requireUser: RequireUser;
}) {
  const { events } = deps;
  const app = new Hono<HttpEnv>();
  const user = deps.requireUser;
  const admin = requireTenantAdmin;
  const eventId = (raw: string | undefined) => requireUuid(raw, 'schedulerEventId');

  app.post('/schedulerEvent', user, admin, async (c) => c.json(events.save(await readJson(c))));
  app.get('/schedulerEvents', user, admin, (c) => c.json(events.list()));
  app.get('/schedulerEvent/:id', user, admin, (c) =>
    c.json(events.get(eventId(c.req.param('id')))),
  );
  app.delete('/schedulerEvent/:id', user, admin, (c) => {
    events.delete(eventId(c.req.param('id')));
    return c.body(null, 200);
  });
  app.post('/scheduler/nextRuns', user, admin, async (c) =>
    c.json(events.preview(await readJson(c))),
  );
  app.get('/scheduler/jobs', user, admin, (c) =>
    c.json({ maxJobs: MAX_JOBS, jobs: deps.scheduler.jobs() }),
  );
  return app;
}
