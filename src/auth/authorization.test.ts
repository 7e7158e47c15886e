import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ForbiddenError, NotFoundError } from '../errors.js';
import type { Principal } from './auth-service.js';
import {
  assertCanReadCustomer,
  assertCanReadUser,
  assertCanWriteUser,
  assertTenantAdmin,
  canReadCustomer,
  canReadUser,
} from './authorization.js';

const admin: Principal = {
  userId: 'admin',
  email: 'admin@x',
  authority: 'TENANT_ADMIN',
  tenantId: 't',
  customerId: null,
};
const cu: Principal = {
  userId: 'me',
  email: 'me@x',
  authority: 'CUSTOMER_USER',
  tenantId: 't',
  customerId: 'A',
};

describe('authorization', () => {
  it('only the tenant admin passes assertTenantAdmin (403 otherwise)', () => {
    assertTenantAdmin(admin);
    assert.throws(() => assertTenantAdmin(cu), ForbiddenError);
  });

  it('a customer user reads its own customer; others are 404', () => {
    assert.equal(canReadCustomer(admin, 'B'), true);
    assert.equal(canReadCustomer(cu, 'A'), true);
    assert.equal(canReadCustomer(cu, 'B'), false);
    assert.throws(() => assertCanReadCustomer(cu, 'B'), NotFoundError);
  });

  it('a customer user reads itself and its customer, writes only itself', () => {
    const self = { id: 'me', customerId: 'A' };
    const peer = { id: 'peer', customerId: 'A' };
    const other = { id: 'other', customerId: 'B' };
    const tenantAdmin = { id: 'admin', customerId: null };
    assert.equal(canReadUser(cu, self), true);
    assert.equal(canReadUser(cu, peer), true);
    assert.equal(canReadUser(cu, other), false);
    assert.equal(canReadUser(cu, tenantAdmin), false);
    assert.equal(canReadUser(admin, other), true);
    assertCanWriteUser(cu, self);
    assertCanWriteUser(admin, other);
    assert.throws(() => assertCanWriteUser(cu, peer), ForbiddenError);
    assert.throws(() => assertCanWriteUser(cu, other), NotFoundError);
    assert.throws(() => assertCanReadUser(cu, tenantAdmin), NotFoundError);
  });

  it('a customer user without a customer sees no other user', () => {
    const orphan: Principal = { ...cu, customerId: null };
    assert.equal(canReadUser(orphan, { id: 'admin', customerId: null }), false);
  });
});
