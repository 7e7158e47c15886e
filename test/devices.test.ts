import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';

interface DeviceJson {
  id: { entityType: string; id: string };
  name: string;
  type: string;
  label: string | null;
  createdTime: number;
  customerId: { id: string };
  deviceProfileId: { entityType: string; id: string };
  additionalInfo: unknown;
  version: number;
}
interface Page<T> {
  data: T[];
  totalPages: number;
  totalElements: number;
  hasNext: boolean;
}

describe('device management REST API', () => {
  let t: TestGateway;
  let token: string;
  before(async () => {
    t = await startGateway();
    token = await t.adminToken();
  });
  after(() => t.close());

  it('creates a device on the Default profile with a random 20-character token', async () => {
    const res = await t.api('/api/device', { body: { name: 'Boiler 1', label: 'hall A' }, token });
    assert.equal(res.status, 200);
    const d = (await res.json()) as DeviceJson;
    assert.equal(d.id.entityType, 'DEVICE');
    assert.match(d.id.id, /^[0-9a-f-]{36}$/);
    assert.equal(d.name, 'Boiler 1');
    assert.equal(d.label, 'hall A');
    assert.equal(d.type, 'Default');
    assert.equal(d.deviceProfileId.entityType, 'DEVICE_PROFILE');
    assert.equal(d.customerId.id, '13814000-1dd2-11b2-8080-808080808080');
    const creds = await t.api(`/api/device/${d.id.id}/credentials`, { token });
    assert.equal(creds.status, 200);
    const c = (await creds.json()) as {
      credentialsType: string;
      credentialsId: string;
      deviceId: { id: string };
    };
    assert.equal(c.credentialsType, 'ACCESS_TOKEN');
    assert.match(c.credentialsId, /^[A-Za-z0-9]{20}$/);
    assert.equal(c.deviceId.id, d.id.id);
    const profile = await t.api(`/api/deviceProfile/${d.deviceProfileId.id}`, { token });
    assert.equal(((await profile.json()) as { name: string; default: boolean }).name, 'Default');
  });

  it('sets the token from ?accessToken= and gets, updates and deletes a device', async () => {
    const res = await t.api('/api/device?accessToken=MY_TOKEN_1', {
      body: { name: 'Pump 7' },
      token,
    });
    const d = (await res.json()) as DeviceJson;
    const creds = (await (await t.api(`/api/device/${d.id.id}/credentials`, { token })).json()) as {
      credentialsId: string;
    };
    assert.equal(creds.credentialsId, 'MY_TOKEN_1');

    const got = await t.api(`/api/device/${d.id.id}`, { token });
    assert.equal(got.status, 200);
    assert.equal(((await got.json()) as DeviceJson).name, 'Pump 7');

    const upd = await t.api('/api/device', {
      body: {
        id: d.id,
        name: 'Pump 7b',
        type: 'Pumps',
        additionalInfo: { description: 'main pump' },
      },
      token,
    });
    assert.equal(upd.status, 200);
    const u = (await upd.json()) as DeviceJson;
    assert.equal(u.id.id, d.id.id);
    assert.equal(u.name, 'Pump 7b');
    assert.equal(u.type, 'Pumps', 'a new type creates its profile');
    assert.deepEqual(u.additionalInfo, { description: 'main pump' });
    assert.equal(u.version, 2);

    const del = await t.api(`/api/device/${d.id.id}`, { method: 'DELETE', token });
    assert.equal(del.status, 200);
    assert.equal((await t.api(`/api/device/${d.id.id}`, { token })).status, 404);
    assert.equal((await t.api(`/api/device/${d.id.id}`, { method: 'DELETE', token })).status, 404);
    // The token is free again once its device is gone.
    assert.equal(
      (await t.api('/api/device?accessToken=MY_TOKEN_1', { body: { name: 'Pump 8' }, token }))
        .status,
      200,
    );
  });

  it('refuses duplicate names and tokens with 400 and a message', async () => {
    await createDevice(t, 'Dup', 'DUP_TOKEN');
    const sameName = await t.api('/api/device', { body: { name: 'Dup' }, token });
    assert.equal(sameName.status, 400);
    assert.match(((await sameName.json()) as { message: string }).message, /name already exists/);
    const sameToken = await t.api('/api/device?accessToken=DUP_TOKEN', {
      body: { name: 'Dup 2' },
      token,
    });
    assert.equal(sameToken.status, 400);
    assert.match(
      ((await sameToken.json()) as { message: string }).message,
      /credentials are already assigned/,
    );
    const page = (await (
      await t.api('/api/tenant/devices?pageSize=100&page=0&textSearch=dup', { token })
    ).json()) as Page<DeviceJson>;
    assert.deepEqual(
      page.data.map((d) => d.name),
      ['Dup'],
      'nothing of a refused device is stored',
    );
  });

  it('validates bodies, ids and tokens', async () => {
    const cases: Array<[string, { method?: string; body?: unknown }, number, RegExp]> = [
      ['/api/device', { body: { label: 'no name' } }, 400, /name/],
      ['/api/device', { body: { name: '' } }, 400, /name/],
      ['/api/device', { body: { name: 42 } }, 400, /name/],
      ['/api/device', { body: '{"name":' }, 400, /Invalid JSON/],
      ['/api/device', { body: [1, 2] }, 400, /device/],
      ['/api/device?accessToken=has%20space', { body: { name: 'x1' } }, 400, /Access token/],
      [
        '/api/device',
        { body: { name: 'x2', deviceProfileId: { id: '00000000-0000-4000-8000-000000000000' } } },
        400,
        /profile/,
      ],
      [
        '/api/device',
        { body: { id: { id: '00000000-0000-4000-8000-000000000000' }, name: 'x3' } },
        404,
        /not found/,
      ],
      ['/api/device/not-a-uuid', {}, 400, /Invalid UUID/],
      ['/api/device/00000000-0000-4000-8000-000000000000', {}, 404, /not found/],
      [
        '/api/device/credentials',
        { body: { deviceId: { id: 'nope' }, credentialsId: 'x' } },
        400,
        /deviceId/,
      ],
    ];
    for (const [path, init, status, message] of cases) {
      const res = await t.api(path, { ...init, token });
      assert.equal(res.status, status, `${path} ${JSON.stringify(init)}`);
      const body = (await res.json()) as { message: string; status: number };
      assert.equal(body.status, status);
      assert.match(body.message, message, path);
    }
  });

  it('changes the access token with POST /api/device/credentials', async () => {
    const d = await createDevice(t, 'Token change', 'OLD_TOKEN');
    // Warm the device API's token lookup, so the change below must invalidate it.
    assert.equal((await t.api('/api/v1/OLD_TOKEN/telemetry', { body: { x: 1 } })).status, 200);
    const creds = (await (
      await t.api(`/api/device/${d.id}/credentials`, { token })
    ).json()) as Record<string, unknown>;
    const res = await t.api('/api/device/credentials', {
      body: { ...creds, credentialsId: 'NEW_TOKEN' },
      token,
    });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { credentialsId: string }).credentialsId, 'NEW_TOKEN');
    const again = (await (await t.api(`/api/device/${d.id}/credentials`, { token })).json()) as {
      credentialsId: string;
    };
    assert.equal(again.credentialsId, 'NEW_TOKEN');
    assert.equal((await t.api('/api/v1/OLD_TOKEN/telemetry', { body: { x: 2 } })).status, 401);
    assert.equal((await t.api('/api/v1/NEW_TOKEN/telemetry', { body: { x: 3 } })).status, 200);
    await createDevice(t, 'Token holder', 'TAKEN_TOKEN');
    const clash = await t.api('/api/device/credentials', {
      body: { ...creds, credentialsId: 'TAKEN_TOKEN' },
      token,
    });
    assert.equal(clash.status, 400);
  });

  it('pages, searches and sorts the tenant device list', async () => {
    for (let i = 0; i < 7; i++) await createDevice(t, `Sensor-${String(i).padStart(2, '0')}`);
    const q = 'pageSize=3&textSearch=sensor-&sortProperty=name&sortOrder=ASC';
    const p0 = (await (
      await t.api(`/api/tenant/devices?${q}&page=0`, { token })
    ).json()) as Page<DeviceJson>;
    assert.deepEqual(
      p0.data.map((d) => d.name),
      ['Sensor-00', 'Sensor-01', 'Sensor-02'],
    );
    assert.equal(p0.totalElements, 7);
    assert.equal(p0.totalPages, 3);
    assert.equal(p0.hasNext, true);
    const p2 = (await (
      await t.api(`/api/tenant/devices?${q}&page=2`, { token })
    ).json()) as Page<DeviceJson>;
    assert.deepEqual(
      p2.data.map((d) => d.name),
      ['Sensor-06'],
    );
    assert.equal(p2.hasNext, false);
    const desc = (await (
      await t.api(
        '/api/tenant/devices?pageSize=2&page=0&textSearch=SENSOR&sortProperty=name&sortOrder=DESC',
        { token },
      )
    ).json()) as Page<DeviceJson>;
    assert.deepEqual(
      desc.data.map((d) => d.name),
      ['Sensor-06', 'Sensor-05'],
    );
    const byName = await t.api('/api/tenant/devices?deviceName=Sensor-03', { token });
    assert.equal(((await byName.json()) as DeviceJson).name, 'Sensor-03');
    assert.equal((await t.api('/api/tenant/devices?deviceName=nope', { token })).status, 404);
    for (const bad of [
      'page=0',
      'pageSize=0&page=0',
      'pageSize=2&page=-1',
      'pageSize=2&page=0&sortProperty=color',
      'pageSize=2&page=0&sortOrder=UP',
    ]) {
      const res = await t.api(`/api/tenant/devices?${bad}`, { token });
      assert.equal(res.status, 400, bad);
    }
  });
});

describe('restart', () => {
  it('keeps devices, credentials, the administrator and the signing secret', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'edge-gw-restart-'));
    try {
      const first = await startGateway({ dataDir });
      const d = await createDevice(first, 'Survivor', 'SURVIVOR_TOKEN');
      const oldToken = await first.adminToken();
      await first.close();

      const second = await startGateway({ dataDir });
      try {
        const me = await second.api('/api/auth/user', { token: oldToken });
        assert.equal(me.status, 200, 'a token issued before the restart still works');
        const got = await second.api(`/api/device/${d.id}`, { token: oldToken });
        assert.equal(((await got.json()) as DeviceJson).name, 'Survivor');
        const creds = (await (
          await second.api(`/api/device/${d.id}/credentials`, { token: oldToken })
        ).json()) as {
          credentialsId: string;
        };
        assert.equal(creds.credentialsId, 'SURVIVOR_TOKEN');
        const profiles = second.gw.db
          .prepare("SELECT count(*) AS n FROM device_profile WHERE name = 'Default'")
          .get() as {
          n: number;
        };
        assert.equal(profiles.n, 1, 'the Default profile is created once');
      } finally {
        await second.close();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
