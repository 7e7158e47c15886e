import assert from 'node:assert/strict';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { DB_FILE } from '../src/db/open.js';
import { decodeBlock, decodeLogRecord } from '../src/telemetry/telemetry-block.js';
import { readLog, readRing } from '../src/telemetry/telemetry-ring.js';
import {
  BUNDLE,
  type GatewayProcess,
  LOOPBACK_EPHEMERAL,
  loginTo,
  spawnGateway,
} from './helpers/process.js';

const EMAIL = 'crash@test.local';
const PASSWORD = 'crash-password-1';
const T0 = 1_700_000_000_000;

/**
 * Every committed point in the file, as (key id, ts): sealed into compressed blocks or still in
 * the log (both are committed), decoded with the gateway's own codec.
 */
function committedPoints(db: Database.Database): Array<{ key_id: number; ts: number }> {
  const out: Array<{ key_id: number; ts: number }> = [];
  for (const b of db.prepare('SELECT key_id, data FROM ts_block').all() as Array<{
    key_id: number;
    data: Buffer;
  }>) {
    for (const p of decodeBlock(b.data)) out.push({ key_id: b.key_id, ts: p.ts });
  }
  for (const r of readLog(db)) {
    for (const p of decodeLogRecord(r.data)) out.push({ key_id: p.keyId, ts: p.ts });
  }
  return out;
}

/**
 * `clients` HTTP clients posting payloads of `size` points back to back, ts T0 + n with n taken
 * from `counter` (consecutive over a whole test); every acknowledged ts is added to `acked`.
 * `stop()` ends them once the process is gone (in-flight requests were never acknowledged).
 */
function streamTelemetry(
  base: string,
  token: string,
  opts: { clients: number; size: number; counter: { next: number }; acked: Set<number> },
): { stop(): Promise<void> } {
  const { size, counter, acked } = opts;
  let stop = false;
  const client = async () => {
    while (!stop) {
      const from = counter.next;
      counter.next += size;
      const body = Array.from({ length: size }, (_, i) => ({
        ts: T0 + from + i,
        values: { v: from + i, s: `p${from + i}` },
      }));
      try {
        const res = await fetch(`${base}/api/v1/${token}/telemetry`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        if (res.status === 200) for (let i = 0; i < size; i++) acked.add(T0 + from + i);
        await res.arrayBuffer();
      } catch {
        return; // the process is gone
      }
    }
  };
  const running = Array.from({ length: opts.clients }, client);
  return {
    async stop() {
      stop = true;
      await Promise.all(running);
    },
  };
}

async function start(
  dir: string,
  extra: readonly string[] = [],
): Promise<{ gw: GatewayProcess; base: string; token: string }> {
  const gw = await spawnGateway(['serve', '--data-dir', dir, ...LOOPBACK_EPHEMERAL, ...extra], {
    env: { EDGE_ADMIN_EMAIL: EMAIL, EDGE_ADMIN_PASSWORD: PASSWORD },
  });
  const { base, token } = await loginTo(gw, EMAIL, PASSWORD);
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
    const counter = { next: 0 };
    const stream = streamTelemetry(first.base, 'crash-device-token', {
      clients: 8,
      size: 10,
      counter,
      acked,
    });
    // Kill in the middle of the stream, once a good amount has been acknowledged.
    const deadline = Date.now() + 20_000;
    while (acked.size < 3000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const exited = once(first.gw.child, 'exit');
    first.gw.child.kill('SIGKILL');
    await exited;
    await stream.stop();
    assert.ok(acked.size >= 3000, `only ${acked.size} points acknowledged`);
    assert.ok(counter.next > acked.size, 'requests were in flight when the process died');

    // Straight after the crash: the file recovers, is intact, and holds every acknowledged point,
    // sealed into blocks or still in the log (both are committed).
    {
      const db = new Database(join(dir, DB_FILE));
      try {
        assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
        const keyV = db.prepare("SELECT id FROM ts_key WHERE key = 'v'").pluck().get() as number;
        const committed = committedPoints(db);
        const stored = new Set(committed.filter((p) => p.key_id === keyV).map((p) => p.ts));
        const missing = [...acked].filter((ts) => !stored.has(ts));
        assert.deepEqual(missing, [], `${missing.length} acknowledged points lost`);
        // Payloads are atomic: both keys of every stored ts exist.
        const perKey = new Map<number, Set<number>>();
        for (const p of committed) {
          if (!perKey.has(p.key_id)) perKey.set(p.key_id, new Set());
          perKey.get(p.key_id)?.add(p.ts);
        }
        assert.equal(perKey.size, 2);
        const [a, b] = [...perKey.values()];
        assert.equal(a.size, b.size);
      } finally {
        db.close();
      }
    }

    // After a restart the API serves them, with counts rebuilt from the chunk table.
    const second = await start(dir);
    procs.push(second.gw);
    const res = await fetch(
      `${second.base}/api/plugins/telemetry/DEVICE/${deviceId}/values/timeseries?keys=v&startTs=${T0}&endTs=${T0 + counter.next}&agg=COUNT&interval=${counter.next}`,
      { headers: { 'X-Authorization': `Bearer ${second.token}` } },
    );
    assert.equal(res.status, 200);
    const body = (await res.json()) as { v: Array<{ value: string }> };
    assert.ok(Number(body.v[0].value) >= acked.size);
    // And it keeps accepting telemetry.
    const more = await fetch(`${second.base}/api/v1/crash-device-token/telemetry`, {
      method: 'POST',
      body: '{"after":1}',
    });
    assert.equal(more.status, 200);
    assert.equal(await second.gw.stop('SIGTERM'), 0);
    // A clean stop sealed the open range: the log is empty, every point is in a block.
    {
      const db = new Database(join(dir, DB_FILE), { readonly: true });
      try {
        assert.equal(readLog(db).length, 0);
        assert.ok(committedPoints(db).length >= 2 * acked.size);
      } finally {
        db.close();
      }
    }
  });

  /**
   * Three rounds on one data dir: start the gateway with `args`, stream (6 clients, 20-point
   * payloads) until 2,000 more points are acknowledged, SIGKILL it; then the file is intact and
   * holds every acknowledged point, and `check` looks at it.
   */
  async function killRounds(
    name: string,
    args: readonly string[],
    check: (db: Database.Database, round: number) => void,
  ): Promise<void> {
    const dir = await mkdtemp(join(tmpdir(), `edge-crash-${name}-`));
    dirs.push(dir);
    const acked = new Set<number>();
    const counter = { next: 0 };
    let deviceCreated = false;
    for (let round = 0; round < 3; round++) {
      const gw = await start(dir, args);
      procs.push(gw.gw);
      if (!deviceCreated) {
        const created = await fetch(`${gw.base}/api/device?accessToken=${name}-device-token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'X-Authorization': `Bearer ${gw.token}` },
          body: JSON.stringify({ name: `${name}-device` }),
        });
        assert.equal(created.status, 200);
        deviceCreated = true;
      }
      const stream = streamTelemetry(gw.base, `${name}-device-token`, {
        clients: 6,
        size: 20,
        counter,
        acked,
      });
      const want = acked.size + 2000;
      const deadline = Date.now() + 20_000;
      while (acked.size < want && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      const exited = once(gw.gw.child, 'exit');
      gw.gw.child.kill('SIGKILL');
      await exited;
      await stream.stop();
      assert.ok(acked.size >= want, `round ${round}: only ${acked.size} points acknowledged`);
      const db = new Database(join(dir, DB_FILE));
      try {
        assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
        check(db, round);
        const keyV = db.prepare("SELECT id FROM ts_key WHERE key = 'v'").pluck().get() as number;
        const stored = new Set(
          committedPoints(db)
            .filter((p) => p.key_id === keyV)
            .map((p) => p.ts),
        );
        const missing = [...acked].filter((ts) => !stored.has(ts));
        assert.deepEqual(missing, [], `round ${round}: ${missing.length} acknowledged points lost`);
      } finally {
        db.close();
      }
    }
  }

  it('SIGKILL while blocks are being sealed: nothing acknowledged lost, integrity_check ok, three times', async () => {
    // Tiny blocks and a tiny open range: a seal (blocks written, log rows deleted) runs after
    // almost every commit, so the kills land in and around seals.
    const sealing = ['--telemetry-block-points', '16', '--telemetry-open-max-points', '1000'];
    await killRounds('seal', sealing, (db) => {
      assert.ok(
        (db.prepare('SELECT count(*) FROM ts_block').pluck().get() as number) > 0,
        'blocks were sealed before the kill',
      );
    });
  });

  it('SIGKILL while commits rewrite the log ring: it wraps, nothing acknowledged lost, each restart resumes it', async () => {
    // An open range of 1,000 points gets a ring of 33 slots; a 20-point payload (40 points)
    // takes most of a slot, and a round acknowledges 100 payloads: the slots are rewritten
    // round after round (a commit that finds the ring full spills rows). Each round starts on
    // what the last kill left.
    const seen = new Set<number>();
    await killRounds('ring', ['--telemetry-open-max-points', '1000'], (db, round) => {
      const ring = readRing(db);
      assert.equal(ring.slots.length, 33, 'the ring keeps its size');
      for (const x of ring.slots) seen.add(x.seq);
      // More seqs seen in the slots than there are slots: slots were rewritten.
      if (round === 2) assert.ok(seen.size > 33, `wrapped (${seen.size} seqs seen)`);
    });
  });
});
