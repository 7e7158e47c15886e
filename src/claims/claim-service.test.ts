import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MIGRATIONS } from '../db/migrations/index.js';
import { migrate } from '../db/migrator.js';
import { type Db, openDb } from '../db/open.js';
import { DeviceProfileService } from '../devices/device-profile-service.js';
import { DeviceService } from '../devices/device-service.js';
import { NotFoundError, ValidationError } from '../errors.js';
import { EventBus } from '../events.js';
import { createLoggers } from '../logger.js';
import { TenantService } from '../tenant/tenant-service.js';
import { ClaimService } from './claim-service.js';

const DURATION = 10_000;

describe('ClaimService', () => {
  let dir: string;
  let db: Db;
  let devices: DeviceService;
  let tenants: TenantService;
  let claims: ClaimService;
  let n = 0;
  const newDevice = () => {
    const name = `claim-dev-${n++}`;
    return { id: devices.save({ name }).id.id, name };
  };
  /** Test setup for the users issue's customer assignment, which has no service yet. */
  const assignCustomer = (deviceId: string) => {
    const customerId = randomUUID();
    db.prepare('INSERT INTO customer (id, tenant_id, title, created_time) VALUES (?, ?, ?, ?)').run(
      customerId,
      tenants.id,
      `customer-${customerId}`,
      Date.now(),
    );
    db.prepare('UPDATE device SET customer_id = ? WHERE id = ?').run(customerId, deviceId);
    return customerId;
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-gw-claim-'));
    db = openDb({ dataDir: dir, durability: 'normal' });
    const loggers = createLoggers('silent');
    migrate(db, MIGRATIONS, loggers.db);
    const bus = new EventBus(loggers.gateway);
    tenants = new TenantService({ db });
    tenants.init();
    const profiles = new DeviceProfileService({ db, tenants });
    profiles.init();
    devices = new DeviceService({ db, tenants, profiles, bus });
    claims = new ClaimService({ db, devices, durationMs: DURATION, log: loggers.claims });
  });
  after(async () => {
    db.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('parses claim bodies: defaults, numeric strings, and type errors', () => {
    assert.deepEqual(claims.parseRequest(undefined), {});
    assert.deepEqual(claims.parseRequest({}), { secretKey: undefined, durationMs: undefined });
    assert.deepEqual(claims.parseRequest({ secretKey: 12, durationMs: '500' }), {
      secretKey: '12',
      durationMs: 500,
    });
    assert.throws(() => claims.parseRequest({ secretKey: [] }), ValidationError);
    assert.throws(() => claims.parseRequest({ durationMs: 'x' }), /durationMs/);
    assert.throws(() => claims.parseRequest('text'), ValidationError);
  });

  it('uses the configured duration and replaces a claim only once it has expired', (t) => {
    t.mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
    const d = newDevice();
    assert.equal(claims.claimByDevice(d.id, { secretKey: 'a' }), 'REGISTERED');
    assert.deepEqual(claims.pending(d.id), {
      deviceId: d.id,
      secretKey: 'a',
      expirationTime: 1_000_000 + DURATION,
      createdTime: 1_000_000,
    });
    t.mock.timers.tick(DURATION - 1);
    assert.equal(
      claims.claimByDevice(d.id, { secretKey: 'b', durationMs: -5 }),
      'KEPT_EARLIER_CLAIM',
    );
    assert.equal(claims.pending(d.id)?.secretKey, 'a');
    t.mock.timers.tick(1);
    assert.equal(claims.claimByDevice(d.id, { secretKey: 'b', durationMs: 50 }), 'REGISTERED');
    assert.equal(claims.pending(d.id)?.secretKey, 'b');
    assert.equal(claims.pending(d.id)?.expirationTime, 1_000_000 + DURATION + 50);
    t.mock.timers.tick(51);
    assert.equal(claims.purgeExpired() >= 1, true);
    assert.equal(claims.pending(d.id), undefined);
  });

  it('ignores a device-side claim when the device already has a customer', () => {
    const d = newDevice();
    assignCustomer(d.id);
    assert.equal(claims.claimByDevice(d.id, { secretKey: 's' }), 'ALREADY_OWNED');
    assert.equal(claims.pending(d.id), undefined);
  });

  it('throws NotFoundError for an unknown device id', () => {
    assert.throws(() => claims.claimByDevice(randomUUID()), NotFoundError);
  });

  it('completes the customer side: SUCCESS assigns in the same transaction and drops the claim', () => {
    const d = newDevice();
    claims.claimByDevice(d.id, { secretKey: 'right' });
    const assigned: string[] = [];
    const result = claims.claimByCustomer(d.name, 'right', (id) => {
      assigned.push(id);
      assignCustomer(id);
    });
    assert.deepEqual(result, { response: 'SUCCESS', deviceId: d.id });
    assert.deepEqual(assigned, [d.id]);
    assert.equal(claims.pending(d.id), undefined);
    assert.deepEqual(
      claims.claimByCustomer(d.name, 'right', () => assert.fail('must not assign')),
      { response: 'CLAIMED' },
    );
  });

  it('customer side: empty secrets match; wrong secret or expiry is FAILURE and discards the claim', (t) => {
    const empty = newDevice();
    claims.claimByDevice(empty.id);
    assert.equal(claims.claimByCustomer(empty.name, undefined, () => {}).response, 'SUCCESS');

    const wrong = newDevice();
    claims.claimByDevice(wrong.id, { secretKey: 'right' });
    assert.deepEqual(
      claims.claimByCustomer(wrong.name, 'wrong', () => {}),
      { response: 'FAILURE' },
    );
    assert.equal(claims.pending(wrong.id), undefined);
    assert.deepEqual(
      claims.claimByCustomer(wrong.name, 'right', () => {}),
      { response: 'FAILURE' },
    );

    t.mock.timers.enable({ apis: ['Date'], now: 5_000_000 });
    const late = newDevice();
    claims.claimByDevice(late.id, { secretKey: 'k', durationMs: 100 });
    t.mock.timers.tick(100);
    assert.deepEqual(
      claims.claimByCustomer(late.name, 'k', () => {}),
      { response: 'FAILURE' },
    );
  });

  it('customer side: an assignment that throws leaves the claim in place', () => {
    const d = newDevice();
    claims.claimByDevice(d.id, { secretKey: 'k' });
    assert.throws(() =>
      claims.claimByCustomer(d.name, 'k', () => {
        throw new Error('boom');
      }),
    );
    assert.equal(claims.pending(d.id)?.secretKey, 'k');
    assert.throws(() => claims.claimByCustomer('no such device', 'k', () => {}), NotFoundError);
    assert.equal(claims.cancel(d.id), true);
    assert.equal(claims.cancel(d.id), false);
  });
});
