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

/**
 * Most messages in one outbox row: a commit of more is split, so that rewriting a row cut by an
 * acknowledgement or the bound stays short.
 */
const ROW_MESSAGES = 256;
/** Rows fetched per statement when reading or dropping. */
const ROW_PAGE = 64;
/** Device names and profiles remembered for the rows read (cleared when full or on a change). */
const MAX_NAMES = 10_000;

/** Refused messages kept for inspection; beyond it the oldest are deleted. */
const MAX_REJECTED = 10_000;
const KIND_NAMES = { 1: 'telemetry', 2: 'attributes', 3: 'claim' } as const;

/** A message of a row, with its seq. */
type Message = OutboxEntry & { readonly seq: number };

/** One table row: the messages of one commit (or what is left of them). */
interface Row {
  readonly seq: number;
  readonly last: number;
  readonly n: number;
  readonly data: string;
}

/**
 * The upstream outbox in SQLite (migrations 016, 019): messages are added inside the
 * transaction that commits their data (`add`), read in `seq` order for sending, deleted on the
 * cloud's PUBACK (`ack`) and bounded: an `add` beyond `maxBacklog` deletes the oldest messages in
 * the same transaction and counts them. The backlog size is kept in memory (exact after every
 * commit).
 *
 * A table row holds the messages of one `add` (up to `ROW_MESSAGES`), numbered by consecutive
 * seqs: a commit inserts one row and an acknowledgement deletes whole rows, so SQLite's pages
 * churn per commit, not per message. A row cut by an acknowledgement, the bound or a message set
 * aside is rewritten with the messages it keeps (they keep their seqs).
 */
export class Outbox {
  readonly #db: Db;
  #max: number;
  #count = 0;
  /** Highest seq given out (never lowered while running; a rolled-back commit leaves a gap). */
  #lastSeq = 0;
  #counters = { sent: 0, dropped: 0, rejected: 0 };
  readonly #names = new Map<number, { name: string; type: string } | null>();
  readonly #nameOf: Statement;
  readonly #insert: Statement;
  readonly #update: Statement;
  readonly #delete: Statement;
  readonly #deleteWithin: Statement;
  readonly #containing: Statement;
  readonly #oldest: Statement;
  readonly #bump: Statement;
  readonly #readFrom: Statement;

  constructor(db: Db, maxBacklog: number) {
    this.#db = db;
    this.#max = maxBacklog;
    this.#nameOf = db.prepare(
      `SELECT d.name, (SELECT p.name FROM device_profile p WHERE p.id = d.device_profile_id) AS type
         FROM device d WHERE d.rid = ?`,
    );
    this.#insert = db.prepare(
      'INSERT INTO upstream_outbox (seq, last, n, ts, data) VALUES (?, ?, ?, ?, ?)',
    );
    this.#update = db.prepare('UPDATE upstream_outbox SET n = ?, ts = ?, data = ? WHERE seq = ?');
    this.#delete = db.prepare('DELETE FROM upstream_outbox WHERE seq = ?');
    this.#deleteWithin = db.prepare(
      'DELETE FROM upstream_outbox WHERE seq >= @first AND seq <= @last AND last <= @last RETURNING n',
    );
    // The row whose seq range holds a seq (the rows' ranges never overlap).
    this.#containing = db.prepare(
      `SELECT seq, last, n, data FROM upstream_outbox
        WHERE seq = (SELECT max(seq) FROM upstream_outbox WHERE seq <= @at) AND last >= @at`,
    );
    this.#oldest = db.prepare(
      'SELECT seq, last, n, data FROM upstream_outbox ORDER BY seq LIMIT ?',
    );
    this.#readFrom = db.prepare(
      `SELECT seq, last, n, data FROM upstream_outbox
        WHERE seq >= coalesce((SELECT max(seq) FROM upstream_outbox WHERE seq <= @at), @at)
          AND last >= @at
        ORDER BY seq LIMIT @limit`,
    );
    this.#bump = db.prepare('UPDATE upstream_counter SET value = value + ? WHERE name = ?');
  }

  /** Loads the backlog size and the totals (again after a rolled-back commit). */
  init(): void {
    const r = this.#db
      .prepare(
        'SELECT coalesce(sum(n), 0) AS n, coalesce(max(last), 0) AS last FROM upstream_outbox',
      )
      .get() as { n: number; last: number };
    this.#count = r.n;
    this.#lastSeq = Math.max(this.#lastSeq, r.last);
    for (const c of this.#db.prepare('SELECT name, value FROM upstream_counter').all() as Array<{
      name: keyof OutboxCounters;
      value: number;
    }>) {
      this.#counters[c.name] = c.value;
    }
  }

  /** The highest seq given out so far (0: none); nothing to read after it. */
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
   * beyond the bound the oldest messages go, counted as dropped. Returns the first message's seq
   * (the others follow it), 0 for none.
   */
  add(entries: readonly OutboxEntry[]): number {
    if (entries.length === 0) return 0;
    const first = this.#lastSeq + 1;
    for (let i = 0; i < entries.length; i += ROW_MESSAGES) {
      const n = Math.min(ROW_MESSAGES, entries.length - i);
      let data = '';
      for (let j = 0; j < n; j++) {
        const e = entries[i + j];
        data += `${j} ${e.rid} ${e.kind} ${e.ts} ${e.data.length}\n${e.data}`;
      }
      this.#insert.run(first + i, first + i + n - 1, n, entries[i].ts, data);
    }
    this.#lastSeq = first + entries.length - 1;
    this.#count += entries.length;
    const over = this.#count - this.#max;
    if (over > 0) {
      const n = this.#dropOldest(over);
      this.#count -= n;
      this.#bumpCounter('dropped', n);
    }
    return first;
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
   * Up to `limit` messages after `afterSeq`, in send order, with their device's name and profile
   * (null: the device was deleted) from a bounded cache (`forgetNames` on a device change).
   */
  read(afterSeq: number, limit: number): OutboxRow[] {
    const out: OutboxRow[] = [];
    let from = afterSeq + 1;
    while (out.length < limit) {
      const rows = this.#readFrom.all({ at: from, limit: ROW_PAGE }) as Row[];
      for (const row of rows) {
        for (const m of decode(row)) {
          if (m.seq <= afterSeq) continue;
          if (out.length >= limit) return out;
          const d = this.#device(m.rid);
          out.push({ ...m, name: d?.name ?? null, type: d?.type ?? null });
        }
      }
      if (rows.length < ROW_PAGE) break;
      from = rows[rows.length - 1].last + 1;
    }
    return out;
  }

  /** Messages just added (`add` returned `firstSeq`) as `read` would return them. */
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

  /** The cloud acknowledged the publish that carried messages `first`..`last`: they go. */
  ack(first: number, last: number, messages: number): void {
    this.#db.transaction(() => {
      const n = this.#removeRange(first, last);
      this.#count -= n;
      // Messages dropped at the bound while in flight were counted there, not here.
      this.#bumpCounter('sent', Math.min(n, messages));
    })();
  }

  /** Messages whose device was deleted before they went up: dropped and counted. */
  dropRows(seqs: readonly number[]): void {
    if (seqs.length === 0) return;
    this.#db.transaction(() => {
      const n = this.#removeSeqs(seqs);
      this.#count -= n;
      this.#bumpCounter('dropped', n);
    })();
  }

  /** The cloud refused these messages more often than the retry bound: set aside with the reason. */
  setAside(rows: readonly OutboxRow[], reason: string, now: number): void {
    if (rows.length === 0) return;
    const insert = this.#db.prepare(
      `INSERT INTO upstream_rejected (device_name, kind, ts, data, reason, rejected_ts)
       VALUES (?, ?, ?, ?, ?, ?)`,
    );
    this.#db.transaction(() => {
      let n = 0;
      for (const r of rows) {
        const gone = this.#removeSeqs([r.seq]);
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

  /** Deletes the messages `first`..`last`; returns how many there were. */
  #removeRange(first: number, last: number): number {
    let n = 0;
    // The rows cut by the range's ends keep their messages outside it ...
    const head = this.#containing.get({ at: first }) as Row | undefined;
    const cutHead = head !== undefined && head.seq < first;
    if (cutHead) n += this.#rewrite(head, (s) => s < first || s > last);
    const tail = this.#containing.get({ at: last }) as Row | undefined;
    if (tail && tail.last > last && !(cutHead && tail.seq === head.seq)) {
      n += this.#rewrite(tail, (s) => s > last);
    }
    // ... and the rows inside it go whole, unread.
    for (const r of this.#deleteWithin.all({ first, last }) as Array<{ n: number }>) n += r.n;
    return n;
  }

  /** Deletes the messages of these seqs; returns how many there were. */
  #removeSeqs(seqs: readonly number[]): number {
    const sorted = [...seqs].sort((a, b) => a - b);
    const gone = new Set(sorted);
    let n = 0;
    for (let i = 0; i < sorted.length; ) {
      const row = this.#containing.get({ at: sorted[i] }) as Row | undefined;
      if (!row) {
        i++;
        continue;
      }
      n += this.#rewrite(row, (s) => !gone.has(s));
      while (i < sorted.length && sorted[i] <= row.last) i++;
    }
    return n;
  }

  /** Drops the `over` oldest messages; returns how many went. */
  #dropOldest(over: number): number {
    let left = over;
    while (left > 0) {
      const rows = this.#oldest.all(ROW_PAGE) as Row[];
      if (rows.length === 0) break;
      for (const row of rows) {
        if (row.n <= left) {
          this.#delete.run(row.seq);
          left -= row.n;
        } else {
          const keep = decode(row).slice(left);
          this.#update.run(keep.length, keep[0].ts, encode(row.seq, keep), row.seq);
          left = 0;
        }
        if (left === 0) break;
      }
    }
    return over - left;
  }

  /** Rewrites a row with the messages whose seq `keep` accepts; returns how many it lost. */
  #rewrite(row: Row, keep: (seq: number) => boolean): number {
    const all = decode(row);
    const kept = all.filter((m) => keep(m.seq));
    if (kept.length === all.length) return 0;
    if (kept.length === 0) this.#delete.run(row.seq);
    else this.#update.run(kept.length, kept[0].ts, encode(row.seq, kept), row.seq);
    return all.length - kept.length;
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

/** A row's text: per message `<seq - row seq> <rid> <kind> <ts> <length>\n<text>`. */
function encode(rowSeq: number, messages: readonly Message[]): string {
  let out = '';
  for (const m of messages) {
    out += `${m.seq - rowSeq} ${m.rid} ${m.kind} ${m.ts} ${m.data.length}\n${m.data}`;
  }
  return out;
}

/** The messages of a row, in seq order. */
function decode(row: Row): Message[] {
  const out: Message[] = [];
  const text = row.data;
  let at = 0;
  while (at < text.length) {
    const nl = text.indexOf('\n', at);
    const head = text.slice(at, nl).split(' ');
    const length = Number(head[4]);
    out.push({
      seq: row.seq + Number(head[0]),
      rid: Number(head[1]),
      kind: Number(head[2]) as OutboxKind,
      ts: Number(head[3]),
      data: text.slice(nl + 1, nl + 1 + length),
    });
    at = nl + 1 + length;
  }
  return out;
}
