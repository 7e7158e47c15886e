import type { Statement } from 'better-sqlite3';
import type { Db } from '../db/open.js';

/** What a row carries (column `kind`). */
export const KIND = { telemetry: 1, attributes: 2, claim: 3 } as const;
export type OutboxKind = (typeof KIND)[keyof typeof KIND];

/** A message for the cloud: one device's telemetry payload, client attributes or claim. */
export interface OutboxEntry {
  readonly rid: number;
  readonly kind: OutboxKind;
  /** Data time of the message (its first point), for `oldestBacklogTs`. */
  readonly ts: number;
  /** The device's part of the gateway-API payload, as JSON text. */
  readonly data: string;
}

/** A row read for sending, with its device's current name and profile (null: device deleted). */
export interface OutboxRow extends OutboxEntry {
  readonly seq: number;
  readonly name: string | null;
  readonly type: string | null;
}

export interface RejectedRow {
  readonly id: number;
  readonly deviceName: string;
  readonly kind: 'telemetry' | 'attributes' | 'claim';
  readonly ts: number;
  readonly data: unknown;
  readonly reason: string;
  readonly rejectedTs: number;
}

export interface OutboxCounters {
  readonly sent: number;
  readonly dropped: number;
  readonly rejected: number;
}

/** Rows per multi-row INSERT in a commit (one statement per chunk size, prepared once). */
const INSERT_CHUNK = 32;
/** Device names and profiles remembered for the rows read (cleared when full or on a change). */
const MAX_NAMES = 10_000;

/** Refused messages kept for inspection; beyond it the oldest are deleted. */
const MAX_REJECTED = 10_000;
const KIND_NAMES = { 1: 'telemetry', 2: 'attributes', 3: 'claim' } as const;

/**
 * The upstream outbox in SQLite (migration 016): rows are added inside the transaction that
 * commits their data (`add`), read in `seq` order for sending, deleted on the cloud's PUBACK
 * (`ack`) and bounded: an `add` beyond `maxBacklog` deletes the oldest rows in the same
 * transaction and counts them. The backlog size is kept in memory (exact after every commit).
 */
export class Outbox {
  readonly #db: Db;
  #max: number;
  #count = 0;
  /** Highest seq added (rows beyond a reader's cursor exist only while it is ahead of it). */
  #lastSeq = 0;
  #counters = { sent: 0, dropped: 0, rejected: 0 };
  /** Multi-row inserts by row count (1..INSERT_CHUNK), prepared on first use. */
  readonly #inserts: Statement[] = [];
  readonly #names = new Map<number, { name: string; type: string } | null>();
  readonly #nameOf: Statement;
  readonly #dropOldest: Statement;
  readonly #bump: Statement;
  readonly #read: Statement;
  readonly #deleteRange: Statement;

  constructor(db: Db, maxBacklog: number) {
    this.#db = db;
    this.#max = maxBacklog;
    this.#nameOf = db.prepare(
      `SELECT d.name, (SELECT p.name FROM device_profile p WHERE p.id = d.device_profile_id) AS type
         FROM device d WHERE d.rid = ?`,
    );
    this.#dropOldest = db.prepare(
      'DELETE FROM upstream_outbox WHERE seq IN (SELECT seq FROM upstream_outbox ORDER BY seq LIMIT ?)',
    );
    this.#bump = db.prepare('UPDATE upstream_counter SET value = value + ? WHERE name = ?');
    this.#read = db.prepare(
      'SELECT seq, rid, kind, ts, data FROM upstream_outbox WHERE seq > ? ORDER BY seq LIMIT ?',
    );
    this.#deleteRange = db.prepare('DELETE FROM upstream_outbox WHERE seq >= ? AND seq <= ?');
  }

  /** Loads the backlog size and the totals (again after a rolled-back commit). */
  init(): void {
    this.#count = (
      this.#db.prepare('SELECT count(*) AS n FROM upstream_outbox').get() as { n: number }
    ).n;
    this.#lastSeq =
      (this.#db.prepare('SELECT max(seq) AS n FROM upstream_outbox').get() as { n: number | null })
        .n ?? 0;
    for (const r of this.#db.prepare('SELECT name, value FROM upstream_counter').all() as Array<{
      name: keyof OutboxCounters;
      value: number;
    }>) {
      this.#counters[r.name] = r.value;
    }
  }

  /** The highest seq added so far (0: none); nothing to read after it. */
  get lastSeq(): number {
    return this.#lastSeq;
  }

  /** A new bound (settings saved): applies from the next add. */
  setMax(maxBacklog: number): void {
    this.#max = maxBacklog;
  }

  get backlog(): number {
    return this.#count;
  }

  get counters(): OutboxCounters {
    return { ...this.#counters };
  }

  /** Data time of the oldest waiting message; null when none waits. */
  oldestTs(): number | null {
    const r = this.#db.prepare('SELECT ts FROM upstream_outbox ORDER BY seq LIMIT 1').get() as
      | { ts: number }
      | undefined;
    return r?.ts ?? null;
  }

  /**
   * Adds messages. Must run inside the transaction that commits their data (the caller's);
   * beyond the bound the oldest rows go, counted as dropped. Returns the first row's seq (the
   * others follow it), 0 for none.
   */
  add(entries: readonly OutboxEntry[]): number {
    if (entries.length === 0) return 0;
    let last = 0;
    for (let i = 0; i < entries.length; i += INSERT_CHUNK) {
      const n = Math.min(INSERT_CHUNK, entries.length - i);
      const args: Array<number | string> = [];
      for (let j = i; j < i + n; j++) {
        const e = entries[j];
        args.push(e.rid, e.kind, e.ts, e.data);
      }
      last = Number(this.#insertOf(n).run(args).lastInsertRowid);
    }
    this.#count += entries.length;
    this.#lastSeq = last;
    const over = this.#count - this.#max;
    if (over > 0) {
      const n = this.#dropOldest.run(over).changes;
      this.#count -= n;
      this.#bumpCounter('dropped', n);
    }
    // AUTOINCREMENT: the rows of one transaction take consecutive seqs, the last one this.
    return last - entries.length + 1;
  }

  /** `add` in a transaction of its own (the push-to-cloud node: its cause is the node's run). */
  addNow(entries: readonly OutboxEntry[]): void {
    try {
      this.#db.transaction(() => this.add(entries))();
    } catch (err) {
      this.init();
      throw err;
    }
  }

  /**
   * Up to `limit` rows after `afterSeq`, in send order, with their device's name and profile
   * (null: the device was deleted) from a bounded cache (`forgetNames` on a device change).
   */
  read(afterSeq: number, limit: number): OutboxRow[] {
    const rows = this.#read.all(afterSeq, limit) as Array<OutboxEntry & { seq: number }>;
    return rows.map((r) => {
      const d = this.#device(r.rid);
      return { ...r, name: d?.name ?? null, type: d?.type ?? null };
    });
  }

  /** Rows just added (`add` returned `firstSeq`) as `read` would return them. */
  rowsOf(entries: readonly OutboxEntry[], firstSeq: number): OutboxRow[] {
    return entries.map((e, i) => {
      const d = this.#device(e.rid);
      return { ...e, seq: firstSeq + i, name: d?.name ?? null, type: d?.type ?? null };
    });
  }

  /** A device was renamed, moved to another profile or deleted, or a profile renamed. */
  forgetNames(): void {
    this.#names.clear();
  }

  #device(rid: number): { name: string; type: string } | null {
    let d = this.#names.get(rid);
    if (d === undefined) {
      d = (this.#nameOf.get(rid) as { name: string; type: string } | undefined) ?? null;
      if (this.#names.size >= MAX_NAMES) this.#names.clear();
      this.#names.set(rid, d);
    }
    return d;
  }

  #insertOf(n: number): Statement {
    let st = this.#inserts[n];
    if (!st) {
      const values = Array.from({ length: n }, () => '(?, ?, ?, ?)').join(', ');
      st = this.#db.prepare(`INSERT INTO upstream_outbox (rid, kind, ts, data) VALUES ${values}`);
      this.#inserts[n] = st;
    }
    return st;
  }

  /** The cloud acknowledged the publish that carried rows `first`..`last`: they go. */
  ack(first: number, last: number, messages: number): void {
    this.#db.transaction(() => {
      const n = this.#deleteRange.run(first, last).changes;
      this.#count -= n;
      // Rows dropped at the bound while in flight were counted there, not here.
      this.#bumpCounter('sent', Math.min(n, messages));
    })();
  }

  /** Rows whose device was deleted before they went up: dropped and counted. */
  dropRows(seqs: readonly number[]): void {
    if (seqs.length === 0) return;
    this.#db.transaction(() => {
      let n = 0;
      for (const s of seqs) n += this.#deleteRange.run(s, s).changes;
      this.#count -= n;
      this.#bumpCounter('dropped', n);
    })();
  }

  /** The cloud refused these rows more often than the retry bound: set aside with the reason. */
  setAside(rows: readonly OutboxRow[], reason: string, now: number): void {
    if (rows.length === 0) return;
    const insert = this.#db.prepare(
      `INSERT INTO upstream_rejected (device_name, kind, ts, data, reason, rejected_ts)
       VALUES (?, ?, ?, ?, ?, ?)`,
    );
    this.#db.transaction(() => {
      let n = 0;
      for (const r of rows) {
        const gone = this.#deleteRange.run(r.seq, r.seq).changes;
        if (gone === 0) continue;
        insert.run(r.name ?? `#${r.rid}`, r.kind, r.ts, r.data, reason, now);
        n += gone;
      }
      this.#count -= n;
      this.#bumpCounter('rejected', n);
      this.#db
        .prepare(
          `DELETE FROM upstream_rejected WHERE id <= (SELECT max(id) FROM upstream_rejected) - ?`,
        )
        .run(MAX_REJECTED);
    })();
  }

  /** Messages set aside, newest first. */
  rejected(limit: number, offset = 0): { total: number; rows: RejectedRow[] } {
    const total = (
      this.#db.prepare('SELECT count(*) AS n FROM upstream_rejected').get() as { n: number }
    ).n;
    const rows = this.#db
      .prepare(
        `SELECT id, device_name, kind, ts, data, reason, rejected_ts FROM upstream_rejected
          ORDER BY id DESC LIMIT ? OFFSET ?`,
      )
      .all(limit, offset) as Array<{
      id: number;
      device_name: string;
      kind: 1 | 2 | 3;
      ts: number;
      data: string;
      reason: string;
      rejected_ts: number;
    }>;
    return {
      total,
      rows: rows.map((r) => ({
        id: r.id,
        deviceName: r.device_name,
        kind: KIND_NAMES[r.kind],
        ts: r.ts,
        data: JSON.parse(r.data) as unknown,
        reason: r.reason,
        rejectedTs: r.rejected_ts,
      })),
    };
  }

  #bumpCounter(name: keyof OutboxCounters, n: number): void {
    if (n <= 0) return;
    this.#bump.run(n, name);
    this.#counters[name] += n;
  }
}
