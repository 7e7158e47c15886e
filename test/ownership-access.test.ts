import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NULL_UUID } from '../src/common/entity.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

interface DeviceJson {
  id: { id: string };
  name: string;
  customerId: { entityType: string; id: string };
}

describe('device ownership and access rules over HTTP', () => {
  let t: TestGateway;
  let admin: string;
  let customerA: string;
  let customerB: string;
  let userA: string;
  let userB: string;
  let own: { id: string; token: string };
  let foreign: { id: string; token: string };
  let tenants: { id: string; token: string };

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    customerA = await createCustomer(t, 'Owner A');
    customerB = await createCustomer(t, 'Owner B');
    userA = await activateUser(t, await createUser(t, 'a@example.com', customerA), 'password-a-1');
    userB = await activateUser(t, await createUser(t, 'b@example.com', customerB), 'password-b-1');
    own = await createDevice(t, 'own-device');
    foreign = await createDevice(t, 'foreign-device');
    tenants = await createDevice(t, 'tenant-device');
  });
  after(() => t.close());

  const device = async (id: string): Promise<DeviceJson> =>
    (await (await t.api(`/api/device/${id}`, { token: admin })).json()) as DeviceJson;

  const auditActions = async (): Promise<string[]> => {
    const res = await t.api('/api/audit/logs?pageSize=100&page=0', { token: admin });
    const page = (await res.json()) as { data: Array<{ actionType: string }> };
    return page.data.map((l) => l.actionType);
  };

  it('owner change to a customer and back to the tenant', async () => {
    const toA = await t.api(`/api/owner/CUSTOMER/${customerA}/DEVICE/${own.id}`, {
      method: 'POST',
      token: admin,
    });
    assert.equal(toA.status, 200);
    assert.equal((await device(own.id)).customerId.id, customerA);

    const me = (await (await t.api('/api/auth/user', { token: admin })).json()) as {
      tenantId: { id: string };
    };
    const back = await t.api(`/api/owner/TENANT/${me.tenantId.id}/DEVICE/${own.id}`, {
      method: 'POST',
      token: admin,
    });
    assert.equal(back.status, 200);
    assert.deepEqual((await device(own.id)).customerId, { entityType: 'CUSTOMER', id: NULL_UUID });

    const unknownCustomer = await t.api(
      `/api/owner/CUSTOMER/${crypto.randomUUID()}/DEVICE/${own.id}`,
      { method: 'POST', token: admin },
    );
    assert.equal(unknownCustomer.status, 404);
    const otherTenant = await t.api(`/api/owner/TENANT/${crypto.randomUUID()}/DEVICE/${own.id}`, {
      method: 'POST',
      token: admin,
    });
    assert.equal(otherTenant.status, 404);
    const asset = await t.api(`/api/owner/CUSTOMER/${customerA}/ASSET/${crypto.randomUUID()}`, {
      method: 'POST',
      token: admin,
    });
    assert.equal(asset.status, 400);

    // Owner change is the tenant's; the customer user cannot even move its own device.
    await t.api(`/api/owner/CUSTOMER/${customerA}/DEVICE/${own.id}`, {
      method: 'POST',
      token: admin,
    });
    const byUser = await t.api(`/api/owner/CUSTOMER/${customerB}/DEVICE/${own.id}`, {
      method: 'POST',
      token: userA,
    });
    assert.equal(byUser.status, 403);
    assert.ok((await auditActions()).includes('CHANGE_OWNER'));
  });

  it('owner change of a dashboard replaces its customer assignments', async () => {
    const created = await t.api('/api/dashboard', { body: { title: 'Owned board' }, token: admin });
    assert.equal(created.status, 200);
    const id = ((await created.json()) as { id: { id: string } }).id.id;
    const assigned = async () => {
      const res = await t.api(`/api/dashboard/${id}`, { token: admin });
      const d = (await res.json()) as { assignedCustomers: Array<{ customerId: { id: string } }> };
      return d.assignedCustomers.map((a) => a.customerId.id).sort();
    };
    await t.api(`/api/customer/${customerB}/dashboard/${id}`, { method: 'POST', token: admin });
    const toA = await t.api(`/api/owner/CUSTOMER/${customerA}/DASHBOARD/${id}`, {
      method: 'POST',
      token: admin,
    });
    assert.equal(toA.status, 200);
    assert.deepEqual(await assigned(), [customerA]);
    assert.equal((await t.api(`/api/dashboard/${id}`, { token: userA })).status, 200);
    assert.equal((await t.api(`/api/dashboard/${id}`, { token: userB })).status, 404);
    const tenantId = (
      (await (await t.api('/api/auth/user', { token: admin })).json()) as {
        tenantId: { id: string };
      }
    ).tenantId.id;
    const back = await t.api(`/api/owner/TENANT/${tenantId}/DASHBOARD/${id}`, {
      method: 'POST',
      token: admin,
    });
    assert.equal(back.status, 200);
    assert.deepEqual(await assigned(), []);
    assert.equal((await t.api(`/api/dashboard/${id}`, { token: userA })).status, 404);
  });

  it('CE assign and unassign; unassigning an unassigned device is 400', async () => {
    const assign = await t.api(`/api/customer/${customerB}/device/${foreign.id}`, {
      method: 'POST',
      token: admin,
    });
    assert.equal(assign.status, 200);
    assert.equal(((await assign.json()) as DeviceJson).customerId.id, customerB);

    const tmp = await createDevice(t, 'assign-roundtrip');
    await t.api(`/api/customer/${customerB}/device/${tmp.id}`, { method: 'POST', token: admin });
    const unassign = await t.api(`/api/customer/device/${tmp.id}`, {
      method: 'DELETE',
      token: admin,
    });
    assert.equal(unassign.status, 200);
    assert.equal(((await unassign.json()) as DeviceJson).customerId.id, NULL_UUID);
    const again = await t.api(`/api/customer/device/${tmp.id}`, {
      method: 'DELETE',
      token: admin,
    });
    assert.equal(again.status, 400);
    assert.equal(
      ((await again.json()) as { message: string }).message,
      "Device isn't assigned to any customer!",
    );

    const unknown = await t.api(`/api/customer/${crypto.randomUUID()}/device/${tmp.id}`, {
      method: 'POST',
      token: admin,
    });
    assert.equal(unknown.status, 404);
    // Assigning is the tenant's: 403 on the caller's own device, 404 on one it cannot see.
    const userAssign = await t.api(`/api/customer/${customerA}/device/${own.id}`, {
      method: 'POST',
      token: userA,
    });
    assert.equal(userAssign.status, 403);
    const userUnassign = await t.api(`/api/customer/device/${foreign.id}`, {
      method: 'DELETE',
      token: userA,
    });
    assert.equal(userUnassign.status, 404);
    const actions = await auditActions();
    assert.ok(actions.includes('ASSIGNED_TO_CUSTOMER'));
    assert.ok(actions.includes('UNASSIGNED_FROM_CUSTOMER'));
  });

  it("lists a customer's devices: tenant admin any customer, a customer user only its own", async () => {
    const list = async (customerId: string, token: string) =>
      t.api(`/api/customer/${customerId}/devices?pageSize=10&page=0`, { token });
    const byAdmin = await list(customerA, admin);
    assert.equal(byAdmin.status, 200);
    const page = (await byAdmin.json()) as { data: DeviceJson[]; totalElements: number };
    assert.deepEqual(
      page.data.map((d) => d.name),
      ['own-device'],
    );
    assert.equal(page.totalElements, 1);
    const byUser = (await (await list(customerA, userA)).json()) as { data: DeviceJson[] };
    assert.deepEqual(
      byUser.data.map((d) => d.name),
      ['own-device'],
    );
    assert.equal((await list(customerB, userA)).status, 404);
    assert.equal((await list(crypto.randomUUID(), admin)).status, 404);
    assert.equal(
      (await t.api('/api/tenant/devices?pageSize=10&page=0', { token: userA })).status,
      403,
    );
  });

  it('a customer user reads and writes its own device: 200', async () => {
    const get = await t.api(`/api/device/${own.id}`, { token: userA });
    assert.equal(get.status, 200);
    const creds = await t.api(`/api/device/${own.id}/credentials`, { token: userA });
    assert.equal(creds.status, 200);
    assert.equal(((await creds.json()) as { credentialsId: string }).credentialsId, own.token);

    const base = `/api/plugins/telemetry/DEVICE/${own.id}`;
    const save = await t.api(`${base}/timeseries/ANY`, { body: { temp: 21.5 }, token: userA });
    assert.equal(save.status, 200);
    const ts = await t.api(`${base}/values/timeseries?keys=temp`, { token: userA });
    assert.equal(ts.status, 200);
    const tsBody = (await ts.json()) as Record<string, Array<{ value: unknown }>>;
    assert.equal(String(tsBody.temp?.[0]?.value), '21.5');
    assert.equal((await t.api(`${base}/keys/timeseries`, { token: userA })).status, 200);

    const attr = await t.api(`${base}/attributes/SERVER_SCOPE`, {
      body: { location: 'hall' },
      token: userA,
    });
    assert.equal(attr.status, 200);
    const attrs = await t.api(`${base}/values/attributes/SERVER_SCOPE`, { token: userA });
    assert.equal(attrs.status, 200);
    const list = (await attrs.json()) as Array<{ key: string; value: unknown }>;
    assert.ok(list.some((kv) => kv.key === 'location' && kv.value === 'hall'));
    const delAttr = await t.api(`${base}/SERVER_SCOPE?keys=location`, {
      method: 'DELETE',
      token: userA,
    });
    assert.equal(delAttr.status, 200);

    const rpc = await t.api(`/api/rpc/oneway/${own.id}`, {
      body: { method: 'reboot', params: {}, persistent: true },
      token: userA,
    });
    assert.equal(rpc.status, 200);
    const { rpcId } = (await rpc.json()) as { rpcId: string };
    assert.equal((await t.api(`/api/rpc/persistent/${rpcId}`, { token: userA })).status, 200);
    const rpcs = await t.api(`/api/rpc/persistent/device/${own.id}?pageSize=10&page=0`, {
      token: userA,
    });
    assert.equal(rpcs.status, 200);
    // Another customer's user does not see that RPC.
    assert.equal((await t.api(`/api/rpc/persistent/${rpcId}`, { token: userB })).status, 404);
    assert.equal(
      (await t.api(`/api/rpc/persistent/${rpcId}`, { method: 'DELETE', token: userB })).status,
      404,
    );
    assert.equal(
      (await t.api(`/api/rpc/persistent/${rpcId}`, { method: 'DELETE', token: userA })).status,
      200,
    );

    // Update (WRITE) of an existing device is allowed; the owner does not change.
    const update = await t.api('/api/device', {
      body: { id: { entityType: 'DEVICE', id: own.id }, name: 'own-device', label: 'mine' },
      token: userA,
    });
    assert.equal(update.status, 200);
    assert.equal(((await update.json()) as DeviceJson).customerId.id, customerA);
  });

  it("another customer's or the tenant's device is 404 for a customer user", async () => {
    for (const d of [foreign, tenants]) {
      const base = `/api/plugins/telemetry/DEVICE/${d.id}`;
      const calls: Array<[string, { method?: string; body?: unknown }]> = [
        [`/api/device/${d.id}`, {}],
        [`/api/device/${d.id}/credentials`, {}],
        [`${base}/values/timeseries?keys=temp`, {}],
        [`${base}/keys/timeseries`, {}],
        [`${base}/timeseries/ANY`, { body: { temp: 1 } }],
        [`${base}/timeseries/delete?keys=temp&deleteAllDataForKeys=true`, { method: 'DELETE' }],
        [`${base}/values/attributes`, {}],
        [`${base}/keys/attributes`, {}],
        [`${base}/attributes/SHARED_SCOPE`, { body: { a: 1 } }],
        [`${base}/SHARED_SCOPE?keys=a`, { method: 'DELETE' }],
        [`/api/rpc/oneway/${d.id}`, { body: { method: 'm', params: {}, persistent: true } }],
        [`/api/rpc/twoway/${d.id}`, { body: { method: 'm', params: {}, persistent: true } }],
        [`/api/rpc/persistent/device/${d.id}?pageSize=10&page=0`, {}],
        [`/api/device/${d.id}`, { method: 'DELETE' }],
        ['/api/device', { body: { id: { entityType: 'DEVICE', id: d.id }, name: 'x' } }],
        [
          '/api/device/credentials',
          { body: { deviceId: { id: d.id }, credentialsType: 'ACCESS_TOKEN', credentialsId: 'x' } },
        ],
      ];
      for (const [path, init] of calls) {
        const res = await t.api(path, { ...init, token: userA });
        assert.equal(res.status, 404, `${init.method ?? (init.body ? 'POST' : 'GET')} ${path}`);
        const body = (await res.json()) as { message: string; errorCode: number };
        assert.equal(body.errorCode, 32);
        assert.doesNotMatch(body.message, /permission/i);
      }
    }
    // An unknown device looks the same as a foreign one.
    const missing = await t.api(`/api/device/${crypto.randomUUID()}`, { token: userA });
    assert.equal(missing.status, 404);
  });

  it('tenant-only operations on its own device are 403 for a customer user', async () => {
    const calls: Array<[string, { method?: string; body?: unknown }]> = [
      [`/api/device/${own.id}`, { method: 'DELETE' }],
      ['/api/device', { body: { name: 'new-by-customer' } }],
      [
        '/api/device/credentials',
        { body: { deviceId: { id: own.id }, credentialsType: 'ACCESS_TOKEN', credentialsId: 'y' } },
      ],
      [`/api/device?accessToken=zzz`, { body: { id: { id: own.id }, name: 'own-device' } }],
      ['/api/tenant/devices?pageSize=10&page=0', {}],
    ];
    for (const [path, init] of calls) {
      const res = await t.api(path, { ...init, token: userA });
      assert.equal(res.status, 403, `${init.method ?? (init.body ? 'POST' : 'GET')} ${path}`);
    }
    // The device survived and the tenant admin still manages everything.
    assert.equal((await t.api(`/api/device/${own.id}`, { token: admin })).status, 200);
    const base = `/api/plugins/telemetry/DEVICE/${foreign.id}`;
    assert.equal(
      (await t.api(`${base}/timeseries/ANY`, { body: { temp: 3 }, token: admin })).status,
      200,
    );
  });
});
