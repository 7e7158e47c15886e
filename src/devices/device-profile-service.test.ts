import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MIGRATIONS } from '../db/migrations/index.js';
import { migrate } from '../db/migrator.js';
import { type Db, openDb } from '../db/open.js';
import { ValidationError } from '../errors.js';
import { EventBus, type GatewayEvents } from '../events.js';
import { createLoggers } from '../logger.js';
import { TenantService } from '../tenant/tenant-service.js';
import { DeviceProfileService } from './device-profile-service.js';

describe('DeviceProfileService delete and default', () => {
  let dir: string;
  let db: Db;
  let bus: EventBus;
  let tenants: TenantService;
  let profiles: DeviceProfileService;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-gw-profiles-'));
    db = openDb({ dataDir: dir, durability: 'normal' });
    const loggers = createLoggers('silent');
    migrate(db, MIGRATIONS, loggers.db);
    bus = new EventBus(loggers.gateway);
    tenants = new TenantService({ db });
    tenants.init();
    // No `otaRemove`: a profile that still owns packages cannot be deleted.
    profiles = new DeviceProfileService({ db, tenants, bus });
    profiles.init();
  });
  after(async () => {
    db.close();
    await rm(dir, { recursive: true, force: true });
  });

  const insertPackage = (profileId: string) =>
    db
      .prepare(
        `INSERT INTO ota_package (id, tenant_id, device_profile_id, type, title, version, created_time)
         VALUES (?, ?, ?, 'FIRMWARE', ?, '1', ?)`,
      )
      .run(randomUUID(), tenants.id, profileId, `fw-${randomUUID()}`, Date.now());

  it('refuses, without deleting anything, when the profile still owns OTA packages', () => {
    const p = profiles.save({ name: 'Owns packages' });
    insertPackage(p.id.id);
    assert.throws(
      () => profiles.delete(p.id.id),
      (err) =>
        err instanceof ValidationError &&
        /still referenced by other entities/.test(err.message) &&
        err.cause !== undefined,
    );
    assert.ok(profiles.find(p.id.id));
  });

  it('emits deviceProfile.deleted after a delete', () => {
    const seen: Array<GatewayEvents['deviceProfile.deleted']> = [];
    bus.on('test', 'deviceProfile.deleted', (e) => seen.push(e));
    const p = profiles.save({ name: 'Short lived' });
    profiles.delete(p.id.id);
    assert.deepEqual(seen, [{ profileId: p.id.id }]);
    bus.removeOwner('test');
  });

  it('keeps exactly one default while switching', () => {
    const first = profiles.getDefault();
    const next = profiles.save({ name: 'Next default' });
    assert.equal(profiles.setDefault(next.id.id).default, true);
    assert.equal(profiles.setDefault(next.id.id).default, true);
    assert.equal(profiles.getDefault().id.id, next.id.id);
    assert.equal(profiles.defaultInfo().name, 'Next default');
    assert.equal(profiles.get(first.id.id).default, false);
    // Saving the old default does not make it default again.
    assert.equal(profiles.save({ id: first.id, name: first.name }).default, false);
    const n = db.prepare('SELECT count(*) AS n FROM device_profile WHERE is_default = 1').get() as {
      n: number;
    };
    assert.equal(n.n, 1);
  });
});
