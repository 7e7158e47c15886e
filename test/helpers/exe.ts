import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { join } from 'node:path';
import { coapRequest } from './coap.js';
import { waitFor } from './gateway.js';
import { SocatPair } from './modbus.js';
import { mqttConnect } from './mqtt.js';
import { LOOPBACK_EPHEMERAL, PROJECT_ROOT, runGateway, spawnGateway } from './process.js';

/** No node on it: the executable must not need one. */
export const NO_NODE = { PATH: '/nonexistent' };

/**
 * How qemu-user runs the arm64 executable without binfmt_misc: named (by its full path, as the
 * executable runs with NO_NODE's PATH), with arm64's libc (-L).
 */
export function qemuArm64(): string[] {
  const qemu = (process.env.PATH ?? '')
    .split(':')
    .map((dir) => join(dir, 'qemu-aarch64-static'))
    .find((file) => existsSync(file));
  assert.ok(qemu, 'qemu-aarch64-static is not on the PATH: apt-get install qemu-user-static');
  return [qemu, '-L', '/usr/aarch64-linux-gnu'];
}

/** Builds dist/edge-gateway-linux-<arch> the way `npm run build:exe` does; returns seconds. */
export function buildExe(arch: 'x64' | 'arm64'): number {
  const started = Date.now();
  const r = spawnSync(process.execPath, ['scripts/build-exe.mjs', '--arch', arch], {
    cwd: PROJECT_ROOT,
    stdio: 'inherit',
  });
  assert.equal(r.status, 0, `build-exe --arch ${arch} failed`);
  return (Date.now() - started) / 1000;
}

/** One HTTPS GET that trusts only `ca` (for the name localhost). */
function httpsGet(
  port: number,
  path: string,
  ca: Buffer,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, ca, servername: 'localhost', timeout: 30_000 },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => {
          body += d.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('https request timed out')));
    req.on('error', reject);
    req.end();
  });
}

/**
 * A first start of an executable (`command`, e.g. [exe] or [...qemuArm64(), exe]) from a folder
 * with no node and no node_modules: healthz, the page, the generated admin's login, one reading
 * each over HTTP, MQTT, CoAP, MQTT over TLS and a serial line (socat) read back over REST, one
 * HTTPS request checked against the generated certificate, /metrics, and a backup while it runs.
 */
export async function smokeTest(
  command: readonly string[],
  dir: string,
  opts: {
    timeoutMs: number;
    env?: Record<string, string>;
    /** The errno of TIOCSRS485 on a pty: ENOTTY (the kernel's), ENOSYS under qemu-user. */
    rs485Errno?: string;
  },
) {
  const { timeoutMs } = opts;
  const dataDir = join(dir, 'data');
  const metricsToken = 'smoke-scrape-token';
  const gw = await spawnGateway(['serve', '--data-dir', dataDir, ...LOOPBACK_EPHEMERAL], {
    command,
    cwd: dir,
    env: { ...NO_NODE, ...opts.env, EDGE_METRICS_TOKEN: metricsToken },
    timeoutMs,
  });
  try {
    const base = `http://127.0.0.1:${gw.ports.http}`;
    const health = await fetch(`${base}/healthz`);
    assert.equal(health.status, 200);
    assert.equal(((await health.json()) as { status: string }).status, 'UP');
    const page = await fetch(`${base}/`);
    assert.match(await page.text(), /<div id="app">/, 'the web page comes from the executable');
    // The addons and the page were written to the cache folder beside the data.
    const [build] = await readdir(join(dataDir, 'cache'));
    for (const addon of ['better_sqlite3.node', 'serialport.node'])
      assert.ok((await stat(join(dataDir, 'cache', build, addon))).size > 1e5, addon);
    assert.ok((await stat(join(dataDir, 'cache', build, 'edge_native.node'))).size > 1e3);

    const text = await readFile(join(dataDir, 'initial-admin.txt'), 'utf8');
    const username = /email: (\S+)/.exec(text)?.[1];
    const password = /password: (\S+)/.exec(text)?.[1];
    const login = await fetch(`${base}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username, password }),
    });
    assert.equal(login.status, 200);
    const { token } = (await login.json()) as { token: string };
    const auth = { 'x-authorization': `Bearer ${token}`, 'content-type': 'application/json' };
    const created = await fetch(`${base}/api/device?accessToken=SMOKE_TOKEN`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ name: 'smoke' }),
    });
    assert.equal(created.status, 200);
    const deviceId = ((await created.json()) as { id: { id: string } }).id.id;

    const http = await fetch(`${base}/api/v1/SMOKE_TOKEN/telemetry`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ viaHttp: 1 }),
    });
    assert.equal(http.status, 200);
    const mqtt = await mqttConnect(gw.ports.mqtt, {
      username: 'SMOKE_TOKEN',
      connectTimeout: 60_000,
    });
    await mqtt.publishAsync('v1/devices/me/telemetry', JSON.stringify({ viaMqtt: 2 }), { qos: 1 });
    await mqtt.endAsync();
    const coap = await coapRequest(
      {
        port: gw.ports.coap,
        method: 'POST',
        pathname: '/api/v1/SMOKE_TOKEN/telemetry',
        payload: JSON.stringify({ viaCoap: 3 }),
      },
      60_000,
    );
    assert.equal(coap.code, '2.01');

    // A text-line device on a socat serial pair: serialport's addon, carried by the executable.
    const pair = await SocatPair.create();
    try {
      const connector = await fetch(`${base}/api/connector`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({
          name: 'smoke-serial',
          type: 'SERIAL',
          enabled: true,
          configuration: {
            devices: [
              {
                port: pair.a,
                baudrate: 9600,
                format: 'csv',
                columns: ['viaSerial'],
                deviceName: 'smoke-serial',
                deviceType: 'scale',
              },
            ],
          },
        }),
      });
      assert.equal(connector.status, 200, await connector.clone().text());
      const { id } = (await connector.json()) as { id: string };
      await waitFor(
        async () => {
          const res = await fetch(`${base}/api/connector/${id}/status`, { headers: auth });
          return ((await res.json()) as { lines: Array<{ open: boolean }> }).lines[0]?.open;
        },
        timeoutMs,
        'the serial port open',
      );
      await writeFile(pair.b, '5\n');
      await waitFor(
        async () => {
          const res = await fetch(`${base}/api/tenant/devices?deviceName=smoke-serial`, {
            headers: auth,
          });
          if (res.status !== 200) return false;
          const serialId = ((await res.json()) as { id: { id: string } }).id.id;
          const ts = await fetch(
            `${base}/api/plugins/telemetry/DEVICE/${serialId}/values/timeseries?keys=viaSerial`,
            { headers: auth },
          );
          const v = (await ts.json()) as Record<string, Array<{ value: unknown }>>;
          return String(v.viaSerial?.[0]?.value) === '5';
        },
        timeoutMs,
        'the serial reading',
      );
    } finally {
      await pair.close();
    }

    // RS-485 mode on a pty: the executable's own addon (edge_native.node) makes the ioctl, and
    // its refusal comes back in the status (without the addon: "not available").
    const errno = opts.rs485Errno ?? 'ENOTTY';
    const rs485Pair = await SocatPair.create();
    try {
      const connector = await fetch(`${base}/api/connector`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({
          name: 'smoke-rs485',
          type: 'SERIAL',
          enabled: true,
          configuration: {
            devices: [
              {
                port: rs485Pair.a,
                format: 'json',
                deviceName: 'smoke-rs485',
                rs485: { enabled: true },
              },
            ],
          },
        }),
      });
      assert.equal(connector.status, 200, await connector.clone().text());
      const { id } = (await connector.json()) as { id: string };
      await waitFor(
        async () => {
          const res = await fetch(`${base}/api/connector/${id}/status`, { headers: auth });
          const { lines } = (await res.json()) as { lines: Array<{ lastError: string | null }> };
          return lines[0]?.lastError === `RS-485 mode not offered by ${rs485Pair.a}: ${errno}`;
        },
        timeoutMs,
        'the RS-485 refusal from the addon',
      );
      await fetch(`${base}/api/connector/${id}`, { method: 'DELETE', headers: auth });
    } finally {
      await rs485Pair.close();
    }

    // TLS with the certificate the executable generated on this first start.
    const ca = await readFile(join(dataDir, 'tls', 'cert.pem'));
    const mqtts = await mqttConnect(gw.ports.mqttTls, {
      protocol: 'mqtts',
      ca,
      servername: 'localhost',
      username: 'SMOKE_TOKEN',
      connectTimeout: 60_000,
    });
    await mqtts.publishAsync('v1/devices/me/telemetry', JSON.stringify({ viaMqttTls: 4 }), {
      qos: 1,
    });
    await mqtts.endAsync();
    const info = await httpsGet(gw.ports.https, '/api/system/info', ca);
    assert.equal(info.status, 200);
    assert.equal(
      (JSON.parse(info.body) as { https: { fingerprint256: string } }).https.fingerprint256,
      new X509Certificate(ca).fingerprint256,
    );

    const values = await fetch(
      `${base}/api/plugins/telemetry/DEVICE/${deviceId}/values/timeseries?keys=viaHttp,viaMqtt,viaCoap,viaMqttTls`,
      { headers: auth },
    );
    const latest = (await values.json()) as Record<string, Array<{ value: unknown }>>;
    assert.deepEqual(
      ['viaHttp', 'viaMqtt', 'viaCoap', 'viaMqttTls'].map((k) => String(latest[k]?.[0]?.value)),
      ['1', '2', '3', '4'],
    );

    const metrics = await fetch(`${base}/metrics`, {
      headers: { authorization: `Bearer ${metricsToken}` },
    });
    assert.equal(metrics.status, 200);
    const exposition = await metrics.text();
    for (const transport of ['http', 'mqtt', 'coap'])
      assert.match(
        exposition,
        new RegExp(
          `edge_ingest_messages_total\\{transport="${transport}",type="telemetry"\\} [1-9]`,
        ),
        `${transport} telemetry counted`,
      );

    // `edge-gateway backup` from the same executable while it runs.
    const backup = await runGateway(['backup', join(dir, 'copy.db'), '--data-dir', dataDir], {
      command,
      cwd: dir,
      env: NO_NODE,
      timeoutMs,
    });
    assert.equal(backup.code, 0, backup.stderr);
    assert.ok((await stat(join(dir, 'copy.db'))).size > 0, 'the backup has content');
  } finally {
    assert.equal(
      await gw.stop('SIGTERM', timeoutMs),
      0,
      `${gw.stderr()} ${JSON.stringify(gw.lines.slice(-5))}`,
    );
  }
}
