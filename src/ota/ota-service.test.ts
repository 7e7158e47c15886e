import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AttributeService } from '../attributes/attribute-service.js';
import { MIGRATIONS } from '../db/migrations/index.js';
import { migrate } from '../db/migrator.js';
import { type Db, openDb } from '../db/open.js';
import { DeviceProfileService } from '../devices/device-profile-service.js';
import { DeviceService } from '../devices/device-service.js';
import { NotFoundError, PayloadTooLargeError, ValidationError } from '../errors.js';
import { EventBus } from '../events.js';
import { createLoggers } from '../logger.js';
import { TenantService } from '../tenant/tenant-service.js';
import { checksum } from './checksum.js';
import { OtaService } from './ota-service.js';

describe('OtaService', () => {
  let dir: string;
  let db: Db;
  let bus: EventBus;
  let profiles: DeviceProfileService;
  let devices: DeviceService;
  let attributes: AttributeService;
  let ota: OtaService;
  let profileId: string;
  let n = 0;
  const data = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));
  const newPackage = (type: 'FIRMWARE' | 'SOFTWARE' = 'FIRMWARE') =>
    ota.save({ title: `pkg-${n++}`, version: '1', type, deviceProfileId: { id: profileId } }).id.id;
  const sharedOf = (deviceId: string) =>
    Object.fromEntries(attributes.get(deviceId, 'SHARED_SCOPE').map((kv) => [kv.key, kv.value]));

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-gw-ota-'));
    db = openDb({ dataDir: dir, durability: 'normal' });
    const loggers = createLoggers('silent');
    migrate(db, MIGRATIONS, loggers.db);
    bus = new EventBus(loggers.gateway);
    const tenants = new TenantService({ db });
    tenants.init();
    const otaCheck = (...args: Parameters<OtaService['check']>) => ota.check(...args);
    profiles = new DeviceProfileService({ db, tenants, bus, otaCheck });
    profiles.init();
    devices = new DeviceService({ db, tenants, profiles, bus, otaCheck });
    attributes = new AttributeService({ db, devices, bus, log: loggers.attributes });
    attributes.start();
    ota = new OtaService({
      db,
      tenants,
      devices,
      profiles,
      bus,
      attributes,
      log: loggers.ota,
      maxBytes: 4096,
    });
    ota.start();
    profileId = profiles.save({ name: 'ota-unit' }).id.id;
  });
  after(async () => {
    await ota.stop();
    attributes.stop();
    db.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('slices chunks: whole file for size 0, a short last chunk, nothing past the end', () => {
    const id = newPackage();
    ota.upload(id, { data });
    assert.ok(ota.chunk(id, 0, 0).equals(data));
    assert.ok(ota.chunk(id, 0, 7).equals(data), 'chunk is ignored without size');
    assert.ok(ota.chunk(id, 300, 0).equals(data.subarray(0, 300)));
    assert.ok(ota.chunk(id, 300, 3).equals(data.subarray(900, 1000)));
    assert.equal(ota.chunk(id, 300, 4).length, 0);
    assert.equal(ota.chunk(id, 1000, 1).length, 0);
    assert.ok(ota.chunk(id, 5000, 0).equals(data));
    assert.throws(() => ota.chunk('00000000-0000-0000-0000-000000000000', 1, 0), NotFoundError);
  });

  it('verifies checksums case-insensitively and defaults to SHA256', () => {
    const a = newPackage();
    assert.throws(
      () => ota.upload(a, { data, checksumAlgorithm: 'SHA256', checksum: 'abc' }),
      ValidationError,
    );
    const info = ota.upload(a, {
      data,
      checksumAlgorithm: 'sha256',
      checksum: checksum('SHA256', data).toUpperCase(),
    });
    assert.equal(info.checksumAlgorithm, 'SHA256');
    assert.equal(info.fileName, `${info.title}-1.bin`);
    const b = newPackage();
    assert.equal(ota.upload(b, { data }).checksum, checksum('SHA256', data));
    assert.throws(
      () => ota.upload(newPackage(), { data: Buffer.alloc(4097) }),
      PayloadTooLargeError,
    );
  });

  it('checks assignments: existence, type, profile and data', () => {
    const empty = newPackage();
    const sw = newPackage('SOFTWARE');
    ota.upload(sw, { data });
    assert.throws(() => ota.check('FIRMWARE', empty, profileId), /empty data/);
    assert.throws(() => ota.check('FIRMWARE', sw, profileId), /with type: SOFTWARE/);
    assert.throws(
      () => ota.check('SOFTWARE', sw, profiles.getDefault().id.id),
      /different deviceProfile/,
    );
    assert.throws(
      () => ota.check('FIRMWARE', '00000000-0000-0000-0000-000000000000', profileId),
      /non-existent/,
    );
    assert.doesNotThrow(() => ota.check('SOFTWARE', sw, profileId));
  });

  it('writes fw_* attributes for devices created in a profile with firmware, and resolves the download', async () => {
    const fw = newPackage();
    ota.upload(fw, { data, checksumAlgorithm: 'CRC32' });
    profiles.save({ id: { id: profileId }, name: 'ota-unit', firmwareId: { id: fw } });
    const device = devices.save({ name: 'ota-unit-dev', deviceProfileId: { id: profileId } });
    await ota.settled();
    const info = ota.get(fw);
    assert.deepEqual(sharedOf(device.id.id), {
      fw_checksum: checksum('CRC32', data),
      fw_checksum_algorithm: 'CRC32',
      fw_size: data.length,
      fw_title: info.title,
      fw_version: '1',
    });
    const out = ota.download(device.id.id, 'FIRMWARE', { title: info.title, size: 100, chunk: 2 });
    assert.ok(out.data.equals(data.subarray(200, 300)));
    assert.throws(() => ota.download(device.id.id, 'FIRMWARE', { version: '2' }), ValidationError);
    assert.throws(() => ota.download(device.id.id, 'SOFTWARE'), NotFoundError);
    profiles.save({ id: { id: profileId }, name: 'ota-unit' });
    await ota.settled();
    assert.deepEqual(sharedOf(device.id.id), {});
    assert.equal(ota.deviceState(device.id.id)?.packageId, null);
  });

  it('tracks the latest fw_state and sw_state from telemetry events', () => {
    const device = devices.save({ name: 'ota-state-dev' });
    const deviceId = device.id.id;
    bus.emit('telemetry', {
      deviceId,
      points: [
        { key: 'fw_state', ts: 20, value: 'DOWNLOADED' },
        { key: 'fw_state', ts: 10, value: 'DOWNLOADING' },
        { key: 'temperature', ts: 20, value: 21 },
        { key: 'sw_state', ts: 30, value: 'UPDATED' },
      ],
    });
    assert.deepEqual(ota.deviceState(deviceId, 'FIRMWARE'), {
      packageId: null,
      state: 'DOWNLOADED',
      stateTs: 20,
      error: null,
    });
    assert.equal(ota.deviceState(deviceId, 'SOFTWARE')?.state, 'UPDATED');
    bus.emit('telemetry', { deviceId: 'gone', points: [{ key: 'fw_state', ts: 1, value: 'X' }] });
  });

  it('updates only tag, url and additionalInfo of existing package info', () => {
    const id = newPackage();
    const info = ota.get(id);
    const body = {
      id: { id },
      title: info.title,
      version: '1',
      deviceProfileId: { id: profileId },
    };
    const updated = ota.save({ ...body, tag: 'stable', additionalInfo: { note: 'x' } });
    assert.equal(updated.tag, 'stable');
    assert.deepEqual(updated.additionalInfo, { note: 'x' });
    assert.throws(() => ota.save({ ...body, version: '2' }), /prohibited/);
    assert.throws(
      () => ota.save({ ...body, id: { id: '00000000-0000-0000-0000-000000000000' } }),
      NotFoundError,
    );
  });

  it('URL packages: assignment writes fw_url, the download is 404, data is refused', async () => {
    assert.throws(
      () =>
        ota.save({
          title: 'url-pkg',
          version: '1',
          usesUrl: true,
          deviceProfileId: { id: profileId },
        }),
      /url is required/,
    );
    const id = ota.save({
      title: 'url-pkg',
      version: '1',
      usesUrl: true,
      url: 'https://example.com/fw.bin',
      deviceProfileId: { id: profileId },
    }).id.id;
    assert.throws(() => ota.upload(id, { data }), /url cannot have data/);
    const device = devices.save({
      name: 'url-dev',
      deviceProfileId: { id: profileId },
      firmwareId: { id },
    });
    await ota.settled();
    assert.deepEqual(sharedOf(device.id.id), {
      fw_title: 'url-pkg',
      fw_version: '1',
      fw_url: 'https://example.com/fw.bin',
    });
    assert.throws(() => ota.download(device.id.id, 'FIRMWARE'), NotFoundError);
    devices.delete(device.id.id);
  });

  it('refuses to delete a package that a device uses', () => {
    const fw = newPackage();
    ota.upload(fw, { data });
    const device = devices.save({
      name: 'ota-holder',
      deviceProfileId: { id: profileId },
      firmwareId: { id: fw },
    });
    assert.throws(() => ota.delete(fw), /referenced by the devices/);
    devices.delete(device.id.id);
    ota.delete(fw);
    assert.throws(() => ota.get(fw), NotFoundError);
  });
});
