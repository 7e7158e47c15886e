import Database from 'better-sqlite3';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const io = () => Number(/^write_bytes: (\d+)$/m.exec(readFileSync('/proc/thread-self/io', 'utf8'))![1]);
function run(name: string, rowBytes: number, mode: 'append' | 'ring', commits = 1200, rowsPerCommit = 50) {
  const dir = mkdtempSync(join(tmpdir(), 'wal-'));
  const db = new Database(join(dir, 'x.db'));
  db.pragma('journal_mode = WAL'); db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE log (seq INTEGER PRIMARY KEY, rid INTEGER NOT NULL, data BLOB NOT NULL)');
  db.exec('CREATE TABLE ring (slot INTEGER PRIMARY KEY, data BLOB NOT NULL)');
  const SLOT = 1000, SLOTS = 4000;
  if (mode === 'ring') { const ins = db.prepare('INSERT INTO ring VALUES (?, zeroblob(?))'); db.transaction(() => { for (let i = 0; i < SLOTS; i++) ins.run(i, SLOT); })(); }
  db.pragma('wal_checkpoint(TRUNCATE)');
  const ins = db.prepare('INSERT INTO log (rid, data) VALUES (?, ?)');
  const upd = db.prepare('UPDATE ring SET data = ? WHERE slot = ?');
  const del = db.prepare('DELETE FROM log WHERE seq <= ?');
  let walFrames = 0;
  const frames = () => { const r = db.pragma('wal_checkpoint(PASSIVE)') as any[]; return r[0].log; };
  const before = io();
  let pos = 0; let seq = 0; const slotBuf = Buffer.alloc(SLOT);
  const tx = db.transaction((rows: Buffer[]) => {
    if (mode === 'append') for (const r of rows) { ins.run(1, r); seq++; }
    else {
      const all = Buffer.concat(rows);
      let off = 0;
      while (off < all.length) {
        const slot = Math.floor(pos / SLOT) % SLOTS; const inSlot = pos % SLOT;
        const take = Math.min(SLOT - inSlot, all.length - off);
        all.copy(slotBuf, inSlot, off, off + take);
        upd.run(slotBuf, slot); pos += take; off += take;
      }
    }
  });
  const row = Buffer.alloc(rowBytes, 7);
  let frameSum = 0;
  for (let c = 0; c < commits; c++) {
    tx(Array.from({ length: rowsPerCommit }, () => row));
    if (c % 100 === 99) { frameSum += frames(); if (mode === 'append' && c % 600 === 599) del.run(seq - 1000); }
  }
  const bytes = io() - before;
  const points = commits * rowsPerCommit * 3;
  console.log(`${name}: ${(frameSum / commits).toFixed(2)} frames/commit, written ${(bytes / points).toFixed(1)} B/point (incl. checkpoints)`);
  db.close();
}
run('append 40 B', 40, 'append');
run('append 25 B', 25, 'append');
run('ring 40 B', 40 + 10, 'ring');
run('ring 25 B', 25 + 10, 'ring');
