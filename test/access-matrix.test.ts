/**
 * The access matrix: every REST endpoint, called by each kind of caller
 * on each kind of entity, with the exact status expected (platform reference §6.2–6.3, issue 6).
 *
 * A new endpoint joins by adding a row to `ROWS`: method, path template (`{id}` is the target),
 * body, the target set, and one status per caller and target, in the order of that set. Path and
 * body may also name the fixture's other entities (`{A}`, `{B}`, `{tenant}`, `{userA}`, the
 * root rule chain `{rootChain}`, two of the tenant admin's inbox notifications `{note}` and
 * `{note2}`); an endpoint that takes no entity id runs on the pseudo-target
 * set `none`. Rows run concurrently
 * (two RPC rows wait for the 5 s minimum RPC timeout); every row must leave the fixture as it
 * found it, so a destructive call (delete, update, owner change) sets `fresh`: each cell then
 * runs on its own throwaway device, made by the tenant admin to stand in for the target.
 * Every row is also called with no token: 401.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

type Caller = 'tenantAdmin' | 'userA' | 'userB';
const CALLERS: readonly Caller[] = ['tenantAdmin', 'userA', 'userB'];

/** The entities a row is called on; each row's statuses follow this order. */
const TARGETS = {
  /** Owned by the tenant; owned by customer A; tenant devices in groups shared with B. */
  device: ['deviceTenant', 'deviceA', 'deviceSharedReadB', 'deviceSharedWriteB'],
  /** A tenant dashboard; one assigned to A; one in a DASHBOARD group shared with B (read). */
  dashboard: ['dashboardTenant', 'dashboardA', 'dashboardSharedB'],
  /** The groups shared with B (read, write) and a tenant group shared with nobody. */
  group: ['groupReadB', 'groupWriteB', 'groupPrivate'],
  /** One alarm on each device target, in the same order. */
  alarm: ['alarmTenant', 'alarmA', 'alarmSharedReadB', 'alarmSharedWriteB'],
  /** Endpoints that take no entity id (lists, or ids of customers and users in the path). */
  none: ['-'],
} as const;
type TargetSet = keyof typeof TARGETS;

interface Row {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** `{id}` is replaced by the target's id. */
  readonly path: string;
  readonly body?: unknown;
  readonly on: TargetSet;
  /**
   * Each cell gets its own device like the target (`on: 'device'`), or its own alarm on such a
   * device (`on: 'alarm'`): destructive calls.
   */
  readonly fresh?: true;
  /** Status per caller, one per target of `on`, in the order of `TARGETS[on]`. */
  readonly expect: Readonly<Record<Caller, readonly number[]>>;
}

// Device access: read = the caller may see the device, write = it may also change it.
const READ = {
  tenantAdmin: [200, 200, 200, 200],
  userA: [404, 200, 404, 404],
  userB: [404, 404, 200, 200],
};
const WRITE = {
  tenantAdmin: [200, 200, 200, 200],
  userA: [404, 200, 404, 404],
  userB: [404, 404, 403, 200],
};
/** A call the device never answers (no session): the RPC expires after the minimum timeout. */
const RPC_TIMEOUT = {
  tenantAdmin: [504, 504, 504, 504],
  userA: [404, 504, 404, 404],
  userB: [404, 404, 403, 504],
};
const DASHBOARD_READ = {
  tenantAdmin: [200, 200, 200],
  userA: [404, 200, 404],
  userB: [404, 404, 200],
};
const GROUP_READ = { tenantAdmin: [200, 200, 200], userA: [404, 404, 404], userB: [200, 200, 404] };
const GROUP_WRITE = {
  tenantAdmin: [200, 200, 200],
  userA: [404, 404, 404],
  userB: [403, 403, 404],
};

/** Device-management calls of the tenant (delete, credentials change, owner change, assign). */
const MANAGE = {
  tenantAdmin: [200, 200, 200, 200],
  userA: [404, 403, 404, 404],
  userB: [404, 404, 403, 403],
};
/** Unassign also refuses a device the tenant owns (nothing to unassign): 400. */
const UNASSIGN = { ...MANAGE, tenantAdmin: [400, 200, 400, 400] };
/** Status per caller for a row `on: 'none'`. */
/** A connector id that exists nowhere. */
const NO_CONNECTOR = '0b5b2b7e-3c55-4f4e-9d0e-2a7c1b9e4f10';
/** An id of nothing (notification targets, templates, rules). */
const NO_ID = '00000000-0000-4000-8000-000000000000';

const ANY = (tenantAdmin: number, userA: number, userB: number) => ({
  tenantAdmin: [tenantAdmin],
  userA: [userA],
  userB: [userB],
});

const TELEMETRY = '/api/plugins/telemetry/DEVICE/{id}';
const ALARM_BODY = {
  type: 'Matrix',
  severity: 'MAJOR',
  originator: { entityType: 'DEVICE', id: '{id}' },
};
const PAGE = 'pageSize=10&page=0';
const RPC = { method: 'setGpio', params: { pin: 1 }, timeout: 100 };

export const ROWS: readonly Row[] = [
  { method: 'GET', path: '/api/device/{id}', on: 'device', expect: READ },
  {
    method: 'GET',
    path: `/api/audit/logs/entity/DEVICE/{id}?${PAGE}`,
    on: 'device',
    expect: MANAGE,
  },
  // Credentials let their holder act as the device: write access (a read-only share is 403).
  { method: 'GET', path: '/api/device/{id}/credentials', on: 'device', expect: WRITE },
  { method: 'GET', path: `${TELEMETRY}/keys/timeseries`, on: 'device', expect: READ },
  {
    method: 'GET',
    path: `${TELEMETRY}/values/timeseries?keys=temperature&startTs=0&endTs=4102444800000`,
    on: 'device',
    expect: READ,
  },
  {
    method: 'POST',
    path: `${TELEMETRY}/timeseries/ANY`,
    body: { humidity: 40 },
    on: 'device',
    expect: WRITE,
  },
  {
    method: 'POST',
    path: `${TELEMETRY}/timeseries/ANY/3600`,
    body: { humidity: 41 },
    on: 'device',
    expect: WRITE,
  },
  {
    method: 'DELETE',
    path: `${TELEMETRY}/timeseries/delete?keys=humidity&deleteAllDataForKeys=true`,
    on: 'device',
    expect: WRITE,
  },
  { method: 'GET', path: `${TELEMETRY}/keys/attributes`, on: 'device', expect: READ },
  { method: 'GET', path: `${TELEMETRY}/keys/attributes/SERVER_SCOPE`, on: 'device', expect: READ },
  { method: 'GET', path: `${TELEMETRY}/values/attributes?keys=mode`, on: 'device', expect: READ },
  {
    method: 'GET',
    path: `${TELEMETRY}/values/attributes/SERVER_SCOPE?keys=mode`,
    on: 'device',
    expect: READ,
  },
  {
    method: 'POST',
    path: `${TELEMETRY}/attributes/SERVER_SCOPE`,
    body: { mode: 'eco' },
    on: 'device',
    expect: WRITE,
  },
  {
    method: 'POST',
    path: `${TELEMETRY}/SHARED_SCOPE`,
    body: { target: 21 },
    on: 'device',
    expect: WRITE,
  },
  { method: 'DELETE', path: `${TELEMETRY}/SERVER_SCOPE?keys=stale`, on: 'device', expect: WRITE },
  { method: 'POST', path: '/api/rpc/oneway/{id}', body: RPC, on: 'device', expect: RPC_TIMEOUT },
  { method: 'POST', path: '/api/rpc/twoway/{id}', body: RPC, on: 'device', expect: RPC_TIMEOUT },
  // A persistent RPC is queued and answered at once with its id.
  {
    method: 'POST',
    path: '/api/rpc/oneway/{id}',
    body: { ...RPC, persistent: true },
    on: 'device',
    expect: WRITE,
  },
  {
    method: 'GET',
    path: '/api/rpc/persistent/device/{id}?pageSize=10&page=0',
    on: 'device',
    expect: READ,
  },

  // Alarms: seen through their originator device; acting on one needs write access to it.
  { method: 'GET', path: '/api/alarm/{id}', on: 'alarm', expect: READ },
  { method: 'GET', path: '/api/alarm/info/{id}', on: 'alarm', expect: READ },
  { method: 'GET', path: `/api/alarm/{id}/comment?${PAGE}`, on: 'alarm', expect: READ },
  {
    method: 'POST',
    path: '/api/alarm/{id}/comment',
    body: { comment: { text: 'looked at it' } },
    on: 'alarm',
    expect: WRITE,
  },
  { method: 'POST', path: '/api/alarm/{id}/ack', on: 'alarm', fresh: true, expect: WRITE },
  { method: 'POST', path: '/api/alarm/{id}/clear', on: 'alarm', fresh: true, expect: WRITE },
  { method: 'DELETE', path: '/api/alarm/{id}', on: 'alarm', fresh: true, expect: WRITE },
  // The assignee must see the device (400 otherwise) and be readable by the caller (404).
  {
    method: 'POST',
    path: '/api/alarm/{id}/assign/{userA}',
    on: 'alarm',
    fresh: true,
    expect: { ...WRITE, tenantAdmin: [400, 200, 400, 400], userB: [404, 404, 403, 404] },
  },
  { method: 'GET', path: `/api/users/assign/{id}?${PAGE}`, on: 'alarm', expect: WRITE },
  // Nobody is assigned: whoever may act gets 400 "already unassigned".
  {
    method: 'DELETE',
    path: '/api/alarm/{id}/assign',
    on: 'alarm',
    expect: {
      ...WRITE,
      tenantAdmin: [400, 400, 400, 400],
      userA: [404, 400, 404, 404],
      userB: [404, 404, 403, 400],
    },
  },
  { method: 'POST', path: '/api/alarm', body: ALARM_BODY, on: 'device', expect: WRITE },
  { method: 'GET', path: `/api/alarm/DEVICE/{id}?${PAGE}`, on: 'device', expect: READ },
  { method: 'GET', path: `/api/v2/alarm/DEVICE/{id}?${PAGE}`, on: 'device', expect: READ },
  { method: 'GET', path: '/api/alarm/highestSeverity/DEVICE/{id}', on: 'device', expect: READ },
  { method: 'GET', path: `/api/alarms?${PAGE}`, on: 'none', expect: ANY(200, 200, 200) },
  { method: 'GET', path: `/api/v2/alarms?${PAGE}`, on: 'none', expect: ANY(200, 200, 200) },
  { method: 'GET', path: `/api/alarm/types?${PAGE}`, on: 'none', expect: ANY(200, 200, 200) },
  // Attributes of customers and the tenant (dynamic alarm thresholds).
  {
    method: 'GET',
    path: '/api/plugins/telemetry/CUSTOMER/{A}/values/attributes',
    on: 'none',
    expect: ANY(200, 200, 404),
  },
  {
    method: 'POST',
    path: '/api/plugins/telemetry/CUSTOMER/{A}/attributes/SERVER_SCOPE',
    body: { limit: 30 },
    on: 'none',
    expect: ANY(200, 403, 404),
  },
  {
    method: 'GET',
    path: '/api/plugins/telemetry/TENANT/{tenant}/values/attributes',
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  {
    method: 'POST',
    path: '/api/plugins/telemetry/TENANT/{tenant}/SERVER_SCOPE',
    body: { limit: 40 },
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  // A user's attributes: the tenant admin and the user itself (CE user permissions).
  {
    method: 'GET',
    path: '/api/plugins/telemetry/USER/{userA}/values/attributes',
    on: 'none',
    expect: ANY(200, 200, 404),
  },
  {
    method: 'GET',
    path: '/api/plugins/telemetry/USER/{userA}/keys/attributes',
    on: 'none',
    expect: ANY(200, 200, 404),
  },
  {
    method: 'POST',
    path: '/api/plugins/telemetry/USER/{userA}/attributes/SERVER_SCOPE',
    body: { limit: 50 },
    on: 'none',
    expect: ANY(200, 200, 404),
  },

  { method: 'GET', path: '/api/dashboard/{id}', on: 'dashboard', expect: DASHBOARD_READ },
  { method: 'GET', path: '/api/dashboard/info/{id}', on: 'dashboard', expect: DASHBOARD_READ },

  { method: 'GET', path: '/api/entityGroup/{id}', on: 'group', expect: GROUP_READ },
  {
    method: 'GET',
    path: '/api/entityGroup/{id}/entities?pageSize=10&page=0',
    on: 'group',
    expect: GROUP_READ,
  },
  // Empty lists: the status is the access decision, and the fixture stays as it is.
  {
    method: 'POST',
    path: '/api/entityGroup/{id}/addEntities',
    body: [],
    on: 'group',
    expect: GROUP_WRITE,
  },
  {
    method: 'POST',
    path: '/api/entityGroup/{id}/deleteEntities',
    body: [],
    on: 'group',
    expect: GROUP_WRITE,
  },

  // Destructive device calls: one throwaway device per cell.
  { method: 'DELETE', path: '/api/device/{id}', on: 'device', fresh: true, expect: MANAGE },
  {
    method: 'POST',
    path: '/api/device',
    body: { id: { entityType: 'DEVICE', id: '{id}' }, name: 'renamed-{id}' },
    on: 'device',
    fresh: true,
    expect: WRITE,
  },
  {
    method: 'POST',
    path: '/api/device/credentials',
    body: {
      deviceId: { entityType: 'DEVICE', id: '{id}' },
      credentialsType: 'ACCESS_TOKEN',
      credentialsId: 'tok-{id}',
    },
    on: 'device',
    fresh: true,
    expect: MANAGE,
  },
  {
    method: 'POST',
    path: '/api/owner/CUSTOMER/{A}/DEVICE/{id}',
    on: 'device',
    fresh: true,
    expect: MANAGE,
  },
  {
    method: 'POST',
    path: '/api/owner/TENANT/{tenant}/DEVICE/{id}',
    on: 'device',
    fresh: true,
    expect: MANAGE,
  },
  {
    method: 'POST',
    path: '/api/customer/{B}/device/{id}',
    on: 'device',
    fresh: true,
    expect: MANAGE,
  },
  {
    method: 'DELETE',
    path: '/api/customer/device/{id}',
    on: 'device',
    fresh: true,
    expect: UNASSIGN,
  },

  // Endpoints without a device, dashboard or group id.
  { method: 'GET', path: `/api/customers?${PAGE}`, on: 'none', expect: ANY(200, 403, 403) },
  { method: 'GET', path: '/api/customer/{A}', on: 'none', expect: ANY(200, 200, 404) },
  { method: 'GET', path: '/api/customer/{B}', on: 'none', expect: ANY(200, 404, 200) },
  { method: 'GET', path: `/api/users?${PAGE}`, on: 'none', expect: ANY(200, 200, 200) },
  { method: 'GET', path: '/api/user/{userA}', on: 'none', expect: ANY(200, 200, 404) },
  {
    method: 'GET',
    path: `/api/customer/{A}/users?${PAGE}`,
    on: 'none',
    expect: ANY(200, 200, 404),
  },
  { method: 'GET', path: `/api/audit/logs?${PAGE}`, on: 'none', expect: ANY(200, 403, 403) },
  { method: 'GET', path: `/api/deviceProfiles?${PAGE}`, on: 'none', expect: ANY(200, 403, 403) },
  // @NOTE: infos (name, type, image) are open to customer users, as in ThingsBoard, whose UI
  // needs them to show a customer's devices; the full profiles stay the tenant's.
  {
    method: 'GET',
    path: `/api/deviceProfileInfos?${PAGE}`,
    on: 'none',
    expect: ANY(200, 200, 200),
  },
  { method: 'GET', path: `/api/otaPackages?${PAGE}`, on: 'none', expect: ANY(200, 403, 403) },
  { method: 'GET', path: `/api/tenant/devices?${PAGE}`, on: 'none', expect: ANY(200, 403, 403) },
  {
    method: 'GET',
    path: `/api/customer/{A}/devices?${PAGE}`,
    on: 'none',
    expect: ANY(200, 200, 404),
  },
  {
    method: 'GET',
    path: `/api/customer/{B}/devices?${PAGE}`,
    on: 'none',
    expect: ANY(200, 404, 200),
  },
  { method: 'GET', path: `/api/tenant/dashboards?${PAGE}`, on: 'none', expect: ANY(200, 403, 403) },
  // Connectors (issue 17) are the tenant administrator's. The body is refused (no `master`), and
  // the id names no connector, so that no row changes the fixture.
  { method: 'GET', path: '/api/connectors', on: 'none', expect: ANY(200, 403, 403) },
  {
    method: 'POST',
    path: '/api/connector',
    body: { name: 'matrix', type: 'MODBUS', enabled: false, configuration: {} },
    on: 'none',
    expect: ANY(400, 403, 403),
  },
  { method: 'GET', path: `/api/connector/${NO_CONNECTOR}`, on: 'none', expect: ANY(404, 403, 403) },
  {
    method: 'GET',
    path: `/api/connector/${NO_CONNECTOR}/status`,
    on: 'none',
    expect: ANY(404, 403, 403),
  },
  {
    method: 'DELETE',
    path: `/api/connector/${NO_CONNECTOR}`,
    on: 'none',
    expect: ANY(404, 403, 403),
  },
  {
    method: 'GET',
    path: `/api/customer/{A}/dashboards?${PAGE}`,
    on: 'none',
    expect: ANY(200, 200, 404),
  },
  {
    method: 'GET',
    path: `/api/customer/{B}/dashboards?${PAGE}`,
    on: 'none',
    expect: ANY(200, 404, 200),
  },
  // Rule chains are the tenant administrator's (rule-engine reference §1.5).
  { method: 'GET', path: `/api/ruleChains?${PAGE}`, on: 'none', expect: ANY(200, 403, 403) },
  { method: 'GET', path: '/api/ruleChains/stats', on: 'none', expect: ANY(200, 403, 403) },
  { method: 'GET', path: '/api/ruleChain/{rootChain}', on: 'none', expect: ANY(200, 403, 403) },
  {
    method: 'GET',
    path: '/api/ruleChain/{rootChain}/metadata',
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  {
    method: 'GET',
    path: '/api/ruleChain/{rootChain}/export',
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  {
    method: 'GET',
    path: '/api/ruleChain/{rootChain}/output/labels',
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  {
    method: 'GET',
    path: '/api/ruleChain/{rootChain}/output/labels/usage',
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  {
    method: 'GET',
    path: '/api/ruleChains/export?limit=10',
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  // An empty file imports nothing.
  {
    method: 'POST',
    path: '/api/ruleChains/import',
    body: { ruleChains: [], metadata: [] },
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  // Already the root: setting it again changes nothing.
  {
    method: 'POST',
    path: '/api/ruleChain/{rootChain}/root',
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  // The root chain cannot be deleted (400), and the fixture keeps it.
  {
    method: 'DELETE',
    path: '/api/ruleChain/{rootChain}',
    on: 'none',
    expect: ANY(400, 403, 403),
  },
  // A stale version: refused with 409 before anything changes.
  {
    method: 'POST',
    path: '/api/ruleChain/metadata',
    body: { ruleChainId: { id: '{rootChain}' }, version: 0, nodes: [], connections: [] },
    on: 'none',
    expect: ANY(409, 403, 403),
  },
  {
    method: 'POST',
    path: '/api/ruleChain',
    body: { name: 'Access matrix chain' },
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  {
    method: 'POST',
    path: '/api/ruleChain/import',
    body: { ruleChain: { name: 'Imported by the matrix' }, metadata: { nodes: [] } },
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  // Scheduler events are the tenant administrator's; an invalid event changes nothing (400).
  { method: 'GET', path: '/api/schedulerEvents', on: 'none', expect: ANY(200, 403, 403) },
  {
    method: 'POST',
    path: '/api/schedulerEvent',
    body: { name: 'Never', type: 'CUSTOM', schedule: { cron: 'not cron' } },
    on: 'none',
    expect: ANY(400, 403, 403),
  },
  {
    method: 'GET',
    path: '/api/schedulerEvent/00000000-0000-4000-8000-000000000000',
    on: 'none',
    expect: ANY(404, 403, 403),
  },
  {
    method: 'DELETE',
    path: '/api/schedulerEvent/00000000-0000-4000-8000-000000000000',
    on: 'none',
    expect: ANY(404, 403, 403),
  },
  { method: 'GET', path: '/api/scheduler/jobs', on: 'none', expect: ANY(200, 403, 403) },
  {
    method: 'POST',
    path: '/api/scheduler/nextRuns',
    body: { schedule: { cron: '0 0 6 * * *', timezone: 'UTC' } },
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  // The notification center's configuration is the tenant administrator's (issue 14 §7); invalid
  // bodies and unknown ids change nothing.
  ...['target', 'template', 'rule'].flatMap((kind): Row[] => [
    {
      method: 'GET',
      path: `/api/notification/${kind}s?${PAGE}`,
      on: 'none',
      expect: ANY(200, 403, 403),
    },
    {
      method: 'POST',
      path: `/api/notification/${kind}`,
      body: {},
      on: 'none',
      expect: ANY(400, 403, 403),
    },
    {
      method: 'GET',
      path: `/api/notification/${kind}/${NO_ID}`,
      on: 'none',
      expect: ANY(404, 403, 403),
    },
    {
      method: 'DELETE',
      path: `/api/notification/${kind}/${NO_ID}`,
      on: 'none',
      expect: ANY(404, 403, 403),
    },
  ]),
  {
    method: 'POST',
    path: '/api/notification/request',
    body: {},
    on: 'none',
    expect: ANY(400, 403, 403),
  },
  // Ad-hoc requests, kept: list, get, delete (the tenant administrator's).
  {
    method: 'GET',
    path: `/api/notification/requests?${PAGE}`,
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  {
    method: 'GET',
    path: `/api/notification/request/${NO_ID}`,
    on: 'none',
    expect: ANY(404, 403, 403),
  },
  {
    method: 'DELETE',
    path: `/api/notification/request/${NO_ID}`,
    on: 'none',
    expect: ANY(404, 403, 403),
  },
  {
    method: 'GET',
    path: `/api/notification/deliveries?${PAGE}`,
    on: 'none',
    expect: ANY(200, 403, 403),
  },
  { method: 'GET', path: '/api/notification/stats', on: 'none', expect: ANY(200, 403, 403) },
  // The inbox: every user has one and reaches only their own notifications.
  { method: 'GET', path: `/api/notifications?${PAGE}`, on: 'none', expect: ANY(200, 200, 200) },
  {
    method: 'GET',
    path: '/api/notifications/unread/count',
    on: 'none',
    expect: ANY(200, 200, 200),
  },
  { method: 'PUT', path: '/api/notifications/read', on: 'none', expect: ANY(200, 200, 200) },
  { method: 'PUT', path: '/api/notification/{note}/read', on: 'none', expect: ANY(200, 404, 404) },
  // Only the admin's cell deletes it; no other row names `{note2}`.
  { method: 'DELETE', path: '/api/notification/{note2}', on: 'none', expect: ANY(200, 404, 404) },
  // System settings (mail, SMS; none saved here: 404) and their test messages: the tenant
  // administrator's.
  { method: 'GET', path: '/api/admin/settings/mail', on: 'none', expect: ANY(404, 403, 403) },
  { method: 'GET', path: '/api/admin/settings/sms', on: 'none', expect: ANY(404, 403, 403) },
  {
    method: 'POST',
    path: '/api/admin/settings',
    body: { key: 'mail' },
    on: 'none',
    expect: ANY(400, 403, 403),
  },
  {
    method: 'POST',
    path: '/api/admin/settings/testMail',
    body: {},
    on: 'none',
    expect: ANY(400, 403, 403),
  },
  {
    method: 'POST',
    path: '/api/admin/settings/testSms',
    body: {},
    on: 'none',
    expect: ANY(400, 403, 403),
  },
];

describe('access matrix: every REST endpoint × caller × entity', {
  concurrency: true,
}, () => {
  let t: TestGateway;
  const tokens = {} as Record<Caller, string>;
  const ids = {} as Record<(typeof TARGETS)[TargetSet][number], string>;
  /** The fixture's other entities, by their placeholder in paths and bodies. */
  const refs = {} as Record<
    'A' | 'B' | 'tenant' | 'userA' | 'rootChain' | 'note' | 'note2',
    string
  >;
  /** Makes a device that stands in for a device target (tenant-owned, owned by A, or shared). */
  let throwaway: (target: string) => Promise<string>;
  /** The device target each alarm target is raised on. */
  const alarmTargets: Record<string, string> = {};

  before(async () => {
    t = await startGateway();
    const admin = await t.adminToken();
    const json = async (path: string, body: unknown): Promise<{ id: { id: string } }> => {
      const res = await t.api(path, { body, token: admin });
      assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
      return (await res.json()) as { id: { id: string } };
    };
    const post = async (path: string, body?: unknown) => {
      const res = await t.api(path, { method: 'POST', body, token: admin });
      assert.equal(res.status, 200, `${path}: ${await res.text()}`);
    };
    const customerA = await createCustomer(t, 'Customer A');
    const customerB = await createCustomer(t, 'Customer B');
    tokens.tenantAdmin = admin;
    refs.A = customerA;
    refs.B = customerB;
    refs.userA = await createUser(t, 'a@example.com', customerA);
    tokens.userA = await activateUser(t, refs.userA, 'password-a-1');
    tokens.userB = await activateUser(
      t,
      await createUser(t, 'b@example.com', customerB),
      'password-b-1',
    );

    for (const name of TARGETS.device) ids[name] = (await createDevice(t, name)).id;
    await post(`/api/owner/CUSTOMER/${customerA}/DEVICE/${ids.deviceA}`);
    for (const name of TARGETS.dashboard)
      ids[name] = (await json('/api/dashboard', { title: name })).id.id;
    await post(`/api/customer/${customerA}/dashboard/${ids.dashboardA}`);

    const group = async (
      name: string,
      type: string,
      members: string[],
      readElseWrite?: boolean,
    ) => {
      const id = (await json('/api/entityGroup', { name, type })).id.id;
      await post(`/api/entityGroup/${id}/addEntities`, members);
      if (readElseWrite !== undefined) {
        const ownerId = { entityType: 'CUSTOMER', id: customerB };
        await post(`/api/entityGroup/${id}/share`, { ownerId, allUserGroup: true, readElseWrite });
      }
      return id;
    };
    ids.groupReadB = await group('Read for B', 'DEVICE', [ids.deviceSharedReadB], true);
    ids.groupWriteB = await group('Write for B', 'DEVICE', [ids.deviceSharedWriteB], false);
    ids.groupPrivate = await group('Private', 'DEVICE', [ids.deviceTenant]);
    await group('Boards for B', 'DASHBOARD', [ids.dashboardSharedB], true);
    const alarmOn = async (deviceId: string) =>
      (await json('/api/alarm', JSON.parse(JSON.stringify(ALARM_BODY).replace('{id}', deviceId))))
        .id.id;
    for (const [i, name] of TARGETS.alarm.entries()) {
      alarmTargets[name] = TARGETS.device[i];
      ids[name] = await alarmOn(ids[TARGETS.device[i]]);
    }

    const me = await t.api('/api/auth/user', { token: admin });
    refs.tenant = ((await me.json()) as { tenantId: { id: string } }).tenantId.id;
    const chains = await t.api(`/api/ruleChains?${PAGE}`, { token: admin });
    const { data } = (await chains.json()) as {
      data: Array<{ id: { id: string }; root: boolean }>;
    };
    refs.rootChain = data.find((c) => c.root)?.id.id ?? '';
    // The default notification rule put each new alarm into the tenant admin's inbox.
    const inbox = await t.api(`/api/notifications?${PAGE}`, { token: admin });
    const notes = ((await inbox.json()) as { data: Array<{ id: { id: string } }> }).data;
    assert.ok(notes.length >= 2, `the admin's inbox has ${notes.length} notifications`);
    refs.note = notes[0].id.id;
    refs.note2 = notes[1].id.id;
    // @NOTE: shared throwaways join the fixture's shared groups; rows only assert statuses, so the
    // extra members change no other row's result.
    throwaway = async (target) => {
      if (target in alarmTargets) return alarmOn(await throwaway(alarmTargets[target]));
      const id = (await createDevice(t, `${target}-${crypto.randomUUID()}`)).id;
      if (target === 'deviceA') await post(`/api/owner/CUSTOMER/${customerA}/DEVICE/${id}`);
      if (target === 'deviceSharedReadB')
        await post(`/api/entityGroup/${ids.groupReadB}/addEntities`, [id]);
      if (target === 'deviceSharedWriteB')
        await post(`/api/entityGroup/${ids.groupWriteB}/addEntities`, [id]);
      return id;
    };
  });
  after(() => t.close());

  for (const row of ROWS) {
    it(`${row.method} ${row.path}`, async () => {
      const targets = TARGETS[row.on];
      const actual = {} as Record<Caller, number[]>;
      await Promise.all(
        CALLERS.map(async (caller) => {
          assert.equal(
            row.expect[caller].length,
            targets.length,
            `${caller}: one status per target`,
          );
          actual[caller] = await Promise.all(
            targets.map(async (target) => {
              const id = row.fresh ? await throwaway(target) : ids[target];
              const fill = (text: string) =>
                text.replace(
                  /\{(id|A|B|tenant|userA|rootChain|note2|note)\}/g,
                  (_, name: keyof typeof refs | 'id') => (name === 'id' ? id : refs[name]),
                );
              const res = await t.api(fill(row.path), {
                method: row.method,
                body:
                  row.body === undefined ? undefined : JSON.parse(fill(JSON.stringify(row.body))),
                token: tokens[caller],
              });
              await res.arrayBuffer();
              return res.status;
            }),
          );
        }),
      );
      assert.deepEqual(actual, row.expect, `columns: ${targets.join(', ')}`);
    });
  }

  it('refuses every row with no token: 401', async () => {
    const statuses = await Promise.all(
      ROWS.map(async (row) => {
        const fill = (text: string) =>
          text.replace(/\{(\w+)\}/g, (_, name: string) =>
            name === 'id'
              ? ids[TARGETS[row.on][0] as keyof typeof ids]
              : refs[name as keyof typeof refs],
          );
        const res = await t.api(fill(row.path), {
          method: row.method,
          body: row.body === undefined ? undefined : JSON.parse(fill(JSON.stringify(row.body))),
        });
        await res.arrayBuffer();
        return `${row.method} ${row.path} ${res.status}`;
      }),
    );
    assert.deepEqual(
      statuses.filter((s) => !s.endsWith(' 401')),
      [],
    );
  });
});
