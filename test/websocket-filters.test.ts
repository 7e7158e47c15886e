import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { forCmd, postTelemetry, type Update, WsClient } from './helpers/ws.js';

// WebSocket entity queries with ThingsBoard's keyFilters (platform.md §1.4, §1.5, §4.4), and the
// updates for deleted time series and attributes (each deleted key with ts 0 and an empty value).

interface Page {
  data: Array<{ entityId: { id: string } }>;
  totalElements: number;
}
const pageOf = (u: Update) => u.data as Page;
const ids = (u: Update) => pageOf(u).data.map((e) => e.entityId.id);
const numeric = (key: string, operation: string, value: number) => ({
  key: { type: 'TIME_SERIES', key },
  valueType: 'NUMERIC',
  predicate: { type: 'NUMERIC', operation, value: { defaultValue: value } },
});

describe('WebSocket keyFilters and deletions', () => {
  let t: TestGateway;
  let admin: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t?.close());

  it('ENTITY_DATA and ENTITY_COUNT keep only entities whose keys pass every filter, live', async () => {
    const hot = await createDevice(t, 'kf-oven-1');
    const cold = await createDevice(t, 'kf-oven-2');
    const other = await createDevice(t, 'kf-fridge-1');
    await postTelemetry(t, hot.token, { temperature: 80 });
    await postTelemetry(t, cold.token, { temperature: 20 });
    await postTelemetry(t, other.token, { temperature: 90 });
    const ws = await WsClient.open(t, '/api/ws', admin);
    try {
      const query = {
        entityFilter: { type: 'entityName', entityType: 'DEVICE', entityNameFilter: 'kf-' },
        pageLink: {
          pageSize: 10,
          page: 0,
          sortOrder: { key: { type: 'ENTITY_FIELD', key: 'name' }, direction: 'ASC' },
        },
        entityFields: [{ type: 'ENTITY_FIELD', key: 'name' }],
        latestValues: [{ type: 'TIME_SERIES', key: 'temperature' }],
        keyFilters: [
          numeric('temperature', 'GREATER', 50),
          {
            key: { type: 'ENTITY_FIELD', key: 'name' },
            valueType: 'STRING',
            predicate: {
              type: 'STRING',
              operation: 'STARTS_WITH',
              value: { defaultValue: 'KF-OVEN' },
              ignoreCase: true,
            },
          },
        ],
      };
      ws.send({
        cmds: [
          { type: 'ENTITY_DATA', cmdId: 1, query },
          { type: 'ENTITY_COUNT', cmdId: 2, query },
        ],
      });
      const first = await ws.next((u) => u.cmdId === 1 && u.data !== null);
      assert.deepEqual(ids(first), [hot.id], 'the fridge fails the name filter, oven 2 the value');
      assert.equal(pageOf(first).totalElements, 1);
      assert.equal((await ws.next(forCmd(2))).count, 1);

      // Oven 2 heats up: it now passes, the page and the count follow without a new command.
      await postTelemetry(t, cold.token, { temperature: 75 });
      const grown = await ws.next((u) => u.cmdId === 1 && u.data !== null);
      assert.deepEqual(ids(grown), [hot.id, cold.id]);
      assert.equal((await ws.next(forCmd(2))).count, 2);

      // A device that no longer passes leaves the page; live values of the rest still arrive.
      await postTelemetry(t, hot.token, { temperature: 40 });
      const shrunk = await ws.next((u) => u.cmdId === 1 && u.data !== null);
      assert.deepEqual(ids(shrunk), [cold.id]);
      assert.equal((await ws.next(forCmd(2))).count, 1);
      await postTelemetry(t, cold.token, { temperature: 76 });
      const live = await ws.next((u) => u.cmdId === 1 && u.update !== null);
      const upd = live.update as Array<{
        entityId: { id: string };
        latest: { TIME_SERIES: Record<string, { value: string }> };
      }>;
      assert.equal(upd[0].entityId.id, cold.id);
      assert.equal(upd[0].latest.TIME_SERIES.temperature.value, '76');
      // The device off the page sends no update.
      await postTelemetry(t, hot.token, { humidity: 10 });
      await postTelemetry(t, cold.token, { temperature: 77 });
      const next = await ws.next((u) => u.cmdId === 1 && u.update !== null);
      assert.equal((next.update as Array<{ entityId: { id: string } }>)[0].entityId.id, cold.id);
    } finally {
      ws.close();
    }
  });

  it('attribute key filters (any scope, or one scope) and a bad filter answered with an error', async () => {
    const a = await createDevice(t, 'kfa-1');
    const b = await createDevice(t, 'kfa-2');
    const shared = (id: string, body: unknown) =>
      t.api(`/api/plugins/telemetry/DEVICE/${id}/attributes/SHARED_SCOPE`, { body, token: admin });
    assert.equal((await shared(a.id, { enabled: true })).status, 200);
    assert.equal((await shared(b.id, { enabled: false })).status, 200);
    const ws = await WsClient.open(t, '/api/ws', admin);
    try {
      const filter = (type: string) => ({
        key: { type, key: 'enabled' },
        valueType: 'BOOLEAN',
        predicate: { type: 'BOOLEAN', operation: 'EQUAL', value: { defaultValue: true } },
      });
      const entityFilter = { type: 'entityName', entityType: 'DEVICE', entityNameFilter: 'kfa-' };
      ws.send({
        cmds: [
          {
            type: 'ENTITY_COUNT',
            cmdId: 3,
            query: { entityFilter, keyFilters: [filter('ATTRIBUTE')] },
          },
          {
            type: 'ENTITY_COUNT',
            cmdId: 4,
            query: { entityFilter, keyFilters: [filter('SERVER_ATTRIBUTE')] },
          },
          {
            type: 'ENTITY_COUNT',
            cmdId: 5,
            query: { entityFilter, keyFilters: [{ key: { type: 'TIME_SERIES' } }] },
          },
        ],
      });
      assert.equal((await ws.next(forCmd(3))).count, 1);
      assert.equal((await ws.next(forCmd(4))).count, 0, 'enabled is a shared attribute');
      const bad = await ws.next(forCmd(5));
      assert.equal(bad.errorCode, 2);
      assert.match(String(bad.errorMsg), /keyFilters/);
      assert.equal((await shared(b.id, { enabled: true })).status, 200);
      assert.equal((await ws.next(forCmd(3))).count, 2);
    } finally {
      ws.close();
    }
  });

  it('deleted time series and attributes are sent as the deleted keys (ts 0, empty value)', async () => {
    const dev = await createDevice(t, 'del-1');
    await postTelemetry(t, dev.token, { ts: 1000, values: { temperature: 21, humidity: 40 } });
    const attrs = `/api/plugins/telemetry/DEVICE/${dev.id}`;
    await t.api(`${attrs}/attributes/SHARED_SCOPE`, { body: { mode: 'eco' }, token: admin });
    const ws = await WsClient.open(t, '/api/ws/plugins/telemetry', admin);
    try {
      ws.send({
        tsSubCmds: [
          { cmdId: 1, entityType: 'DEVICE', entityId: dev.id, scope: 'LATEST_TELEMETRY' },
        ],
        attrSubCmds: [{ cmdId: 2, entityType: 'DEVICE', entityId: dev.id, scope: 'SHARED_SCOPE' }],
        historyCmds: [],
      });
      await ws.next(forCmd(1));
      await ws.next(forCmd(2));
      const del = await t.api(
        `${attrs}/timeseries/delete?keys=temperature&deleteAllDataForKeys=true`,
        { method: 'DELETE', token: admin },
      );
      assert.equal(del.status, 200, await del.text());
      assert.deepEqual((await ws.next(forCmd(1))).data, { temperature: [[0, '']] });
      const delAttr = await t.api(`${attrs}/SHARED_SCOPE?keys=mode`, {
        method: 'DELETE',
        token: admin,
      });
      assert.equal(delAttr.status, 200, await delAttr.text());
      assert.deepEqual((await ws.next(forCmd(2))).data, { mode: [[0, '']] });
      // A new value after the deletion is sent again (the latest-only check starts over).
      await postTelemetry(t, dev.token, { ts: 500, values: { temperature: 19 } });
      assert.deepEqual((await ws.next(forCmd(1))).data, { temperature: [[500, '19']] });
    } finally {
      ws.close();
    }
  });
  it("dynamic values read the device, the caller's tenant, inherit upwards, else use the default", async () => {
    const a = await createDevice(t, 'dv-kiln-1');
    const b = await createDevice(t, 'dv-kiln-2');
    await postTelemetry(t, a.token, { temperature: 70 });
    await postTelemetry(t, b.token, { temperature: 40 });
    const me = (await (await t.api('/api/auth/user', { token: admin })).json()) as {
      tenantId: { id: string };
    };
    const tenantAttr = async (body: unknown) => {
      const res = await t.api(
        `/api/plugins/telemetry/TENANT/${me.tenantId.id}/attributes/SERVER_SCOPE`,
        { token: admin, body },
      );
      assert.equal(res.status, 200);
    };
    const ws = await WsClient.open(t, '/api/ws', admin);
    let cmdId = 0;
    /** The ids matching `temperature > (dynamic value, default 100)`. */
    const match = async (dynamicValue: unknown) => {
      cmdId++;
      ws.send({
        cmds: [
          {
            type: 'ENTITY_DATA',
            cmdId,
            query: {
              entityFilter: { type: 'entityName', entityType: 'DEVICE', entityNameFilter: 'dv-' },
              pageLink: { pageSize: 10, page: 0 },
              entityFields: [{ type: 'ENTITY_FIELD', key: 'name' }],
              keyFilters: [
                {
                  key: { type: 'TIME_SERIES', key: 'temperature' },
                  valueType: 'NUMERIC',
                  predicate: {
                    type: 'NUMERIC',
                    operation: 'GREATER',
                    value: { defaultValue: 100, dynamicValue },
                  },
                },
              ],
            },
          },
        ],
      });
      const u = await ws.next((x) => x.cmdId === cmdId && x.data !== null);
      return ids(u).sort();
    };
    try {
      const tenant = { sourceType: 'CURRENT_TENANT', sourceAttribute: 'hotAbove' };
      assert.deepEqual(await match(tenant), [], 'no tenant attribute yet: the default 100');
      await tenantAttr({ hotAbove: 50 });
      assert.deepEqual(await match(tenant), [a.id], 'the tenant attribute 50');
      await tenantAttr({ hotAbove: 30 });
      assert.deepEqual(await match(tenant), [a.id, b.id].sort());

      // CURRENT_DEVICE reads each device's own attribute; with inherit a device without it
      // takes the tenant's (30), without inherit the default (100).
      const res = await t.api(`/api/plugins/telemetry/DEVICE/${a.id}/attributes/SERVER_SCOPE`, {
        token: admin,
        body: { hotAbove: 80 },
      });
      assert.equal(res.status, 200);
      const device = { sourceType: 'CURRENT_DEVICE', sourceAttribute: 'hotAbove' };
      assert.deepEqual(await match(device), [], 'kiln 1: 70 > 80 fails; kiln 2: default 100');
      assert.deepEqual(await match({ ...device, inherit: true }), [b.id], 'kiln 2 inherits 30');
      // A tenant administrator has no customer: CURRENT_CUSTOMER finds the tenant's only by
      // inheriting; CURRENT_USER (the administrator has no such attribute) likewise.
      const customer = { sourceType: 'CURRENT_CUSTOMER', sourceAttribute: 'hotAbove' };
      assert.deepEqual(await match(customer), []);
      assert.deepEqual(await match({ ...customer, inherit: true }), [a.id, b.id].sort());
      const user = { sourceType: 'CURRENT_USER', sourceAttribute: 'hotAbove' };
      assert.deepEqual(await match(user), [], 'no user attribute: the default');
      assert.deepEqual(await match({ ...user, inherit: true }), [a.id, b.id].sort());
    } finally {
      ws.close();
    }
  });
});
