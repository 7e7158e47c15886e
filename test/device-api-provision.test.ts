import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway } from './helpers/gateway.js';

interface Profile {
  id: { entityType: string; id: string };
  name: string;
  provisionType: string;
  provisionDeviceKey: string | null;
  profileData: { provisionConfiguration: { type: string; provisionDeviceSecret: string | null } };
}
interface Device {
  id: { id: string };
  name: string;
  type: string;
  deviceProfileId: { id: string };
  additionalInfo: Record<string, unknown> | null;
}
interface Page<T> {
  data: T[];
  totalElements: number;
}

const NOT_FOUND = { errorMsg: 'Provision data was not found!', status: 'NOT_FOUND' };
const FAILURE = { errorMsg: 'Failed to provision device!', status: 'FAILURE' };

describe('device provisioning over HTTP (POST /api/v1/provision)', () => {
  let t: TestGateway;
  let admin: string;
  let createProfile: Profile;
  let preProfile: Profile;

  const provision = (body: unknown) => t.api('/api/v1/provision', { body });
  const provisionJson = async (body: unknown) => {
    const res = await provision(body);
    assert.equal(res.status, 200, 'provisioning always answers 200');
    return (await res.json()) as Record<string, unknown>;
  };
  const saveProfile = (body: unknown) => t.api('/api/deviceProfile', { body, token: admin });
  const deviceCount = async () => {
    const res = await t.api('/api/tenant/devices?pageSize=1&page=0', { token: admin });
    return ((await res.json()) as Page<Device>).totalElements;
  };
  const deviceByName = async (name: string) => {
    const res = await t.api(`/api/tenant/devices?pageSize=100&page=0`, { token: admin });
    return ((await res.json()) as Page<Device>).data.find((d) => d.name === name);
  };

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    let res = await saveProfile({
      name: 'Sensors',
      profileData: {
        provisionConfiguration: {
          type: 'ALLOW_CREATE_NEW_DEVICES',
          provisionDeviceKey: 'create-key',
          provisionDeviceSecret: 'create-secret',
        },
      },
    });
    assert.equal(res.status, 200, await res.clone().text());
    createProfile = (await res.json()) as Profile;
    res = await saveProfile({
      name: 'Meters',
      provisionType: 'CHECK_PRE_PROVISIONED_DEVICES',
      provisionDeviceKey: 'pre-key',
      profileData: { provisionConfiguration: { provisionDeviceSecret: 'pre-secret' } },
    });
    assert.equal(res.status, 200, await res.clone().text());
    preProfile = (await res.json()) as Profile;
    res = await saveProfile({
      name: 'Locked',
      provisionType: 'DISABLED',
      provisionDeviceKey: 'disabled-key',
      profileData: { provisionConfiguration: { provisionDeviceSecret: 'disabled-secret' } },
    });
    assert.equal(res.status, 200);
  });
  after(() => t.close());

  describe('device profiles carry the provisioning strategy', () => {
    it('returns ThingsBoard profile JSON with provisionType, key and secret', () => {
      assert.equal(createProfile.id.entityType, 'DEVICE_PROFILE');
      assert.equal(createProfile.provisionType, 'ALLOW_CREATE_NEW_DEVICES');
      assert.equal(createProfile.provisionDeviceKey, 'create-key');
      assert.deepEqual(createProfile.profileData.provisionConfiguration, {
        type: 'ALLOW_CREATE_NEW_DEVICES',
        provisionDeviceSecret: 'create-secret',
      });
      assert.equal(preProfile.provisionType, 'CHECK_PRE_PROVISIONED_DEVICES');
    });

    it('lists profiles page by page and reads one back', async () => {
      const res = await t.api('/api/deviceProfiles?pageSize=2&page=0&sortProperty=name', {
        token: admin,
      });
      assert.equal(res.status, 200);
      const page = (await res.json()) as Page<Profile> & { hasNext: boolean };
      assert.equal(page.totalElements, 4);
      assert.deepEqual(
        page.data.map((p) => p.name),
        ['Default', 'Locked'],
      );
      assert.equal(page.hasNext, true);
      const one = await t.api(`/api/deviceProfile/${preProfile.id.id}`, { token: admin });
      assert.equal(((await one.json()) as Profile).provisionDeviceKey, 'pre-key');
    });

    it('updates a profile by id and keeps keys unique', async () => {
      const res = await saveProfile({
        id: preProfile.id,
        name: 'Meters',
        description: 'water meters',
        provisionType: 'CHECK_PRE_PROVISIONED_DEVICES',
        provisionDeviceKey: 'pre-key',
        profileData: { provisionConfiguration: { provisionDeviceSecret: 'pre-secret' } },
      });
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as { description: string }).description, 'water meters');
      const dup = await saveProfile({
        name: 'Other',
        provisionType: 'ALLOW_CREATE_NEW_DEVICES',
        provisionDeviceKey: 'pre-key',
        profileData: { provisionConfiguration: { provisionDeviceSecret: 's' } },
      });
      assert.equal(dup.status, 400);
      assert.match(
        ((await dup.json()) as { message: string }).message,
        /provision device key already exists/,
      );
    });

    it('refuses invalid profiles with 400 naming the problem, and stores nothing', async () => {
      const cases: Array<[unknown, RegExp]> = [
        [
          { name: 'X', provisionType: 'ALLOW_CREATE_NEW_DEVICES' },
          /provisionDeviceKey is required/,
        ],
        [
          {
            name: 'X',
            provisionType: 'ALLOW_CREATE_NEW_DEVICES',
            provisionDeviceKey: 'k',
            profileData: {
              provisionConfiguration: { type: 'DISABLED', provisionDeviceSecret: 's' },
            },
          },
          /provisionType differs/,
        ],
        [{ name: 'X', provisionType: 'SOMETIMES' }, /provisionType/],
        [{ name: '' }, /name/],
        [{ name: 'Sensors' }, /name already exists/],
        ['{"name": ', /Invalid JSON/],
      ];
      for (const [body, message] of cases) {
        const res = await saveProfile(body);
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.match(((await res.json()) as { message: string }).message, message);
      }
      const page = await t.api('/api/deviceProfiles?pageSize=10&page=0', { token: admin });
      assert.equal(((await page.json()) as Page<Profile>).totalElements, 4);
    });

    it('answers 401 without a user token and 404 for an unknown profile id', async () => {
      assert.equal((await t.api('/api/deviceProfile', { body: { name: 'Y' } })).status, 401);
      assert.equal((await t.api('/api/deviceProfiles?pageSize=1&page=0')).status, 401);
      const res = await saveProfile({ id: { id: crypto.randomUUID() }, name: 'Ghost' });
      assert.equal(res.status, 404);
      assert.equal((await t.api('/api/deviceProfiles?page=0', { token: admin })).status, 400);
    });
  });

  describe('ALLOW_CREATE_NEW_DEVICES', () => {
    it('creates the device in the profile and returns its new access token', async () => {
      const body = await provisionJson({
        deviceName: '  Sensor A  ',
        provisionDeviceKey: 'create-key',
        provisionDeviceSecret: 'create-secret',
      });
      assert.deepEqual(Object.keys(body).sort(), ['credentialsType', 'credentialsValue', 'status']);
      assert.equal(body.status, 'SUCCESS');
      assert.equal(body.credentialsType, 'ACCESS_TOKEN');
      assert.match(body.credentialsValue as string, /^[A-Za-z0-9]{20}$/);
      const device = await deviceByName('Sensor A');
      assert.ok(device, 'device created with the trimmed name');
      assert.equal(device.type, 'Sensors');
      assert.equal(device.deviceProfileId.id, createProfile.id.id);
      // The token works on the device API.
      const claim = await t.api(`/api/v1/${body.credentialsValue}/claim`, { method: 'POST' });
      assert.equal(claim.status, 200);
    });

    it('answers FAILURE for a name that exists', async () => {
      const before = await deviceCount();
      const body = await provisionJson({
        deviceName: 'Sensor A',
        provisionDeviceKey: 'create-key',
        provisionDeviceSecret: 'create-secret',
      });
      assert.deepEqual(body, FAILURE);
      assert.equal(await deviceCount(), before);
    });

    it('uses a device-chosen token, and fails when that token is taken', async () => {
      const body = await provisionJson({
        deviceName: 'Sensor B',
        provisionDeviceKey: 'create-key',
        provisionDeviceSecret: 'create-secret',
        credentialsType: 'ACCESS_TOKEN',
        token: 'sensor-b-token',
      });
      assert.deepEqual(body, {
        credentialsValue: 'sensor-b-token',
        credentialsType: 'ACCESS_TOKEN',
        status: 'SUCCESS',
      });
      const taken = await provisionJson({
        deviceName: 'Sensor C',
        provisionDeviceKey: 'create-key',
        provisionDeviceSecret: 'create-secret',
        token: 'sensor-b-token',
      });
      assert.deepEqual(taken, FAILURE);
      assert.equal(await deviceByName('Sensor C'), undefined);
    });

    it('names a device without deviceName with 20 random characters; flags gateways', async () => {
      const before = await deviceCount();
      const body = await provisionJson({
        provisionDeviceKey: 'create-key',
        provisionDeviceSecret: 'create-secret',
        gateway: true,
      });
      assert.equal(body.status, 'SUCCESS');
      assert.equal(await deviceCount(), before + 1);
      const res = await t.api('/api/tenant/devices?pageSize=100&page=0', { token: admin });
      const created = ((await res.json()) as Page<Device>).data.filter(
        (d) => d.type === 'Sensors' && /^[A-Za-z0-9]{20}$/.test(d.name),
      );
      assert.equal(created.length, 1);
      assert.deepEqual(created[0].additionalInfo, { gateway: true });
    });

    it('stores device-chosen MQTT basic credentials and answers them with key userName', async () => {
      const body = await provisionJson({
        deviceName: 'Sensor MQTT',
        provisionDeviceKey: 'create-key',
        provisionDeviceSecret: 'create-secret',
        credentialsType: 'MQTT_BASIC',
        clientId: 'sensor-mqtt',
        username: 'sensor-user',
        password: 'sensor-pass',
      });
      assert.deepEqual(body, {
        credentialsValue: {
          clientId: 'sensor-mqtt',
          userName: 'sensor-user',
          password: 'sensor-pass',
        },
        credentialsType: 'MQTT_BASIC',
        status: 'SUCCESS',
      });
      const device = await deviceByName('Sensor MQTT');
      assert.ok(device);
      const creds = await t.api(`/api/device/${device.id.id}/credentials`, { token: admin });
      assert.equal(
        ((await creds.json()) as { credentialsType: string }).credentialsType,
        'MQTT_BASIC',
      );
    });

    it('answers FAILURE for unusable credentials and leaves no device behind', async () => {
      const before = await deviceCount();
      for (const extra of [
        { credentialsType: 'MQTT_BASIC', password: 'only-a-password' },
        { credentialsType: 'X509_CERTIFICATE', hash: '-----BEGIN CERTIFICATE-----' },
      ]) {
        const body = await provisionJson({
          deviceName: 'Sensor Bad Creds',
          provisionDeviceKey: 'create-key',
          provisionDeviceSecret: 'create-secret',
          ...extra,
        });
        assert.deepEqual(body, FAILURE, JSON.stringify(extra));
      }
      assert.equal(await deviceCount(), before);
      assert.equal(await deviceByName('Sensor Bad Creds'), undefined);
    });

    it('answers FAILURE for a blank name', async () => {
      const body = await provisionJson({
        deviceName: '   ',
        provisionDeviceKey: 'create-key',
        provisionDeviceSecret: 'create-secret',
      });
      assert.deepEqual(body, FAILURE);
    });
  });

  describe('CHECK_PRE_PROVISIONED_DEVICES', () => {
    before(async () => {
      for (const [name, profileId, token] of [
        ['Meter 1', preProfile.id.id, 'meter-1-token'],
        ['Meter 2', preProfile.id.id, 'meter-2-token'],
        ['Stray meter', undefined, 'stray-token'],
      ] as const) {
        const res = await t.api(`/api/device?accessToken=${token}`, {
          body: { name, ...(profileId ? { deviceProfileId: { id: profileId } } : {}) },
          token: admin,
        });
        assert.equal(res.status, 200);
      }
    });

    it('returns the credentials of the pre-provisioned device, once', async () => {
      const body = await provisionJson({
        deviceName: 'Meter 1',
        provisionDeviceKey: 'pre-key',
        provisionDeviceSecret: 'pre-secret',
        token: 'ignored-token',
      });
      assert.deepEqual(body, {
        credentialsValue: 'meter-1-token',
        credentialsType: 'ACCESS_TOKEN',
        status: 'SUCCESS',
      });
      const again = await provisionJson({
        deviceName: 'Meter 1',
        provisionDeviceKey: 'pre-key',
        provisionDeviceSecret: 'pre-secret',
      });
      assert.deepEqual(again, FAILURE);
    });

    it('answers FAILURE for a missing device or one in another profile; creates nothing', async () => {
      const before = await deviceCount();
      for (const deviceName of ['Stray meter', 'Meter 99', undefined]) {
        const body = await provisionJson({
          deviceName,
          provisionDeviceKey: 'pre-key',
          provisionDeviceSecret: 'pre-secret',
        });
        assert.deepEqual(body, FAILURE, String(deviceName));
      }
      assert.equal(await deviceCount(), before);
    });
  });

  describe('NOT_FOUND', () => {
    it('for a wrong key, a wrong or empty secret, or a DISABLED profile', async () => {
      const before = await deviceCount();
      const cases = [
        { provisionDeviceKey: 'no-such-key', provisionDeviceSecret: 'create-secret' },
        { provisionDeviceKey: 'create-key', provisionDeviceSecret: 'wrong' },
        { provisionDeviceKey: 'create-key', provisionDeviceSecret: '' },
        { provisionDeviceKey: '', provisionDeviceSecret: 'create-secret' },
        { provisionDeviceKey: 'pre-key', provisionDeviceSecret: 'create-secret' },
        { provisionDeviceKey: 'disabled-key', provisionDeviceSecret: 'disabled-secret' },
      ];
      for (const c of cases) {
        assert.deepEqual(await provisionJson({ deviceName: 'Meter 2', ...c }), NOT_FOUND);
      }
      assert.equal(await deviceCount(), before);
    });
  });

  describe('bad requests', () => {
    it('answers 400 with a JSON body naming the problem, and stores nothing', async () => {
      const before = await deviceCount();
      const cases: Array<[unknown, RegExp]> = [
        ['{"provisionDeviceKey":', /Invalid JSON/],
        ['', /body is required/],
        [{ provisionDeviceKey: 'create-key' }, /provisionDeviceSecret: is required/],
        [{ provisionDeviceSecret: 'create-secret' }, /provisionDeviceKey: is required/],
        [
          {
            provisionDeviceKey: 'create-key',
            provisionDeviceSecret: 'create-secret',
            credentialsType: 'PIGEON',
          },
          /credentialsType/,
        ],
        [[1, 2], /provision request/],
      ];
      for (const [body, message] of cases) {
        const res = await t.api('/api/v1/provision', {
          method: 'POST',
          body: typeof body === 'string' ? body : JSON.stringify(body),
          headers: { 'content-type': 'application/json' },
        });
        assert.equal(res.status, 400, JSON.stringify(body));
        const json = (await res.json()) as { status: number; message: string };
        assert.equal(json.status, 400);
        assert.match(json.message, message);
      }
      assert.equal(await deviceCount(), before);
    });

    it('answers 413 for a body over the configured limit', async () => {
      const res = await provision({
        provisionDeviceKey: 'create-key',
        provisionDeviceSecret: 'create-secret',
        deviceName: 'x'.repeat(70_000),
      });
      assert.equal(res.status, 413);
      assert.equal(((await res.json()) as { status: number }).status, 413);
      assert.equal((await t.api('/healthz')).status, 200);
    });
  });
});
