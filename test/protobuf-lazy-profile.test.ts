/**
 * protobufjs is loaded on first use, not at start (src/devices/protobuf-lib.ts): a profile
 * switched to Protobuf after start decodes its devices' Protobuf telemetry as one that was
 * Protobuf from the start, and a gateway started with a stored Protobuf profile loads it before
 * its transports listen (the built bundle, a fresh process). Its own file: the library is loaded
 * once per process.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import protobuf from 'protobufjs';
import { protobufLoaded } from '../src/devices/protobuf-lib.js';
import {
  createPlainMqttProfile,
  createProfiledDevice,
  latest,
  setProfileTransport,
} from './helpers/alarms.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { closed, mqttConnect } from './helpers/mqtt.js';
import {
  BUNDLE,
  type GatewayProcess,
  LOOPBACK_EPHEMERAL,
  loginTo,
  spawnGateway,
} from './helpers/process.js';

const TELEMETRY_SCHEMA = `syntax = "proto3";
package telemetry;
message Reading { optional double temperature = 1; optional string state = 2; }`;
const ATTRIBUTES_SCHEMA = `syntax = "proto3";
package attributes;
message Config { optional string firmwareVersion = 1; }`;
const Reading = protobuf.parse(TELEMETRY_SCHEMA).root.lookupType('telemetry.Reading');

describe('protobufjs loaded when a profile is switched to Protobuf', () => {
  let t: TestGateway;
  let admin: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  it('a JSON profile switched to Protobuf after start: its device reconnects and sends Protobuf telemetry', async () => {
    const profile = await createPlainMqttProfile(t, 'JSON, later Protobuf');
    const device = await createProfiledDevice(t, 'late-proto-device', profile.id.id);

    const json = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
    await json.publishAsync('v1/devices/me/telemetry', '{"temperature":20}', { qos: 1 });
    await waitFor(async () => (await latest(t, device.id, 'temperature')) === 20, 10_000, 'JSON');
    assert.equal(protobufLoaded(), false, 'not loaded by JSON devices');

    const gone = closed(json, 10_000);
    await setProfileTransport(t, profile, {
      type: 'MQTT',
      transportPayloadTypeConfiguration: {
        transportPayloadType: 'PROTOBUF',
        deviceTelemetryProtoSchema: TELEMETRY_SCHEMA,
        deviceAttributesProtoSchema: ATTRIBUTES_SCHEMA,
      },
    });
    assert.equal(protobufLoaded(), true, 'loaded by the save');
    await gone;
    json.end(true);

    const proto = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
    try {
      const payload = Buffer.from(
        Reading.encode(Reading.fromObject({ temperature: 21.5, state: 'ok' })).finish(),
      );
      await proto.publishAsync('v1/devices/me/telemetry', payload, { qos: 1 });
      await waitFor(
        async () => (await latest(t, device.id, 'temperature')) === 21.5,
        10_000,
        'Protobuf telemetry',
      );
      assert.equal(await latest(t, device.id, 'state'), 'ok');
    } finally {
      await proto.endAsync();
    }
  });

  it("a schema that does not compile is still refused with ThingsBoard's message", async () => {
    const res = await t.api('/api/deviceProfile', {
      token: admin,
      body: {
        name: 'broken proto',
        transportType: 'MQTT',
        profileData: {
          transportConfiguration: {
            type: 'MQTT',
            transportPayloadTypeConfiguration: {
              transportPayloadType: 'PROTOBUF',
              deviceTelemetryProtoSchema: 'syntax = "proto3"; message {',
              deviceAttributesProtoSchema: ATTRIBUTES_SCHEMA,
            },
          },
        },
      },
    });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /failed to parse telemetry proto schema/);
  });
});

const EMAIL = 'lazy-proto@test.local';
const PASSWORD = 'lazy-proto-password-1';

/** The built bundle on `dir`; its base URL and an admin token. */
async function spawned(dir: string): Promise<{ gw: GatewayProcess; base: string; token: string }> {
  const gw = await spawnGateway(['serve', '--data-dir', dir, ...LOOPBACK_EPHEMERAL], {
    env: { EDGE_ADMIN_EMAIL: EMAIL, EDGE_ADMIN_PASSWORD: PASSWORD },
  });
  const { base, token } = await loginTo(gw, EMAIL, PASSWORD);
  return { gw, base, token };
}

describe('protobufjs loaded at start for a stored Protobuf profile', () => {
  let dir: string;
  const procs: GatewayProcess[] = [];
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-lazy-proto-'));
  });
  after(async () => {
    for (const p of procs) await p.stop('SIGKILL').catch(() => 'already gone');
    await rm(dir, { recursive: true, force: true });
  });

  it("after a restart, a device's first message is Protobuf telemetry, decoded", async () => {
    assert.ok(existsSync(BUNDLE), 'run `node build.mjs` first: this test runs the built bundle');
    const first = await spawned(dir);
    procs.push(first.gw);
    const auth = { 'content-type': 'application/json', 'X-Authorization': `Bearer ${first.token}` };
    const profile = await fetch(`${first.base}/api/deviceProfile`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({
        name: 'stored Protobuf',
        transportType: 'MQTT',
        profileData: {
          transportConfiguration: {
            type: 'MQTT',
            transportPayloadTypeConfiguration: {
              transportPayloadType: 'PROTOBUF',
              deviceTelemetryProtoSchema: TELEMETRY_SCHEMA,
              deviceAttributesProtoSchema: ATTRIBUTES_SCHEMA,
            },
          },
        },
      }),
    });
    assert.equal(profile.status, 200, await profile.clone().text());
    const profileId = ((await profile.json()) as { id: { id: string } }).id.id;
    const device = await fetch(`${first.base}/api/device?accessToken=restart-proto-token`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({
        name: 'restart-proto',
        deviceProfileId: { entityType: 'DEVICE_PROFILE', id: profileId },
      }),
    });
    assert.equal(device.status, 200, await device.clone().text());
    const deviceId = ((await device.json()) as { id: { id: string } }).id.id;
    assert.equal(await first.gw.stop(), 0);

    const second = await spawned(dir);
    procs.push(second.gw);
    const c = await mqttConnect(second.gw.ports.mqtt, { username: 'restart-proto-token' });
    try {
      const payload = Buffer.from(
        Reading.encode(Reading.fromObject({ temperature: 7.5 })).finish(),
      );
      await c.publishAsync('v1/devices/me/telemetry', payload, { qos: 1 });
    } finally {
      await c.endAsync();
    }
    const res = await fetch(
      `${second.base}/api/plugins/telemetry/DEVICE/${deviceId}/values/timeseries?keys=temperature&useStrictDataTypes=true`,
      { headers: { 'X-Authorization': `Bearer ${second.token}` } },
    );
    const body = (await res.json()) as Record<string, Array<{ value: unknown }>>;
    assert.equal(body.temperature?.[0]?.value, 7.5);
  });
});
