import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser, tenantIdOf } from './helpers/users.js';
import { forCmd, type Update, WsClient } from './helpers/ws.js';

// Legacy attribute subscriptions (`attrSubCmds` on /api/ws/plugins/telemetry, `ATTRIBUTES` on
// /api/ws, platform.md §4.2) on users, customers and the tenant, with CE's READ_ATTRIBUTES rules
// (§6.2): the tenant admin any of them; a customer user its own user and its own customer.

const UNAUTHORIZED = { errorCode: 3, errorMsg: 'Unauthorized', data: null };

/** `data` of a legacy update as key -> value texts (ts left out: REST save time). */
const values = (u: Update) =>
  Object.fromEntries(
    Object.entries(u.data as Record<string, Array<[number, string]>>).map(([k, list]) => [
      k,
      list.map(([, v]) => v),
    ]),
  );

describe('WebSocket attribute subscriptions on users, customers and the tenant', () => {
  let t: TestGateway;
  let admin: string;
  let tenantId: string;
  let customerA: string;
  let customerB: string;
  let userA1: string;
  let userA2: string;
  let tokenA1: string;
  let tokenA2: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    tenantId = await tenantIdOf(t, admin);
    customerA = await createCustomer(t, 'WS owner customer A');
    customerB = await createCustomer(t, 'WS owner customer B');
    userA1 = await createUser(t, 'a1@ws-owner.test', customerA);
    userA2 = await createUser(t, 'a2@ws-owner.test', customerA);
    tokenA1 = await activateUser(t, userA1, 'password-a1');
    tokenA2 = await activateUser(t, userA2, 'password-a2');
  });
  after(() => t?.close());

  const path = (type: string, id: string) => `/api/plugins/telemetry/${type}/${id}`;
  const save = async (type: string, id: string, token: string, scope: string, body: unknown) => {
    const res = await t.api(`${path(type, id)}/attributes/${scope}`, { token, body });
    assert.equal(res.status, 200, await res.text());
  };
  const remove = async (type: string, id: string, token: string, scope: string, keys: string) => {
    const res = await t.api(`${path(type, id)}/${scope}?keys=${keys}`, { method: 'DELETE', token });
    assert.equal(res.status, 200, await res.text());
  };

  it('legacy attrSubCmds: a customer user follows its own attributes; others are refused', async () => {
    await save('USER', userA1, tokenA1, 'SERVER_SCOPE', { hotAbove: 50 });
    const ws = await WsClient.open(t, '/api/ws/plugins/telemetry', tokenA1);
    try {
      const sub = (cmdId: number, entityType: string, entityId: string, scope?: string) =>
        ws.send({ attrSubCmds: [{ cmdId, entityType, entityId, scope }] });
      sub(1, 'USER', userA1, 'SERVER_SCOPE');
      const first = await ws.next(forCmd(1), 10_000, 'own snapshot');
      assert.equal(first.errorCode, 0);
      assert.deepEqual(values(first), { hotAbove: ['50'] });
      assert.ok((first.data as Record<string, [number, string][]>).hotAbove[0][0] > 0);

      // A peer user (READ but not READ_ATTRIBUTES), another customer, the tenant: refused.
      sub(2, 'USER', userA2);
      sub(3, 'CUSTOMER', customerB);
      sub(4, 'TENANT', tenantId);
      sub(5, 'USER', crypto.randomUUID());
      for (const id of [2, 3, 4, 5])
        assert.deepEqual(
          { ...(await ws.next(forCmd(id), 10_000, `refusal ${id}`)) },
          { subscriptionId: id, ...UNAUTHORIZED },
        );

      // Its own customer: read.
      await save('CUSTOMER', customerA, admin, 'SERVER_SCOPE', { site: 'north' });
      sub(6, 'CUSTOMER', customerA);
      assert.deepEqual(values(await ws.next(forCmd(6))), { site: ['north'] });

      // Live: a save (by itself and by the admin), then a delete as ts 0 and an empty value.
      await save('USER', userA1, tokenA1, 'SERVER_SCOPE', { theme: 'dark' });
      assert.deepEqual(values(await ws.next(forCmd(1))), { theme: ['dark'] });
      await save('USER', userA1, admin, 'SERVER_SCOPE', { hotAbove: 60.5 });
      assert.deepEqual(values(await ws.next(forCmd(1))), { hotAbove: ['60.5'] });
      await remove('USER', userA1, tokenA1, 'SERVER_SCOPE', 'theme');
      assert.deepEqual((await ws.next(forCmd(1))).data, { theme: [[0, '']] });
      // Other scopes, other users and the tenant do not reach it.
      await save('USER', userA1, tokenA1, 'SHARED_SCOPE', { other: 1 });
      await save('USER', userA2, tokenA2, 'SERVER_SCOPE', { hotAbove: 1 });
      await save('TENANT', tenantId, admin, 'SERVER_SCOPE', { hotAbove: 2 });
      await save('CUSTOMER', customerA, admin, 'SERVER_SCOPE', { site: 'south' });
      assert.deepEqual(values(await ws.next(forCmd(6))), { site: ['south'] });
      assert.deepEqual(ws.unreadFor(1), []);
      for (const id of [2, 3, 4, 5]) assert.deepEqual(ws.unreadFor(id), []);

      // Unsubscribed: no more updates.
      ws.send({
        attrSubCmds: [{ cmdId: 1, entityType: 'USER', entityId: userA1, unsubscribe: true }],
      });
      await save('USER', userA1, tokenA1, 'SERVER_SCOPE', { hotAbove: 70 });
      await save('CUSTOMER', customerA, admin, 'SERVER_SCOPE', { site: 'east' });
      await ws.next(forCmd(6));
      assert.deepEqual(ws.unreadFor(1), []);
    } finally {
      ws.close();
    }
  });

  it('/api/ws ATTRIBUTES: the tenant admin follows a customer, a user and the tenant', async () => {
    await save('CUSTOMER', customerB, admin, 'SERVER_SCOPE', { limit: 10 });
    await save('CUSTOMER', customerB, admin, 'SHARED_SCOPE', { motto: 'hi' });
    const ws = await WsClient.open(t, '/api/ws');
    try {
      ws.send({
        authCmd: { cmdId: 0, token: admin },
        cmds: [
          { type: 'ATTRIBUTES', cmdId: 1, entityType: 'CUSTOMER', entityId: customerB },
          { type: 'ATTRIBUTES', cmdId: 2, entityType: 'USER', entityId: userA2, keys: 'mode' },
          {
            type: 'ATTRIBUTES',
            cmdId: 3,
            entityType: 'TENANT',
            entityId: tenantId,
            scope: 'SERVER_SCOPE',
          },
          {
            type: 'ATTRIBUTES',
            cmdId: 4,
            entityType: 'CUSTOMER',
            entityId: customerB,
            scope: 'CLIENT_SCOPE',
          },
        ],
      });
      // No scope: server and shared attributes.
      assert.deepEqual(values(await ws.next(forCmd(1))), { limit: ['10'], motto: ['hi'] });
      assert.deepEqual((await ws.next(forCmd(2))).data, {});
      assert.equal((await ws.next(forCmd(3))).errorCode, 0);
      // CLIENT_SCOPE is devices' only: nothing now, nothing later.
      assert.deepEqual((await ws.next(forCmd(4))).data, {});

      await save('CUSTOMER', customerB, admin, 'SERVER_SCOPE', { limit: 12, flag: true });
      assert.deepEqual(values(await ws.next(forCmd(1))), { limit: ['12'], flag: ['true'] });
      // Only the keys asked for.
      await save('USER', userA2, tokenA2, 'SERVER_SCOPE', { other: 'x' });
      await save('USER', userA2, tokenA2, 'SERVER_SCOPE', { mode: { a: 1 } });
      assert.deepEqual(values(await ws.next(forCmd(2))), { mode: ['{"a":1}'] });
      await save('TENANT', tenantId, admin, 'SERVER_SCOPE', { ovenMax: 900 });
      assert.deepEqual(values(await ws.next(forCmd(3))), { ovenMax: ['900'] });
      await remove('CUSTOMER', customerB, admin, 'SHARED_SCOPE', 'motto');
      assert.deepEqual((await ws.next(forCmd(1))).data, { motto: [[0, '']] });
      assert.deepEqual(ws.unreadFor(2), []);
      assert.deepEqual(ws.unreadFor(4), []);
    } finally {
      ws.close();
    }
  });

  it('/api/ws ATTRIBUTES: a customer user is refused a peer and the tenant, allowed itself', async () => {
    const ws = await WsClient.open(t, '/api/ws', tokenA2);
    try {
      ws.send({
        cmds: [
          { type: 'ATTRIBUTES', cmdId: 1, entityType: 'USER', entityId: userA1 },
          { type: 'ATTRIBUTES', cmdId: 2, entityType: 'TENANT', entityId: tenantId },
          { type: 'ATTRIBUTES', cmdId: 3, entityType: 'USER', entityId: userA2, keys: 'mode' },
        ],
      });
      for (const id of [1, 2])
        assert.deepEqual(
          { ...(await ws.next(forCmd(id))) },
          { subscriptionId: id, ...UNAUTHORIZED },
        );
      assert.deepEqual(values(await ws.next(forCmd(3))), { mode: ['{"a":1}'] });
      await save('USER', userA2, tokenA2, 'SERVER_SCOPE', { mode: 'b' });
      assert.deepEqual(values(await ws.next(forCmd(3))), { mode: ['b'] });
      assert.deepEqual(ws.unreadFor(1), []);
      assert.deepEqual(ws.unreadFor(2), []);
    } finally {
      ws.close();
    }
  });
});
