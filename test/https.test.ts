import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { connect } from 'node:tls';
import { ADMIN_EMAIL, ADMIN_PASSWORD, createDevice, startGateway } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { opensslCertificate } from './helpers/tls.js';

interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** Collects a response into a Reply. */
function collect(res: IncomingMessage, resolve: (r: Reply) => void): void {
  let text = '';
  res.on('data', (d: Buffer) => {
    text += d.toString();
  });
  res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
}

/** One HTTPS request that trusts only `ca` and checks the name `servername` against it. */
function httpsCall(
  port: number,
  path: string,
  opts: { ca: Buffer; servername: string; method?: string; body?: unknown; token?: string },
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: opts.method ?? (body ? 'POST' : 'GET'),
        ca: opts.ca,
        servername: opts.servername,
        headers: {
          ...(body ? { 'content-type': 'application/json' } : {}),
          ...(opts.token ? { 'x-authorization': `Bearer ${opts.token}` } : {}),
        },
        timeout: 10_000,
      },
      (res) => collect(res, resolve),
    );
    req.on('timeout', () => req.destroy(new Error('https request timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

/** One plain HTTP request (fetch follows redirects; this does not). */
function httpCall(port: number, path: string, method = 'GET', body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        headers: body ? { 'content-type': 'application/json' } : {},
      },
      (res) => collect(res, resolve),
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The certificate a TLS server presents (no verification). */
function peerCertificate(port: number): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      const cert = socket.getPeerX509Certificate();
      socket.end();
      if (cert) resolve(cert);
      else reject(new Error('no peer certificate'));
    });
    socket.on('error', reject);
  });
}

describe('HTTPS', () => {
  it('generates a self-signed certificate on first start, keeps it, and serves everything over it', async (ctx) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'edge-gw-https-'));
    ctx.after(() => rm(dataDir, { recursive: true, force: true }));
    const t = await startGateway({ dataDir, config: { https: { enabled: true } } });
    let fingerprint: string;
    try {
      const logged = t.logs.find((l) => typeof l.fingerprint256 === 'string');
      assert.ok(logged, 'the fingerprint is logged');
      assert.equal(logged.generated, true);
      const ca = await readFile(join(dataDir, 'tls', 'cert.pem'));
      const cert = new X509Certificate(ca);
      fingerprint = cert.fingerprint256;
      assert.equal(logged.fingerprint256, fingerprint);
      assert.match(cert.subjectAltName ?? '', /DNS:localhost/);
      assert.match(cert.subjectAltName ?? '', /IP Address:127\.0\.0\.1/);
      assert.equal(cert.publicKey.asymmetricKeyType, 'ec');
      assert.equal((await stat(join(dataDir, 'tls', 'key.pem'))).mode & 0o777, 0o600);

      const port = t.gw.ports.https;
      assert.ok(port > 0);
      assert.equal((await peerCertificate(port)).fingerprint256, fingerprint);

      // The page's info, the REST API and the device API, verified against the certificate by
      // name and by address.
      const info = await httpsCall(port, '/api/system/info', { ca, servername: 'localhost' });
      assert.equal(info.status, 200);
      const body = JSON.parse(info.body) as {
        https: { fingerprint256: string; selfSigned: boolean };
      };
      assert.equal(body.https.fingerprint256, fingerprint);
      assert.equal(body.https.selfSigned, true);
      const login = await httpsCall(port, '/api/auth/login', {
        ca,
        servername: 'localhost',
        body: { username: ADMIN_EMAIL, password: ADMIN_PASSWORD },
      });
      assert.equal(login.status, 200, login.body);
      const device = await createDevice(t, 'secure');
      const telemetry = await httpsCall(port, `/api/v1/${device.token}/telemetry`, {
        ca,
        servername: 'localhost',
        body: { overTls: 1 },
      });
      assert.equal(telemetry.status, 200);
      assert.deepEqual(t.gw.services.telemetry.keys(device.id), ['overTls']);
      const page = await httpsCall(port, '/', { ca, servername: 'localhost' });
      assert.equal(page.status, 200);

      // MQTT over TLS and MQTT over secure WebSocket use the same pair.
      assert.equal((await peerCertificate(t.gw.ports.mqttTls)).fingerprint256, fingerprint);
      const mqtts = await mqttConnect(t.gw.ports.mqttTls, {
        protocol: 'mqtts',
        ca,
        username: device.token,
      });
      await mqtts.publishAsync('v1/devices/me/telemetry', '{"mqtts":1}', { qos: 1 });
      await mqtts.endAsync();
      const wss = await mqttConnect(port, {
        protocol: 'wss',
        path: '/mqtt',
        ca,
        username: device.token,
        wsOptions: { ca },
      });
      await wss.publishAsync('v1/devices/me/telemetry', '{"wss":1}', { qos: 1 });
      await wss.endAsync();
      assert.deepEqual(t.gw.services.telemetry.keys(device.id).sort(), ['mqtts', 'overTls', 'wss']);
    } finally {
      await t.close(false);
    }

    // A restart keeps the certificate (browsers and devices that accepted it go on working).
    const again = await startGateway({ dataDir, config: { https: { enabled: true } } });
    try {
      assert.equal((await peerCertificate(again.gw.ports.https)).fingerprint256, fingerprint);
    } finally {
      await again.close(false);
    }
  });

  it('serves a given certificate, and redirects plain HTTP except the device API', async (ctx) => {
    const dir = await mkdtemp(join(tmpdir(), 'edge-gw-https-given-'));
    ctx.after(() => rm(dir, { recursive: true, force: true }));
    const { cert: certFile, key: keyFile } = opensslCertificate(
      dir,
      '/CN=gateway.plant.test',
      'DNS:gateway.plant.test',
    );
    const ca = await readFile(certFile);
    const t = await startGateway({
      config: {
        https: { enabled: true },
        tls: { cert: certFile, key: keyFile },
        http: { redirect: true },
      },
    });
    try {
      const given = new X509Certificate(ca).fingerprint256;
      assert.equal((await peerCertificate(t.gw.ports.https)).fingerprint256, given);
      assert.equal((await peerCertificate(t.gw.ports.mqttTls)).fingerprint256, given);
      const logged = t.logs.find((l) => typeof l.fingerprint256 === 'string');
      assert.equal(logged?.generated, false);
      const health = await httpsCall(t.gw.ports.https, '/healthz', {
        ca,
        servername: 'gateway.plant.test',
      });
      assert.equal(health.status, 200);

      const https = t.gw.ports.https;
      const http = t.gw.ports.http;
      // The REST API, the page and health go to HTTPS, path and query kept; 308 keeps the method.
      for (const [method, path] of [
        ['GET', '/'],
        ['GET', '/api/tenant/devices?pageSize=10&page=0'],
        ['POST', '/api/auth/login'],
        ['GET', '/healthz'],
      ] as const) {
        const r = await httpCall(http, path, method, method === 'POST' ? '{}' : undefined);
        assert.equal(r.status, 308, `${method} ${path}`);
        assert.equal(r.headers.location, `https://127.0.0.1:${https}${path}`);
      }
      // The device API stays on plain HTTP.
      const device = await createDeviceOverHttps(https, ca);
      const plain = await httpCall(http, `/api/v1/${device}/telemetry`, 'POST', '{"plain":1}');
      assert.equal(plain.status, 200);
      const attrs = await httpCall(http, `/api/v1/${device}/attributes?clientKeys=a`);
      assert.equal(attrs.status, 200);
    } finally {
      await t.close();
    }

    /** Creates a device through the REST API over HTTPS; returns its access token. */
    async function createDeviceOverHttps(port: number, cafile: Buffer): Promise<string> {
      const o = { ca: cafile, servername: 'gateway.plant.test' };
      const login = await httpsCall(port, '/api/auth/login', {
        ...o,
        body: { username: ADMIN_EMAIL, password: ADMIN_PASSWORD },
      });
      const { token } = JSON.parse(login.body) as { token: string };
      const created = await httpsCall(port, '/api/device?accessToken=PLAIN_TOKEN', {
        ...o,
        token,
        body: { name: 'plain-device' },
      });
      assert.equal(created.status, 200, created.body);
      return 'PLAIN_TOKEN';
    }
  });

  it('is off when turned off: no HTTPS listener, no MQTT over TLS, nothing generated', async () => {
    const t = await startGateway({ config: { https: { enabled: false } } });
    try {
      assert.equal(t.gw.ports.https, 0);
      assert.equal(t.gw.ports.mqttTls, 0);
      const info = (await (await t.api('/api/system/info')).json()) as { https: unknown };
      assert.equal(info.https, null);
      await assert.rejects(stat(join(t.dataDir, 'tls')));
    } finally {
      await t.close();
    }
  });
});
