import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MIGRATIONS } from '../db/migrations/index.js';
import { migrate } from '../db/migrator.js';
import { type Db, openDb } from '../db/open.js';
import { DeviceProfileService } from '../devices/device-profile-service.js';
import { DeviceService } from '../devices/device-service.js';
import { NotFoundError } from '../errors.js';
import { EventBus, type GatewayEvents } from '../events.js';
import { createLoggers } from '../logger.js';
import { TenantService } from '../tenant/tenant-service.js';
import { AttributeService, type SharedAttributeUpdate } from './attribute-service.js';

describe('AttributeService', () => {
  let dir: string;
  let db: Db;
  let bus: EventBus;
  let devices: DeviceService;
  let attrs: AttributeService;
  let n = 0;
  const newDevice = () => devices.save({ name: `svc-dev-${n++}` }).id.id;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-gw-attr-'));
    db = openDb({ dataDir: dir, durability: 'normal' });
    const loggers = createLoggers('silent');
    migrate(db, MIGRATIONS, loggers.db);
    bus = new EventBus(loggers.gateway);
    const tenants = new TenantService({ db });
    tenants.init();
    const profiles = new DeviceProfileService({ db, tenants });
    profiles.init();
    devices = new DeviceService({ db, tenants, profiles, bus });
    attrs = new AttributeService({ db, devices, bus, log: loggers.attributes });
    attrs.start();
  });
  after(async () => {
    attrs.stop();
    db.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('saves, overwrites and reads attributes per scope with lastUpdateTs', async () => {
    const id = newDevice();
    await attrs.save(id, 'SHARED_SCOPE', { fw_title: 'fw', fw_version: '1.0', fw_size: 10 });
    await attrs.save(id, 'SERVER_SCOPE', { fw_title: 'other' });
    await attrs.save(id, 'SHARED_SCOPE', { fw_size: 12, skipped: null });
    const shared = attrs.get(id, 'SHARED_SCOPE');
    assert.deepEqual(
      shared.map(({ key, value }) => [key, value]),
      [
        ['fw_size', 12],
        ['fw_title', 'fw'],
        ['fw_version', '1.0'],
      ],
    );
    assert.ok(shared.every((kv) => Math.abs(kv.lastUpdateTs - Date.now()) < 5000));
    assert.deepEqual(
      attrs.get(id, 'SHARED_SCOPE', ['fw_version', 'nope']).map((kv) => kv.key),
      ['fw_version'],
    );
    assert.deepEqual(attrs.get(id.toUpperCase(), 'SERVER_SCOPE')[0].value, 'other');
    assert.deepEqual(attrs.get(id, 'CLIENT_SCOPE'), []);
  });

  it('keeps 64-bit integers exactly', async () => {
    const id = newDevice();
    await attrs.save(id, 'SERVER_SCOPE', { big: 2n ** 62n + 1n, neg: -(2n ** 63n) });
    const byKey = Object.fromEntries(attrs.get(id, 'SERVER_SCOPE').map((kv) => [kv.key, kv.value]));
    assert.equal(byKey.big, 2n ** 62n + 1n);
    assert.equal(byKey.neg, -(2n ** 63n));
  });

  it('emits events after commit and pushes shared changes to subscribers only', async () => {
    const id = newDevice();
    const events: Array<GatewayEvents['attributes.updated'] | GatewayEvents['attributes.deleted']> =
      [];
    bus.on('test', 'attributes.updated', (e) => {
      // The event comes after the commit: the value is readable.
      assert.equal(attrs.get(e.deviceId, e.scope).length > 0, true);
      events.push(e);
    });
    bus.on('test', 'attributes.deleted', (e) => events.push(e));
    const pushed: SharedAttributeUpdate[] = [];
    const sub = attrs.subscribe(id, (u) => pushed.push(u));
    await attrs.save(id, 'CLIENT_SCOPE', { c: 1 });
    await attrs.save(id, 'SERVER_SCOPE', { s: 1 });
    await attrs.save(id, 'SHARED_SCOPE', { sh: 1 });
    await attrs.delete(id, 'SHARED_SCOPE', ['sh', 'missing']);
    await attrs.delete(id, 'SHARED_SCOPE', ['missing']);
    bus.removeOwner('test');
    assert.deepEqual(
      events.map((e) => e.scope),
      ['CLIENT_SCOPE', 'SERVER_SCOPE', 'SHARED_SCOPE', 'SHARED_SCOPE'],
    );
    assert.equal(pushed.length, 2);
    assert.equal(pushed[0].kind, 'updated');
    assert.deepEqual(pushed[1], { kind: 'deleted', keys: ['sh'] });
    assert.equal(attrs.counts.subscribers, 1);
    sub.unsubscribe();
    sub.unsubscribe();
    assert.equal(sub.active, false);
    assert.deepEqual(attrs.counts, { subscribers: 0, polls: 0 });
    await attrs.save(id, 'SHARED_SCOPE', { after: 1 });
    assert.equal(pushed.length, 2);
  });

  it('answers device attribute requests by the §2.2 rules', async () => {
    const id = newDevice();
    const device = devices.identity(id)!;
    await attrs.save(id, 'CLIENT_SCOPE', { a: 1 });
    await attrs.save(id, 'SHARED_SCOPE', { b: 2 });
    await attrs.save(id, 'SERVER_SCOPE', { c: 3 });
    const keys = (r: ReturnType<AttributeService['forDevice']>) => ({
      client: r.client?.map((kv) => kv.key),
      shared: r.shared?.map((kv) => kv.key),
    });
    assert.deepEqual(keys(attrs.forDevice(device, {})), { client: ['a'], shared: ['b'] });
    assert.deepEqual(keys(attrs.forDevice(device, { clientKeys: ['a', 'c'] })), {
      client: ['a'],
      shared: undefined,
    });
    assert.deepEqual(keys(attrs.forDevice(device, { sharedKeys: ['c'] })), {
      client: undefined,
      shared: undefined,
    });
  });

  it('long poll: value, timeout, abort and device deletion leave nothing behind', async () => {
    const id = newDevice();
    const got = attrs.waitForUpdate(id, { timeoutMs: 5000 });
    await attrs.save(id, 'SHARED_SCOPE', { k: 'v' });
    const outcome = await got;
    assert.equal(outcome.kind, 'value');
    assert.equal(await attrs.waitForUpdate(id, { timeoutMs: 20 }).then((o) => o.kind), 'timeout');
    const ac = new AbortController();
    const aborted = attrs.waitForUpdate(id, { timeoutMs: 5000, signal: ac.signal });
    assert.deepEqual(attrs.counts, { subscribers: 1, polls: 1 });
    ac.abort();
    assert.equal((await aborted).kind, 'aborted');
    const deleted = attrs.waitForUpdate(id, { timeoutMs: 5000 });
    devices.delete(id);
    assert.deepEqual(await deleted, { kind: 'closed', reason: 'deleted' });
    assert.deepEqual(attrs.counts, { subscribers: 0, polls: 0 });
    await assert.rejects(attrs.save(id, 'SHARED_SCOPE', { k: 1 }), NotFoundError);
    assert.throws(() => attrs.get(id, 'SHARED_SCOPE'), NotFoundError);
  });
});
