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
import { ValidationError } from '../errors.js';
import { EventBus } from '../events.js';
import { createLoggers } from '../logger.js';
import { TenantService } from '../tenant/tenant-service.js';
import { ProvisionService } from './provision-service.js';

describe('ProvisionService', () => {
  let dir: string;
  let db: Db;
  let profiles: DeviceProfileService;
  let devices: DeviceService;
  let provisioning: ProvisionService;
  let preProfileId: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-gw-prov-'));
    db = openDb({ dataDir: dir, durability: 'normal' });
    const loggers = createLoggers('silent');
    migrate(db, MIGRATIONS, loggers.db);
    const bus = new EventBus(loggers.gateway);
    const tenants = new TenantService({ db });
    tenants.init();
    profiles = new DeviceProfileService({ db, tenants, bus });
    profiles.init();
    devices = new DeviceService({ db, tenants, profiles, bus });
    provisioning = new ProvisionService({ db, devices, profiles, log: loggers.provisioning });
    preProfileId = profiles.save({
      name: 'pre',
      provisionType: 'CHECK_PRE_PROVISIONED_DEVICES',
      provisionDeviceKey: 'k-pre',
      profileData: { provisionConfiguration: { provisionDeviceSecret: 's-pre' } },
    }).id.id;
  });
  after(async () => {
    db.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('parses requests: required key and secret, known credentials types, nulls as absent', () => {
    assert.deepEqual(
      provisioning.parseRequest({
        provisionDeviceKey: 'k',
        provisionDeviceSecret: 's',
        deviceName: null,
        extra: 1,
      }),
      {
        provisionDeviceKey: 'k',
        provisionDeviceSecret: 's',
        deviceName: undefined,
        credentialsType: undefined,
        token: undefined,
        clientId: undefined,
        username: undefined,
        password: undefined,
        hash: undefined,
        gateway: undefined,
      },
    );
    assert.throws(
      () => provisioning.parseRequest({ provisionDeviceSecret: 's' }),
      /provisionDeviceKey: is required/,
    );
    assert.throws(
      () => provisioning.parseRequest({ provisionDeviceKey: 1, provisionDeviceSecret: 's' }),
      /provisionDeviceKey: must be a string/,
    );
    assert.throws(
      () =>
        provisioning.parseRequest({
          provisionDeviceKey: 'k',
          provisionDeviceSecret: 's',
          gateway: 'yes',
        }),
      ValidationError,
    );
  });

  it('pre-provisioned devices provision once; reset() allows it again', () => {
    const device = devices.save(
      { name: 'pre-1', deviceProfileId: { id: preProfileId } },
      {
        accessToken: 'pre-1-token',
      },
    );
    const req = {
      provisionDeviceKey: 'k-pre',
      provisionDeviceSecret: 's-pre',
      deviceName: 'pre-1',
    };
    assert.equal(provisioning.isProvisioned(device.id.id), false);
    assert.deepEqual(provisioning.provision(req), {
      credentialsValue: 'pre-1-token',
      credentialsType: 'ACCESS_TOKEN',
      status: 'SUCCESS',
    });
    assert.equal(provisioning.isProvisioned(device.id.id), true);
    assert.equal(provisioning.provision(req).status, 'FAILURE');
    assert.equal(provisioning.reset(device.id.id), true);
    assert.equal(provisioning.provision(req).status, 'SUCCESS');
  });

  it('a profile switched to DISABLED answers NOT_FOUND', () => {
    profiles.save({
      id: { id: preProfileId },
      name: 'pre',
      provisionType: 'DISABLED',
      provisionDeviceKey: 'k-pre',
      profileData: { provisionConfiguration: { provisionDeviceSecret: 's-pre' } },
    });
    assert.deepEqual(
      provisioning.provision({
        provisionDeviceKey: 'k-pre',
        provisionDeviceSecret: 's-pre',
        deviceName: 'pre-1',
      }),
      { errorMsg: 'Provision data was not found!', status: 'NOT_FOUND' },
    );
  });
});
