import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { Checkpointer } from './checkpointer.js';
import { DB_FILE, openDb } from './open.js';

const log = pino({ level: 'silent' });

describe('checkpointer', () => {
  it('checkpoints the WAL from a worker thread, with auto-checkpoints off until it stops', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'edge-ckpt-'));
    const db = openDb({ dataDir: dir, durability: 'normal' });
    try {
      db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
      const ckpt = new Checkpointer({ db, dataDir: dir, log, walBytes: 1, pollMs: 10 });
      db.pragma('wal_checkpoint(TRUNCATE)');
      const sizeBefore = statSync(join(dir, DB_FILE)).size;
      ckpt.start();
      assert.equal(db.pragma('wal_autocheckpoint', { simple: true }), 0);
      const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
      const deadline = Date.now() + 10_000;
      while (ckpt.checkpoints === 0 && Date.now() < deadline) {
        db.transaction(() => {
          for (let i = 0; i < 100; i++) insert.run('x'.repeat(100));
        })();
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.ok(ckpt.checkpoints > 0, 'the worker ran a checkpoint');
      // Only a checkpoint copies pages into the database file: it grew past the schema pages.
      assert.ok(
        statSync(join(dir, DB_FILE)).size > sizeBefore,
        'the checkpoint wrote the rows into the database file',
      );
      await ckpt.stop();
      assert.equal(db.pragma('wal_autocheckpoint', { simple: true }), 10_000);
      assert.equal((db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n > 0, true);
      // Stopping twice is harmless.
      await ckpt.stop();
    } finally {
      db.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('starts its worker only once frames wait, and ends it when the WAL stays idle', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'edge-ckpt-'));
    const db = openDb({ dataDir: dir, durability: 'normal' });
    const ckpt = new Checkpointer({
      db,
      dataDir: dir,
      log,
      maxAgeMs: 200,
      pollMs: 20,
      idleStopMs: 300,
    });
    try {
      db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
      db.pragma('wal_checkpoint(TRUNCATE)');
      ckpt.start();
      await new Promise((r) => setTimeout(r, 400));
      assert.equal(ckpt.running, false, 'no worker while nothing waits');
      db.prepare('INSERT INTO t (v) VALUES (?)').run('x');
      const deadline = Date.now() + 10_000;
      while (ckpt.checkpoints === 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.ok(ckpt.checkpoints > 0, 'frames older than the age limit were checkpointed');
      while (ckpt.running && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.equal(ckpt.running, false, 'the worker ended after the idle time');
      assert.equal(db.pragma('wal_autocheckpoint', { simple: true }), 0);
    } finally {
      await ckpt.stop();
      db.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps the WAL file bounded under writes without pauses', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'edge-ckpt-'));
    const db = openDb({ dataDir: dir, durability: 'normal' });
    // A failed assertion must still end the worker: a live one kept the test process from exiting.
    let stopCkpt = async () => {};
    try {
      db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)');
      const walBytes = 256 * 1024;
      const ckpt = new Checkpointer({ db, dataDir: dir, log, walBytes, pollMs: 20 });
      stopCkpt = () => ckpt.stop();
      ckpt.start();
      // The file shrinks back to this size whenever SQLite starts the WAL over.
      db.pragma(`journal_size_limit = ${walBytes}`);
      const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
      const prune = db.prepare('DELETE FROM t WHERE id <= ?');
      while (ckpt.checkpoints === 0) {
        insert.run(Buffer.alloc(10));
        await new Promise((r) => setTimeout(r, 5));
      }
      // About 130 MB through the WAL, one commit per turn of the event loop: the writer is never
      // idle long enough for the worker's checkpoint alone to let the WAL start over (without
      // the gateway connection finishing it, the file grows to the whole 130 MB).
      const row = Buffer.alloc(1000, 7);
      let largest = 0;
      for (let i = 0; i < 4000; i++) {
        db.transaction(() => {
          for (let r = 0; r < 3; r++) insert.run(row);
          prune.run(i * 3 - 300);
        })();
        await new Promise((r) => setImmediate(r));
        largest = Math.max(largest, statSync(join(dir, `${DB_FILE}-wal`)).size);
      }
      assert.ok(ckpt.finished > 0, 'the gateway connection finished checkpoints');
      assert.ok(largest < 40e6, `the WAL file stayed bounded: at most ${largest} bytes`);
    } finally {
      await stopCkpt();
      db.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
