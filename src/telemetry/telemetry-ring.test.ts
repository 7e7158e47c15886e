import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { MIGRATIONS } from '../db/migrations/index.js';
import { migrate } from '../db/migrator.js';
import { type Db, openDb } from '../db/open.js';
import { DeviceProfileService } from '../devices/device-profile-service.js';
import { DeviceService } from '../devices/device-service.js';
import { EventBus } from '../events.js';
import { TenantService } from '../tenant/tenant-service.js';
import { decodeLogRecord, encodeLogRecord } from './telemetry-block.js';
import type { TsEntry } from './telemetry-parser.js';
import {
  decodeSlot,
  encodeSlot,
  readLog,
  readRing,
  SLOT_BYTES,
  SLOT_PAYLOAD,
  slotSeq,
} from './telemetry-ring.js';
import { TelemetryStore } from './telemetry-store.js';

const log = pino({ level: 'silent' });
const T0 = 1_700_000_000_000;

interface Fixture {
  db: Db;
  devices: DeviceService;
  /** A new device's rid. */
  device(name: string): { id: string; rid: number };
  /** A store on the file, as the gateway makes one at start (ring preallocated, log read). */
  open(): TelemetryStore;
  close(): Promise<void>;
}

/** The device service on a migrated file (the store checks that a device exists). */
function deviceService(db: Db): DeviceService {
  const tenants = new TenantService({ db });
  tenants.init();
  const profiles = new DeviceProfileService({ db, tenants });
  profiles.init();
  return new DeviceService({ db, tenants, profiles, bus: new EventBus(log) });
}

async function fixture(): Promise<Fixture> {
  const dir = await mkdtemp(join(tmpdir(), 'edge-ring-'));
  const db = openDb({ dataDir: dir, durability: 'normal' });
  migrate(db, MIGRATIONS, log);
  const devices = deviceService(db);
  return {
    db,
    devices,
    device(name) {
      const d = devices.save({ name });
      const identity = devices.identity(d.id.id);
      assert.ok(identity);
      return { id: d.id.id, rid: identity.rid };
    },
    open() {
      const store = new TelemetryStore(db, { ringSlots: 4 });
      store.init();
      return store;
    },
    async close() {
      db.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** One message: `n` readings of key `k` from ts `t` on (doubles with two decimals, as sensors). */
function message(t: number, n = 3, k = 'v'): TsEntry[] {
  return Array.from({ length: n }, (_, i) => ({
    key: k,
    ts: t + i,
    kind: 'double' as const,
    value: Math.round((t % 10_000) + i * 1.25) / 100,
  }));
}

function history(store: TelemetryStore, rid: number, key = 'v'): Array<[number, unknown]> {
  return store
    .history(rid, key, 0, Number.MAX_SAFE_INTEGER, 100_000, 'ASC')
    .map((p) => [p.ts, p.value]);
}

const count = (db: Db, sql: string) => db.prepare(sql).pluck().get() as number;

describe('log ring slots', () => {
  it('encode and decode whole records under the slot seq, in order, in a blob of fixed size', () => {
    const records = [
      { rid: 1, data: new Uint8Array([1, 2, 3]) },
      { rid: 300_000, data: new Uint8Array(200).fill(7) },
      { rid: 5, data: new Uint8Array(0) },
    ];
    const slot = encodeSlot(2 ** 40 + 3, records);
    assert.equal(slot.length, SLOT_BYTES);
    assert.equal(slotSeq(slot), 2 ** 40 + 3);
    assert.deepEqual(
      decodeSlot(slot).map((e) => [e.seq, e.rid, [...e.data]]),
      records.map((r) => [2 ** 40 + 3, r.rid, [...r.data]]),
    );
    assert.deepEqual(decodeSlot(encodeSlot(9, [])), []);
    assert.throws(
      () => encodeSlot(1, [{ rid: 1, data: new Uint8Array(SLOT_PAYLOAD) }]),
      /overfull/,
    );
  });
});

describe('log ring', () => {
  it('commits rewrite the preallocated slots in place and wrap around; nothing spills while it fits', async () => {
    const f = await fixture();
    try {
      const d = f.device('wrap');
      const store = f.open();
      assert.equal(count(f.db, 'SELECT count(*) FROM ts_ring'), 4, 'preallocated');
      const expected: Array<[number, unknown]> = [];
      // 20 commits of one message each, a seal after every second one: the 4 slots are
      // reused five times over.
      for (let c = 0; c < 20; c++) {
        const points = message(T0 + c * 1000);
        store.write([{ rid: d.rid, points }]);
        for (const p of points) expected.push([p.ts, p.value]);
        if (c % 2 === 1) store.settle();
      }
      assert.equal(count(f.db, 'SELECT count(*) FROM ts_ring'), 4, 'no slot added');
      assert.equal(count(f.db, 'SELECT count(*) FROM ts_log_spill'), 0, 'nothing spilled');
      assert.equal(Math.max(...readRing(f.db).slots.map((s) => s.seq)), 20, 'one slot a commit');
      assert.deepEqual(history(store, d.rid), expected);
      assert.equal(store.totalPoints, 60);
      // The log view of the gateway's connection shows the live records only: none after a seal.
      assert.equal(count(f.db, 'SELECT count(*) FROM ts_log'), 0);
      store.write([{ rid: d.rid, points: message(T0 + 50_000) }]);
      assert.equal(count(f.db, 'SELECT count(*) FROM ts_log'), 1);
    } finally {
      await f.close();
    }
  });

  it('a commit that does not fit the free ring spills rows, and the order of writes is kept', async () => {
    const f = await fixture();
    try {
      const d = f.device('spill');
      const store = f.open();
      // Three slots taken by three open commits, then a commit of two slots: spilled.
      for (let c = 0; c < 3; c++) store.write([{ rid: d.rid, points: message(T0 + c * 1000) }]);
      const big = Array.from({ length: 40 }, (_, i) => ({
        rid: d.rid,
        points: [{ key: 'v', ts: T0 + 1000, kind: 'string' as const, value: `over-${i}` }],
      }));
      store.write(big);
      assert.equal(count(f.db, 'SELECT count(*) FROM ts_log_spill'), 40);
      // A record larger than a slot always spills.
      const long = 'x'.repeat(SLOT_PAYLOAD);
      store.write([{ rid: d.rid, points: [{ key: 's', ts: T0, kind: 'string', value: long }] }]);
      assert.equal(count(f.db, 'SELECT count(*) FROM ts_log_spill'), 41);
      // Then the last slot again, after the spilled rows.
      store.write([{ rid: d.rid, points: [{ key: 'v', ts: T0 + 2000, kind: 'long', value: 42 }] }]);
      const seqs = readLog(f.db).map((e) => e.seq);
      assert.deepEqual(
        seqs,
        [...seqs].sort((a, b) => a - b),
      );
      const check = (s: TelemetryStore) => {
        const h = history(s, d.rid);
        // The last written value wins for a repeated ts, across the ring and the spill rows.
        assert.deepEqual(
          h.find(([ts]) => ts === T0 + 1000),
          [T0 + 1000, 'over-39'],
        );
        assert.deepEqual(
          h.find(([ts]) => ts === T0 + 2000),
          [T0 + 2000, 42],
        );
        assert.equal(s.latest(d.rid, ['s']).get('s')?.value, long);
      };
      check(store);
      check(f.open());
      store.settle();
      assert.equal(count(f.db, 'SELECT count(*) FROM ts_log_spill'), 0);
      check(f.open());
    } finally {
      await f.close();
    }
  });

  it('a restart resumes the open range from the ring and writes on after its newest slot', async () => {
    const f = await fixture();
    try {
      const d = f.device('resume');
      let store = f.open();
      const expected: Array<[number, unknown]> = [];
      const write = (c: number) => {
        const points = message(T0 + c * 1000);
        store.write([{ rid: d.rid, points }]);
        for (const p of points) expected.push([p.ts, p.value]);
      };
      // Wrapped once (6 slots written in 4: two sealed), 3 slots open: head at slot 2.
      for (let c = 0; c < 3; c++) write(c);
      store.settle();
      for (let c = 3; c < 6; c++) write(c);
      assert.deepEqual(
        readRing(f.db).slots.map((s) => s.seq),
        [5, 6, 3, 4],
      );
      // As after a crash: a new store reads the file.
      store = f.open();
      assert.equal(store.stagedPoints, 9);
      assert.deepEqual(history(store, d.rid), expected);
      assert.equal(store.latest(d.rid, ['v']).get('v')?.ts, T0 + 5002);
      // The next commit takes the free slot 2, not a live one; a second one no longer fits.
      write(6);
      write(7);
      assert.deepEqual(
        readRing(f.db).slots.map((s) => s.seq),
        [5, 6, 7, 4],
      );
      assert.equal(count(f.db, 'SELECT count(*) FROM ts_log_spill'), 1);
      store = f.open();
      assert.deepEqual(history(store, d.rid), expected);
      store.settle();
      assert.equal(readLog(f.db).length, 0);
      store = f.open();
      assert.equal(store.stagedPoints, 0);
      assert.deepEqual(history(store, d.rid), expected);
    } finally {
      await f.close();
    }
  });

  it("a deleted device's records are removed from the slots, and never come back under a reused rid", async () => {
    const f = await fixture();
    try {
      const kept = f.device('kept');
      const gone = f.device('gone');
      const store = f.open();
      store.write([
        { rid: kept.rid, points: message(T0) },
        { rid: gone.rid, points: message(T0) },
      ]);
      f.devices.delete(gone.id);
      store.reloadCounts(); // as the service does on device.deleted
      const rids = () => readLog(f.db).map((e) => e.rid);
      assert.deepEqual(rids(), [kept.rid]);
      assert.equal(store.devicePoints(gone.rid), 0);
      // The highest rid is free again: a new device gets it, with none of the old points.
      const reborn = f.device('reborn');
      assert.equal(reborn.rid, gone.rid);
      const again = f.open();
      assert.deepEqual(history(again, reborn.rid), []);
      assert.equal(again.devicePoints(kept.rid), 3);
      assert.deepEqual(
        readLog(f.db).flatMap((e) => decodeLogRecord(e.data).map((p) => p.ts)),
        [T0, T0 + 1, T0 + 2],
      );
    } finally {
      await f.close();
    }
  });

  it('migration 017: log rows of the former table are read back, and the ring numbers on after them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'edge-m017-'));
    const db = openDb({ dataDir: dir, durability: 'normal' });
    try {
      migrate(
        db,
        MIGRATIONS.filter((m) => m.version < 17),
        log,
      );
      const devices = deviceService(db);
      const d = devices.save({ name: 'old-log' });
      const rid = devices.identity(d.id.id)?.rid as number;
      db.prepare("INSERT INTO ts_key (id, key) VALUES (1, 'v')").run();
      const record = encodeLogRecord([{ keyId: 1, ts: T0, kind: 'double', value: 21.5 }]);
      db.prepare('INSERT INTO ts_log (seq, device_rid, data) VALUES (5, ?, ?)').run(rid, record);
      migrate(db, MIGRATIONS, log);
      const store = new TelemetryStore(db, { ringSlots: 4 });
      store.init();
      assert.equal(store.stagedPoints, 1);
      store.write([{ rid, points: message(T0 + 1000) }]);
      assert.deepEqual(
        readLog(db).map((e) => e.seq),
        [5, 6],
      );
      assert.equal(history(store, rid).length, 4);
      // The delete trigger follows the table's new name.
      devices.delete(d.id.id);
      assert.equal(count(db, 'SELECT count(*) FROM ts_log_spill'), 0);
    } finally {
      db.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
