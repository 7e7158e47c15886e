import { Hono } from 'hono';
import type { AlarmActor, AlarmService } from '../../alarms/alarm-service.js';
import { ALARM_SORT, type AlarmFilter } from '../../alarms/alarm-store.js';
import {
  ALARM_SEARCH_STATUSES,
  ALARM_SEVERITIES,
  ALARM_STATUSES,
  type AlarmSeverity,
  type AlarmStatus,
  statusListFilter,
} from '../../alarms/types.js';
import { type Principal, principalOf } from '../../auth/auth-service.js';
import {
  type Access,
  canAssignAlarmTo,
  canReadUser,
  deviceAccess,
  isTenantAdmin,
  type SharedDeviceAccess,
} from '../../auth/authorization.js';
import { parsePageQuery, requireUuid } from '../../common/entity.js';
import type { DeviceService } from '../../devices/device-service.js';
import { ForbiddenError, NotFoundError, ValidationError } from '../../errors.js';
import type { GroupService } from '../../groups/group-service.js';
import type { UserService } from '../../users/user-service.js';
import { USER_SORT, type UserRow } from '../../users/user-store.js';
import { type HttpEnv, queryRecord, readJson } from './context.js';
import type { RequireUser } from './middleware.js';

const actorOf = (p: Principal): AlarmActor => ({
  userId: p.userId,
  email: p.email,
  customerId: p.customerId,
});

function list(raw: string | undefined): string[] | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function oneOf<T extends string>(name: string, values: readonly T[], raw: string[] | undefined) {
  for (const v of raw ?? []) {
    if (!(values as readonly string[]).includes(v))
      throw new ValidationError(`${name}: ${v} is not one of ${values.join(', ')}`);
  }
  return raw as T[] | undefined;
}

function time(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (!/^\d+$/.test(raw)) throw new ValidationError(`${name} must be epoch milliseconds`);
  return Number(raw);
}

/** `searchStatus` (§2.4) or one v2 `statusList` item as cleared/acknowledged flags. */
function searchFlags(s: string): { cleared?: boolean; acknowledged?: boolean } {
  switch (s) {
    case 'ACTIVE':
      return { cleared: false };
    case 'CLEARED':
      return { cleared: true };
    case 'ACK':
      return { acknowledged: true };
    case 'UNACK':
      return { acknowledged: false };
    default:
      return {};
  }
}

/** The filters of the v1 lists: `searchStatus` or `status` (both at once is 400, §2.4). */
function v1Filter(q: Record<string, string | undefined>): AlarmFilter {
  const searchStatus = q.searchStatus || undefined;
  const status = q.status || undefined;
  if (searchStatus && status)
    throw new ValidationError(
      "Invalid alarms search query: Both parameters 'searchStatus' and 'status' can't be specified at the same time!",
    );
  oneOf('searchStatus', ALARM_SEARCH_STATUSES, searchStatus ? [searchStatus] : undefined);
  const statusList = oneOf<AlarmStatus>('status', ALARM_STATUSES, status ? [status] : undefined);
  return {
    ...(searchStatus ? searchFlags(searchStatus) : {}),
    statusList,
    ...common(q),
  };
}

/** The filters of the v2 lists (`statusList` as `statusListFilter` reads it). */
function v2Filter(q: Record<string, string | undefined>): AlarmFilter {
  return {
    ...statusListFilter(list(q.statusList) ?? []),
    severityList: oneOf<AlarmSeverity>('severityList', ALARM_SEVERITIES, list(q.severityList)),
    typeList: list(q.typeList),
    ...common(q),
  };
}

function common(q: Record<string, string | undefined>): AlarmFilter {
  return {
    assigneeId: q.assigneeId ? requireUuid(q.assigneeId, 'assigneeId') : undefined,
    startTime: time('startTime', q.startTime),
    endTime: time('endTime', q.endTime),
    textSearch: q.textSearch || undefined,
  };
}

/**
 * Alarm REST API (platform.md §2.4), mounted at `/api`. An alarm is seen and acted on through
 * its originator device (`deviceAccess`): no access → 404 (ids do not leak); reads need read
 * access; ack, clear, assign, comments, update and delete need write access (a device shared
 * read-only gives 403).
 */
export function alarmRoutes(deps: {
  alarms: AlarmService;
  devices: Pick<DeviceService, 'owner'>;
  groups: Pick<GroupService, 'sharedDeviceIds'>;
  users: Pick<UserService, 'row' | 'pageWhere'>;
  requireUser: RequireUser;
  shared?: SharedDeviceAccess;
}) {
  const { alarms, devices, shared, users } = deps;
  const app = new Hono<HttpEnv>();
  const user = deps.requireUser;

  const access = (p: Principal, deviceId: string): Access => {
    try {
      return deviceAccess(p, devices.owner(deviceId), shared);
    } catch (err) {
      if (err instanceof NotFoundError) return 'none';
      throw err;
    }
  };
  /** The alarm id from the path, checked against the caller's access to its originator. */
  const alarmId = (raw: string, p: Principal, level: 'read' | 'write'): string => {
    const id = requireUuid(raw, 'alarmId');
    const a = access(p, alarms.originatorOf(id));
    if (a === 'none') throw new NotFoundError(`Alarm with id [${id}] is not found`);
    if (level === 'write' && a === 'read') throw new ForbiddenError();
    return id;
  };
  /** The device an entity list is about; only devices originate alarms here. */
  const entity = (type: string, raw: string, p: Principal): string => {
    if (type !== 'DEVICE')
      throw new ValidationError(`Alarms are only raised on devices, not on ${type}`);
    const id = requireUuid(raw, 'entityId');
    if (access(p, id) === 'none') throw new NotFoundError(`Device with id [${id}] is not found`);
    return id;
  };
  /** What a list shows the caller: everything (tenant admin) or its customer's devices. */
  const visible = (p: Principal): AlarmFilter => {
    if (isTenantAdmin(p)) return {};
    if (p.customerId === null) throw new ForbiddenError();
    const customerId = p.customerId;
    const sharedDeviceIds = deps.groups
      .sharedDeviceIds(customerId)
      .filter((id) => access(p, id) !== 'none');
    return { visibleTo: { customerId, sharedDeviceIds } };
  };
  const uuid = '{[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}}';

  app.get('/alarm/types', user, (c) => {
    const q = parsePageQuery(queryRecord(c), ['type'] as const);
    return c.json(alarms.types(visible(c.var.principal), q));
  });

  app.get('/alarm/highestSeverity/:entityType/:entityId', user, (c) => {
    const p = c.var.principal;
    const originatorId = entity(c.req.param('entityType'), c.req.param('entityId'), p);
    const sev = alarms.highestSeverity({ ...v1Filter(queryRecord(c)), originatorId });
    return sev ? c.json(sev) : c.body(null, 200);
  });

  app.get('/alarm/info/:alarmId', user, (c) =>
    c.json(alarms.info(alarmId(c.req.param('alarmId'), c.var.principal, 'read'))),
  );

  app.get(`/alarm/:alarmId${uuid}`, user, (c) =>
    c.json(alarms.get(alarmId(c.req.param('alarmId'), c.var.principal, 'read'))),
  );

  app.post('/alarm', user, async (c) => {
    const p = c.var.principal;
    const body = (await readJson(c)) as Record<string, unknown> | null;
    if (body === null || typeof body !== 'object' || Array.isArray(body))
      throw new ValidationError('Alarm must be a JSON object');
    const existing = body.id as { id?: unknown } | undefined;
    if (existing?.id !== undefined) alarmId(String(existing.id), p, 'write');
    const originator = body.originator as { id?: unknown } | undefined;
    if (originator && typeof originator.id === 'string') {
      const a = access(p, requireUuid(originator.id, 'originator.id'));
      if (a === 'none') throw new NotFoundError(`Device with id [${originator.id}] is not found`);
      if (a === 'read') throw new ForbiddenError();
    }
    return c.json(alarms.save(body, actorOf(p)));
  });

  app.delete(`/alarm/:alarmId${uuid}`, user, (c) => {
    const p = c.var.principal;
    alarms.delete(alarmId(c.req.param('alarmId'), p, 'write'), actorOf(p));
    return c.json(true);
  });

  app.post('/alarm/:alarmId/ack', user, (c) => {
    const p = c.var.principal;
    return c.json(alarms.ack(alarmId(c.req.param('alarmId'), p, 'write'), actorOf(p)));
  });

  app.post('/alarm/:alarmId/clear', user, (c) => {
    const p = c.var.principal;
    return c.json(alarms.clear(alarmId(c.req.param('alarmId'), p, 'write'), actorOf(p)));
  });

  /** Whether `row` may be given the alarm `id` by `p` (authorization.canAssignAlarmTo). */
  const assignable = (p: Principal, id: string) => {
    const device = devices.owner(alarms.originatorOf(id));
    return (row: UserRow) =>
      canAssignAlarmTo(p, { ...principalOf(row), enabled: row.enabled === 1 }, device, shared);
  };

  // ThingsBoard's assignee picker: the users the alarm can be assigned to, as UserEmailInfo.
  app.get('/users/assign/:alarmId', user, (c) => {
    const p = c.var.principal;
    const id = alarmId(c.req.param('alarmId'), p, 'write');
    const page = users.pageWhere(parsePageQuery(queryRecord(c), USER_SORT), assignable(p, id));
    return c.json({
      ...page,
      data: page.data.map((u) => ({
        id: u.id,
        email: u.email,
        firstName: u.firstName,
        lastName: u.lastName,
      })),
    });
  });

  app.post('/alarm/:alarmId/assign/:userId', user, (c) => {
    const p = c.var.principal;
    const id = alarmId(c.req.param('alarmId'), p, 'write');
    const assigneeId = requireUuid(c.req.param('userId'), 'userId');
    const row = users.row(assigneeId);
    if (!row || !canReadUser(p, { id: row.id, customerId: row.customer_id }))
      throw new NotFoundError(`User with id [${assigneeId}] is not found`);
    if (!assignable(p, id)(row))
      throw new ValidationError(
        `User ${row.email} cannot be assigned: disabled, or cannot see the alarm's originator`,
      );
    return c.json(alarms.assign(id, assigneeId, actorOf(p)));
  });

  app.delete('/alarm/:alarmId/assign', user, (c) => {
    const p = c.var.principal;
    return c.json(alarms.unassign(alarmId(c.req.param('alarmId'), p, 'write'), actorOf(p)));
  });

  app.post('/alarm/:alarmId/comment', user, async (c) => {
    const p = c.var.principal;
    const id = alarmId(c.req.param('alarmId'), p, 'write');
    return c.json(alarms.saveComment(id, await readJson(c), actorOf(p)));
  });

  app.get('/alarm/:alarmId/comment', user, (c) => {
    const id = alarmId(c.req.param('alarmId'), c.var.principal, 'read');
    return c.json(alarms.comments(id, parsePageQuery(queryRecord(c), ['createdTime'] as const)));
  });

  app.delete('/alarm/:alarmId/comment/:commentId', user, (c) => {
    const p = c.var.principal;
    const id = alarmId(c.req.param('alarmId'), p, 'write');
    alarms.deleteComment(id, requireUuid(c.req.param('commentId'), 'commentId'), actorOf(p));
    return c.body(null, 200);
  });

  app.get('/alarm/:entityType/:entityId', user, (c) => {
    const p = c.var.principal;
    const originatorId = entity(c.req.param('entityType'), c.req.param('entityId'), p);
    const params = queryRecord(c);
    const q = parsePageQuery(params, ALARM_SORT);
    return c.json(alarms.list({ ...v1Filter(params), textSearch: q.textSearch, originatorId }, q));
  });

  app.get('/alarms', user, (c) => {
    const p = c.var.principal;
    const params = queryRecord(c);
    const q = parsePageQuery(params, ALARM_SORT);
    return c.json(alarms.list({ ...v1Filter(params), ...visible(p) }, q));
  });

  app.get('/v2/alarm/:entityType/:entityId', user, (c) => {
    const p = c.var.principal;
    const originatorId = entity(c.req.param('entityType'), c.req.param('entityId'), p);
    const params = queryRecord(c);
    const q = parsePageQuery(params, ALARM_SORT);
    return c.json(alarms.list({ ...v2Filter(params), originatorId }, q));
  });

  app.get('/v2/alarms', user, (c) => {
    const p = c.var.principal;
    const params = queryRecord(c);
    const q = parsePageQuery(params, ALARM_SORT);
    return c.json(alarms.list({ ...v2Filter(params), ...visible(p) }, q));
  });

  return app;
}
