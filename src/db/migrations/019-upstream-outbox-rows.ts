import type { Migration } from '../migrator.js';

/**
 * The upstream outbox holds one row per commit instead of one row per message (docs/upstream.md
 * "The outbox"; `src/upstream/outbox.ts`): a commit inserts one row, an acknowledgement deletes
 * whole rows, and the rows' B-tree and WAL pages churn once per commit instead of once per
 * message.
 *
 * - `seq`: the row's key, the seq of its first message when written (seqs are the send order;
 *   no AUTOINCREMENT: the service numbers them, so no `sqlite_sequence` page per commit);
 * - `last`: the seq of its last message when written (the rows' seq ranges never overlap);
 * - `n`: the messages still in the row; `ts`: the data time of its first one;
 * - `data`: the messages, each `<seq - row seq> <rid> <kind> <ts> <length>\n<text>` with the
 *   text's length in UTF-16 code units (JavaScript's).
 *
 * The rows of 016's table become rows of one message, with their seq.
 */
export const m019UpstreamOutboxRows: Migration = {
  version: 19,
  name: 'upstream-outbox-rows',
  up(db) {
    db.exec(`
      CREATE TABLE upstream_outbox_rows (
        seq  INTEGER PRIMARY KEY,
        last INTEGER NOT NULL,
        n    INTEGER NOT NULL,
        ts   INTEGER NOT NULL,
        data TEXT NOT NULL
      );
    `);
    const insert = db.prepare(
      'INSERT INTO upstream_outbox_rows (seq, last, n, ts, data) VALUES (?, ?, 1, ?, ?)',
    );
    const page = db.prepare(
      'SELECT seq, rid, kind, ts, data FROM upstream_outbox WHERE seq > ? ORDER BY seq LIMIT 10000',
    );
    // In pages: better-sqlite3 cannot write while a read statement iterates.
    for (let after = 0; ; ) {
      const rows = page.all(after) as Array<{
        seq: number;
        rid: number;
        kind: number;
        ts: number;
        data: string;
      }>;
      if (rows.length === 0) break;
      for (const r of rows) {
        insert.run(r.seq, r.seq, r.ts, `0 ${r.rid} ${r.kind} ${r.ts} ${r.data.length}\n${r.data}`);
      }
      after = rows[rows.length - 1].seq;
    }
    db.exec(`
      DROP TABLE upstream_outbox;
      ALTER TABLE upstream_outbox_rows RENAME TO upstream_outbox;
    `);
  },
};
