import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { IClientOptions } from 'mqtt';
import protobuf from 'protobufjs';
import { coapRequest } from './helpers/coap.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { mqttConnect, mqttRefusal, nextMessage } from './helpers/mqtt.js';
import { issue, makeCa, type Pem, selfSignedClient } from './helpers/pki.js';

const DAY = 24 * 3600_000;

/** The certificate's base64 body: its PEM without header, footer and line breaks. */
const bodyOf = (pem: string) =>
  pem.replace(/-----(BEGIN|END) CERTIFICATE-----/g, '').replace(/\s/g, '');
/** ThingsBoard's credentials id of a certificate: SHA3-256 hex of that body (device-api.md §8.2). */
const sha3 = (text: string) => createHash('sha3-256').update(text).digest('hex');

interface Credentials {
  credentialsType: string;
  credentialsId: string;
  credentialsValue: string | null;
}

describe('X.509 device credentials over MQTT with TLS', () => {
  let t: TestGateway;
  let admin: string;
  let dir: string;
  let serverCa: string;
  let serverPair: { cert: string; key: string };

  /** mqtt.js options for the gateway's TLS port, with the device's certificate when given. */
  const tlsOptions = (device?: Pem, extra: IClientOptions = {}): IClientOptions => ({
    protocol: 'mqtts',
    ca: serverCa,
    ...(device ? { cert: device.cert, key: device.key } : {}),
    ...extra,
  });
  const setCredentials = (deviceId: string, pem: string) =>
    t.api('/api/device/credentials', {
      body: {
        deviceId: { id: deviceId },
        credentialsType: 'X509_CERTIFICATE',
        credentialsValue: pem,
      },
      token: admin,
    });
  const readCredentials = async (deviceId: string) =>
    (await (
      await t.api(`/api/device/${deviceId}/credentials`, { token: admin })
    ).json()) as Credentials;
  const latest = async (deviceId: string, key: string) => {
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${deviceId}/values/timeseries?keys=${key}&useStrictDataTypes=true`,
      {
        token: admin,
      },
    );
    const body = (await res.json()) as Record<string, Array<{ value: unknown }> | undefined>;
    return body[key]?.[0]?.value;
  };
  /** Registers a device with `pem` as its X.509 credentials; returns its id. */
  const x509Device = async (name: string, pem: string) => {
    const { id } = await createDevice(t, name);
    const res = await setCredentials(id, pem);
    assert.equal(res.status, 200, await res.clone().text());
    return id;
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-gw-x509-'));
    const ca = await makeCa('x509 test server CA');
    const server = await issue(ca, '127.0.0.1', 'server');
    serverCa = ca.cert;
    serverPair = { cert: join(dir, 'server.pem'), key: join(dir, 'server-key.pem') };
    await writeFile(serverPair.cert, server.cert);
    await writeFile(serverPair.key, server.key);
    t = await startGateway({
      config: { mqtt: { tlsPort: 0, tlsCert: serverPair.cert, tlsKey: serverPair.key } },
    });
    admin = await t.adminToken();
  });
  after(async () => {
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('stores a certificate keyed by the SHA3-256 of its base64 body and shows it', async () => {
    const device = await selfSignedClient('rest-device');
    const { id } = await createDevice(t, 'x509-rest');
    const res = await setCredentials(id, device.cert);
    assert.equal(res.status, 200);
    const saved = (await res.json()) as Credentials;
    assert.equal(saved.credentialsType, 'X509_CERTIFICATE');
    assert.equal(saved.credentialsId, sha3(bodyOf(device.cert)));
    assert.equal(saved.credentialsValue, bodyOf(device.cert));
    assert.deepEqual(await readCredentials(id), saved);
    // The same certificate with Windows line ends, or as its bare base64 body, is the same key.
    for (const form of [device.cert.replace(/\n/g, '\r\n'), bodyOf(device.cert)]) {
      const again = await setCredentials(id, form);
      assert.equal(again.status, 200);
      assert.equal(((await again.json()) as Credentials).credentialsId, saved.credentialsId);
    }
    // A device with X.509 credentials has no access token: its old one opens nothing.
    const http = await t.api('/api/v1/anything/telemetry', { body: { x: 1 } });
    assert.equal(http.status, 401);
  });

  it('refuses what is not one certificate, and a certificate another device has (400)', async () => {
    const { id } = await createDevice(t, 'x509-bad');
    const device = await selfSignedClient('bad-device');
    for (const pem of [
      'not a certificate',
      '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----',
      `${device.cert}\n${device.cert}`,
    ]) {
      const res = await setCredentials(id, pem);
      assert.equal(res.status, 400, pem);
      const body = (await res.json()) as { message: string };
      assert.match(body.message, /credentialsValue must be one PEM X\.509 certificate/);
    }
    const missing = await t.api('/api/device/credentials', {
      body: { deviceId: { id }, credentialsType: 'X509_CERTIFICATE' },
      token: admin,
    });
    assert.equal(missing.status, 400);
    assert.match(((await missing.json()) as { message: string }).message, /credentialsValue/);
    await x509Device('x509-owner', device.cert);
    const taken = await setCredentials(id, device.cert);
    assert.equal(taken.status, 400);
    assert.match(((await taken.json()) as { message: string }).message, /already assigned/);
    assert.equal((await readCredentials(id)).credentialsType, 'ACCESS_TOKEN');
  });

  it('authenticates a device by its certificate (user name ignored) and stores its telemetry', async () => {
    const device = await selfSignedClient('sensor-1');
    const id = await x509Device('x509-sensor', device.cert);
    const c = await mqttConnect(
      t.gw.ports.mqttTls,
      tlsOptions(device, { username: 'not-a-token', password: 'ignored', clientId: 'x509-1' }),
    );
    await c.publishAsync('v1/devices/me/telemetry', '{"certTemp":21.5}', { qos: 1 });
    await c.endAsync();
    assert.equal(await latest(id, 'certTemp'), 21.5);
  });

  it('accepts a CA-signed device certificate by the leaf alone', async () => {
    const ca = await makeCa('device CA');
    const device = await issue(ca, 'ca-signed-sensor', 'client');
    const id = await x509Device('x509-ca-signed', device.cert);
    const c = await mqttConnect(t.gw.ports.mqttTls, tlsOptions(device, { clientId: 'x509-ca' }));
    await c.publishAsync('v1/devices/me/telemetry', '{"signed":1}', { qos: 1 });
    await c.endAsync();
    assert.equal(await latest(id, 'signed'), 1);
  });

  it('refuses an unknown certificate with not authorized, even with a good token', async () => {
    const { token } = await createDevice(t, 'x509-token-device');
    const stranger = await selfSignedClient('stranger');
    assert.equal(
      await mqttRefusal(t.gw.ports.mqttTls, tlsOptions(stranger, { username: token })),
      5,
    );
    assert.equal(
      await mqttRefusal(t.gw.ports.mqttTls, tlsOptions(stranger, { protocolVersion: 5 })),
      0x87,
    );
    // Without a certificate, the same token opens a session as before.
    const c = await mqttConnect(t.gw.ports.mqttTls, tlsOptions(undefined, { username: token }));
    await c.endAsync();
  });

  it('refuses an expired or not yet valid certificate', async () => {
    const expired = await selfSignedClient('expired', {
      notBefore: new Date(Date.now() - 10 * DAY),
      notAfter: new Date(Date.now() - DAY),
    });
    const early = await selfSignedClient('early', {
      notBefore: new Date(Date.now() + DAY),
      notAfter: new Date(Date.now() + 10 * DAY),
    });
    await x509Device('x509-expired', expired.cert);
    await x509Device('x509-early', early.cert);
    assert.equal(await mqttRefusal(t.gw.ports.mqttTls, tlsOptions(expired)), 5);
    assert.equal(
      await mqttRefusal(t.gw.ports.mqttTls, tlsOptions(expired, { protocolVersion: 5 })),
      0x87,
    );
    assert.equal(await mqttRefusal(t.gw.ports.mqttTls, tlsOptions(early)), 5);
  });

  it('accepts an expired certificate with --mqtt-tls-skip-cert-validity', async () => {
    const lenient = await startGateway({
      config: {
        mqtt: {
          tlsPort: 0,
          tlsCert: serverPair.cert,
          tlsKey: serverPair.key,
          tlsSkipCertValidity: true,
        },
      },
    });
    try {
      const expired = await selfSignedClient('old-device', {
        notBefore: new Date(Date.now() - 10 * DAY),
        notAfter: new Date(Date.now() - DAY),
      });
      const token = await lenient.adminToken();
      const { id } = await createDevice(lenient, 'x509-old');
      const res = await lenient.api('/api/device/credentials', {
        body: {
          deviceId: { id },
          credentialsType: 'X509_CERTIFICATE',
          credentialsValue: expired.cert,
        },
        token,
      });
      assert.equal(res.status, 200);
      const c = await mqttConnect(lenient.gw.ports.mqttTls, tlsOptions(expired));
      await c.publishAsync('v1/devices/me/telemetry', '{"old":1}', { qos: 1 });
      await c.endAsync();
      assert.deepEqual(lenient.gw.services.telemetry.keys(id), ['old']);
    } finally {
      await lenient.close();
    }
  });

  describe('provisioning with X509_CERTIFICATE', () => {
    const request = (deviceName: string, pem: string) => ({
      deviceName,
      provisionDeviceKey: 'x509-key',
      provisionDeviceSecret: 'x509-secret',
      credentialsType: 'X509_CERTIFICATE',
      hash: pem,
    });
    const deviceId = async (name: string) =>
      (
        (await (
          await t.api(`/api/tenant/devices?deviceName=${name}`, { token: admin })
        ).json()) as {
          id: { id: string };
        }
      ).id.id;
    /** Connects with the certificate, sends one reading, and checks it arrived. */
    const connectsWith = async (name: string, device: Pem) => {
      const c = await mqttConnect(t.gw.ports.mqttTls, tlsOptions(device));
      await c.publishAsync('v1/devices/me/telemetry', '{"provisioned":1}', { qos: 1 });
      await c.endAsync();
      assert.equal(await latest(await deviceId(name), 'provisioned'), 1);
    };

    before(async () => {
      for (const [name, type, key, secret] of [
        ['x509-created', 'ALLOW_CREATE_NEW_DEVICES', 'x509-key', 'x509-secret'],
        ['x509-pre', 'CHECK_PRE_PROVISIONED_DEVICES', 'x509-pre-key', 'x509-pre-secret'],
      ]) {
        const res = await t.api('/api/deviceProfile', {
          body: {
            name,
            profileData: {
              provisionConfiguration: {
                type,
                provisionDeviceKey: key,
                provisionDeviceSecret: secret,
              },
            },
          },
          token: admin,
        });
        assert.equal(res.status, 200, await res.clone().text());
      }
    });

    it('over HTTP: SUCCESS with the base64 body, then the device connects with it', async () => {
      const device = await selfSignedClient('http-provisioned');
      const res = await t.api('/api/v1/provision', { body: request('x509-http', device.cert) });
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), {
        credentialsValue: bodyOf(device.cert),
        credentialsType: 'X509_CERTIFICATE',
        status: 'SUCCESS',
      });
      const creds = await readCredentials(await deviceId('x509-http'));
      assert.equal(creds.credentialsId, sha3(bodyOf(device.cert)));
      await connectsWith('x509-http', device);
    });

    it('over MQTT with TLS, presenting the certificate on the provision session', async () => {
      const device = await selfSignedClient('mqtt-provisioned');
      const p = await mqttConnect(
        t.gw.ports.mqttTls,
        tlsOptions(device, { username: 'provision', clientId: 'x509-prov' }),
      );
      try {
        await p.subscribeAsync('/provision/response', { qos: 1 });
        const response = nextMessage(p, '/provision/response');
        await p.publishAsync(
          '/provision/request',
          JSON.stringify(request('x509-mqtt', device.cert)),
          {
            qos: 1,
          },
        );
        assert.deepEqual(JSON.parse((await response).payload.toString()), {
          credentialsValue: bodyOf(device.cert),
          credentialsType: 'X509_CERTIFICATE',
          status: 'SUCCESS',
        });
      } finally {
        await p.endAsync();
      }
      await connectsWith('x509-mqtt', device);
    });

    it('over MQTT as a Protobuf ProvisionDeviceRequestMsg (ThingsBoard .proto field names)', async () => {
      const root = protobuf.parse(`syntax = "proto3";
        enum CredentialsType { ACCESS_TOKEN = 0; X509_CERTIFICATE = 1; MQTT_BASIC = 2; }
        message ValidateDeviceX509CertRequestMsg { string hash = 1; }
        message CredentialsDataProto { ValidateDeviceX509CertRequestMsg validateDeviceX509CertRequestMsg = 2; }
        message ProvisionDeviceCredentialsMsg { string provisionDeviceKey = 1; string provisionDeviceSecret = 2; }
        message ProvisionDeviceRequestMsg { string deviceName = 1; CredentialsType credentialsType = 2;
          ProvisionDeviceCredentialsMsg provisionDeviceCredentialsMsg = 3;
          CredentialsDataProto credentialsDataProto = 4; }
        enum ResponseStatus { UNKNOWN = 0; SUCCESS = 1; NOT_FOUND = 2; FAILURE = 3; }
        message ProvisionDeviceResponseMsg { ResponseStatus status = 1; CredentialsType credentialsType = 2;
          string credentialsValue = 3; }`).root;
      const Request = root.lookupType('ProvisionDeviceRequestMsg');
      const Response = root.lookupType('ProvisionDeviceResponseMsg');
      const device = await selfSignedClient('proto-provisioned');
      const payload = Request.encode(
        Request.fromObject({
          deviceName: 'x509-proto',
          credentialsType: 'X509_CERTIFICATE',
          provisionDeviceCredentialsMsg: {
            provisionDeviceKey: 'x509-key',
            provisionDeviceSecret: 'x509-secret',
          },
          credentialsDataProto: { validateDeviceX509CertRequestMsg: { hash: device.cert } },
        }),
      ).finish();
      const p = await mqttConnect(
        t.gw.ports.mqttTls,
        tlsOptions(undefined, { username: 'provision' }),
      );
      try {
        await p.subscribeAsync('/provision/response', { qos: 1 });
        const response = nextMessage(p, '/provision/response');
        await p.publishAsync('/provision/request', Buffer.from(payload), { qos: 1 });
        const answer = Response.toObject(Response.decode((await response).payload), {
          enums: String,
        });
        assert.deepEqual(answer, {
          status: 'SUCCESS',
          credentialsType: 'X509_CERTIFICATE',
          credentialsValue: bodyOf(device.cert),
        });
      } finally {
        await p.endAsync();
      }
      await connectsWith('x509-proto', device);
    });

    it('over CoAP: 2.01 with the same body', async () => {
      const device = await selfSignedClient('coap-provisioned');
      const res = await coapRequest({
        port: t.gw.ports.coap,
        method: 'POST',
        pathname: '/api/v1/provision',
        payload: JSON.stringify(request('x509-coap', device.cert)),
      });
      assert.equal(res.code, '2.01');
      assert.deepEqual(JSON.parse(res.text), {
        credentialsValue: bodyOf(device.cert),
        credentialsType: 'X509_CERTIFICATE',
        status: 'SUCCESS',
      });
      await connectsWith('x509-coap', device);
    });

    it('FAILURE for a certificate in use or not a certificate, and no device ever made', async () => {
      const device = await selfSignedClient('used-twice');
      await x509Device('x509-first-owner', device.cert);
      // Refused before a device exists: not created and deleted again (ENTITY_ACTION rules).
      const created: string[] = [];
      const onCreated = (e: { device: { name: string } }) => created.push(e.device.name);
      t.gw.bus.on('x509-test', 'device.created', onCreated);
      try {
        for (const pem of [device.cert, 'not a certificate']) {
          const res = await t.api('/api/v1/provision', { body: request('x509-second', pem) });
          assert.deepEqual(await res.json(), {
            errorMsg: 'Failed to provision device!',
            status: 'FAILURE',
          });
        }
      } finally {
        t.gw.bus.off('x509-test', 'device.created', onCreated);
      }
      assert.deepEqual(created, []);
      const lookup = await t.api('/api/tenant/devices?deviceName=x509-second', { token: admin });
      assert.equal(lookup.status, 404);
    });

    it('a pre-provisioned device answers with its stored certificate', async () => {
      const device = await selfSignedClient('pre-provisioned');
      const profile = (await (
        await t.api('/api/deviceProfiles?pageSize=100&page=0', { token: admin })
      ).json()) as { data: Array<{ id: { id: string }; name: string }> };
      const pre = profile.data.find((p) => p.name === 'x509-pre');
      assert.ok(pre);
      const created = await t.api('/api/device', {
        body: { name: 'x509-meter', deviceProfileId: { id: pre.id.id } },
        token: admin,
      });
      const id = ((await created.json()) as { id: { id: string } }).id.id;
      assert.equal((await setCredentials(id, device.cert)).status, 200);
      const res = await t.api('/api/v1/provision', {
        body: {
          deviceName: 'x509-meter',
          provisionDeviceKey: 'x509-pre-key',
          provisionDeviceSecret: 'x509-pre-secret',
        },
      });
      assert.deepEqual(await res.json(), {
        credentialsValue: bodyOf(device.cert),
        credentialsType: 'X509_CERTIFICATE',
        status: 'SUCCESS',
      });
    });
  });
});
