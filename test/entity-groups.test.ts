import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

interface GroupJson {
  id: { entityType: string; id: string };
  type: string;
  name: string;
  ownerId: { entityType: string; id: string };
  groupAll: boolean;
}

describe('entity groups and sharing over HTTP', () => {
  let t: TestGateway;
  let admin: string;
  let customerA: string;
  let customerB: string;
  let userB: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    customerA = await createCustomer(t, 'Group A');
    customerB = await createCustomer(t, 'Group B');
    userB = await activateUser(t, await createUser(t, 'gb@example.com', customerB), 'password-b-1');
  });
  after(() => t.close());

  const create = async (body: unknown, token = admin) => t.api('/api/entityGroup', { body, token });
  const entities = async (groupId: string, token = admin) => {
    const res = await t.api(`/api/entityGroup/${groupId}/entities?pageSize=10&page=0`, { token });
    assert.equal(res.status, 200);
    return ((await res.json()) as { data: Array<{ id: { id: string } }> }).data.map((e) => e.id.id);
  };
  const post = (path: string, body: unknown, token = admin) =>
    t.api(path, { method: 'POST', body, token });

  it('lists the virtual All group, computed from ownership, beside custom groups', async () => {
    const tenantDevice = await createDevice(t, 'all-tenant');
    const aDevice = await createDevice(t, 'all-a');
    await post(`/api/owner/CUSTOMER/${customerA}/DEVICE/${aDevice.id}`, undefined);
    assert.equal((await create({ name: 'Custom', type: 'DEVICE' })).status, 200);

    const res = await t.api('/api/entityGroups/DEVICE', { token: admin });
    assert.equal(res.status, 200);
    const groups = (await res.json()) as GroupJson[];
    assert.deepEqual(
      groups.map((g) => [g.name, g.groupAll, g.ownerId.entityType]),
      [
        ['All', true, 'TENANT'],
        ['Custom', false, 'TENANT'],
      ],
    );
    const all = groups[0];
    assert.equal(all.id.entityType, 'ENTITY_GROUP');
    const members = await entities(all.id.id);
    assert.ok(members.includes(tenantDevice.id));
    assert.ok(!members.includes(aDevice.id));
    const byId = await t.api(`/api/entityGroup/${all.id.id}`, { token: admin });
    assert.deepEqual(await byId.json(), all);

    // All is not manually editable.
    assert.equal((await post(`/api/entityGroup/${all.id.id}/addEntities`, [])).status, 400);
    assert.equal(
      (await t.api(`/api/entityGroup/${all.id.id}`, { method: 'DELETE', token: admin })).status,
      400,
    );
    assert.equal((await t.api('/api/entityGroups/ASSET', { token: admin })).status, 400);
  });

  it("holds only entities of the group's owner; validates names", async () => {
    const aDevice = await createDevice(t, 'owned-by-a');
    await post(`/api/owner/CUSTOMER/${customerA}/DEVICE/${aDevice.id}`, undefined);
    const group = (await (
      await create({ name: 'Tenant only', type: 'DEVICE' })
    ).json()) as GroupJson;
    assert.equal(
      (await post(`/api/entityGroup/${group.id.id}/addEntities`, [aDevice.id])).status,
      400,
    );
    assert.equal(
      (await post(`/api/entityGroup/${group.id.id}/addEntities`, [crypto.randomUUID()])).status,
      404,
    );
    assert.equal((await post(`/api/entityGroup/${group.id.id}/addEntities`, ['nope'])).status, 400);

    const forA = await create({
      name: 'A devices',
      type: 'DEVICE',
      ownerId: { entityType: 'CUSTOMER', id: customerA },
    });
    assert.equal(forA.status, 200);
    const aGroup = (await forA.json()) as GroupJson;
    assert.deepEqual(aGroup.ownerId, { entityType: 'CUSTOMER', id: customerA });
    assert.equal(
      (await post(`/api/entityGroup/${aGroup.id.id}/addEntities`, [aDevice.id])).status,
      200,
    );
    assert.deepEqual(await entities(aGroup.id.id), [aDevice.id]);

    assert.equal((await create({ name: 'Tenant only', type: 'DEVICE' })).status, 409);
    assert.equal((await create({ name: 'All', type: 'DEVICE' })).status, 400);
    assert.equal((await create({ name: 'x', type: 'ASSET' })).status, 400);
    assert.equal((await create({ name: 'x', type: 'DEVICE' }, userB)).status, 403);
  });

  it('sharing: the customer lists the group, reads its devices, the best level wins', async () => {
    const device = await createDevice(t, 'shared-both');
    const read = (await (await create({ name: 'R', type: 'DEVICE' })).json()) as GroupJson;
    const write = (await (await create({ name: 'W', type: 'DEVICE' })).json()) as GroupJson;
    for (const g of [read, write])
      assert.equal(
        (await post(`/api/entityGroup/${g.id.id}/addEntities`, [device.id])).status,
        200,
      );
    const share = (g: GroupJson, readElseWrite: boolean) =>
      post(`/api/entityGroup/${g.id.id}/share`, {
        ownerId: { entityType: 'CUSTOMER', id: customerB },
        allUserGroup: true,
        readElseWrite,
      });
    const save = () =>
      post(`/api/plugins/telemetry/DEVICE/${device.id}/timeseries/ANY`, { t: 1 }, userB);

    assert.equal((await t.api(`/api/device/${device.id}`, { token: userB })).status, 404);
    assert.equal((await share(read, true)).status, 200);
    assert.equal((await t.api(`/api/device/${device.id}`, { token: userB })).status, 200);
    assert.equal((await save()).status, 403);
    assert.equal((await share(write, false)).status, 200);
    assert.equal((await save()).status, 200);

    const listed = (await (
      await t.api('/api/entityGroups/DEVICE', { token: userB })
    ).json()) as GroupJson[];
    assert.deepEqual(
      listed.map((g) => g.name),
      ['All', 'R', 'W'],
    );
    assert.deepEqual(listed[0].ownerId, { entityType: 'CUSTOMER', id: customerB });
    assert.deepEqual(await entities(read.id.id, userB), [device.id]);
    assert.equal((await share(write, true)).status, 200);
    assert.equal((await save()).status, 403);
    assert.equal(
      (
        await post(`/api/entityGroup/${read.id.id}/share`, {
          ownerId: { entityType: 'CUSTOMER', id: crypto.randomUUID() },
          allUserGroup: true,
          readElseWrite: true,
        })
      ).status,
      404,
    );

    // Emptying the group, or the device moving to another owner, ends the shared access.
    assert.equal(
      (await post(`/api/entityGroup/${write.id.id}/deleteEntities`, [device.id])).status,
      200,
    );
    assert.equal((await t.api(`/api/device/${device.id}`, { token: userB })).status, 200);
    await post(`/api/owner/CUSTOMER/${customerA}/DEVICE/${device.id}`, undefined);
    assert.equal((await t.api(`/api/device/${device.id}`, { token: userB })).status, 404);
    assert.deepEqual(await entities(read.id.id), []);

    // Deleting the group removes its shares.
    assert.equal(
      (await t.api(`/api/entityGroup/${read.id.id}`, { method: 'DELETE', token: userB })).status,
      403,
    );
    assert.equal(
      (await t.api(`/api/entityGroup/${read.id.id}`, { method: 'DELETE', token: admin })).status,
      200,
    );
    assert.equal((await t.api(`/api/entityGroup/${read.id.id}`, { token: admin })).status, 404);

    const logs = await t.api('/api/audit/logs?pageSize=100&page=0', { token: admin });
    const actions = ((await logs.json()) as { data: Array<{ actionType: string }> }).data.map(
      (l) => l.actionType,
    );
    assert.ok(actions.includes('ADDED_TO_ENTITY_GROUP'));
    assert.ok(actions.includes('REMOVED_FROM_ENTITY_GROUP'));
  });
});
