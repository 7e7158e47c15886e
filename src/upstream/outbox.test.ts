import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import { MIGRATIONS } from '../db/migrations/index.js';
import { migrate } from '../db/migrator.js';
import { type Db, openDb } from '../db/open.js';
import { KIND, Outbox, type OutboxEntry } from './outbox.js';

const log = pino({ level: 'silent' });

/** `n` telemetry messages of device rid 1, numbered from `from` (their ts and text carry it). */
function messages(from: number, n: number): OutboxEntry[] {
  return Array.from({ length: n }, (_, i) => ({
    rid: 1,
    kind: KIND.telemetry,
    ts: from + i,
    data: `[{"ts":${from + i},"values":{"v":"é😀${from + i}"}}]`,
  }));
}

describe('upstream outbox (one table row per add)', () => {
  let dir: string;
  let db: Db;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-outbox-'));
    db = openDb({ dataDir: dir, durability: 'normal' });
    migrate(db, MIGRATIONS, log);
  });
  afterEach(async () => {
    db.close();
    await rm(dir, { recursive: true, force: true });
  });

  const open = (max = 1_000_000) => {
    const o = new Outbox(db, max);
    o.init();
    return o;
  };
  const tsOf = (o: Outbox) => o.read(0, 100_000).map((r) => r.ts);
  const tx = (f: () => void) => db.transaction(f)();

  it('reads across rows in seq order, from any seq, and keeps each text exactly', () => {
    const o = open();
    let first = 0;
    tx(() => {
      first = o.add(messages(1, 3));
    });
    tx(() => o.add(messages(4, 300))); // two rows: 256 + 44
    assert.equal(first, 1);
    assert.equal(o.backlog, 303);
    assert.equal(o.lastSeq, 303);
    const all = o.read(0, 10_000);
    assert.deepEqual(
      all.map((r) => r.seq),
      Array.from({ length: 303 }, (_, i) => i + 1),
    );
    assert.deepEqual(all[2], { ...messages(3, 1)[0], seq: 3, name: null, type: null });
    assert.deepEqual(
      o.read(2, 3).map((r) => r.seq),
      [3, 4, 5],
    );
    assert.deepEqual(
      o.read(258, 2).map((r) => r.seq),
      [259, 260],
    );
    assert.equal(o.oldestTs(), 1);
  });

  it('acknowledgements cut rows at any seq, in any order, and a restart resumes from what is left', () => {
    const o = open();
    tx(() => o.add(messages(1, 10)));
    tx(() => o.add(messages(11, 10)));
    tx(() => o.add(messages(21, 10)));
    o.ack(1, 2, 2); // the start of row 1
    o.ack(3, 4, 2); // the start of what is left of it
    o.ack(5, 14, 10); // the end of row 1 and the start of row 2
    o.ack(18, 18, 1); // out of order, in the middle of row 2
    o.ack(21, 30, 10); // a whole row
    assert.equal(o.backlog, 5);
    assert.equal(o.counters.sent, 25);
    const left = [15, 16, 17, 19, 20];
    assert.deepEqual(tsOf(o), left);
    const again = open();
    assert.equal(again.backlog, 5);
    assert.equal(again.counters.sent, 25);
    assert.deepEqual(tsOf(again), left);
    o.ack(1, 20, 5);
    assert.equal(o.backlog, 0);
    assert.equal(o.oldestTs(), null);
    assert.equal(
      (db.prepare('SELECT count(*) AS n FROM upstream_outbox').get() as { n: number }).n,
      0,
    );
    // Seqs go on after the last one given out, even with the table empty.
    let next = 0;
    tx(() => {
      next = o.add(messages(31, 1));
    });
    assert.equal(next, 31);
  });

  it('drops the oldest messages beyond the bound, cutting a row, and counts them', () => {
    const o = open(25);
    for (let i = 0; i < 4; i++) tx(() => o.add(messages(1 + 10 * i, 10)));
    assert.equal(o.backlog, 25);
    assert.equal(o.counters.dropped, 15);
    assert.deepEqual(
      tsOf(o),
      Array.from({ length: 25 }, (_, i) => 16 + i),
    );
    assert.equal(o.oldestTs(), 16);
  });

  it('removes single messages (deleted device, set aside) and keeps the others of their row', () => {
    const o = open();
    tx(() => o.add(messages(1, 10)));
    o.dropRows([3, 7]);
    const [fourth] = o.read(3, 1);
    o.setAside([fourth], 'refused', 99);
    o.setAside([fourth], 'refused', 99); // already gone: not counted twice
    assert.deepEqual(tsOf(o), [1, 2, 5, 6, 8, 9, 10]);
    assert.equal(o.backlog, 7);
    assert.deepEqual(o.counters, { sent: 0, dropped: 2, rejected: 1 });
    const rejected = o.rejected(10);
    assert.equal(rejected.total, 1);
    assert.deepEqual(rejected.rows[0].data, JSON.parse(messages(4, 1)[0].data));
  });

  it('migration 019 turns the rows of 016 into rows of one message with their seq', async () => {
    db.close();
    await rm(dir, { recursive: true, force: true });
    db = openDb({ dataDir: dir, durability: 'normal' });
    migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 19),
      log,
    );
    const insert = db.prepare(
      'INSERT INTO upstream_outbox (rid, kind, ts, data) VALUES (?, ?, ?, ?)',
    );
    for (const m of messages(1, 3)) insert.run(m.rid, m.kind, m.ts, m.data);
    db.prepare('DELETE FROM upstream_outbox WHERE seq = 1').run();
    migrate(db, MIGRATIONS, log);
    const o = open();
    assert.equal(o.backlog, 2);
    assert.equal(o.lastSeq, 3);
    assert.deepEqual(
      o.read(0, 10),
      messages(2, 2).map((m, i) => ({ ...m, seq: i + 2, name: null, type: null })),
    );
  });
});
