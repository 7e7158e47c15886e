import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  ADMIN_EMAIL,
  ADMIN_PASSWORD,
  createDevice,
  startGateway,
  type TestGateway,
} from './helpers/gateway.js';
import { activateUser, activationToken, createCustomer, createUser } from './helpers/users.js';

interface AuditLog {
  id: { entityType: string; id: string };
  createdTime: number;
  tenantId: { entityType: string; id: string };
  customerId: { entityType: string; id: string };
  entityId: { entityType: string; id: string } | null;
  entityName: string | null;
  userId: { entityType: string; id: string };
  userName: string | null;
  actionType: string;
  actionData: Record<string, unknown>;
  actionStatus: 'SUCCESS' | 'FAILURE';
  actionFailureDetails: string | null;
}

interface Page<T> {
  data: T[];
  totalElements: number;
  hasNext: boolean;
}

const USER_PASSWORD = 'audited-password-1';

describe('audit log', () => {
  let t: TestGateway;
  let admin: string;
  let adminId: string;
  let customerId: string;
  let userId: string;
  let activateToken: string;
  let start: number;

  const logs = async (query = '') => {
    const res = await t.api(`/api/audit/logs?pageSize=100&page=0${query}`, { token: admin });
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as Page<AuditLog>;
  };

  before(async () => {
    t = await startGateway();
    start = Date.now();
    const bad = await t.api('/api/auth/login', {
      body: { username: ADMIN_EMAIL, password: 'wrong-one' },
    });
    assert.equal(bad.status, 401);
    const ghost = await t.api('/api/auth/login', {
      body: { username: 'ghost@example.com', password: 'x' },
    });
    assert.equal(ghost.status, 401);
    admin = await t.adminToken();
    adminId = (
      (await (await t.api('/api/auth/user', { token: admin })).json()) as { id: { id: string } }
    ).id.id;
    customerId = await createCustomer(t, 'Audited');
    const c = await (await t.api(`/api/customer/${customerId}`, { token: admin })).json();
    await t.api('/api/customer', { body: { ...(c as object), city: 'Paris' }, token: admin });
    userId = await createUser(t, 'audited@example.com', customerId);
    activateToken = await activationToken(t, userId);
    const act = await t.api('/api/noauth/activate', {
      body: { activateToken, password: USER_PASSWORD },
    });
    assert.equal(act.status, 200);
    await t.api(`/api/user/${userId}/userCredentialsEnabled?userCredentialsEnabled=false`, {
      method: 'POST',
      token: admin,
    });
    const disabled = await t.api('/api/auth/login', {
      body: { username: 'audited@example.com', password: USER_PASSWORD },
    });
    assert.equal(disabled.status, 401);
    await t.api(`/api/user/${userId}`, { method: 'DELETE', token: admin });
    const gone = await createCustomer(t, 'Gone');
    await t.api(`/api/customer/${gone}`, { method: 'DELETE', token: admin });
    await t.api('/api/auth/logout', { method: 'POST', token: admin });
  });
  after(() => t.close());

  it('records logins, failed logins and logout, newest first, in ThingsBoard AuditLog JSON', async () => {
    const page = await logs();
    const times = page.data.map((l) => l.createdTime);
    assert.deepEqual(
      times,
      [...times].sort((a, b) => b - a),
    );
    assert.equal(page.data[0].actionType, 'LOGOUT');
    assert.equal(page.data[0].userId.id, adminId);

    const login = page.data.filter((l) => l.actionType === 'LOGIN');
    const ok = login.find((l) => l.actionStatus === 'SUCCESS');
    assert.ok(ok);
    assert.equal(ok.userName, ADMIN_EMAIL);
    assert.equal(ok.userId.id, adminId);
    assert.deepEqual(ok.entityId, { entityType: 'USER', id: adminId });
    assert.equal(ok.id.entityType, 'AUDIT_LOG');
    assert.equal(ok.tenantId.entityType, 'TENANT');
    assert.equal(ok.customerId.id, '13814000-1dd2-11b2-8080-808080808080');

    const failed = login.filter((l) => l.actionStatus === 'FAILURE');
    const wrongPassword = failed.find((l) => l.userName === ADMIN_EMAIL);
    assert.ok(wrongPassword);
    assert.equal(wrongPassword.actionFailureDetails, 'Invalid username or password');
    const unknown = failed.find((l) => l.userName === 'ghost@example.com');
    assert.ok(unknown);
    assert.equal(unknown.entityId, null);
    const inactive = failed.find((l) => l.userName === 'audited@example.com');
    assert.ok(inactive);
    assert.equal(inactive.actionFailureDetails, 'User account is not active');
    assert.equal(inactive.customerId.id, customerId);
  });

  it('records customer and user changes, activation and credential changes', async () => {
    const page = await logs();
    const has = (actionType: string, entityType: string, entityName: string) =>
      page.data.find(
        (l) =>
          l.actionType === actionType &&
          l.entityId?.entityType === entityType &&
          l.entityName === entityName,
      );
    assert.ok(has('ADDED', 'CUSTOMER', 'Audited'));
    assert.ok(has('UPDATED', 'CUSTOMER', 'Audited'));
    const deleted = has('DELETED', 'CUSTOMER', 'Gone');
    assert.ok(deleted);
    assert.deepEqual(deleted.actionData, { deletedUsers: 0 });
    const added = has('ADDED', 'USER', 'audited@example.com');
    assert.ok(added);
    assert.equal(added.userName, ADMIN_EMAIL);
    const activated = has('ACTIVATED', 'USER', 'audited@example.com');
    assert.ok(activated);
    assert.equal(activated.userId.id, userId, 'the user activated itself');
    const creds = has('CREDENTIALS_UPDATED', 'USER', 'audited@example.com');
    assert.ok(creds);
    assert.deepEqual(creds.actionData, { userCredentialsEnabled: false });
    assert.ok(has('DELETED', 'USER', 'audited@example.com'));
  });

  it('filters by action types and time, and pages', async () => {
    const onlyLogin = await logs('&actionTypes=LOGIN');
    assert.ok(onlyLogin.data.length >= 4);
    assert.ok(onlyLogin.data.every((l) => l.actionType === 'LOGIN'));
    const two = await logs('&actionTypes=LOGIN,LOGOUT');
    assert.deepEqual([...new Set(two.data.map((l) => l.actionType))].sort(), ['LOGIN', 'LOGOUT']);
    const none = await logs(`&startTime=${Date.now() + 60_000}`);
    assert.equal(none.totalElements, 0);
    const all = await logs(`&startTime=${start}&endTime=${Date.now()}`);
    assert.ok(all.totalElements > 10);
    const res = await t.api('/api/audit/logs?pageSize=3&page=1&sortOrder=ASC', { token: admin });
    const page = (await res.json()) as Page<AuditLog>;
    assert.equal(page.data.length, 3);
    assert.equal(page.hasNext, true);
    const oldestFirst = [...all.data].reverse();
    assert.deepEqual(
      page.data.map((l) => l.id.id),
      oldestFirst.slice(3, 6).map((l) => l.id.id),
    );
    const bad = await t.api('/api/audit/logs?pageSize=3&page=0&actionTypes=NOPE', { token: admin });
    assert.equal(bad.status, 400);
    const badTime = await t.api('/api/audit/logs?pageSize=3&page=0&startTime=yesterday', {
      token: admin,
    });
    assert.equal(badTime.status, 400);
    const noAuth = await t.api('/api/audit/logs?pageSize=3&page=0');
    assert.equal(noAuth.status, 401);
  });

  it('lists one device, customer or user by entity with paging; a device the caller cannot manage is refused', async () => {
    const a = await createDevice(t, 'audited-a');
    const b = await createDevice(t, 'audited-b');
    const other = await createCustomer(t, 'Other');
    const otherUser = await createUser(t, 'other@example.com', other);
    const otherToken = await activateUser(t, otherUser, 'other-password-1');
    const call = (path: string, token = admin) => t.api(path, { token });
    const assign = async (customer: string, device: string) => {
      const res = await t.api(`/api/customer/${customer}/device/${device}`, {
        method: 'POST',
        token: admin,
      });
      assert.equal(res.status, 200, await res.clone().text());
    };
    await assign(customerId, a.id);
    const unassign = await t.api(`/api/customer/device/${a.id}`, {
      method: 'DELETE',
      token: admin,
    });
    assert.equal(unassign.status, 200);
    await assign(customerId, a.id);
    await assign(other, b.id);

    const entity = async (id: string, query: string) => {
      const res = await call(`/api/audit/logs/entity/DEVICE/${id}?${query}`);
      assert.equal(res.status, 200, await res.clone().text());
      return (await res.json()) as Page<AuditLog>;
    };
    const first = await entity(a.id, 'pageSize=2&page=0');
    assert.equal(first.totalElements, 3);
    assert.equal(first.hasNext, true);
    assert.deepEqual(
      first.data.map((l) => l.actionType),
      ['ASSIGNED_TO_CUSTOMER', 'UNASSIGNED_FROM_CUSTOMER'],
      'newest first',
    );
    const second = await entity(a.id, 'pageSize=2&page=1');
    assert.equal(second.hasNext, false);
    assert.deepEqual(
      second.data.map((l) => l.actionType),
      ['ASSIGNED_TO_CUSTOMER'],
    );
    for (const l of [...first.data, ...second.data])
      assert.deepEqual(l.entityId, { entityType: 'DEVICE', id: a.id });
    const onlyB = await entity(b.id, 'pageSize=10&page=0');
    assert.equal(onlyB.totalElements, 1);
    assert.equal(onlyB.data[0].entityName, 'audited-b');
    const unassigned = await entity(
      a.id,
      'pageSize=10&page=0&actionTypes=UNASSIGNED_FROM_CUSTOMER',
    );
    assert.equal(unassigned.totalElements, 1);
    const later = await entity(a.id, `pageSize=10&page=0&startTime=${Date.now() + 60_000}`);
    assert.equal(later.totalElements, 0);

    // The tenant administrator only; a device the caller cannot see is 404 before that.
    const foreign = await call(
      `/api/audit/logs/entity/DEVICE/${a.id}?pageSize=10&page=0`,
      otherToken,
    );
    assert.equal(foreign.status, 404);
    const own = await call(`/api/audit/logs/entity/DEVICE/${b.id}?pageSize=10&page=0`, otherToken);
    assert.equal(own.status, 403);
    const byUser = await call(`/api/audit/logs/user/${otherUser}?pageSize=10&page=0`, otherToken);
    assert.equal(byUser.status, 403);
    const unknown = await call(
      '/api/audit/logs/entity/DEVICE/0b5b2b7e-3c55-4f4e-9d0e-2a7c1b9e4f10?pageSize=10&page=0',
    );
    assert.equal(unknown.status, 404);
    const badType = await call(`/api/audit/logs/entity/GADGET/${a.id}?pageSize=10&page=0`);
    assert.equal(badType.status, 400);
    assert.match(((await badType.json()) as { message: string }).message, /GADGET/);
    const badId = await call('/api/audit/logs/entity/DEVICE/nope?pageSize=10&page=0');
    assert.equal(badId.status, 400);

    const userPage = (await (
      await call(`/api/audit/logs/user/${otherUser}?pageSize=10&page=0`)
    ).json()) as Page<AuditLog>;
    assert.ok(userPage.data.some((l) => l.actionType === 'ACTIVATED'));
    assert.ok(userPage.data.every((l) => l.userId.id === otherUser));
    const customerPage = (await (
      await call(`/api/audit/logs/customer/${other}?pageSize=10&page=0`)
    ).json()) as Page<AuditLog>;
    assert.ok(customerPage.totalElements >= 1);
    assert.ok(customerPage.data.every((l) => l.customerId.id === other));
    const adminPage = (await (
      await call(`/api/audit/logs/user/${adminId}?pageSize=100&page=0`)
    ).json()) as Page<AuditLog>;
    assert.ok(adminPage.data.some((l) => l.entityId?.id === a.id));
    assert.ok(adminPage.data.every((l) => l.userId.id === adminId));
  });

  it('finds one entity by the audit_log_entity index, not a scan of the log', () => {
    const plan = t.gw.db
      .prepare(
        `EXPLAIN QUERY PLAN SELECT * FROM audit_log WHERE entity_id = ? AND entity_type = ?
         ORDER BY created_time DESC, rid DESC LIMIT 10`,
      )
      .all('x', 'DEVICE') as Array<{ detail: string }>;
    const details = plan.map((p) => p.detail).join('; ');
    assert.match(details, /USING INDEX audit_log_entity/);
    assert.doesNotMatch(details, /TEMP B-TREE/, 'no sort of the matches');
  });

  it('never stores passwords or tokens', () => {
    const rows = JSON.stringify(t.gw.db.prepare('SELECT * FROM audit_log').all());
    for (const secret of [ADMIN_PASSWORD, USER_PASSWORD, 'wrong-one', activateToken, admin]) {
      assert.ok(!rows.includes(secret), 'a secret is in the audit log');
    }
  });
});
