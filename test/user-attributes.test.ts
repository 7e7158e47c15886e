import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { DB_FILE } from '../src/db/open.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser, tenantIdOf } from './helpers/users.js';
import { forCmd, hotterThan, postTelemetry, type Update, WsClient } from './helpers/ws.js';

// Users' attributes (platform.md §3.8 with `USER`, access as CE's user permissions, §6.2), the
// `CURRENT_USER` dynamic value of WebSocket key filters (§1.5, §4.4), and queries that run again
// when a user's, customer's or tenant's attribute their dynamic values read changes.

const ids = (u: Update) =>
  (u.data as { data: Array<{ entityId: { id: string } }> }).data.map((e) => e.entityId.id).sort();

/** `temperature > dynamicValue (default 100)`, an ENTITY_DATA and an ENTITY_COUNT of `prefix`. */
function queries(cmdId: number, prefix: string, dynamicValue: unknown) {
  const query = {
    entityFilter: { type: 'entityName', entityType: 'DEVICE', entityNameFilter: prefix },
    pageLink: { pageSize: 10, page: 0 },
    entityFields: [{ type: 'ENTITY_FIELD', key: 'name' }],
    keyFilters: [hotterThan(100, dynamicValue)],
  };
  return {
    cmds: [
      { type: 'ENTITY_DATA', cmdId, query },
      { type: 'ENTITY_COUNT', cmdId: cmdId + 1, query },
    ],
  };
}
const page = (cmdId: number) => (u: Update) => u.cmdId === cmdId && u.data != null;

describe('user attributes', () => {
  let t: TestGateway;
  let admin: string;
  let tenantId: string;
  let customerA: string;
  let userA1: string;
  let userA2: string;
  let userB: string;
  let tokenA1: string;
  let tokenA2: string;
  let tokenB: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    tenantId = await tenantIdOf(t, admin);
    customerA = await createCustomer(t, 'Attr customer A');
    const customerB = await createCustomer(t, 'Attr customer B');
    userA1 = await createUser(t, 'a1@attrs.test', customerA);
    userA2 = await createUser(t, 'a2@attrs.test', customerA);
    userB = await createUser(t, 'b@attrs.test', customerB);
    tokenA1 = await activateUser(t, userA1, 'password-a1');
    tokenA2 = await activateUser(t, userA2, 'password-a2');
    tokenB = await activateUser(t, userB, 'password-b');
  });
  after(() => t?.close());

  const attrs = (id: string) => `/api/plugins/telemetry/USER/${id}`;
  const save = async (id: string, token: string, body: unknown, status = 200) => {
    const res = await t.api(`${attrs(id)}/attributes/SERVER_SCOPE`, { token, body });
    assert.equal(res.status, status, await res.text());
  };

  /** Two devices of customer A named `prefix`1 and 2, at 70 and 40 degrees. */
  const customerDevices = async (prefix: string) => {
    const made = [await createDevice(t, `${prefix}1`), await createDevice(t, `${prefix}2`)];
    for (const [i, d] of made.entries()) {
      const res = await t.api(`/api/customer/${customerA}/device/${d.id}`, {
        method: 'POST',
        token: admin,
      });
      assert.equal(res.status, 200);
      await postTelemetry(t, d.token, { temperature: i === 0 ? 70 : 40 });
    }
    return made;
  };

  it('a user reads and writes its own; the tenant admin any; peers 403, others 404', async () => {
    await save(userA1, tokenA1, { hotAbove: 50, theme: 'dark' });
    const own = await t.api(`${attrs(userA1)}/values/attributes/SERVER_SCOPE`, { token: tokenA1 });
    assert.equal(own.status, 200);
    const list = (await own.json()) as Array<{ key: string; value: unknown; lastUpdateTs: number }>;
    assert.deepEqual(
      list.map(({ key, value }) => ({ key, value })),
      [
        { key: 'hotAbove', value: 50 },
        { key: 'theme', value: 'dark' },
      ],
    );
    assert.ok(list[0].lastUpdateTs > 0);
    const keys = await t.api(`${attrs(userA1)}/keys/attributes`, { token: tokenA1 });
    assert.deepEqual(await keys.json(), ['hotAbove', 'theme']);
    const scoped = await t.api(`${attrs(userA1)}/keys/attributes/SERVER_SCOPE`, { token: admin });
    assert.deepEqual(await scoped.json(), ['hotAbove', 'theme']);

    // The tenant administrator: any user's (v1 save path too).
    const byAdmin = await t.api(`${attrs(userA1)}/SERVER_SCOPE`, {
      token: admin,
      body: { shift: 2 },
    });
    assert.equal(byAdmin.status, 200);
    const read = await t.api(`${attrs(userA1)}/values/attributes?keys=shift`, { token: admin });
    assert.deepEqual(
      ((await read.json()) as Array<{ key: string; value: unknown }>).map((a) => a.value),
      [2],
    );

    // A peer of the same customer may read the user itself, not its attributes: 403.
    assert.equal((await t.api(`/api/user/${userA1}`, { token: tokenA2 })).status, 200);
    const peerRead = await t.api(`${attrs(userA1)}/values/attributes`, { token: tokenA2 });
    assert.equal(peerRead.status, 403);
    await save(userA1, tokenA2, { hotAbove: 1 }, 403);
    // A user of another customer cannot see it: 404, as for an unknown id.
    assert.equal((await t.api(`${attrs(userA1)}/keys/attributes`, { token: tokenB })).status, 404);
    await save(userA1, tokenB, { hotAbove: 1 }, 404);
    const unknown = await t.api(
      `${attrs('1b4e28ba-2fa1-11d2-883f-0016d3cca427')}/keys/attributes`,
      {
        token: admin,
      },
    );
    assert.equal(unknown.status, 404);
    // Users have no client scope; a blank body is refused.
    await save(userA1, tokenA1, {}, 400);
    const client = await t.api(`${attrs(userA1)}/attributes/CLIENT_SCOPE`, {
      token: tokenA1,
      body: { a: 1 },
    });
    assert.equal(client.status, 400);

    // Delete: the user's own, by keys.
    const del = await t.api(`${attrs(userA1)}/SERVER_SCOPE?keys=theme,shift`, {
      method: 'DELETE',
      token: tokenA1,
    });
    assert.equal(del.status, 200);
    const left = await t.api(`${attrs(userA1)}/keys/attributes`, { token: tokenA1 });
    assert.deepEqual(await left.json(), ['hotAbove']);
  });

  it('deleting a user, or its customer, deletes its attributes', async () => {
    const customer = await createCustomer(t, 'Attr customer gone');
    const alone = await createUser(t, 'alone@attrs.test', customer);
    const withCustomer = await createUser(t, 'with@attrs.test', customer);
    await save(alone, admin, { a: 1 });
    await save(withCustomer, admin, { b: 2 });
    const custAttr = await t.api(
      `/api/plugins/telemetry/CUSTOMER/${customer}/attributes/SERVER_SCOPE`,
      { token: admin, body: { c: 3 } },
    );
    assert.equal(custAttr.status, 200);
    const rows = (type: string, id: string) => {
      const db = new Database(join(t.dataDir, DB_FILE), { readonly: true });
      try {
        return db
          .prepare('SELECT key FROM owner_attribute_kv WHERE entity_type = ? AND entity_id = ?')
          .all(type, id)
          .map((r) => (r as { key: string }).key);
      } finally {
        db.close();
      }
    };
    assert.deepEqual(rows('USER', alone), ['a']);
    assert.equal(
      (await t.api(`/api/user/${alone}`, { method: 'DELETE', token: admin })).status,
      200,
    );
    assert.deepEqual(rows('USER', alone), []);
    assert.deepEqual(rows('USER', withCustomer), ['b']);
    assert.deepEqual(rows('CUSTOMER', customer), ['c']);
    // The customer's users go with it (a foreign-key cascade), and so do their attributes.
    assert.equal(
      (await t.api(`/api/customer/${customer}`, { method: 'DELETE', token: admin })).status,
      200,
    );
    assert.deepEqual(rows('USER', withCustomer), []);
    assert.deepEqual(rows('CUSTOMER', customer), []);
    assert.deepEqual(rows('USER', userA1), ['hotAbove'], 'other users keep theirs');
  });

  it("CURRENT_USER reads each subscriber's own attribute: two users, one filter, two answers", async () => {
    const [hot, warm] = await customerDevices('ua-kiln-');
    await save(userA1, tokenA1, { hotAbove: 50 });
    await save(userA2, tokenA2, { hotAbove: 30 });
    const ws1 = await WsClient.open(t, '/api/ws', tokenA1);
    const ws2 = await WsClient.open(t, '/api/ws', tokenA2);
    try {
      const user = { sourceType: 'CURRENT_USER', sourceAttribute: 'hotAbove' };
      ws1.send(queries(1, 'ua-kiln-', user));
      ws2.send(queries(1, 'ua-kiln-', user));
      assert.deepEqual(ids(await ws1.next(page(1))), [hot.id], 'user 1: above 50');
      assert.deepEqual(ids(await ws2.next(page(1))), [hot.id, warm.id].sort(), 'user 2: above 30');
      assert.equal((await ws1.next(forCmd(2))).count, 1);
      assert.equal((await ws2.next(forCmd(2))).count, 2);

      // A value the dashboard's user typed (userValue) comes before the dynamic one.
      const typed = queries(5, 'ua-kiln-', user).cmds[0];
      const keyFilters = [hotterThan(100, user, 35)];
      ws1.send({ cmds: [{ ...typed, query: { ...typed.query, keyFilters } }] });
      assert.deepEqual(ids(await ws1.next(page(5))), [hot.id, warm.id].sort(), 'typed: above 35');

      // inherit: a user without the attribute takes its customer's, then the tenant's.
      const inherit = { sourceType: 'CURRENT_USER', sourceAttribute: 'coldBelow', inherit: true };
      ws1.send(queries(3, 'ua-kiln-', inherit));
      assert.deepEqual(ids(await ws1.next(page(3))), [], 'nothing anywhere: the default 100');
      const tenantAttr = await t.api(
        `/api/plugins/telemetry/TENANT/${tenantId}/attributes/SERVER_SCOPE`,
        { token: admin, body: { coldBelow: 45 } },
      );
      assert.equal(tenantAttr.status, 200);
      // The tenant's value reaches the live query at once (no new command, no new reading).
      assert.deepEqual(ids(await ws1.next(page(3))), [hot.id], 'the tenant says 45');
      const customerAttr = await t.api(
        `/api/plugins/telemetry/CUSTOMER/${customerA}/attributes/SERVER_SCOPE`,
        { token: admin, body: { coldBelow: 10 } },
      );
      assert.equal(customerAttr.status, 200);
      assert.deepEqual(ids(await ws1.next(page(3))), [hot.id, warm.id].sort(), 'customer: 10');
      await save(userA1, tokenA1, { coldBelow: 80 });
      assert.deepEqual(ids(await ws1.next(page(3))), [], "the user's own 80 comes first");
    } finally {
      ws1.close();
      ws2.close();
    }
  });

  it('a changed dynamic attribute re-runs the live queries that read it, at once', async () => {
    const [a, b] = await customerDevices('ub-oven-');
    await save(userA1, tokenA1, { ovenHot: 50 });
    await save(userA2, tokenA2, { ovenHot: 50 });
    const ws1 = await WsClient.open(t, '/api/ws', tokenA1);
    const ws2 = await WsClient.open(t, '/api/ws', tokenA2);
    const wsAdmin = await WsClient.open(t, '/api/ws/plugins/telemetry', admin);
    try {
      const user = { sourceType: 'CURRENT_USER', sourceAttribute: 'ovenHot' };
      ws1.send(queries(1, 'ub-oven-', user));
      ws2.send(queries(1, 'ub-oven-', user));
      // The legacy wrapper: entityDataCmds / entityCountCmds.
      const tenant = { sourceType: 'CURRENT_TENANT', sourceAttribute: 'ovenHot' };
      const q = queries(5, 'ub-oven-', tenant).cmds;
      wsAdmin.send({ entityDataCmds: [q[0]], entityCountCmds: [q[1]] });
      assert.deepEqual(ids(await ws1.next(page(1))), [a.id]);
      assert.deepEqual(ids(await ws2.next(page(1))), [a.id]);
      assert.equal((await ws1.next(forCmd(2))).count, 1);
      assert.equal((await ws2.next(forCmd(2))).count, 1);
      assert.deepEqual(ids(await wsAdmin.next(page(5))), [], 'no tenant attribute: 100');
      assert.equal((await wsAdmin.next(forCmd(6))).count, 0);

      // The administrator lowers user 1's threshold: user 1's page and count follow at once.
      await save(userA1, admin, { ovenHot: 30 });
      const grown = await ws1.next(page(1));
      assert.deepEqual(ids(grown), [a.id, b.id].sort());
      assert.equal((grown.data as { totalElements: number }).totalElements, 2);
      assert.equal((await ws1.next(forCmd(2))).count, 2);
      // A change that does not change the match sends nothing; the next page user 1 gets is the
      // one of its next real change.
      await save(userA1, tokenA1, { ovenHot: 35 });
      await save(userA1, tokenA1, { ovenHot: 60 });
      assert.deepEqual(ids(await ws1.next(page(1))), [a.id]);
      assert.equal((await ws1.next(forCmd(2))).count, 1);
      // User 2's query reads user 2's attribute: the first thing it gets is its own change.
      await save(userA2, tokenA2, { ovenHot: 80 });
      assert.deepEqual(ids(await ws2.next(page(1))), []);

      // The tenant's attribute: the administrator's query follows, the users' do not read it.
      const tenantAttr = await t.api(
        `/api/plugins/telemetry/TENANT/${tenantId}/attributes/SERVER_SCOPE`,
        { token: admin, body: { ovenHot: 20 } },
      );
      assert.equal(tenantAttr.status, 200);
      assert.deepEqual(ids(await wsAdmin.next(page(5))), [a.id, b.id].sort());
      assert.equal((await wsAdmin.next(forCmd(6))).count, 2);
      // Deleting it brings the default back.
      const del = await t.api(
        `/api/plugins/telemetry/TENANT/${tenantId}/SERVER_SCOPE?keys=ovenHot`,
        { method: 'DELETE', token: admin },
      );
      assert.equal(del.status, 200);
      assert.deepEqual(ids(await wsAdmin.next(page(5))), []);
      // New readings are still matched against the new thresholds (user 1: 60, user 2: 80).
      await postTelemetry(t, b.token, { temperature: 65 });
      assert.deepEqual(ids(await ws1.next(page(1))), [a.id, b.id].sort());
      await postTelemetry(t, b.token, { temperature: 85 });
      assert.deepEqual(ids(await ws2.next(page(1))), [b.id]);
    } finally {
      ws1.close();
      ws2.close();
      wsAdmin.close();
    }
  });

  it("CURRENT_DEVICE: a device's own threshold changing re-runs the query too", async () => {
    const a = await createDevice(t, 'uc-press-1');
    const b = await createDevice(t, 'uc-press-2');
    await postTelemetry(t, a.token, { temperature: 70 });
    await postTelemetry(t, b.token, { temperature: 40 });
    const ws = await WsClient.open(t, '/api/ws', admin);
    try {
      const device = { sourceType: 'CURRENT_DEVICE', sourceAttribute: 'pressHot' };
      ws.send(queries(1, 'uc-press-', device));
      assert.deepEqual(ids(await ws.next(page(1))), [], 'no device attribute: 100');
      const res = await t.api(`/api/plugins/telemetry/DEVICE/${b.id}/attributes/SHARED_SCOPE`, {
        token: admin,
        body: { pressHot: 30 },
      });
      assert.equal(res.status, 200);
      assert.deepEqual(ids(await ws.next(page(1))), [b.id]);
      assert.equal((await ws.next((u) => u.cmdId === 2 && u.count === 1)).count, 1);
    } finally {
      ws.close();
    }
  });
});
