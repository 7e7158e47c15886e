/**
 * The alarm REST API (platform.md §2.4) over HTTP: create with dedup, lists with paging, sorting,
 * filters and text search, v2 lists, highest severity, types, assignment, comments, what a
 * customer user sees, the profile check on save, and retention.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { numeric, rule } from './helpers/alarms.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

interface Page<T> {
  data: T[];
  totalElements: number;
  totalPages: number;
  hasNext: boolean;
}
interface A {
  id: { id: string };
  type: string;
  severity: string;
  status: string;
  assignee: { email: string } | null;
  assigneeId: { id: string } | null;
}

describe('alarm REST API', () => {
  let t: TestGateway;
  let admin: string;
  let device: string;
  let other: string;
  const clock = { now: Date.UTC(2026, 0, 1) };

  before(async () => {
    t = await startGateway({
      overrides: { now: () => clock.now },
      config: { alarms: { maxComments: 10 } },
    });
    admin = await t.adminToken();
    device = (await createDevice(t, 'rest-1')).id;
    other = (await createDevice(t, 'rest-2')).id;
  });
  after(() => t.close());

  const post = async (body: unknown) => {
    const res = await t.api('/api/alarm', { token: admin, body });
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as A;
  };
  const get = async <T>(path: string, token = admin): Promise<T> => {
    const res = await t.api(path, { token });
    assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
    return (await res.json()) as T;
  };
  const originator = (id: string) => ({ entityType: 'DEVICE', id });

  it('creates, dedups the uncleared alarm of a type, lists, filters and sorts', async () => {
    clock.now += 1000;
    const a = await post({ type: 'Leak', severity: 'MINOR', originator: originator(device) });
    clock.now += 1000;
    const again = await post({
      type: 'Leak',
      severity: 'CRITICAL',
      originator: originator(device),
    });
    assert.equal(again.id.id, a.id.id, 'one uncleared alarm per originator and type');
    assert.equal(again.severity, 'CRITICAL');
    clock.now += 1000;
    const door = await post({
      type: 'Door open',
      severity: 'WARNING',
      originator: originator(device),
    });
    clock.now += 1000;
    await post({ type: 'Leak', severity: 'MAJOR', originator: originator(other) });

    const list = await get<Page<A>>(
      `/api/alarm/DEVICE/${device}?pageSize=1&page=0&sortProperty=createdTime&sortOrder=ASC`,
    );
    assert.equal(list.totalElements, 2);
    assert.equal(list.totalPages, 2);
    assert.equal(list.hasNext, true);
    assert.equal(list.data[0].type, 'Leak');
    const bySeverity = await get<Page<A>>(
      `/api/alarms?pageSize=10&page=0&sortProperty=severity&sortOrder=DESC`,
    );
    assert.deepEqual(
      bySeverity.data.map((x) => x.severity),
      ['CRITICAL', 'MAJOR', 'WARNING'],
    );
    const text = await get<Page<A>>('/api/alarms?pageSize=10&page=0&textSearch=door');
    assert.deepEqual(
      text.data.map((x) => x.id.id),
      [door.id.id],
    );
    const timed = await get<Page<A>>(
      `/api/alarms?pageSize=10&page=0&startTime=${clock.now - 1500}&endTime=${clock.now}`,
    );
    assert.equal(timed.totalElements, 2, 'createdTime within [startTime, endTime]');

    const ack = await t.api(`/api/alarm/${door.id.id}/ack`, { method: 'POST', token: admin });
    assert.equal(ack.status, 200);
    const acked = await get<Page<A>>(`/api/alarms?pageSize=10&page=0&searchStatus=ACK`);
    assert.deepEqual(
      acked.data.map((x) => x.id.id),
      [door.id.id],
    );
    const unackActive = await get<Page<A>>(`/api/alarms?pageSize=10&page=0&status=ACTIVE_UNACK`);
    assert.equal(unackActive.totalElements, 2);
    const both = await t.api('/api/alarms?pageSize=10&page=0&status=ACTIVE_ACK&searchStatus=ACK', {
      token: admin,
    });
    assert.equal(both.status, 400, 'searchStatus and status together');

    const v2 = await get<Page<A>>(
      `/api/v2/alarms?pageSize=10&page=0&statusList=ACTIVE,UNACK&severityList=CRITICAL,MAJOR&typeList=Leak`,
    );
    assert.equal(v2.totalElements, 2);
    const v2Device = await get<Page<A>>(
      `/api/v2/alarm/DEVICE/${device}?pageSize=10&page=0&statusList=ACK`,
    );
    assert.deepEqual(
      v2Device.data.map((x) => x.type),
      ['Door open'],
    );
    const bad = await t.api('/api/v2/alarms?pageSize=10&page=0&severityList=HUGE', {
      token: admin,
    });
    assert.equal(bad.status, 400);

    const highest = await t.api(`/api/alarm/highestSeverity/DEVICE/${device}`, { token: admin });
    assert.equal(await highest.json(), 'CRITICAL');
    const highestAck = await t.api(`/api/alarm/highestSeverity/DEVICE/${device}?searchStatus=ACK`, {
      token: admin,
    });
    assert.equal(await highestAck.json(), 'WARNING');
    const types = await get<Page<{ type: string }>>('/api/alarm/types?pageSize=10&page=0');
    assert.deepEqual(
      types.data.map((x) => x.type),
      ['Door open', 'Leak'],
    );

    const info = await get<A & { originatorName: string }>(`/api/alarm/info/${a.id.id}`);
    assert.equal(info.originatorName, 'rest-1');
    assert.equal(
      (await t.api('/api/alarm/info/00000000-0000-4000-8000-000000000000', { token: admin }))
        .status,
      404,
    );

    const del = await t.api(`/api/alarm/${door.id.id}`, { method: 'DELETE', token: admin });
    assert.equal(await del.json(), true);
    assert.equal((await t.api(`/api/alarm/${door.id.id}`, { token: admin })).status, 404);
  });

  it('assigns and unassigns; user comments are added, edited and deleted', async () => {
    const a = await post({ type: 'Assigned', severity: 'MAJOR', originator: originator(device) });
    const me = await get<{ id: { id: string } }>('/api/auth/user');
    const assigned = await t.api(`/api/alarm/${a.id.id}/assign/${me.id.id}`, {
      method: 'POST',
      token: admin,
    });
    const body = (await assigned.json()) as A;
    assert.equal(body.assigneeId?.id, me.id.id);
    assert.ok(body.assignee?.email);
    const mine = await get<Page<A>>(`/api/alarms?pageSize=10&page=0&assigneeId=${me.id.id}`);
    assert.deepEqual(
      mine.data.map((x) => x.id.id),
      [a.id.id],
    );
    const un = await t.api(`/api/alarm/${a.id.id}/assign`, { method: 'DELETE', token: admin });
    assert.equal(((await un.json()) as A).assigneeId, null);

    const c = await t.api(`/api/alarm/${a.id.id}/comment`, {
      token: admin,
      body: { comment: { text: 'on my way' } },
    });
    assert.equal(c.status, 200);
    const comment = (await c.json()) as {
      id: { id: string };
      type: string;
      comment: { text: string };
    };
    assert.equal(comment.type, 'OTHER');
    const edited = await t.api(`/api/alarm/${a.id.id}/comment`, {
      token: admin,
      body: { id: comment.id, comment: { text: 'there' } },
    });
    assert.equal(((await edited.json()) as { comment: { edited: boolean } }).comment.edited, true);
    const all = await get<Page<{ type: string }>>(
      `/api/alarm/${a.id.id}/comment?pageSize=10&page=0`,
    );
    assert.deepEqual(
      all.data.map((x) => x.type),
      ['SYSTEM', 'SYSTEM', 'OTHER'],
    );
    const gone = await t.api(`/api/alarm/${a.id.id}/comment/${comment.id.id}`, {
      method: 'DELETE',
      token: admin,
    });
    assert.equal(gone.status, 200);
    const empty = await t.api(`/api/alarm/${a.id.id}/comment`, {
      token: admin,
      body: { comment: { text: '' } },
    });
    assert.equal(empty.status, 400);
  });

  it('a customer user lists only the alarms of devices it can see', async () => {
    const customer = await createCustomer(t, 'Alarm customer');
    const userToken = await activateUser(
      t,
      await createUser(t, 'alarms@example.com', customer),
      'password-alarms-1',
    );
    const mine = (await createDevice(t, 'customer-dev')).id;
    await t.api(`/api/customer/${customer}/device/${mine}`, { method: 'POST', token: admin });
    const visible = await post({
      type: 'Visible',
      severity: 'MINOR',
      originator: originator(mine),
    });
    const list = await get<Page<A>>('/api/alarms?pageSize=50&page=0', userToken);
    assert.deepEqual(
      list.data.map((x) => x.id.id),
      [visible.id.id],
    );
    const types = await get<Page<{ type: string }>>(
      '/api/alarm/types?pageSize=10&page=0',
      userToken,
    );
    assert.deepEqual(
      types.data.map((x) => x.type),
      ['Visible'],
    );
  });

  it('refuses invalid alarm bodies and profiles with a 400 naming the field', async () => {
    const noType = await t.api('/api/alarm', {
      token: admin,
      body: { severity: 'MAJOR', originator: originator(device) },
    });
    assert.equal(noType.status, 400);
    assert.match(((await noType.json()) as { message: string }).message, /type/);
    const res = await t.api('/api/deviceProfile', {
      token: admin,
      body: {
        name: 'Broken',
        profileData: {
          alarms: [
            {
              id: 'x',
              alarmType: 'X',
              createRules: { CRITICAL: rule([numeric('t', 'BIGGER', 1)]) },
            },
          ],
        },
      },
    });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { message: string }).message, /operation/);
  });

  it('retention removes old cleared alarms, then the oldest cleared beyond the cap', async () => {
    const dev = (await createDevice(t, 'retention')).id;
    const made: string[] = [];
    for (let i = 0; i < 3; i++) {
      clock.now += 1000;
      const a = await post({ type: `Old ${i}`, severity: 'MINOR', originator: originator(dev) });
      const res = await t.api(`/api/alarm/${a.id.id}/clear`, { method: 'POST', token: admin });
      assert.equal(res.status, 200);
      made.push(a.id.id);
    }
    const { alarms } = t.gw.services;
    const total = alarms.count();
    // Nothing is 90 days old; a cap one below the count removes the oldest cleared alarm.
    const r = alarms.purge(clock.now - 90 * 86_400_000, total - 1);
    assert.deepEqual(r, { aged: 0, capped: 1 });
    assert.equal((await t.api(`/api/alarm/${made[0]}`, { token: admin })).status, 404);
    assert.equal((await t.api(`/api/alarm/${made[1]}`, { token: admin })).status, 200);
    clock.now += 91 * 86_400_000;
    const run = t.gw.services.alarmRetention.runOnce();
    assert.ok(run.aged >= 2, `aged: ${run.aged}`);
    assert.equal((await t.api(`/api/alarm/${made[2]}`, { token: admin })).status, 404);
    assert.ok(metric(await metrics(), 'edge_alarm_retention_removed_total{reason="age"}') >= 2);
  });

  const metrics = async () => (await t.api('/metrics', { token: admin })).text();
  const metric = (text: string, series: string): number => {
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    assert.ok(line, `${series} in /metrics`);
    return Number(line.slice(series.length + 1));
  };

  it("users' alarm operations are in the audit log; /metrics counts alarms per status", async () => {
    const unack = 'edge_alarms{status="ACTIVE_UNACK"}';
    const before = metric(await metrics(), unack);
    clock.now += 1000;
    const a = await post({ type: 'Audited', severity: 'MINOR', originator: originator(device) });
    assert.equal(metric(await metrics(), unack), before + 1);
    const me = await get<{ id: { id: string } }>('/api/auth/user');
    const call = async (path: string, method = 'POST', body?: unknown) => {
      const res = await t.api(path, { method, token: admin, body });
      assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
      return res;
    };
    await call(`/api/alarm/${a.id.id}/ack`);
    await call(`/api/alarm/${a.id.id}/assign/${me.id.id}`);
    await call(`/api/alarm/${a.id.id}/assign`, 'DELETE');
    const c = (await (
      await call(`/api/alarm/${a.id.id}/comment`, 'POST', { comment: { text: 'checked' } })
    ).json()) as { id: { id: string } };
    await call(`/api/alarm/${a.id.id}/comment`, 'POST', { id: c.id, comment: { text: 'fixed' } });
    await call(`/api/alarm/${a.id.id}/comment/${c.id.id}`, 'DELETE');
    await call(`/api/alarm/${a.id.id}/clear`);
    const text = await metrics();
    assert.equal(metric(text, unack), before);
    assert.ok(metric(text, 'edge_alarms{status="CLEARED_ACK"}') >= 1);
    assert.ok(metric(text, 'edge_alarm_engine_devices') >= 0);
    await call(`/api/alarm/${a.id.id}`, 'DELETE');
    const logs = await get<Page<{ actionType: string; entityId: unknown; userName: string }>>(
      '/api/audit/logs?pageSize=100&page=0&sortOrder=ASC',
    );
    const mine = logs.data.filter(
      (l) => JSON.stringify(l.entityId) === JSON.stringify({ entityType: 'ALARM', id: a.id.id }),
    );
    assert.deepEqual(
      mine.map((l) => l.actionType),
      [
        'ADDED',
        'ALARM_ACK',
        'ALARM_ASSIGNED',
        'ALARM_UNASSIGNED',
        'ADDED_COMMENT',
        'UPDATED_COMMENT',
        'DELETED_COMMENT',
        'ALARM_CLEAR',
        'DELETED',
      ],
    );
    assert.ok(mine.every((l) => l.userName === mine[0].userName && l.userName));
  });

  it('keeps at most maxComments comments per alarm, the newest; the rest are counted', async () => {
    clock.now += 1000;
    const a = await post({ type: 'Chatty', severity: 'MINOR', originator: originator(device) });
    for (let i = 0; i < 12; i++) {
      clock.now += 1;
      const res = await t.api(`/api/alarm/${a.id.id}/comment`, {
        token: admin,
        body: { comment: { text: `note ${i}` } },
      });
      assert.equal(res.status, 200);
    }
    const page = await get<Page<{ comment: { text: string } }>>(
      `/api/alarm/${a.id.id}/comment?pageSize=100&page=0`,
    );
    assert.equal(page.totalElements, 10);
    assert.deepEqual(
      page.data.map((x) => x.comment.text),
      Array.from({ length: 10 }, (_, i) => `note ${i + 2}`),
    );
    assert.ok(metric(await metrics(), 'edge_alarm_comments_trimmed_total') >= 2);
    assert.ok(t.logs.some((l) => String(l.msg).startsWith('alarm comments at their bound')));
  });
});
