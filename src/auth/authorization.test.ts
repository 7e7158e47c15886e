import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ForbiddenError, NotFoundError } from '../errors.js';
import type { Principal } from './auth-service.js';
import {
  assertCanClaimDevices,
  assertCanManageDevice,
  assertCanReadCustomer,
  assertCanReadDevice,
  assertCanReadUser,
  assertCanWriteDevice,
  assertCanWriteUser,
  assertOwnerAttributeAccess,
  assertTenantAdmin,
  canReadCustomer,
  canReadDashboard,
  canReadUser,
  deviceAccess,
  type OwnerRef,
  ownerAttributeAccess,
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

  it('device access: tenant admin writes all, a customer user its customer own devices', () => {
    const own = { id: 'd1', customerId: 'A' };
    const foreign = { id: 'd2', customerId: 'B' };
    const tenants = { id: 'd3', customerId: null };
    assert.equal(deviceAccess(admin, foreign), 'write');
    assert.equal(deviceAccess(admin, tenants), 'write');
    assert.equal(deviceAccess(cu, own), 'write');
    assert.equal(deviceAccess(cu, foreign), 'none');
    assert.equal(deviceAccess(cu, tenants), 'none');
    assert.equal(deviceAccess({ ...cu, customerId: null }, tenants), 'none');
    assertCanReadDevice(cu, own);
    assertCanWriteDevice(cu, own);
    assert.throws(() => assertCanReadDevice(cu, foreign), NotFoundError);
    assert.throws(() => assertCanWriteDevice(cu, tenants), NotFoundError);
    assert.throws(() => assertCanManageDevice(cu, own), ForbiddenError);
    assert.throws(() => assertCanManageDevice(cu, foreign), NotFoundError);
    assertCanManageDevice(admin, foreign);
  });

  it('sharing plugs in: a shared read-only device reads but refuses writes with 403', () => {
    const foreign = { id: 'd2', customerId: 'B' };
    const readOnly = () => 'read' as const;
    assert.equal(deviceAccess(cu, foreign, readOnly), 'read');
    assert.equal(
      deviceAccess(admin, foreign, () => 'none'),
      'write',
    );
    assertCanReadDevice(cu, foreign, readOnly);
    assert.throws(() => assertCanWriteDevice(cu, foreign, readOnly), ForbiddenError);
  });

  it('a shared device is 403, not 404, for management; a shared dashboard reads', () => {
    const shared = { id: 'd3', customerId: null };
    assert.throws(() => assertCanManageDevice(cu, shared, () => 'write'), ForbiddenError);
    assert.throws(() => assertCanManageDevice(cu, shared), NotFoundError);
    const board = { id: 'b', customerIds: [] };
    assert.equal(canReadDashboard(cu, board), false);
    assert.equal(canReadDashboard(cu, { ...board, sharedWithCaller: true }), true);
    assert.equal(
      canReadDashboard({ ...cu, customerId: null }, { ...board, sharedWithCaller: true }),
      false,
    );
  });

  it('owner attributes: the tenant admin all; a customer user its own user and its customer', () => {
    const me: OwnerRef = { type: 'USER', id: 'me', user: { id: 'me', customerId: 'A' } };
    const peer: OwnerRef = { type: 'USER', id: 'p', user: { id: 'p', customerId: 'A' } };
    const other: OwnerRef = { type: 'USER', id: 'o', user: { id: 'o', customerId: 'B' } };
    const own: OwnerRef = { type: 'CUSTOMER', id: 'A' };
    const foreign: OwnerRef = { type: 'CUSTOMER', id: 'B' };
    const tenant: OwnerRef = { type: 'TENANT', id: 't' };
    for (const o of [me, peer, other, own, foreign, tenant])
      assert.equal(ownerAttributeAccess(admin, o), 'write');
    assert.deepEqual(
      [me, peer, other, own, foreign, tenant].map((o) => ownerAttributeAccess(cu, o)),
      ['write', 'none', 'none', 'read', 'none', 'none'],
    );
    // REST: 404 for what the caller cannot see, 403 for what it sees without the right.
    assertOwnerAttributeAccess(cu, me, 'write');
    assertOwnerAttributeAccess(cu, own, 'read');
    assert.throws(() => assertOwnerAttributeAccess(cu, own, 'write'), ForbiddenError);
    assert.throws(() => assertOwnerAttributeAccess(cu, peer, 'read'), ForbiddenError);
    assert.throws(() => assertOwnerAttributeAccess(cu, tenant, 'read'), ForbiddenError);
    assert.throws(() => assertOwnerAttributeAccess(cu, other, 'read'), NotFoundError);
    assert.throws(() => assertOwnerAttributeAccess(cu, foreign, 'read'), NotFoundError);
  });

  it('only a customer user with a customer claims devices', () => {
    assert.equal(assertCanClaimDevices(cu), 'A');
    assert.throws(() => assertCanClaimDevices(admin), ForbiddenError);
    assert.throws(() => assertCanClaimDevices({ ...cu, customerId: null }), ForbiddenError);
  });
});
