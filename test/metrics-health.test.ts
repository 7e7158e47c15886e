import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { DB_FILE } from '../src/db/open.js';
import { coapRequest } from './helpers/coap.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { activateUser, createCustomer, createUser } from './helpers/users.js';

/** The value of one sample in Prometheus text, e.g. `edge_ingest_messages_total{...}`. */
function sample(text: string, name: string, labels = ''): number | undefined {
  const prefix = labels ? `${name}{${labels}} ` : `${name} `;
  const line = text.split('\n').find((l) => l.startsWith(prefix));
  return line === undefined ? undefined : Number(line.slice(prefix.length));
}

async function scrape(t: TestGateway, token: string, base = t.baseUrl): Promise<string> {
  const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(res.status, 200, await res.clone().text());
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return await res.text();
}

/** A port that was free a moment ago (the metrics listener needs a fixed one). */
async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as { port: number };
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

describe('metrics', () => {
  it('counts ingest per transport and type, commits, connections, database bytes', async () => {
    const t = await startGateway();
    try {
      const { token } = await createDevice(t, 'metered');
      const admin = await t.adminToken();
      const before = await scrape(t, admin);
      assert.equal(
        sample(before, 'edge_ingest_messages_total', 'transport="http",type="telemetry"'),
        undefined,
      );

      // HTTP: the fast lane and the Hono route (chunked body) both count.
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${t.baseUrl}/api/v1/${token}/telemetry`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ t: i }),
        });
        assert.equal(res.status, 200);
      }
      const attrs = await fetch(`${t.baseUrl}/api/v1/${token}/attributes`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ fw: '1.0' }),
      });
      assert.equal(attrs.status, 200);
      // A refused request is not counted.
      const bad = await fetch(`${t.baseUrl}/api/v1/${token}/telemetry`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{bad',
      });
      assert.equal(bad.status, 400);

      const client = await mqttConnect(t.gw.ports.mqtt, { username: token });
      await client.publishAsync('v1/devices/me/telemetry', JSON.stringify({ m: 1 }), { qos: 1 });
      await client.publishAsync('v1/devices/me/telemetry', JSON.stringify({ m: 2 }), { qos: 1 });
      await client.publishAsync('v1/devices/me/attributes', JSON.stringify({ a: 1 }), { qos: 1 });

      const coap = await coapRequest({
        port: t.gw.ports.coap,
        method: 'POST',
        pathname: `/api/v1/${token}/telemetry`,
        payload: JSON.stringify({ c: 1 }),
      });
      assert.equal(coap.code, '2.01');

      const text = await waitFor(async () => {
        const s = await scrape(t, admin);
        const coapCount = sample(
          s,
          'edge_ingest_messages_total',
          'transport="coap",type="telemetry"',
        );
        return coapCount === 1 ? s : undefined;
      });
      const ingest = (labels: string) => sample(text, 'edge_ingest_messages_total', labels);
      assert.equal(ingest('transport="http",type="telemetry"'), 3);
      assert.equal(ingest('transport="http",type="attributes"'), 1);
      assert.equal(ingest('transport="mqtt",type="telemetry"'), 2);
      assert.equal(ingest('transport="mqtt",type="attributes"'), 1);
      assert.equal(ingest('transport="coap",type="telemetry"'), 1);

      // 6 points, each in some commit.
      const commits = sample(text, 'edge_telemetry_commit_seconds_count') ?? 0;
      assert.ok(commits >= 1 && commits <= 6, `commits ${commits}`);
      assert.equal(sample(text, 'edge_telemetry_commit_failures_total'), 0);
      assert.equal(sample(text, 'edge_telemetry_points'), 6);
      assert.equal(sample(text, 'edge_writer_queue_points'), 0);
      assert.equal(sample(text, 'edge_ring_evicted_points_total'), 0);
      assert.equal(sample(text, 'edge_open_connections', 'transport="mqtt"'), 1);
      assert.ok(
        (sample(text, 'edge_open_connections', 'transport="http"') ?? 0) >= 1,
        'edge_open_connections',
      );
      assert.equal(sample(text, 'edge_mqtt_device_sessions'), 1);
      const dbBytes = sample(text, 'edge_database_bytes', 'file="db"') ?? 0;
      const walBytes = sample(text, 'edge_database_bytes', 'file="wal"') ?? 0;
      assert.ok(dbBytes >= 4096 && dbBytes + walBytes > 20_000, `db ${dbBytes}, wal ${walBytes}`);
      assert.ok(
        (sample(text, 'process_resident_memory_bytes') ?? 0) > 10e6,
        'process_resident_memory_bytes',
      );
      assert.ok(
        (sample(text, 'nodejs_heap_size_used_bytes') ?? 0) > 1e6,
        'nodejs_heap_size_used_bytes',
      );
      assert.match(text, /^nodejs_eventloop_lag_seconds\{stat="p99"\} \d/m);
      await client.endAsync();

      // Throttle and limit counters: a wrong device token over MQTT, a wrong password.
      const wrong = await mqttConnect(t.gw.ports.mqtt, {
        username: 'no-such-token',
        reconnectPeriod: 0,
      }).catch((err: Error) => err);
      assert.ok(wrong instanceof Error, 'a wrong token is refused');
      const login = await t.api('/api/auth/login', {
        body: { username: 'nobody@test.local', password: 'wrong-password' },
      });
      assert.equal(login.status, 401);
      const auth = await waitFor(async () => {
        const s = await scrape(t, admin);
        return sample(s, 'edge_auth_failures_total', 'kind="device",outcome="failed"') === 1
          ? s
          : undefined;
      });
      assert.equal(sample(auth, 'edge_auth_failures_total', 'kind="login",outcome="failed"'), 1);
      assert.equal(sample(auth, 'edge_auth_failures_total', 'kind="login",outcome="throttled"'), 0);
      assert.equal(
        sample(auth, 'edge_throttle_entries', 'table="device_address",state="tracked"'),
        1,
      );
      assert.equal(
        sample(auth, 'edge_throttle_entries', 'table="login_account",state="dropped"'),
        0,
      );
      assert.equal(sample(auth, 'edge_coap_refusals_total', 'reason="malformed"'), 0);
      // Notification and upstream backlogs (upstream is off here: an empty backlog, no link).
      assert.equal(sample(auth, 'edge_notifications', 'state="pending"'), 0);
      assert.equal(sample(auth, 'edge_notifications_dropped_total', 'what="outbox"'), 0);
      assert.equal(sample(auth, 'edge_upstream_backlog'), 0);
      assert.equal(sample(auth, 'edge_upstream_connected'), 0);
      assert.equal(sample(auth, 'edge_upstream_messages_total', 'outcome="dropped"'), 0);
    } finally {
      await t.close();
    }
  });

  it("gives a burst's heap back once the gateway is quiet, and counts it", async () => {
    // The gateway shares this test process's heap: a burst here is a burst of the gateway's.
    const t = await startGateway({ config: { memory: { trimAfterMb: 16, trimQuietSec: 1 } } });
    try {
      const admin = await t.adminToken();
      const read = async () => {
        const text = await scrape(t, admin);
        return {
          trims: sample(text, 'edge_memory_trims_total') ?? 0,
          bytes: sample(text, 'edge_memory_trimmed_bytes_total') ?? 0,
        };
      };
      // Slow polls: the trim waits for a quiet event loop (under 5 % busy between its looks; one
      // quiet look of 2 s is the 1 s quiet period asked for above).
      const quietly = async <T>(check: () => Promise<T | undefined>, what: string) =>
        waitFor(
          async () => {
            await new Promise((r) => setTimeout(r, 1000));
            return check();
          },
          90_000,
          what,
        );
      // Start-up counts as a burst: its trim comes first.
      const before = await quietly(async () => {
        const now = await read();
        return now.trims >= 1 ? now : undefined;
      }, 'the trim after start');
      let burst: Array<{ i: number; s: string }> | undefined = [];
      for (let i = 0; i < 1_500_000; i++) burst.push({ i, s: `item ${i}` });
      assert.equal(burst.length, 1_500_000);
      burst = undefined;
      // Waits for the bytes, not for the next trim: one the resident set's growth started while
      // `before` was being read may be counted first and find little to give back.
      const after = await quietly(async () => {
        const now = await read();
        return now.bytes - before.bytes > 16 * 1024 * 1024 ? now : undefined;
      }, "the burst's trim");
      assert.ok(after.trims > before.trims, JSON.stringify({ before, after }));
    } finally {
      await t.close();
    }
  });

  it('needs a tenant admin JWT or the scrape token; on its own port when configured', async () => {
    const port = await freePort();
    const t = await startGateway({
      config: { metrics: { port } },
      secrets: {
        adminEmail: 'admin@test.local',
        adminPassword: 'admin-password-1',
        metricsToken: 'scrape-secret-1',
      },
    });
    try {
      assert.equal(t.gw.ports.metrics, port);
      const base = `http://127.0.0.1:${port}`;
      // Not on the device-facing port any more.
      // (the page's catch-all may answer there, but not with metrics).
      const main = await t.api('/metrics', { token: await t.adminToken() });
      assert.doesNotMatch(await main.text(), /edge_ingest_messages_total/);
      assert.equal((await fetch(`${base}/metrics`)).status, 401);
      const wrong = await fetch(`${base}/metrics`, { headers: { authorization: 'Bearer nope' } });
      assert.equal(wrong.status, 401);
      assert.match(await scrape(t, 'scrape-secret-1', base), /edge_ingest_messages_total/);
      assert.match(await scrape(t, await t.adminToken(), base), /edge_telemetry_points 0/);
      // A customer user may not read them.
      const customer = await createCustomer(t, 'C');
      const userId = await createUser(t, 'user@c.local', customer);
      const userToken = await activateUser(t, userId, 'user-password-1');
      const res = await fetch(`${base}/metrics`, {
        headers: { authorization: `Bearer ${userToken}` },
      });
      assert.equal(res.status, 403);
    } finally {
      await t.close();
    }
  });
});

describe('health and the watchdog', () => {
  it('/healthz checks the database and answers 503 while it cannot be written', async () => {
    const t = await startGateway();
    const other = new Database(join(t.dataDir, DB_FILE));
    try {
      const up = await t.api('/healthz');
      assert.equal(up.status, 200);
      assert.deepEqual(((await up.json()) as { db: unknown }).db, { status: 'UP' });

      // Another connection holds the write lock: the database cannot be written.
      other.exec('BEGIN IMMEDIATE');
      const down = await t.api('/healthz');
      assert.equal(down.status, 503);
      const body = (await down.json()) as { status: string; db: { status: string; error: string } };
      assert.equal(body.status, 'DOWN');
      assert.equal(body.db.status, 'DOWN');
      assert.match(body.db.error, /^write: database is locked/);
      other.exec('ROLLBACK');
      assert.equal((await t.api('/healthz')).status, 200);
      assert.equal(t.logs.filter((l) => l.msg === 'database check failed').length, 1);
    } finally {
      other.close();
      await t.close();
    }
  });

  it('feeds the systemd watchdog only while the database takes writes', async (ctx) => {
    const dir = await mkdtemp(join(tmpdir(), 'edge-gw-notify-'));
    const socketPath = join(dir, 'notify.sock');
    // A NOTIFY_SOCKET listener: Node has no unix datagram sockets; python3 prints each message.
    const listener = spawn(
      'python3',
      [
        '-u',
        '-c',
        `import socket,sys
s=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM); s.bind(sys.argv[1]); print('bound')
while True: print(s.recv(4096).decode().replace('\\n',' '))`,
        socketPath,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    ctx.after(async () => {
      listener.kill();
      await rm(dir, { recursive: true, force: true });
    });
    const messages: string[] = [];
    createInterface({ input: listener.stdout }).on('line', (l) => messages.push(l));
    await waitFor(() => messages.includes('bound'), 10_000, 'the notify socket');
    const watchdogs = () => messages.filter((m) => m.includes('WATCHDOG=1')).length;

    // WATCHDOG_USEC 200 ms: fed every 100 ms.
    const t = await startGateway({ env: { NOTIFY_SOCKET: socketPath, WATCHDOG_USEC: '200000' } });
    const other = new Database(join(t.dataDir, DB_FILE));
    try {
      await waitFor(() => messages.some((m) => m.includes('READY=1')), 10_000, 'READY=1');
      await waitFor(() => watchdogs() >= 3, 10_000, 'watchdog feeds');
      other.exec('BEGIN IMMEDIATE');
      await waitFor(
        () => t.logs.some((l) => l.msg === 'health check failed: the watchdog is not fed'),
        10_000,
        'the watchdog to starve',
      );
      // systemd-notify runs as a child process: let those already started arrive.
      await new Promise((r) => setTimeout(r, 1000));
      const starved = watchdogs();
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(watchdogs(), starved, 'no WATCHDOG=1 while the database is locked');
      other.exec('ROLLBACK');
      await waitFor(() => watchdogs() > starved, 10_000, 'feeding to resume');
    } finally {
      other.close();
      await t.close();
    }
  });
});
