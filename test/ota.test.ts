import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { crc32 } from 'node:zlib';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';

interface PackageInfo {
  id: { entityType: string; id: string };
  title: string;
  version: string;
  type: string;
  hasData: boolean;
  fileName: string | null;
  contentType: string | null;
  checksumAlgorithm: string | null;
  checksum: string | null;
  dataSize: number | null;
  deviceProfileId: { id: string };
}
interface Profile {
  id: { entityType: string; id: string };
  name: string;
  firmwareId: { id: string } | null;
}

const MAX_OTA_BYTES = 96 * 1024;
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const FW_KEYS = 'fw_title,fw_version,fw_size,fw_checksum,fw_checksum_algorithm';

describe('OTA packages: upload, assignment and chunked download', () => {
  let t: TestGateway;
  let admin: string;
  let profile: Profile;
  let device: { id: string; token: string; name: string };
  let other: { id: string; token: string };
  // 80 KiB: above the 64 KiB device API body limit, below ota.maxBytes.
  const firmware = randomBytes(80 * 1024 + 123);
  const software = Buffer.from('software image 2.0\n'.repeat(50));
  let fw: PackageInfo;
  let fw2: PackageInfo;
  let sw: PackageInfo;

  const createPackage = async (body: Record<string, unknown>): Promise<PackageInfo> => {
    const res = await t.api('/api/otaPackage', { body, token: admin });
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as PackageInfo;
  };
  const uploadMultipart = (id: string, data: Uint8Array, query: string, name = 'fw.bin') => {
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(data)], { type: 'application/x-firmware' }), name);
    return fetch(`${t.baseUrl}/api/otaPackage/${id}?${query}`, {
      method: 'POST',
      headers: { 'X-Authorization': `Bearer ${admin}` },
      body: form,
    });
  };
  const uploadRaw = (id: string, data: Uint8Array, query: string) =>
    fetch(`${t.baseUrl}/api/otaPackage/${id}?${query}`, {
      method: 'POST',
      headers: { 'X-Authorization': `Bearer ${admin}`, 'content-type': 'application/octet-stream' },
      body: new Uint8Array(data),
    });
  const saveDevice = (body: Record<string, unknown>) =>
    t.api('/api/device', { body, token: admin });
  const shared = async (token: string) => {
    const res = await t.api(`/api/v1/${token}/attributes?sharedKeys=${FW_KEYS},fw_tag,fw_url`);
    assert.equal(res.status, 200);
    return ((await res.json()) as { shared?: Record<string, unknown> }).shared ?? {};
  };
  const assignProfile = async (firmwareId: { id: string } | null) => {
    const res = await t.api('/api/deviceProfile', {
      body: { id: profile.id, name: profile.name, firmwareId },
      token: admin,
    });
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as Profile;
  };

  before(async () => {
    t = await startGateway({ config: { ota: { maxBytes: MAX_OTA_BYTES } } });
    admin = await t.adminToken();
    const res = await t.api('/api/deviceProfile', { body: { name: 'Thermostats' }, token: admin });
    profile = (await res.json()) as Profile;
    const create = async (name: string, token: string) => {
      const r = await t.api(`/api/device?accessToken=${token}`, {
        body: { name, deviceProfileId: { id: profile.id.id } },
        token: admin,
      });
      assert.equal(r.status, 200);
      return { id: ((await r.json()) as { id: { id: string } }).id.id, token, name };
    };
    device = await create('Thermostat 1', 'thermo-1-token');
    other = await create('Thermostat 2', 'thermo-2-token');
  });
  after(() => t.close());

  describe('packages', () => {
    it('creates package info without data', async () => {
      fw = await createPackage({
        title: 'thermo-fw',
        version: '1.0',
        type: 'FIRMWARE',
        deviceProfileId: { entityType: 'DEVICE_PROFILE', id: profile.id.id },
      });
      assert.equal(fw.id.entityType, 'OTA_PACKAGE');
      assert.equal(fw.hasData, false);
      assert.equal(fw.dataSize, null);
      fw2 = await createPackage({
        title: 'thermo-fw',
        version: '2.0',
        type: 'FIRMWARE',
        tag: 'thermo-fw 2.0',
        deviceProfileId: { id: profile.id.id },
      });
      sw = await createPackage({
        title: 'thermo-sw',
        version: '2.0',
        type: 'SOFTWARE',
        deviceProfileId: { id: profile.id.id },
      });
    });

    it('refuses a duplicate title/version and invalid info with 400', async () => {
      const cases: Array<[unknown, RegExp]> = [
        [
          { title: 'thermo-fw', version: '1.0', deviceProfileId: { id: profile.id.id } },
          /already exists/,
        ],
        [{ title: '', version: '1' }, /title/],
        [{ title: 't', version: '1', type: 'BOOTLOADER' }, /type/],
        [{ title: 't', version: '1', deviceProfileId: { id: crypto.randomUUID() } }, /profile/],
        ['{"title":', /Invalid JSON/],
      ];
      for (const [body, message] of cases) {
        const res = await t.api('/api/otaPackage', { body, token: admin });
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.match(((await res.json()) as { message: string }).message, message);
      }
    });

    it('rejects an upload whose checksum does not match, and keeps the package empty', async () => {
      const res = await uploadMultipart(
        fw.id.id,
        firmware,
        'checksumAlgorithm=SHA256&checksum=00ff',
      );
      assert.equal(res.status, 400);
      assert.match(((await res.json()) as { message: string }).message, /checksum/i);
      const info = await t.api(`/api/otaPackage/${fw.id.id}`, { token: admin });
      assert.equal(((await info.json()) as PackageInfo).hasData, false);
    });

    it('stores a multipart upload larger than the device API limit and verifies its SHA256', async () => {
      const res = await uploadMultipart(
        fw.id.id,
        firmware,
        `checksumAlgorithm=SHA256&checksum=${sha256(firmware)}`,
        'thermo-fw-1.0.bin',
      );
      assert.equal(res.status, 200, await res.clone().text());
      fw = (await res.json()) as PackageInfo;
      assert.equal(fw.hasData, true);
      assert.equal(fw.dataSize, firmware.length);
      assert.equal(fw.checksumAlgorithm, 'SHA256');
      assert.equal(fw.checksum, sha256(firmware));
      assert.equal(fw.fileName, 'thermo-fw-1.0.bin');
      assert.equal(fw.contentType, 'application/x-firmware');
    });

    it('refuses to replace stored data', async () => {
      const res = await uploadMultipart(fw.id.id, firmware, 'checksumAlgorithm=SHA256');
      assert.equal(res.status, 400);
    });

    it('accepts a raw octet-stream upload, verifying a little-endian CRC32', async () => {
      const buf = Buffer.alloc(4);
      buf.writeUInt32LE(crc32(software));
      const res = await uploadRaw(
        sw.id.id,
        software,
        `checksumAlgorithm=CRC32&checksum=${buf.toString('hex')}`,
      );
      assert.equal(res.status, 200, await res.clone().text());
      sw = (await res.json()) as PackageInfo;
      assert.equal(sw.checksum, buf.toString('hex'));
      assert.equal(sw.dataSize, software.length);
    });

    it('computes an MD5 checksum when none is given', async () => {
      const data = randomBytes(5000);
      const res = await uploadRaw(fw2.id.id, data, 'checksumAlgorithm=MD5');
      assert.equal(res.status, 200);
      fw2 = (await res.json()) as PackageInfo;
      assert.equal(fw2.checksum, createHash('md5').update(data).digest('hex'));
    });

    it('answers 400 for a bad algorithm or id, 404 for an unknown package, 401 without a token', async () => {
      const fresh = await createPackage({
        title: 'spare',
        version: '1',
        deviceProfileId: { id: profile.id.id },
      });
      assert.equal((await uploadRaw(fresh.id.id, software, 'checksumAlgorithm=ROT13')).status, 400);
      assert.equal((await uploadRaw(fresh.id.id, new Uint8Array(0), '')).status, 400);
      const noData = await t.api(`/api/otaPackage/${fresh.id.id}/download`, { token: admin });
      assert.equal(noData.status, 404);
      const delUnknown = await t.api(`/api/otaPackage/${crypto.randomUUID()}`, {
        method: 'DELETE',
        token: admin,
      });
      assert.equal(delUnknown.status, 404);
      assert.equal((await t.api('/api/otaPackages?page=0', { token: admin })).status, 400);
      const text = await fetch(`${t.baseUrl}/api/otaPackage/${fresh.id.id}`, {
        method: 'POST',
        headers: { 'X-Authorization': `Bearer ${admin}`, 'content-type': 'text/plain' },
        body: 'firmware',
      });
      assert.equal(text.status, 400);
      assert.equal((await uploadRaw(crypto.randomUUID(), software, '')).status, 404);
      assert.equal((await t.api('/api/otaPackage/not-a-uuid', { token: admin })).status, 400);
      assert.equal(
        (await t.api(`/api/otaPackage/${crypto.randomUUID()}`, { token: admin })).status,
        404,
      );
      assert.equal((await t.api(`/api/otaPackage/${fw.id.id}`)).status, 401);
      const unauth = await fetch(`${t.baseUrl}/api/otaPackage/${fresh.id.id}`, {
        method: 'POST',
        body: software,
      });
      assert.equal(unauth.status, 401);
      assert.equal(
        (await t.api(`/api/otaPackage/${fresh.id.id}`, { method: 'DELETE', token: admin })).status,
        200,
      );
    });

    it('answers 413 for a file over ota.maxBytes and stores nothing', async () => {
      const fresh = await createPackage({
        title: 'huge',
        version: '1',
        deviceProfileId: { id: profile.id.id },
      });
      const res = await uploadRaw(fresh.id.id, randomBytes(MAX_OTA_BYTES + 1), '');
      assert.equal(res.status, 413);
      const info = await t.api(`/api/otaPackage/${fresh.id.id}`, { token: admin });
      assert.equal(((await info.json()) as PackageInfo).hasData, false);
      await t.api(`/api/otaPackage/${fresh.id.id}`, { method: 'DELETE', token: admin });
    });

    it('lists packages and downloads one whole', async () => {
      const res = await t.api('/api/otaPackages?pageSize=10&page=0&sortProperty=version', {
        token: admin,
      });
      assert.equal(res.status, 200);
      const page = (await res.json()) as { data: PackageInfo[]; totalElements: number };
      assert.equal(page.totalElements, 3);
      const forProfile = await t.api(
        `/api/otaPackages/${profile.id.id}/SOFTWARE?pageSize=10&page=0`,
        {
          token: admin,
        },
      );
      assert.deepEqual(
        ((await forProfile.json()) as { data: PackageInfo[] }).data.map((p) => p.title),
        ['thermo-sw'],
      );
      const dl = await t.api(`/api/otaPackage/${fw.id.id}/download`, { token: admin });
      assert.equal(dl.status, 200);
      assert.equal(sha256(new Uint8Array(await dl.arrayBuffer())), fw.checksum);
    });
  });

  describe('assignment and device download', () => {
    it('answers 404 with an empty body while nothing is assigned', async () => {
      const res = await t.api(`/api/v1/${device.token}/firmware?title=thermo-fw&version=1.0`);
      assert.equal(res.status, 404);
      assert.equal(await res.text(), '');
    });

    it('assigning to the profile sets the fw_* shared attributes, pushed to a polling device', async () => {
      const poll = t.api(`/api/v1/${device.token}/attributes/updates?timeout=10000`);
      // Let the poll register before the assignment.
      await new Promise((r) => setTimeout(r, 100));
      const saved = await assignProfile({ id: fw.id.id });
      assert.equal(saved.firmwareId?.id, fw.id.id);
      const pushed = await poll;
      assert.equal(pushed.status, 200);
      const update = (await pushed.json()) as Record<string, unknown>;
      assert.equal(update.fw_title, 'thermo-fw');
      assert.equal(update.fw_version, '1.0');
      const expected = {
        fw_title: 'thermo-fw',
        fw_version: '1.0',
        fw_size: firmware.length,
        fw_checksum: sha256(firmware),
        fw_checksum_algorithm: 'SHA256',
      };
      await t.gw.services.ota.settled();
      assert.deepEqual(await shared(device.token), expected);
      assert.deepEqual(await shared(other.token), expected);
      assert.equal(t.gw.services.ota.deviceState(device.id)?.state, 'INITIATED');
    });

    it('downloads the firmware in chunks that reassemble to the checksum', async () => {
      const size = 16 * 1024;
      const parts: Buffer[] = [];
      for (let chunk = 0; ; chunk++) {
        const res = await t.api(
          `/api/v1/${device.token}/firmware?title=thermo-fw&version=1.0&size=${size}&chunk=${chunk}`,
        );
        assert.equal(res.status, 200);
        const part = Buffer.from(await res.arrayBuffer());
        if (part.length === 0) break;
        assert.ok(part.length <= size);
        assert.equal(res.headers.get('content-length'), String(part.length));
        parts.push(part);
        assert.ok(chunk < 100, 'download ends');
      }
      assert.equal(parts.length, Math.ceil(firmware.length / size));
      const whole = Buffer.concat(parts);
      assert.equal(sha256(whole), fw.checksum);
      assert.ok(whole.equals(firmware));
    });

    it('sends the whole file without size, with file name headers', async () => {
      const res = await t.api(`/api/v1/${device.token}/firmware?title=thermo-fw&version=1.0`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-disposition'), 'attachment;filename=thermo-fw-1.0.bin');
      assert.equal(res.headers.get('x-filename'), 'thermo-fw-1.0.bin');
      assert.equal(res.headers.get('content-type'), 'application/x-firmware');
      assert.ok(Buffer.from(await res.arrayBuffer()).equals(firmware));
    });

    it('answers 400 for missing or mismatching title/version and bad chunk params, 401 for a bad token', async () => {
      for (const q of [
        'version=1.0',
        'title=thermo-fw',
        'title=thermo-fw&version=9.9',
        'title=other&version=1.0',
        'title=thermo-fw&version=1.0&size=abc',
        'title=thermo-fw&version=1.0&size=10&chunk=-1',
      ]) {
        const res = await t.api(`/api/v1/${device.token}/firmware?${q}`);
        assert.equal(res.status, 400, q);
        const body = (await res.json()) as { status: number; message: string };
        assert.equal(body.status, 400);
        assert.ok(body.message.length > 0);
      }
      const res = await t.api('/api/v1/bad-token/firmware?title=thermo-fw&version=1.0');
      assert.equal(res.status, 401);
      assert.equal(await res.text(), '');
    });

    it('a device assignment overrides the profile; a package of another profile is refused', async () => {
      const res = await saveDevice({
        id: { id: device.id },
        name: device.name,
        deviceProfileId: { id: profile.id.id },
        firmwareId: { id: fw2.id.id },
        softwareId: { id: sw.id.id },
      });
      assert.equal(res.status, 200, await res.clone().text());
      const saved = (await res.json()) as { firmwareId: { entityType: string; id: string } };
      assert.deepEqual(saved.firmwareId, { entityType: 'OTA_PACKAGE', id: fw2.id.id });
      await t.gw.services.ota.settled();
      const attrs = await shared(device.token);
      assert.equal(attrs.fw_version, '2.0');
      assert.equal(attrs.fw_tag, 'thermo-fw 2.0');
      assert.equal(attrs.fw_checksum_algorithm, 'MD5');
      assert.equal((await shared(other.token)).fw_version, '1.0');
      const swRes = await t.api(`/api/v1/${device.token}/software?title=thermo-sw&version=2.0`);
      assert.equal(swRes.status, 200);
      assert.ok(Buffer.from(await swRes.arrayBuffer()).equals(software));

      const other2 = await t.api('/api/device', { body: { name: 'Plain' }, token: admin });
      const plain = (await other2.json()) as { id: { id: string } };
      const refused = await saveDevice({
        id: plain.id,
        name: 'Plain',
        firmwareId: { id: fw.id.id },
      });
      assert.equal(refused.status, 400);
      assert.match(
        ((await refused.json()) as { message: string }).message,
        /different deviceProfile/,
      );
      const wrongType = await saveDevice({
        id: { id: device.id },
        name: device.name,
        deviceProfileId: { id: profile.id.id },
        firmwareId: { id: sw.id.id },
      });
      assert.equal(wrongType.status, 400);
    });

    it('removing the device assignment falls back to the profile package', async () => {
      const res = await saveDevice({
        id: { id: device.id },
        name: device.name,
        deviceProfileId: { id: profile.id.id },
      });
      assert.equal(res.status, 200);
      await t.gw.services.ota.settled();
      const attrs = await shared(device.token);
      assert.equal(attrs.fw_version, '1.0');
      assert.equal(attrs.fw_tag, undefined, 'stale fw_tag deleted');
    });

    it('tracks fw_state telemetry sent by the device', async () => {
      for (const state of ['DOWNLOADING', 'FAILED']) {
        const body =
          state === 'FAILED' ? { fw_state: state, fw_error: 'bad flash' } : { fw_state: state };
        const res = await t.api(`/api/v1/${device.token}/telemetry`, { body });
        assert.equal(res.status, 200);
        await waitFor(
          () => t.gw.services.ota.deviceState(device.id)?.state === state,
          5000,
          `fw_state ${state}`,
        );
      }
      assert.equal(t.gw.services.ota.deviceState(device.id)?.error, 'bad flash');
    });

    it('refuses to delete an assigned package; unassigning deletes the fw_* attributes', async () => {
      const del = await t.api(`/api/otaPackage/${fw.id.id}`, { method: 'DELETE', token: admin });
      assert.equal(del.status, 400);
      assert.match(((await del.json()) as { message: string }).message, /referenced/);
      await assignProfile(null);
      await t.gw.services.ota.settled();
      assert.deepEqual(await shared(device.token), {});
      assert.equal(
        (await t.api(`/api/v1/${device.token}/firmware?title=thermo-fw&version=1.0`)).status,
        404,
      );
      const ok = await t.api(`/api/otaPackage/${fw.id.id}`, { method: 'DELETE', token: admin });
      assert.equal(ok.status, 200);
      assert.equal((await t.api(`/api/otaPackage/${fw.id.id}`, { token: admin })).status, 404);
    });
  });
});
