import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';
import { forCmd, postTelemetry, type Update, WsClient } from './helpers/ws.js';

async function createTypedDevice(t: TestGateway, name: string, type: string): Promise<string> {
  const res = await t.api('/api/device', { body: { name, type }, token: await t.adminToken() });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return (JSON.parse(text) as { id: { id: string } }).id.id;
}

const dataOf = (u: Update) => u.data as Record<string, Array<[number, string]>>;

describe('live WebSocket API', () => {
  let t: TestGateway;
  let admin: string;

  before(async () => {
    t = await startGateway({ config: { ws: { pingIntervalSec: 1 } } });
    admin = await t.adminToken();
  });
  after(() => t.close());

  it('legacy /api/ws/plugins/telemetry: latest values, live updates and history (tsSubCmds, historyCmds)', async () => {
    const dev = await createDevice(t, 'legacy-1');
    await postTelemetry(t, dev.token, { ts: 1000, values: { temperature: 21.5, humidity: 40 } });
    const ws = await WsClient.open(t, '/api/ws/plugins/telemetry', admin);
    try {
      ws.send({
        tsSubCmds: [
          {
            cmdId: 1,
            entityType: 'DEVICE',
            entityId: dev.id,
            keys: 'temperature',
            scope: 'LATEST_TELEMETRY',
          },
        ],
        historyCmds: [],
        attrSubCmds: [],
      });
      const first = await ws.next(forCmd(1));
      assert.equal(first.errorCode, 0);
      assert.deepEqual(dataOf(first), { temperature: [[1000, '21.5']] });
      await postTelemetry(t, dev.token, { temperature: 22, humidity: 41 });
      const live = await ws.next(forCmd(1));
      assert.deepEqual(Object.keys(dataOf(live)), ['temperature']);
      assert.equal(dataOf(live).temperature[0][1], '22');
      assert.equal(typeof (live.latestValues as Record<string, number>).temperature, 'number');

      ws.send({
        historyCmds: [
          {
            cmdId: 2,
            entityType: 'DEVICE',
            entityId: dev.id,
            keys: 'temperature,humidity',
            startTs: 0,
            endTs: 2000,
            limit: 10,
            agg: 'NONE',
          },
        ],
      });
      const hist = await ws.next(forCmd(2));
      assert.deepEqual(dataOf(hist), { temperature: [[1000, '21.5']], humidity: [[1000, '40']] });
      // Unsubscribe: no more updates for cmdId 1.
      ws.send({
        tsSubCmds: [{ cmdId: 1, entityType: 'DEVICE', entityId: dev.id, unsubscribe: true }],
      });
      ws.send({ tsSubCmds: [{ cmdId: 3, entityType: 'DEVICE', entityId: dev.id }] });
      await ws.next(forCmd(3));
      await postTelemetry(t, dev.token, { temperature: 23 });
      await ws.next(forCmd(3));
      assert.deepEqual(ws.unreadFor(1), []);
    } finally {
      ws.close();
    }
  });

  it('/api/ws with authCmd: TIMESERIES with a time window, TIMESERIES_HISTORY, ATTRIBUTES', async () => {
    const dev = await createDevice(t, 'v2-1');
    const now = Date.now();
    await postTelemetry(t, dev.token, [
      { ts: now - 5000, values: { temperature: 20 } },
      { ts: now - 4000, values: { temperature: 20.5 } },
    ]);
    const ws = await WsClient.open(t, '/api/ws');
    try {
      ws.send({
        authCmd: { cmdId: 0, token: admin },
        cmds: [
          {
            type: 'TIMESERIES',
            cmdId: 10,
            entityType: 'DEVICE',
            entityId: dev.id,
            keys: 'temperature',
            startTs: now - 60_000,
            timeWindow: 61_000,
            interval: 1000,
            limit: 100,
            agg: 'NONE',
          },
          {
            type: 'ATTRIBUTES',
            cmdId: 11,
            entityType: 'DEVICE',
            entityId: dev.id,
            scope: 'SHARED_SCOPE',
          },
          {
            type: 'TIMESERIES_HISTORY',
            cmdId: 12,
            entityType: 'DEVICE',
            entityId: dev.id,
            keys: 'temperature',
            startTs: now - 10_000,
            endTs: now,
            interval: 10_000,
            limit: 100,
            agg: 'MAX',
          },
        ],
      });
      const first = await ws.next(forCmd(10));
      assert.deepEqual(dataOf(first).temperature, [
        [now - 5000, '20'],
        [now - 4000, '20.5'],
      ]);
      const agg = await ws.next(forCmd(12));
      assert.equal(dataOf(agg).temperature.length, 1);
      assert.equal(dataOf(agg).temperature[0][1], '20.5');
      assert.deepEqual(dataOf(await ws.next(forCmd(11))), {});

      await postTelemetry(t, dev.token, { temperature: 30.25 });
      const live = await ws.next(forCmd(10));
      assert.equal(dataOf(live).temperature[0][1], '30.25');

      const res = await t.api(`/api/plugins/telemetry/DEVICE/${dev.id}/attributes/SHARED_SCOPE`, {
        body: { targetTemperature: 42, mode: 'eco' },
        token: admin,
      });
      assert.equal(res.status, 200);
      const attr = await ws.next(forCmd(11));
      assert.equal(dataOf(attr).targetTemperature[0][1], '42');
      assert.equal(dataOf(attr).mode[0][1], 'eco');
      // A client attribute is another scope: not sent to this subscription.
      await fetch(`${t.baseUrl}/api/v1/${dev.token}/attributes`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ firmware: '1.0' }),
      });
      await t.api(`/api/plugins/telemetry/DEVICE/${dev.id}/attributes/SHARED_SCOPE`, {
        body: { mode: 'boost' },
        token: admin,
      });
      const next = await ws.next(forCmd(11));
      assert.deepEqual(Object.keys(dataOf(next)), ['mode']);
    } finally {
      ws.close();
    }
  });

  it('ENTITY_DATA with a deviceType filter: page with latest values, live updates, tsCmd; ENTITY_COUNT', async () => {
    const a = await createTypedDevice(t, 'thermo-a', 'thermostat');
    const b = await createTypedDevice(t, 'thermo-b', 'thermostat');
    const other = await createTypedDevice(t, 'pump-1', 'pump');
    const creds = async (id: string) =>
      (
        (await (await t.api(`/api/device/${id}/credentials`, { token: admin })).json()) as {
          credentialsId: string;
        }
      ).credentialsId;
    const tokenA = await creds(a);
    const tokenOther = await creds(other);
    await postTelemetry(t, tokenA, { temperature: 19 });
    const ws = await WsClient.open(t, '/api/ws', admin);
    try {
      const query = {
        entityFilter: { type: 'deviceType', deviceTypes: ['thermostat'], deviceNameFilter: '' },
        pageLink: {
          pageSize: 10,
          page: 0,
          sortOrder: { key: { type: 'ENTITY_FIELD', key: 'name' }, direction: 'ASC' },
        },
        entityFields: [{ type: 'ENTITY_FIELD', key: 'name' }],
        latestValues: [{ type: 'TIME_SERIES', key: 'temperature' }],
      };
      ws.send({
        cmds: [
          {
            type: 'ENTITY_DATA',
            cmdId: 20,
            query,
            latestCmd: { keys: [{ type: 'TIME_SERIES', key: 'temperature' }] },
          },
          { type: 'ENTITY_COUNT', cmdId: 21, query: { entityFilter: query.entityFilter } },
        ],
      });
      const first = await ws.next((u) => u.cmdId === 20 && u.data !== null);
      assert.equal(first.cmdUpdateType, 'ENTITY_DATA');
      const page = first.data as {
        data: Array<{
          entityId: { id: string };
          latest: Record<string, Record<string, { value: string }>>;
        }>;
        totalElements: number;
      };
      assert.equal(page.totalElements, 2);
      assert.deepEqual(
        page.data.map((e) => e.entityId.id),
        [a, b],
      );
      assert.equal(page.data[0].latest.ENTITY_FIELD.name.value, 'thermo-a');
      assert.equal(page.data[0].latest.TIME_SERIES.temperature.value, '19');
      const count = await ws.next(forCmd(21));
      assert.equal(count.cmdUpdateType, 'COUNT_DATA');
      assert.equal(count.count, 2);

      await postTelemetry(t, tokenOther, { temperature: 99 });
      await postTelemetry(t, tokenA, { temperature: 20.5 });
      const live = await ws.next((u) => u.cmdId === 20 && u.update !== null);
      const upd = live.update as Array<{
        entityId: { id: string };
        latest: { TIME_SERIES: Record<string, { value: string }> };
      }>;
      assert.equal(upd[0].entityId.id, a);
      assert.equal(upd[0].latest.TIME_SERIES.temperature.value, '20.5');

      // A follow-up command with the same cmdId adds a time-series window (what widgets do).
      ws.send({
        cmds: [
          {
            type: 'ENTITY_DATA',
            cmdId: 20,
            tsCmd: {
              keys: ['temperature'],
              startTs: Date.now() - 60_000,
              timeWindow: 120_000,
              interval: 1000,
              limit: 100,
              agg: 'NONE',
            },
          },
        ],
      });
      const ts = await ws.next((u) => u.cmdId === 20 && u.update !== null);
      const series = ts.update as Array<{
        entityId: { id: string };
        timeseries: Record<string, Array<{ value: string }>>;
      }>;
      assert.deepEqual(
        series.find((e) => e.entityId.id === a)?.timeseries.temperature.map((v) => v.value),
        ['19', '20.5'],
      );
      // A new device of the type changes the page and the count.
      await createTypedDevice(t, 'thermo-c', 'thermostat');
      const grown = await ws.next((u) => u.cmdId === 20 && u.data !== null);
      assert.equal((grown.data as { totalElements: number }).totalElements, 3);
      assert.equal((await ws.next(forCmd(21))).count, 3);
      // Unsubscribed: nothing more.
      ws.send({ cmds: [{ type: 'ENTITY_DATA_UNSUBSCRIBE', cmdId: 20 }] });
      ws.send({ cmds: [{ type: 'ENTITY_COUNT_UNSUBSCRIBE', cmdId: 21 }] });
      ws.send({ tsSubCmds: [{ cmdId: 22, entityType: 'DEVICE', entityId: a }] });
      await ws.next(forCmd(22));
      await postTelemetry(t, tokenA, { temperature: 21 });
      await ws.next(forCmd(22));
      assert.deepEqual(ws.unreadFor(20), []);
    } finally {
      ws.close();
    }
  });

  it('legacy entityDataCmds form answers like ENTITY_DATA', async () => {
    const id = await createTypedDevice(t, 'legacy-form-1', 'legacy-form');
    const ws = await WsClient.open(t, '/api/ws/plugins/telemetry', admin);
    try {
      ws.send({
        entityDataCmds: [
          {
            cmdId: 30,
            query: {
              entityFilter: { type: 'deviceType', deviceType: 'legacy-form' },
              pageLink: { pageSize: 5, page: 0 },
              entityFields: [{ type: 'ENTITY_FIELD', key: 'name' }],
            },
          },
        ],
      });
      const first = await ws.next(forCmd(30));
      const page = first.data as { data: Array<{ entityId: { id: string } }> };
      assert.deepEqual(
        page.data.map((e) => e.entityId.id),
        [id],
      );
    } finally {
      ws.close();
    }
  });

  it('ALARM_DATA, ALARM_COUNT and ALARM_STATUS follow an alarm through create, acknowledge and clear', async () => {
    const dev = await createDevice(t, 'alarmed-1');
    const ws = await WsClient.open(t, '/api/ws', admin);
    try {
      ws.send({
        cmds: [
          {
            type: 'ALARM_DATA',
            cmdId: 40,
            query: {
              entityFilter: {
                type: 'singleEntity',
                singleEntity: { entityType: 'DEVICE', id: dev.id },
              },
              pageLink: {
                page: 0,
                pageSize: 10,
                sortOrder: { key: { type: 'ALARM_FIELD', key: 'createdTime' }, direction: 'DESC' },
                statusList: [],
                severityList: [],
                typeList: [],
                timeWindow: 86_400_000,
              },
              entityFields: [{ type: 'ENTITY_FIELD', key: 'name' }],
            },
          },
          {
            type: 'ALARM_COUNT',
            cmdId: 41,
            query: {
              entityFilter: {
                type: 'singleEntity',
                singleEntity: { entityType: 'DEVICE', id: dev.id },
              },
              statusList: ['ACTIVE'],
            },
          },
          { type: 'ALARM_STATUS', cmdId: 42, originatorId: { entityType: 'DEVICE', id: dev.id } },
        ],
      });
      const empty = await ws.next(forCmd(40));
      assert.equal(empty.cmdUpdateType, 'ALARM_DATA');
      assert.equal((empty.data as { totalElements: number }).totalElements, 0);
      assert.equal((await ws.next(forCmd(41))).count, 0);
      const status = await ws.next(forCmd(42));
      assert.equal(status.cmdUpdateType, 'ALARM_STATUS');
      assert.equal(status.active, false);

      const created = await t.api('/api/alarm', {
        body: {
          originator: { entityType: 'DEVICE', id: dev.id },
          type: 'High Temperature',
          severity: 'MAJOR',
        },
        token: admin,
      });
      const createdText = await created.text();
      assert.equal(created.status, 200, createdText);
      const alarmId = (JSON.parse(createdText) as { id: { id: string } }).id.id;
      const added = await ws.next(forCmd(40));
      const list = (added.data as { data: Array<Record<string, unknown>> }).data;
      assert.equal(list[0].type, 'High Temperature');
      assert.equal(list[0].status, 'ACTIVE_UNACK');
      assert.equal(
        (list[0].latest as { ENTITY_FIELD: { name: { value: string } } }).ENTITY_FIELD.name.value,
        'alarmed-1',
      );
      assert.equal((await ws.next(forCmd(41))).count, 1);
      assert.equal((await ws.next(forCmd(42))).active, true);

      assert.equal(
        (await t.api(`/api/alarm/${alarmId}/ack`, { method: 'POST', token: admin })).status,
        200,
      );
      const acked = await ws.next(forCmd(40));
      assert.equal((acked.update as Array<Record<string, unknown>>)[0].status, 'ACTIVE_ACK');

      assert.equal(
        (await t.api(`/api/alarm/${alarmId}/clear`, { method: 'POST', token: admin })).status,
        200,
      );
      const cleared = await ws.next(forCmd(40));
      assert.equal((cleared.update as Array<Record<string, unknown>>)[0].status, 'CLEARED_ACK');
      assert.equal((await ws.next(forCmd(41))).count, 0);
      assert.equal((await ws.next(forCmd(42))).active, false);
    } finally {
      ws.close();
    }
  });

  it('NOTIFICATIONS and NOTIFICATIONS_COUNT follow the inbox; MARK_(ALL_)NOTIFICATIONS_AS_READ', async () => {
    const dev = await createDevice(t, 'notified-1');
    const ws = await WsClient.open(t, '/api/ws', admin);
    try {
      ws.send({
        cmds: [
          { type: 'NOTIFICATIONS_COUNT', cmdId: 60 },
          { type: 'NOTIFICATIONS', cmdId: 61, limit: 10 },
        ],
      });
      const count0 = (await ws.next(forCmd(60))).totalUnreadCount as number;
      const list0 = await ws.next(forCmd(61));
      assert.equal(list0.cmdUpdateType, 'NOTIFICATIONS');
      assert.equal(list0.totalUnreadCount, count0);
      const raise = async (type: string) => {
        const res = await t.api('/api/alarm', {
          body: { originator: { entityType: 'DEVICE', id: dev.id }, type, severity: 'MAJOR' },
          token: admin,
        });
        assert.equal(res.status, 200, await res.text());
      };
      // The default notification rule puts every new alarm into the tenant administrator's inbox.
      await raise('Notified A');
      const count1 = await ws.next(forCmd(60));
      assert.equal(count1.cmdUpdateType, 'NOTIFICATIONS_COUNT');
      assert.equal(count1.totalUnreadCount, count0 + 1);
      const pushed = await ws.next((u) => u.cmdId === 61 && u.update !== null);
      const first = pushed.update as { id: { id: string }; subject: string };
      assert.match(first.subject, /Notified A/);
      assert.equal(pushed.totalUnreadCount, count0 + 1);
      await raise('Notified B');
      assert.equal((await ws.next(forCmd(60))).totalUnreadCount, count0 + 2);
      await ws.next((u) => u.cmdId === 61 && u.update !== null);

      ws.send({
        cmds: [{ type: 'MARK_NOTIFICATIONS_AS_READ', cmdId: 62, notifications: [first.id.id] }],
      });
      assert.equal((await ws.next(forCmd(60))).totalUnreadCount, count0 + 1);
      const relisted = await ws.next((u) => u.cmdId === 61 && u.notifications !== null);
      assert.equal(
        (relisted.notifications as Array<{ id: { id: string } }>).some(
          (n) => n.id.id === first.id.id,
        ),
        false,
      );
      ws.send({ cmds: [{ type: 'MARK_ALL_NOTIFICATIONS_AS_READ', cmdId: 63 }] });
      assert.equal((await ws.next(forCmd(60))).totalUnreadCount, 0);
      const unread = await t.api('/api/notifications/unread/count', { token: admin });
      assert.equal(await unread.text(), '0');
      ws.send({ cmds: [{ type: 'NOTIFICATIONS_UNSUBSCRIBE', cmdId: 60 }] });
      ws.send({ cmds: [{ type: 'NOTIFICATIONS_UNSUBSCRIBE', cmdId: 61 }] });
      await raise('Notified C');
      ws.send({ tsSubCmds: [{ cmdId: 64, entityType: 'DEVICE', entityId: dev.id }] });
      await ws.next(forCmd(64));
      assert.deepEqual(ws.unreadFor(60), []);
    } finally {
      ws.close();
    }
  });

  it('a customer user subscribing to a foreign device gets the Unauthorized error update, never data', async () => {
    const foreign = await createDevice(t, 'tenant-only-1');
    const own = await createDevice(t, 'customer-own-1');
    const customerId = await createCustomer(t, 'WS Customer');
    const assigned = await t.api(`/api/customer/${customerId}/device/${own.id}`, {
      method: 'POST',
      token: admin,
    });
    assert.equal(assigned.status, 200);
    const userId = await createUser(t, 'ws-customer@test.local', customerId);
    const token = await activateUser(t, userId, 'customer-password-1');
    const ws = await WsClient.open(t, '/api/ws', token);
    try {
      ws.send({
        cmds: [
          {
            type: 'TIMESERIES',
            cmdId: 50,
            entityType: 'DEVICE',
            entityId: foreign.id,
            keys: 'temperature',
          },
          { type: 'ATTRIBUTES', cmdId: 51, entityType: 'DEVICE', entityId: foreign.id },
          {
            type: 'TIMESERIES',
            cmdId: 52,
            entityType: 'DEVICE',
            entityId: own.id,
            keys: 'temperature',
          },
          {
            type: 'ENTITY_DATA',
            cmdId: 53,
            query: {
              entityFilter: {
                type: 'entityList',
                entityType: 'DEVICE',
                entityList: [foreign.id, own.id],
              },
              pageLink: { pageSize: 10, page: 0 },
            },
          },
        ],
      });
      for (const id of [50, 51]) {
        const refused = await ws.next(forCmd(id));
        assert.equal(refused.errorCode, 3);
        assert.equal(refused.errorMsg, 'Unauthorized');
        assert.equal(refused.data, null);
      }
      assert.equal((await ws.next(forCmd(52))).errorCode, 0);
      const page = (await ws.next(forCmd(53))).data as {
        data: Array<{ entityId: { id: string } }>;
      };
      assert.deepEqual(
        page.data.map((e) => e.entityId.id),
        [own.id],
      );
      await postTelemetry(t, foreign.token, { temperature: 1 });
      await postTelemetry(t, own.token, { temperature: 2 });
      await ws.next(forCmd(52));
      assert.deepEqual(ws.unreadFor(50), []);
      assert.equal(
        ws.received.some((u) => JSON.stringify(u).includes(foreign.id) && u.errorCode === 0),
        false,
      );
    } finally {
      ws.close();
    }
  });

  it('a session ends when its user is disabled', async () => {
    const userId = await createUser(t, 'ws-disabled@test.local');
    const token = await activateUser(t, userId, 'disabled-password-1');
    const ws = await WsClient.open(t, '/api/ws', token);
    const res = await t.api(
      `/api/user/${userId}/userCredentialsEnabled?userCredentialsEnabled=false`,
      {
        method: 'POST',
        token: admin,
      },
    );
    assert.equal(res.status, 200);
    const closed = await ws.waitClosed();
    assert.equal(closed.code, 1008);
    assert.equal(closed.reason, 'User account is not active');
  });

  it('refuses a bad token before the upgrade and a socket without authCmd', async () => {
    await assert.rejects(WsClient.open(t, '/api/ws', 'not-a-jwt'), /401/);
    const ws = await WsClient.open(t, '/api/ws');
    ws.send({ cmds: [{ type: 'TIMESERIES', cmdId: 1, entityId: 'x' }] });
    const closed = await ws.waitClosed();
    assert.equal(closed.code, 1008);
    assert.equal(closed.reason, 'Auth cmd is missing');
    const bad = await WsClient.open(t, '/api/ws', admin);
    bad.ws.send('{not json');
    const err = await bad.next((u) => u.errorCode === 2);
    assert.equal(err.errorMsg, 'Failed to parse the payload');
    bad.close();
  });

  it('pings idle connections', async () => {
    const ws = await WsClient.open(t, '/api/ws', admin);
    try {
      await waitFor(() => ws.pings >= 2, 10_000, 'two pings');
      assert.equal(ws.closed, undefined);
    } finally {
      ws.close();
    }
  });
});

describe('live WebSocket API: expiry and slow clients', () => {
  it('a session ends when its token expires', async () => {
    const t = await startGateway({ config: { auth: { accessTokenTtlSec: 2 } } });
    try {
      const ws = await WsClient.open(t, '/api/ws', await t.adminToken());
      const closed = await ws.waitClosed(15_000);
      assert.equal(closed.code, 1008);
      assert.equal(closed.reason, 'Token has expired');
    } finally {
      await t.close();
    }
  });

  it('a slow client is closed with a reason while a fast one gets every update', async () => {
    const t = await startGateway({
      config: {
        ws: { maxPendingBytes: 64 * 1024 },
        http: { maxBodyBytes: 2 * 1024 * 1024 },
        limits: { requestStoredBytes: 2 * 1024 * 1024 },
      },
    });
    try {
      const admin = await t.adminToken();
      const dev = await createDevice(t, 'firehose');
      const fast = await WsClient.open(t, '/api/ws', admin);
      const slow = await WsClient.open(t, '/api/ws', admin);
      const sub = {
        cmds: [{ type: 'TIMESERIES', cmdId: 1, entityType: 'DEVICE', entityId: dev.id }],
      };
      fast.send(sub);
      slow.send(sub);
      await fast.next(forCmd(1));
      await slow.next(forCmd(1));
      // The slow client stops reading: the kernel buffers fill, then the gateway's.
      slow.ws.pause();
      const big = 'x'.repeat(60_000);
      const values: Record<string, string> = {};
      for (let i = 0; i < 8; i++) values[`blob${i}`] = big;
      let sent = 0;
      const slowClosedLogged = () =>
        t.logs.some((l) => l.msg === 'websocket client too slow: closed');
      while (!slowClosedLogged() && sent < 400) {
        await postTelemetry(t, dev.token, { ...values, seq: sent });
        sent++;
      }
      assert.ok(slowClosedLogged(), `slow client not closed after ${sent} messages`);
      // Ingest went on and the fast client got every message, the last one included.
      await postTelemetry(t, dev.token, { seq: sent });
      await fast.next(
        (u) => u.subscriptionId === 1 && dataOf(u).seq?.[0]?.[1] === String(sent),
        30_000,
        'the last update on the fast client',
      );
      const seqs = fast.received.flatMap((u) => dataOf(u)?.seq ?? []).map(([, v]) => Number(v));
      assert.deepEqual(
        seqs,
        Array.from({ length: sent + 1 }, (_, i) => i),
      );
      slow.ws.resume();
      const closed = await slow.waitClosed(30_000);
      assert.equal(closed.code, 1008);
      assert.equal(closed.reason, 'Max pending updates limit reached!');
      fast.close();
    } finally {
      await t.close();
    }
  });
});
