import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { highTempAlarm } from './helpers/alarms.js';
import { startGateway, type TestGateway } from './helpers/gateway.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

interface ProfileJson {
  id: { entityType: string; id: string };
  name: string;
  default: boolean;
  type: string;
  transportType: string;
  firmwareId: { id: string } | null;
  profileData: { alarms?: unknown; [key: string]: unknown };
}
interface Page<T> {
  data: T[];
  totalPages: number;
  totalElements: number;
  hasNext: boolean;
}
interface ErrorJson {
  status: number;
  message: string;
}

describe('device profiles REST API', () => {
  let t: TestGateway;
  let admin: string;
  let defaultProfile: ProfileJson;
  const save = (body: unknown) => t.api('/api/deviceProfile', { body, token: admin });
  const create = async (body: unknown): Promise<ProfileJson> => {
    const res = await save(body);
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as ProfileJson;
  };
  const get = (id: string, token = admin) => t.api(`/api/deviceProfile/${id}`, { token });
  const del = (id: string) => t.api(`/api/deviceProfile/${id}`, { method: 'DELETE', token: admin });
  const createDevice = async (name: string, profileId?: string): Promise<string> => {
    const body = profileId ? { name, deviceProfileId: { id: profileId } } : { name };
    const res = await t.api('/api/device', { body, token: admin });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { id: { id: string } }).id.id;
  };

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    const res = await t.api('/api/deviceProfileInfo/default', { token: admin });
    const info = (await res.json()) as { id: { id: string } };
    defaultProfile = (await (await get(info.id.id)).json()) as ProfileJson;
  });
  after(() => t.close());

  describe('create, read, update, delete', () => {
    let p: ProfileJson;

    it('creates a profile with the full alarm rule example and keeps unknown fields', async () => {
      const alarm = { ...highTempAlarm(), vendorNote: 'kept' };
      p = await create({
        name: 'Thermostats',
        description: 'Room thermostats',
        profileData: { alarms: [alarm], configuration: { type: 'DEFAULT' } },
      });
      assert.equal(p.id.entityType, 'DEVICE_PROFILE');
      assert.equal(p.name, 'Thermostats');
      assert.equal(p.default, false);
      assert.deepEqual(p.profileData.alarms, [alarm]);
      const got = await get(p.id.id);
      assert.equal(got.status, 200);
      assert.deepEqual(((await got.json()) as ProfileJson).profileData.alarms, [alarm]);
    });

    it('updates the alarm rules by id', async () => {
      const upd = await create({ id: p.id, name: 'Thermostats', profileData: { alarms: null } });
      assert.equal(upd.id.id, p.id.id);
      assert.equal(upd.profileData.alarms, null);
      const again = await create({
        id: p.id,
        name: 'Thermostats',
        profileData: { alarms: [highTempAlarm()] },
      });
      assert.equal((again.profileData.alarms as unknown[]).length, 1);
    });

    it('deletes an unused profile; 404 afterwards and for unknown ids', async () => {
      const tmp = await create({ name: 'Temporary' });
      assert.equal((await del(tmp.id.id)).status, 200);
      assert.equal((await get(tmp.id.id)).status, 404);
      assert.equal((await del(tmp.id.id)).status, 404);
      assert.equal((await del(randomUUID())).status, 404);
      assert.equal((await del('nope')).status, 400);
    });

    it('refuses to delete a profile that devices use, until they are gone', async () => {
      const used = await create({ name: 'Pumps' });
      const deviceId = await createDevice('Pump 1', used.id.id);
      const res = await del(used.id.id);
      assert.equal(res.status, 400);
      assert.equal(
        ((await res.json()) as ErrorJson).message,
        'The device profile referenced by the devices cannot be deleted!',
      );
      assert.equal((await get(used.id.id)).status, 200);
      await t.api(`/api/device/${deviceId}`, { method: 'DELETE', token: admin });
      assert.equal((await del(used.id.id)).status, 200);
    });

    it('deletes the OTA packages of a deleted profile with it', async () => {
      const fwProfile = await create({ name: 'With firmware' });
      const pkgRes = await t.api('/api/otaPackage', {
        body: {
          title: 'fw',
          version: '1.0',
          type: 'FIRMWARE',
          deviceProfileId: { id: fwProfile.id.id },
        },
        token: admin,
      });
      assert.equal(pkgRes.status, 200, await pkgRes.clone().text());
      const pkg = (await pkgRes.json()) as { id: { id: string } };
      const upload = await fetch(
        `${t.baseUrl}/api/otaPackage/${pkg.id.id}?checksumAlgorithm=SHA256`,
        {
          method: 'POST',
          headers: {
            'X-Authorization': `Bearer ${admin}`,
            'content-type': 'application/octet-stream',
          },
          body: new Uint8Array([1, 2, 3, 4]),
        },
      );
      assert.equal(upload.status, 200, await upload.clone().text());
      const assigned = await create({
        id: fwProfile.id,
        name: 'With firmware',
        firmwareId: pkg.id,
      });
      assert.equal(assigned.firmwareId?.id, pkg.id.id);

      assert.equal((await del(fwProfile.id.id)).status, 200);
      assert.equal((await get(fwProfile.id.id)).status, 404);
      const gone = await t.api(`/api/otaPackage/info/${pkg.id.id}`, { token: admin });
      assert.equal(gone.status, 404);
    });
  });

  describe('default profile', () => {
    it('refuses to delete the default profile', async () => {
      const res = await del(defaultProfile.id.id);
      assert.equal(res.status, 400);
      assert.equal(
        ((await res.json()) as ErrorJson).message,
        'Deletion of Default Device Profile is prohibited!',
      );
    });

    it('switches the default; new devices without a type get it', async () => {
      const onOld = await createDevice('Before switch');
      const next = await create({ name: 'New default' });
      const res = await t.api(`/api/deviceProfile/${next.id.id}/default`, {
        method: 'POST',
        token: admin,
      });
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as ProfileJson).default, true);
      const old = (await (await get(defaultProfile.id.id)).json()) as ProfileJson;
      assert.equal(old.default, false);
      const info = (await (
        await t.api('/api/deviceProfileInfo/default', { token: admin })
      ).json()) as ProfileJson;
      assert.equal(info.id.id, next.id.id);

      const deviceId = await createDevice('After switch');
      const device = (await (await t.api(`/api/device/${deviceId}`, { token: admin })).json()) as {
        deviceProfileId: { id: string };
      };
      assert.equal(device.deviceProfileId.id, next.id.id);

      // Setting it again changes nothing.
      const again = await t.api(`/api/deviceProfile/${next.id.id}/default`, {
        method: 'POST',
        token: admin,
      });
      assert.equal(again.status, 200);
      // The old default is now an ordinary profile: refused only because a device uses it.
      const refused = await del(defaultProfile.id.id);
      assert.match(((await refused.json()) as ErrorJson).message, /referenced by the devices/);
      await t.api(`/api/device/${onOld}`, { method: 'DELETE', token: admin });
      // Switch back so the other tests see the original default.
      const back = await t.api(`/api/deviceProfile/${defaultProfile.id.id}/default`, {
        method: 'POST',
        token: admin,
      });
      assert.equal(back.status, 200);
      const count = t.gw.db
        .prepare('SELECT count(*) AS n FROM device_profile WHERE is_default = 1')
        .get() as { n: number };
      assert.equal(count.n, 1);
      assert.equal(
        (
          await t.api(`/api/deviceProfile/${randomUUID()}/default`, {
            method: 'POST',
            token: admin,
          })
        ).status,
        404,
      );
    });
  });

  describe('alarm rule validation', () => {
    const refused = async (alarm: unknown, pattern: RegExp) => {
      const res = await save({ name: `Bad ${randomUUID()}`, profileData: { alarms: [alarm] } });
      const text = await res.text();
      assert.equal(res.status, 400, text);
      const { message } = JSON.parse(text) as ErrorJson;
      assert.match(message, pattern);
      return message;
    };
    /** The example with one create rule replaced by `rule` (paths stay readable). */
    const withMajor = (rule: unknown) => ({
      ...highTempAlarm(),
      createRules: { MAJOR: rule },
    });
    const filter = (predicate: unknown, extra: Record<string, unknown> = {}) => ({
      key: { type: 'TIME_SERIES', key: 'temperature' },
      valueType: 'NUMERIC',
      predicate,
      ...extra,
    });

    it('names an unknown severity and a missing alarm type', async () => {
      await refused(
        { ...highTempAlarm(), createRules: { SEVERE: {} } },
        /profileData\.alarms\.0\.createRules: Unrecognized key: "SEVERE"/,
      );
      await refused(
        { ...highTempAlarm(), alarmType: '' },
        /alarms\.0\.alarmType: Alarm rule type should be specified!/,
      );
      await refused({ ...highTempAlarm(), createRules: {} }, /at least one create rule/);
    });

    it('names an unknown operation and a wrong threshold type', async () => {
      await refused(
        withMajor({
          condition: {
            condition: [
              filter({ type: 'NUMERIC', operation: 'BIGGER', value: { defaultValue: 1 } }),
            ],
          },
        }),
        /createRules\.MAJOR\.condition\.condition\.0\.predicate\.operation: Invalid option/,
      );
      await refused(
        withMajor({
          condition: {
            condition: [
              filter({ type: 'NUMERIC', operation: 'GREATER', value: { defaultValue: '40' } }),
            ],
          },
        }),
        /predicate\.value\.defaultValue: .*expected number/,
      );
    });

    it('refuses a predicate that does not fit the value type, also nested in COMPLEX', async () => {
      await refused(
        withMajor({
          condition: {
            condition: [
              filter({
                type: 'COMPLEX',
                operation: 'OR',
                predicates: [
                  { type: 'NUMERIC', operation: 'LESS', value: { defaultValue: 0 } },
                  { type: 'STRING', operation: 'EQUAL', value: { defaultValue: 'hot' } },
                ],
              }),
            ],
          },
        }),
        /predicate\.predicates\.1\.type: a NUMERIC filter takes NUMERIC predicates, not STRING/,
      );
    });

    it('refuses a bad spec, a bad schedule and an empty condition', async () => {
      const ok = filter({ type: 'NUMERIC', operation: 'GREATER', value: { defaultValue: 1 } });
      await refused(
        withMajor({
          condition: {
            condition: [ok],
            spec: { type: 'DURATION', unit: 'FORTNIGHTS', predicate: { defaultValue: 5 } },
          },
        }),
        /condition\.spec\.unit: Invalid option/,
      );
      await refused(
        withMajor({
          condition: {
            condition: [ok],
            spec: { type: 'REPEATING', predicate: { defaultValue: 0 } },
          },
        }),
        /spec\.predicate\.defaultValue: must be at least 1/,
      );
      await refused(
        withMajor({
          condition: { condition: [ok] },
          schedule: {
            type: 'SPECIFIC_TIME',
            timezone: 'Mars/Olympus_Mons',
            daysOfWeek: [1, 2],
            startsOn: 0,
            endsOn: 0,
          },
        }),
        /schedule\.timezone: must be an IANA time zone/,
      );
      await refused(
        withMajor({
          condition: { condition: [ok] },
          schedule: { type: 'CUSTOM', timezone: 'UTC', items: [{ enabled: true, dayOfWeek: 9 }] },
        }),
        /schedule\.items\.0\.dayOfWeek/,
      );
      await refused(
        withMajor({ condition: { condition: [] } }),
        /an alarm rule needs at least one key filter/,
      );
    });

    it('refuses duplicate alarm types in one profile', async () => {
      const res = await save({
        name: 'Duplicates',
        profileData: { alarms: [highTempAlarm(), { ...highTempAlarm(), id: 'other' }] },
      });
      assert.equal(res.status, 400);
      assert.match(
        ((await res.json()) as ErrorJson).message,
        /Can't create device profile with the same alarm rule types: "High Temperature"!/,
      );
    });

    it('keeps a refused update from changing the stored rules', async () => {
      const p = await create({ name: 'Guarded', profileData: { alarms: [highTempAlarm()] } });
      const bad = await save({
        id: p.id,
        name: 'Guarded',
        profileData: { alarms: [{ ...highTempAlarm(), clearRule: { condition: {} } }] },
      });
      assert.equal(bad.status, 400);
      assert.match(((await bad.json()) as ErrorJson).message, /clearRule\.condition\.condition/);
      const stored = (await (await get(p.id.id)).json()) as ProfileJson;
      assert.deepEqual(stored.profileData.alarms, [highTempAlarm()]);
    });
  });

  describe('lists, infos and names', () => {
    let t2: TestGateway;
    let token: string;
    let customerUser: string;
    before(async () => {
      t2 = await startGateway();
      token = await t2.adminToken();
      for (const [name, transportType] of [
        ['Meters', 'DEFAULT'],
        ['Alpha sensors', 'MQTT'],
        ['Zeta sensors', 'COAP'],
        ['Beta sensors', 'MQTT'],
      ]) {
        const res = await t2.api('/api/deviceProfile', { body: { name, transportType }, token });
        assert.equal(res.status, 200, await res.clone().text());
      }
      const meters = (await (
        await t2.api('/api/deviceProfiles?pageSize=1&page=0&textSearch=meters', { token })
      ).json()) as Page<ProfileJson>;
      const dev = await t2.api('/api/device', {
        body: { name: 'Meter 1', deviceProfileId: meters.data[0]?.id },
        token,
      });
      assert.equal(dev.status, 200);
      const acme = await createCustomer(t2, 'Acme');
      customerUser = await activateUser(
        t2,
        await createUser(t2, 'user@acme.test', acme),
        'acme-pass-1',
      );
    });
    after(() => t2.close());
    const page = async <T>(path: string, as = token) => {
      const res = await t2.api(path, { token: as });
      assert.equal(res.status, 200, await res.clone().text());
      return (await res.json()) as Page<T>;
    };

    it('pages infos sorted by name, with ThingsBoard info fields only', async () => {
      const p0 = await page<Record<string, unknown>>(
        '/api/deviceProfileInfos?pageSize=2&page=0&sortProperty=name',
      );
      assert.equal(p0.totalElements, 5);
      assert.equal(p0.totalPages, 3);
      assert.equal(p0.hasNext, true);
      assert.deepEqual(
        p0.data.map((d) => d.name),
        ['Alpha sensors', 'Beta sensors'],
      );
      assert.deepEqual(Object.keys(p0.data[0] ?? {}).sort(), [
        'defaultDashboardId',
        'id',
        'image',
        'name',
        'tenantId',
        'transportType',
        'type',
      ]);
      const p2 = await page<{ name: string }>(
        '/api/deviceProfileInfos?pageSize=2&page=2&sortProperty=name',
      );
      assert.deepEqual(
        p2.data.map((d) => d.name),
        ['Zeta sensors'],
      );
      assert.equal(p2.hasNext, false);
    });

    it('filters infos by transport type and text', async () => {
      const mqtt = await page<{ name: string }>(
        '/api/deviceProfileInfos?pageSize=10&page=0&transportType=MQTT&sortProperty=name&sortOrder=DESC',
      );
      assert.deepEqual(
        mqtt.data.map((d) => d.name),
        ['Beta sensors', 'Alpha sensors'],
      );
      const text = await page<{ name: string }>(
        '/api/deviceProfileInfos?pageSize=10&page=0&textSearch=SENS',
      );
      assert.equal(text.totalElements, 3);
    });

    it('gets one info by id and the default one', async () => {
      const list = await page<{ id: { id: string }; name: string }>(
        '/api/deviceProfileInfos?pageSize=1&page=0&textSearch=zeta',
      );
      const zeta = list.data[0];
      assert.ok(zeta);
      const res = await t2.api(`/api/deviceProfileInfo/${zeta.id.id}`, { token });
      assert.equal(res.status, 200);
      const info = (await res.json()) as Record<string, unknown>;
      assert.equal(info.name, 'Zeta sensors');
      assert.equal(info.transportType, 'COAP');
      assert.equal('profileData' in info, false);
      const def = await t2.api('/api/deviceProfileInfo/default', { token });
      assert.equal(((await def.json()) as { name: string }).name, 'Default');
      assert.equal((await t2.api(`/api/deviceProfileInfo/${randomUUID()}`, { token })).status, 404);
    });

    it('lists names, all or only those devices use', async () => {
      const res = await t2.api('/api/deviceProfile/names', { token });
      assert.equal(res.status, 200);
      const names = (await res.json()) as Array<{ id: { entityType: string }; name: string }>;
      assert.deepEqual(
        names.map((n) => n.name),
        ['Alpha sensors', 'Beta sensors', 'Default', 'Meters', 'Zeta sensors'],
      );
      assert.equal(names[0]?.id.entityType, 'DEVICE_PROFILE');
      const active = await t2.api('/api/deviceProfile/names?activeOnly=true', { token });
      assert.deepEqual(
        ((await active.json()) as Array<{ name: string }>).map((n) => n.name),
        ['Meters'],
      );
      assert.equal(
        (await t2.api('/api/deviceProfile/names?activeOnly=maybe', { token })).status,
        400,
      );
    });

    it('lets a customer user read infos, but not profiles, names or writes (403)', async () => {
      const infos = await page<{ name: string }>(
        '/api/deviceProfileInfos?pageSize=10&page=0',
        customerUser,
      );
      assert.equal(infos.totalElements, 5);
      const def = await t2.api('/api/deviceProfileInfo/default', { token: customerUser });
      assert.equal(def.status, 200);
      const id = ((await def.json()) as { id: { id: string } }).id.id;
      for (const [path, method] of [
        [`/api/deviceProfile/${id}`, 'GET'],
        ['/api/deviceProfiles?pageSize=10&page=0', 'GET'],
        ['/api/deviceProfile/names', 'GET'],
        [`/api/deviceProfile/${id}`, 'DELETE'],
        [`/api/deviceProfile/${id}/default`, 'POST'],
      ] as const) {
        const res = await t2.api(path, { method, token: customerUser });
        assert.equal(res.status, 403, `${method} ${path}`);
      }
      const post = await t2.api('/api/deviceProfile', { body: { name: 'X' }, token: customerUser });
      assert.equal(post.status, 403);
      assert.equal((await t2.api('/api/deviceProfileInfos?pageSize=1&page=0')).status, 401);
    });
  });
});
