import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { mqttConnect, mqttRefusal } from './helpers/mqtt.js';
import { opensslCertificate } from './helpers/tls.js';

describe('MQTT over TLS and over WebSocket', () => {
  let t: TestGateway;
  let dir: string;
  let ca: Buffer;
  let dev: { id: string; token: string };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-gw-tls-'));
    const { cert, key } = opensslCertificate(dir, '/CN=localhost', 'IP:127.0.0.1,DNS:localhost');
    ca = await readFile(cert);
    t = await startGateway({ config: { mqtt: { tlsPort: 0, tlsCert: cert, tlsKey: key } } });
    dev = await createDevice(t, 'tls-device', 'TLS_TOKEN');
  });
  after(async () => {
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('listens for MQTT over TLS when a certificate and key are configured', async () => {
    assert.ok(t.gw.ports.mqttTls > 0);
    const c = await mqttConnect(t.gw.ports.mqttTls, {
      protocol: 'mqtts',
      ca,
      username: dev.token,
      clientId: 'tls-1',
    });
    await c.publishAsync('v1/devices/me/telemetry', '{"secure":1}', { qos: 1 });
    await c.endAsync();
    assert.deepEqual(t.gw.services.telemetry.keys(dev.id), ['secure']);
    assert.equal(
      await mqttRefusal(t.gw.ports.mqttTls, { protocol: 'mqtts', ca, username: 'WRONG' }),
      5,
    );
  });

  it('serves MQTT over WebSocket on the HTTP port at /mqtt and nowhere else', async () => {
    const c = await mqttConnect(t.gw.ports.http, {
      protocol: 'ws',
      path: '/mqtt',
      username: dev.token,
      clientId: 'ws-1',
    });
    await c.publishAsync('v1/devices/me/telemetry', '{"browser":1}', { qos: 1 });
    await c.endAsync();
    assert.ok(t.gw.services.telemetry.keys(dev.id).includes('browser'));
    await assert.rejects(
      mqttConnect(t.gw.ports.http, {
        protocol: 'ws',
        path: '/elsewhere',
        username: dev.token,
        connectTimeout: 2000,
      }),
    );
  });

  it('serves no TLS port without a certificate', async () => {
    const plain = await startGateway();
    try {
      assert.equal(plain.gw.ports.mqttTls, 0);
    } finally {
      await plain.close();
    }
  });
});
