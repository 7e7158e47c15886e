import assert from 'node:assert/strict';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { DB_FILE } from '../src/db/open.js';
import {
  BUNDLE,
  type GatewayProcess,
  LOOPBACK_EPHEMERAL,
  spawnGateway,
} from './helpers/process.js';

const EMAIL = 'crash@test.local';
const PASSWORD = 'crash-password-1';
const T0 = 1_700_000_000_000;

async function start(dir: string): Promise<{ gw: GatewayProcess; base: string; token: string }> {
  const gw = await spawnGateway(['serve', '--data-dir', dir, ...LOOPBACK_EPHEMERAL], {
    env: { EDGE_ADMIN_EMAIL: EMAIL, EDGE_ADMIN_PASSWORD: PASSWORD },
  });
  const base = `http://127.0.0.1:${gw.ports.http}`;
  const login = await fetch(`${base}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: EMAIL, password: PASSWORD }),
  });
  assert.equal(login.status, 200);
  const { token } = (await login.json()) as { token: string };
  return { gw, base, token };
}

describe('crash safety of acknowledged telemetry', () => {
  const dirs: string[] = [];
  const procs: GatewayProcess[] = [];
  after(async () => {
    for (const p of procs) await p.stop('SIGKILL').catch(() => 'already gone');
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('every point acknowledged before SIGKILL is stored after restart; integrity_check is ok', async () => {
    assert.ok(existsSync(BUNDLE), 'run `node build.mjs` first: this test runs the built bundle');
    const dir = await mkdtemp(join(tmpdir(), 'edge-crash-'));
    dirs.push(dir);
    const first = await start(dir);
    procs.push(first.gw);
    const created = await fetch(`${first.base}/api/device?accessToken=crash-device-token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'X-Authorization': `Bearer ${first.token}` },
      body: JSON.stringify({ name: 'crash-device' }),
    });
    assert.equal(created.status, 200);
    const deviceId = ((await created.json()) as { id: { id: string } }).id.id;

    // 8 clients stream 10-point payloads back to back; each acknowledged ts is recorded.
    const acked = new Set<number>();
    let stop = false;
    let seq = 0;
    const client = async () => {
      while (!stop) {
        const base = seq;
        seq += 10;
        const body = Array.from({ length: 10 }, (_, i) => ({
          ts: T0 + base + i,
          values: { v: base + i, s: `p${base + i}` },
        }));
        try {
          const res = await fetch(`${first.base}/api/v1/crash-device-token/telemetry`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          if (res.status === 200) for (let i = 0; i < 10; i++) acked.add(T0 + base + i);
          await res.arrayBuffer();
        } catch {
          return; // the process is gone: in-flight requests were never acknowledged
        }
      }
    };
    const clients = Array.from({ length: 8 }, client);
    // Kill in the middle of the stream, once a good amount has been acknowledged.
    const deadline = Date.now() + 20_000;
    while (acked.size < 3000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const exited = once(first.gw.child, 'exit');
    first.gw.child.kill('SIGKILL');
    await exited;
    stop = true;
    await Promise.all(clients);
    assert.ok(acked.size >= 3000, `only ${acked.size} points acknowledged`);
    assert.ok(seq > acked.size, 'requests were in flight when the process died');

    // Straight after the crash: the file recovers, is intact, and holds every acknowledged point,
    // moved into ts_kv or still in the stage table (both are committed).
    const committed = `SELECT key_id, ts FROM ts_kv UNION ALL SELECT key_id, ts FROM ts_kv_stage`;
    {
      const db = new Database(join(dir, DB_FILE));
      try {
        assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
        const stored = new Set(
          (
            db
              .prepare(
                `SELECT ts FROM (${committed}) JOIN ts_key k ON k.id = key_id WHERE k.key = 'v'`,
              )
              .all() as Array<{ ts: number }>
          ).map((r) => r.ts),
        );
        const missing = [...acked].filter((ts) => !stored.has(ts));
        assert.deepEqual(missing, [], `${missing.length} acknowledged points lost`);
        // Payloads are atomic: both keys of every stored ts exist.
        const perKey = db
          .prepare(`SELECT key_id, count(*) AS n FROM (${committed}) GROUP BY key_id`)
          .all() as Array<{ n: number }>;
        assert.equal(perKey.length, 2);
        assert.equal(perKey[0].n, perKey[1].n);
      } finally {
        db.close();
      }
    }

    // After a restart the API serves them, with counts rebuilt from the chunk table.
    const second = await start(dir);
    procs.push(second.gw);
    const res = await fetch(
      `${second.base}/api/plugins/telemetry/DEVICE/${deviceId}/values/timeseries?keys=v&startTs=${T0}&endTs=${T0 + seq}&agg=COUNT&interval=${seq}`,
      { headers: { 'X-Authorization': `Bearer ${second.token}` } },
    );
    assert.equal(res.status, 200);
    const body = (await res.json()) as { v: Array<{ value: string }> };
    assert.ok(Number(body.v[0].value) >= acked.size);
    // The restart moved the staged points into the time-series table.
    {
      const db = new Database(join(dir, DB_FILE), { readonly: true });
      try {
        assert.equal(db.prepare('SELECT count(*) FROM ts_kv_stage').pluck().get(), 0);
      } finally {
        db.close();
      }
    }
    // And it keeps accepting telemetry.
    const more = await fetch(`${second.base}/api/v1/crash-device-token/telemetry`, {
      method: 'POST',
      body: '{"after":1}',
    });
    assert.equal(more.status, 200);
    assert.equal(await second.gw.stop('SIGTERM'), 0);
  });
});
