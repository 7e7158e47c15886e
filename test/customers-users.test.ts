import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NULL_UUID } from '../src/common/entity.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

interface Customer {
  id: { entityType: string; id: string };
  createdTime: number;
  tenantId: { entityType: string; id: string };
  title: string;
  name: string;
  email: string | null;
  city: string | null;
  version: number;
}

interface User {
  id: { entityType: string; id: string };
  tenantId: { entityType: string; id: string };
  customerId: { entityType: string; id: string };
  email: string;
  name: string;
  authority: string;
  firstName: string | null;
  phone: string | null;
  additionalInfo: Record<string, unknown>;
  version: number;
}

interface Page<T> {
  data: T[];
  totalPages: number;
  totalElements: number;
  hasNext: boolean;
}

describe('customers', () => {
  let t: TestGateway;
  let admin: string;
  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  it('creates, reads and updates a customer in ThingsBoard JSON', async () => {
    const res = await t.api('/api/customer', {
      body: { title: 'Acme', email: 'ops@acme.example', city: 'Berlin', additionalInfo: { a: 1 } },
      token: admin,
    });
    assert.equal(res.status, 200);
    const c = (await res.json()) as Customer;
    assert.equal(c.id.entityType, 'CUSTOMER');
    assert.equal(c.tenantId.entityType, 'TENANT');
    assert.equal(c.title, 'Acme');
    assert.equal(c.name, 'Acme');
    assert.equal(c.city, 'Berlin');
    assert.equal(c.version, 1);
    assert.ok(c.createdTime > 0);

    const got = (await (
      await t.api(`/api/customer/${c.id.id}`, { token: admin })
    ).json()) as Customer;
    assert.deepEqual(got, c);

    const upd = await t.api('/api/customer', { body: { ...c, city: 'Hamburg' }, token: admin });
    assert.equal(upd.status, 200);
    const updated = (await upd.json()) as Customer;
    assert.equal(updated.city, 'Hamburg');
    assert.equal(updated.version, 2);

    const stale = await t.api('/api/customer', { body: { ...c, city: 'Munich' }, token: admin });
    assert.equal(stale.status, 409, 'an old version is a conflict');
  });

  it('keeps titles unique and validates input', async () => {
    await createCustomer(t, 'Unique');
    const dup = await t.api('/api/customer', { body: { title: 'Unique' }, token: admin });
    assert.equal(dup.status, 400);
    assert.equal(
      ((await dup.json()) as { message: string }).message,
      'Customer with such title already exists!',
    );
    const empty = await t.api('/api/customer', { body: { title: ' ' }, token: admin });
    assert.equal(empty.status, 400);
    const badEmail = await t.api('/api/customer', {
      body: { title: 'X', email: 'nope' },
      token: admin,
    });
    assert.equal(badEmail.status, 400);
    const unknown = await t.api('/api/customer', {
      body: {
        id: { entityType: 'CUSTOMER', id: '3f6a0c1e-0000-4000-8000-000000000000' },
        title: 'Ghost',
      },
      token: admin,
    });
    assert.equal(unknown.status, 404);
    assert.equal((await t.api('/api/customer/not-a-uuid', { token: admin })).status, 400);
  });

  it('pages customers with textSearch and sorting', async () => {
    for (const title of ['Page 1', 'Page 2', 'Page 3']) await createCustomer(t, title);
    const res = await t.api(
      '/api/customers?pageSize=2&page=0&textSearch=page&sortProperty=title&sortOrder=DESC',
      {
        token: admin,
      },
    );
    assert.equal(res.status, 200);
    const page = (await res.json()) as Page<Customer>;
    assert.deepEqual(
      page.data.map((c) => c.title),
      ['Page 3', 'Page 2'],
    );
    assert.equal(page.totalElements, 3);
    assert.equal(page.totalPages, 2);
    assert.equal(page.hasNext, true);
    assert.equal((await t.api('/api/customers?page=0', { token: admin })).status, 400);
  });

  it('deleting a customer deletes its users and unassigns its devices', async () => {
    const id = await createCustomer(t, 'Doomed');
    const userId = await createUser(t, 'doomed@example.com', id);
    const device = await createDevice(t, 'doomed-device');
    // @NOTE: assignment endpoints come with a later item of the issue; set it directly.
    t.gw.db.prepare('UPDATE device SET customer_id = ? WHERE id = ?').run(id, device.id);
    const del = await t.api(`/api/customer/${id}`, { method: 'DELETE', token: admin });
    assert.equal(del.status, 200);
    assert.equal((await t.api(`/api/customer/${id}`, { token: admin })).status, 404);
    assert.equal((await t.api(`/api/user/${userId}`, { token: admin })).status, 404);
    const d = (await (await t.api(`/api/device/${device.id}`, { token: admin })).json()) as {
      customerId: { id: string };
    };
    assert.equal(d.customerId.id, NULL_UUID);
    assert.equal(
      (await t.api(`/api/customer/${id}`, { method: 'DELETE', token: admin })).status,
      404,
    );
  });
});

describe('users', () => {
  let t: TestGateway;
  let admin: string;
  let customerId: string;
  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    customerId = await createCustomer(t, 'Users Inc');
  });
  after(() => t.close());

  it('creates a customer user in ThingsBoard JSON, disabled until activated', async () => {
    const res = await t.api('/api/user?sendActivationMail=false', {
      body: {
        email: 'jane@example.com',
        authority: 'CUSTOMER_USER',
        customerId: { entityType: 'CUSTOMER', id: customerId },
        firstName: 'Jane',
        lastName: 'Doe',
        phone: '+49 30 1234',
        additionalInfo: { description: 'ops', userCredentialsEnabled: true },
      },
      token: admin,
    });
    assert.equal(res.status, 200);
    const u = (await res.json()) as User;
    assert.equal(u.id.entityType, 'USER');
    assert.equal(u.customerId.id, customerId);
    assert.equal(u.email, 'jane@example.com');
    assert.equal(u.name, 'jane@example.com');
    assert.equal(u.authority, 'CUSTOMER_USER');
    assert.equal(u.phone, '+49 30 1234');
    assert.deepEqual(u.additionalInfo, { description: 'ops', userCredentialsEnabled: false });
    assert.equal(u.version, 1);

    const upd = await t.api('/api/user', { body: { ...u, firstName: 'Janet' }, token: admin });
    assert.equal(upd.status, 200);
    const updated = (await upd.json()) as User;
    assert.equal(updated.firstName, 'Janet');
    assert.equal(updated.version, 2);
    const stale = await t.api('/api/user', { body: { ...u, firstName: 'J' }, token: admin });
    assert.equal(stale.status, 409);
    const move = await t.api('/api/user', {
      body: { ...updated, authority: 'TENANT_ADMIN', customerId: null },
      token: admin,
    });
    assert.equal(move.status, 400, "a user's authority cannot change");
  });

  it('validates authority, customer and email', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ email: 'a@example.com', authority: 'CUSTOMER_USER' }, /needs a customerId/],
      [
        { email: 'a@example.com', authority: 'CUSTOMER_USER', customerId: { id: NULL_UUID } },
        /needs a customerId/,
      ],
      [
        {
          email: 'a@example.com',
          authority: 'CUSTOMER_USER',
          customerId: { id: '3f6a0c1e-0000-4000-8000-000000000000' },
        },
        /Customer with id/,
      ],
      [
        { email: 'a@example.com', authority: 'TENANT_ADMIN', customerId: { id: customerId } },
        /cannot belong/,
      ],
      [{ email: 'not-an-email', authority: 'TENANT_ADMIN' }, /email/],
      [{ email: 'a@example.com', authority: 'SYS_ADMIN' }, /authority/],
      [
        { email: 'jane@example.com', authority: 'CUSTOMER_USER', customerId: { id: customerId } },
        /already present/,
      ],
    ];
    for (const [body, message] of cases) {
      const res = await t.api('/api/user?sendActivationMail=false', { body, token: admin });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(((await res.json()) as { message: string }).message, message);
    }
    const badFlag = await t.api('/api/user?sendActivationMail=maybe', {
      body: { email: 'b@example.com', authority: 'TENANT_ADMIN' },
      token: admin,
    });
    assert.equal(badFlag.status, 400);
  });

  it('creates a second tenant administrator who can log in after activation', async () => {
    const id = await createUser(t, 'second.admin@example.com');
    const token = await activateUser(t, id, 'admin-two-password');
    const list = await t.api('/api/customers?pageSize=10&page=0', { token });
    assert.equal(list.status, 200);
  });

  it('with sendActivationMail (the default) creates the user and logs that no mail was sent', async () => {
    const res = await t.api('/api/user', {
      body: {
        email: 'mailme@example.com',
        authority: 'CUSTOMER_USER',
        customerId: { id: customerId },
      },
      token: admin,
    });
    assert.equal(res.status, 200);
    const { id } = (await res.json()) as User;
    const line = t.logs.find(
      (l) => typeof l.msg === 'string' && l.msg.startsWith('no activation mail sent'),
    );
    assert.ok(line);
    assert.equal(line.userId, id.id);
  });

  it('lists all users for the tenant admin and per customer, with paging', async () => {
    const all = (await (
      await t.api('/api/users?pageSize=100&page=0&sortProperty=email', { token: admin })
    ).json()) as Page<User>;
    const emails = all.data.map((u) => u.email);
    assert.ok(emails.includes('admin@test.local'));
    assert.ok(emails.includes('jane@example.com'));
    assert.deepEqual(emails, [...emails].sort());
    const res = await t.api(`/api/customer/${customerId}/users?pageSize=1&page=0&textSearch=JAN`, {
      token: admin,
    });
    assert.equal(res.status, 200);
    const page = (await res.json()) as Page<User>;
    assert.deepEqual(
      page.data.map((u) => u.email),
      ['jane@example.com'],
    );
    assert.equal(page.totalElements, 1);
    assert.equal(page.hasNext, false);
    const missing = await t.api(
      '/api/customer/3f6a0c1e-0000-4000-8000-000000000000/users?pageSize=1&page=0',
      {
        token: admin,
      },
    );
    assert.equal(missing.status, 404);
  });

  it('deletes a user, but not oneself', async () => {
    const id = await createUser(t, 'gone@example.com', customerId);
    assert.equal((await t.api(`/api/user/${id}`, { method: 'DELETE', token: admin })).status, 200);
    assert.equal((await t.api(`/api/user/${id}`, { token: admin })).status, 404);
    assert.equal((await t.api(`/api/user/${id}`, { method: 'DELETE', token: admin })).status, 404);
    const me = (await (await t.api('/api/auth/user', { token: admin })).json()) as User;
    const self = await t.api(`/api/user/${me.id.id}`, { method: 'DELETE', token: admin });
    assert.equal(self.status, 400);
  });
});
