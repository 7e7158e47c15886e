import type { Statement } from 'better-sqlite3';
import type { Db } from '../db/open.js';
import {
  decodeBlock,
  decodeLogRecord,
  encodeBlock,
  encodeLogRecord,
  type LogPoint,
} from './telemetry-block.js';
import type { TsEntry, TsKind } from './telemetry-parser.js';
import {
  decodeSlot,
  encodeSlot,
  entryBytes,
  type LogEntry,
  type RingSlot,
  readRing,
  SLOT_BYTES,
  SLOT_PAYLOAD,
  slotSeq,
} from './telemetry-ring.js';

/** Width of an eviction chunk: points are counted, and evicted oldest first, per hour. */
export const CHUNK_MS = 3_600_000;

export type TsScalar = boolean | number | bigint | string;

/** A stored value with its type; `json` values are the JSON text. */
export interface StoredValue {
  readonly ts: number;
  readonly kind: TsKind;
  readonly value: TsScalar;
}

export type Aggregation = 'AVG' | 'MIN' | 'MAX' | 'SUM' | 'COUNT';

/** Points of one device for one commit. */
export interface WriteItem {
  readonly rid: number;
  readonly points: readonly TsEntry[];
}

/**
 * Bytes counted for the byte bound besides a block's or a log record's data: its key columns,
 * record header, cell pointer and (for blocks) its entry in `ts_block_age`.
 */
export const BLOCK_OVERHEAD = 40;
export const LOG_OVERHEAD = 12;

/** Ring slots when the store is given no size (the service sizes it from the open range). */
const DEFAULT_RING_SLOTS = 1024;

/** The log ring in memory: the seq of every slot, where the next commit writes, the tail. */
interface Ring {
  seqs: number[];
  head: number;
  /** The oldest seq a seal still needs (`ts_ring_tail`): slots below it are free. */
  tail: number;
}

/** The open (not yet sealed) points of one series, in arrival order. */
interface OpenSeries {
  readonly rid: number;
  readonly keyId: number;
  points: StoredValue[];
  /** Its share of the bytes of the log records that hold its points. */
  bytes: number;
  /**
   * The log seq (ring slot or spill row) of its oldest open point: the log before the oldest of
   * all can go.
   */
  firstSeq: number;
}

/** A segment: the blocks written by one seal; its ts range says which queries look into it. */
interface Segment {
  min: number;
  max: number;
}

interface BlockRow {
  seg: number;
  chunk: number;
  n: number;
  first_ts: number;
  last_ts: number;
  data: Buffer;
}

/** A row of the typed value columns (`ts_kv_latest`, and `ts_kv` before migration 013). */
export interface ValueRow {
  ts: bigint;
  dbl_v: number | null;
  long_v: bigint | null;
  bool_v: bigint | null;
  str_v: string | null;
  json_v: string | null;
}

/**
 * The telemetry storage (docs/telemetry.md): a durable log of committed messages (`ts_log`, one
 * row per device per commit), the open range of every series in memory (rebuilt from the log at
 * start), and closed ranges as compressed blocks (`ts_block`, one per series, hour chunk and
 * seal). A commit appends to the log only; a seal (rare and large) writes the open range as
 * blocks, the latest values, and drops the log rows it no longer needs, in one transaction.
 *
 * Point counts (total and per device) are kept in memory, loaded once by `init()`, so no write
 * or eviction decision needs a `count(*)`. Sealed points are counted exactly (an overwritten
 * point is removed from its old block when the new one is sealed); open points are counted as
 * they arrive (exact after `settle()`).
 */
export class TelemetryStore {
  readonly #db: Db;
  readonly #keyIds = new Map<string, number>();
  readonly #keyNames = new Map<number, string>();
  /** Sealed points per device, and in all. */
  readonly #perDevice = new Map<number, number>();
  #total = 0;
  /** Bytes of the sealed blocks and of the open range's log records (see BLOCK_OVERHEAD). */
  #bytes = 0;
  #openBytes = 0;
  /** Open points per device (device, then key), and in all. */
  readonly #open = new Map<number, Map<number, OpenSeries>>();
  readonly #openPerDevice = new Map<number, number>();
  #openPoints = 0;
  /** Points in the largest open series (the writer seals when it reaches the block size). */
  #largestOpen = 0;
  /** Segments by id, and the next id. */
  readonly #segs = new Map<number, Segment>();
  #nextSeg = 1;
  /** The newest sealed ts of each series: a point at or before it may overwrite a sealed one. */
  readonly #maxTs = new Map<number, Map<number, number>>();
  /**
   * The newest open point of each series, not yet in `ts_kv_latest`: latest values are written
   * once per series per seal; reads overlay them.
   */
  readonly #pendingLatest = new Map<number, Map<number, StoredValue>>();
  /** Time (ms, monotonic) the oldest open point was committed. */
  #openSince: number | undefined;
  readonly #stmts = new Map<string, Statement>();
  readonly #s: ReturnType<typeof prepare>;
  /** One commit's transaction, made once (`db.transaction()` builds wrappers on every call). */
  readonly #commit: (items: readonly WriteItem[], out: CommitOut) => void;
  readonly #ringSlots: number;
  #ring: Ring = { seqs: [], head: 0, tail: 0 };
  /** The next log seq (of a ring slot or a spill row). */
  #nextSeq = 1;

  /**
   * `ringSlots`: slots of the log ring (SLOT_BYTES each), preallocated by `init()`; a ring
   * never shrinks.
   */
  constructor(db: Db, opts: { ringSlots?: number } = {}) {
    this.#db = db;
    this.#ringSlots = Math.max(1, opts.ringSlots ?? DEFAULT_RING_SLOTS);
    this.#s = prepare(db);
    this.#commit = db.transaction((items: readonly WriteItem[], out: CommitOut) =>
      this.#commitTx(items, out),
    );
    registerViews(db, this);
  }

  /** The open points as rows of the former stage table (`ts_kv_stage` view). */
  *openRows(): Generator<unknown[]> {
    for (const byKey of this.#open.values()) {
      for (const series of byKey.values()) {
        for (const p of series.points) {
          const v = p.kind === 'bool' ? (p.value ? 1 : 0) : p.value;
          yield [series.firstSeq, series.rid, series.keyId, p.ts, OLD_KIND[p.kind], v];
        }
      }
    }
  }

  /** Loads the key dictionary, the counts and the open range (from the log). */
  init(): void {
    for (const r of this.#s.allKeys.all() as Array<{ id: number; key: string }>) {
      this.#keyIds.set(r.key, r.id);
      this.#keyNames.set(r.id, r.key);
    }
    this.#allocateRing();
    this.reloadCounts();
  }

  /**
   * Preallocates the ring's slots (once in a data directory's life, and when the ring grows),
   * then checkpoints them and truncates the WAL (the slots are written once, at start, and the
   * WAL file does not keep their size): afterwards commits only rewrite slots in place.
   */
  #allocateRing(): void {
    const have = this.#s.ringSlots.get() as number;
    if (have >= this.#ringSlots) return;
    this.#s.addSlots.run(have, this.#ringSlots - 1);
    this.#db.pragma('wal_checkpoint(TRUNCATE)');
  }

  /**
   * Reloads the counts, the segments and the open range from the tables (at start, and after a
   * device delete removed rows).
   */
  reloadCounts(): void {
    this.#perDevice.clear();
    this.#total = 0;
    this.#bytes = 0;
    this.#openBytes = 0;
    this.#segs.clear();
    this.#maxTs.clear();
    let maxSeg = 0;
    for (const r of this.#s.blockMeta.iterate() as Iterable<{
      seg: number;
      rid: number;
      key: number;
      n: number;
      f: number;
      l: number;
      b: number;
    }>) {
      this.#perDevice.set(r.rid, (this.#perDevice.get(r.rid) ?? 0) + r.n);
      this.#total += r.n;
      this.#bytes += r.b + BLOCK_OVERHEAD;
      const seg = this.#segs.get(r.seg);
      if (seg) {
        seg.min = Math.min(seg.min, r.f);
        seg.max = Math.max(seg.max, r.l);
      } else this.#segs.set(r.seg, { min: r.f, max: r.l });
      if (r.seg > maxSeg) maxSeg = r.seg;
      this.#noteSealed(r.rid, r.key, r.l);
    }
    this.#nextSeg = maxSeg + 1;
    // The open range: every message still in the log, in commit order.
    this.#open.clear();
    this.#openPerDevice.clear();
    this.#openPoints = 0;
    this.#largestOpen = 0;
    this.#pendingLatest.clear();
    this.#openSince = undefined;
    const ring = readRing(this.#db);
    const gone = this.#purgeDeleted(ring.slots, ring.entries);
    const seqs = ring.slots.map((x) => x.seq);
    let newest = 0;
    for (let i = 1; i < seqs.length; i++) if (seqs[i] > seqs[newest]) newest = i;
    // Write on after the newest slot (from slot 0 in a ring never written).
    const head = seqs.length === 0 || seqs[newest] === 0 ? 0 : (newest + 1) % seqs.length;
    this.#ring = { seqs, head, tail: ring.tail };
    this.#nextSeq = Math.max(seqs[newest] ?? 0, ring.spillMax, ring.tail - 1) + 1;
    for (const e of ring.entries) {
      if (gone.has(e.rid)) continue;
      this.#addOpen(e.rid, e.seq, decodeLogRecord(e.data), e.data.length + LOG_OVERHEAD);
    }
  }

  /**
   * Removes from the ring the records of devices that no longer exist (the delete trigger
   * removes their spill rows, blocks and latest values, but cannot reach into the slots), so
   * that they never come back, not even under a reused rid. Returns those devices.
   */
  #purgeDeleted(slots: readonly RingSlot[], entries: readonly LogEntry[]): Set<number> {
    const gone = new Set<number>();
    const seen = new Set<number>();
    for (const e of entries) {
      if (seen.has(e.rid)) continue;
      seen.add(e.rid);
      if (!this.#s.deviceExists.get(e.rid)) gone.add(e.rid);
    }
    if (gone.size === 0) return gone;
    this.#db.transaction(() => {
      for (const x of slots) {
        if (!x.entries.some((e) => gone.has(e.rid))) continue;
        const kept = x.entries.filter((e) => !gone.has(e.rid));
        this.#s.updateSlot.run(encodeSlot(x.seq, kept), x.slot);
      }
    })();
    return gone;
  }

  /** Points stored: sealed and open (open ones may still overwrite: exact after `settle()`). */
  get totalPoints(): number {
    return this.#total + this.#openPoints;
  }

  /** Bytes stored, counted as eviction removes them: blocks and open log records. */
  get totalBytes(): number {
    return this.#bytes + this.#openBytes;
  }

  /** Points committed to the log and not yet sealed into blocks. */
  get stagedPoints(): number {
    return this.#openPoints;
  }

  /** Points of the largest open series. */
  get largestOpenSeries(): number {
    return this.#largestOpen;
  }

  /** When (performance.now()) the oldest open point was committed; undefined if none. */
  get openSince(): number | undefined {
    return this.#openSince;
  }

  /** Points of one device, open ones included (exact after `settle()`). */
  devicePoints(rid: number): number {
    return (this.#perDevice.get(rid) ?? 0) + (this.#openPerDevice.get(rid) ?? 0);
  }

  /** Devices with more than `cap` points, open ones included. */
  devicesOver(cap: number): number[] {
    const rids = new Set([...this.#perDevice.keys(), ...this.#openPerDevice.keys()]);
    return [...rids].filter((rid) => this.devicePoints(rid) > cap);
  }

  keyId(key: string): number | undefined {
    return this.#keyIds.get(key);
  }

  keyName(id: number): string | undefined {
    return this.#keyNames.get(id);
  }

  /**
   * Commits the points of one batch in one transaction: one log row per item (a compact record,
   * no index), nothing else unless a key is new. Returns the devices whose points were dropped
   * because the device no longer exists.
   *
   * `inCommit` runs inside the same transaction, after the log rows, with the items kept (those
   * of live devices): what it writes commits with the points or not at all, and if it throws
   * the whole commit rolls back (docs/telemetry.md, "The commit's transaction").
   */
  write<T extends WriteItem>(
    items: readonly T[],
    inCommit?: (kept: readonly T[]) => void,
  ): { dropped: ReadonlySet<number> } {
    const out: CommitOut = {
      newKeys: [],
      dropped: new Set(),
      rows: [],
      slots: [],
      nextSeq: this.#nextSeq,
      inCommit: inCommit as CommitOut['inCommit'],
    };
    try {
      this.#commit(items, out);
    } catch (err) {
      this.#forgetKeys(out.newKeys);
      throw err;
    }
    const ring = this.#ring;
    for (const [slot, seq] of out.slots) {
      ring.seqs[slot] = seq;
      ring.head = (slot + 1) % ring.seqs.length;
    }
    this.#nextSeq = out.nextSeq;
    for (const [rid, seq, points, bytes] of out.rows) this.#addOpen(rid, seq, points, bytes);
    return { dropped: out.dropped };
  }

  #commitTx(items: readonly WriteItem[], out: CommitOut): void {
    const s = this.#s;
    const live = new Set<number>();
    const args: unknown[] = [];
    const pending: Array<[number, LogPoint[]]> = [];
    for (const item of items) {
      const { rid } = item;
      if (!live.has(rid)) {
        // A device deleted while its points waited for the batch: drop them, so that they
        // cannot outlive it (or reappear under a reused rid).
        if (out.dropped.has(rid) || !s.deviceExists.get(rid)) {
          out.dropped.add(rid);
          continue;
        }
        live.add(rid);
      }
      if (item.points.length === 0) continue;
      const points: LogPoint[] = item.points.map((p) => ({
        keyId: this.#keyIdOf(p.key, out.newKeys),
        ts: p.ts,
        kind: p.kind,
        value: p.value,
      }));
      pending.push([rid, points]);
    }
    const records = pending.map(([rid, points]) => ({
      rid,
      points,
      data: encodeLogRecord(points),
    }));
    if (!this.#writeRing(records, out)) {
      // The free ring is too small for this commit (or a record for a slot): spill rows.
      for (let p = 0; p < records.length; ) {
        const g = groupSize(records.length - p);
        args.length = 0;
        for (let q = p; q < p + g; q++) {
          const r = records[q];
          const seq = out.nextSeq++;
          args.push(seq, r.rid, r.data);
          out.rows.push([r.rid, seq, r.points, r.data.length + LOG_OVERHEAD]);
        }
        this.#statement(`log:${g}`, () => logSql(g)).run(args);
        p += g;
      }
    }
    out.inCommit?.(out.dropped.size > 0 ? items.filter((i) => !out.dropped.has(i.rid)) : items);
  }

  /**
   * Writes the records of a commit into the free slots from the ring's head, in order, whole
   * records per slot. Returns false, writing nothing, when they do not fit.
   */
  #writeRing(
    records: ReadonlyArray<{ rid: number; points: LogPoint[]; data: Uint8Array }>,
    out: CommitOut,
  ): boolean {
    if (records.length === 0) return true;
    const groups: Array<typeof records> = [[]];
    let used = 0;
    for (const r of records) {
      const size = entryBytes(r.rid, r.data);
      if (size > SLOT_PAYLOAD) return false;
      if (used + size > SLOT_PAYLOAD) {
        groups.push([]);
        used = 0;
      }
      (groups[groups.length - 1] as (typeof records)[number][]).push(r);
      used += size;
    }
    const { seqs, head, tail } = this.#ring;
    if (groups.length > seqs.length) return false;
    for (let i = 0; i < groups.length; i++) {
      const seq = seqs[(head + i) % seqs.length];
      if (seq !== 0 && seq >= tail) return false;
    }
    for (let i = 0; i < groups.length; i++) {
      const slot = (head + i) % seqs.length;
      const seq = out.nextSeq++;
      this.#s.updateSlot.run(encodeSlot(seq, groups[i]), slot);
      out.slots.push([slot, seq]);
      for (const r of groups[i])
        out.rows.push([r.rid, seq, r.points, r.data.length + LOG_OVERHEAD]);
    }
    return true;
  }

  /** Adds committed log points to the open range (arrival order kept per series). */
  #addOpen(rid: number, seq: number, points: readonly LogPoint[], bytes: number): void {
    const share = bytes / points.length;
    let byKey = this.#open.get(rid);
    if (!byKey) {
      byKey = new Map();
      this.#open.set(rid, byKey);
    }
    let latest = this.#pendingLatest.get(rid);
    if (!latest) {
      latest = new Map();
      this.#pendingLatest.set(rid, latest);
    }
    for (const p of points) {
      let series = byKey.get(p.keyId);
      if (!series) {
        series = { rid, keyId: p.keyId, points: [], bytes: 0, firstSeq: seq };
        byKey.set(p.keyId, series);
      }
      series.bytes += share;
      const v: StoredValue = { ts: p.ts, kind: p.kind, value: normalize(p.kind, p.value) };
      series.points.push(v);
      if (series.points.length > this.#largestOpen) this.#largestOpen = series.points.length;
      // The newest ts of the series (the last written among equal ts) is its latest value.
      const newest = latest.get(p.keyId);
      if (!newest || v.ts >= newest.ts) latest.set(p.keyId, v);
    }
    this.#openPerDevice.set(rid, (this.#openPerDevice.get(rid) ?? 0) + points.length);
    this.#openPoints += points.length;
    this.#openBytes += bytes;
    this.#openSince ??= performance.now();
  }

  /** The dictionary id of a key, added (and listed in `newKeys`) on first sight. */
  #keyIdOf(key: string, newKeys: string[]): number {
    let keyId = this.#keyIds.get(key);
    if (keyId === undefined) {
      keyId = Number(this.#s.insertKey.run(key).lastInsertRowid);
      this.#keyIds.set(key, keyId);
      this.#keyNames.set(keyId, key);
      newKeys.push(key);
    }
    return keyId;
  }

  /** The dictionary rows rolled back with a batch: forget them. */
  #forgetKeys(keys: readonly string[]): void {
    for (const key of keys) {
      const id = this.#keyIds.get(key);
      this.#keyIds.delete(key);
      if (id !== undefined) this.#keyNames.delete(id);
    }
  }

  /**
   * Seals open series into compressed blocks in one transaction: the series whose oldest open
   * point is oldest first, at least one and then up to `maxPoints` points (all by default). The
   * blocks of one seal form a segment; the latest values are written, and the log rows that no
   * open series needs any more are deleted. A point that repeats a sealed (device, key, ts) is
   * removed from its old block, so the last value written wins and nothing is counted twice.
   * Returns the number of new points.
   */
  settle(maxPoints = Number.POSITIVE_INFINITY): number {
    if (this.#openPoints === 0) return 0;
    const all: OpenSeries[] = [];
    for (const byKey of this.#open.values()) for (const series of byKey.values()) all.push(series);
    all.sort((a, b) => a.firstSeq - b.firstSeq);
    let taken = 0;
    let take = 0;
    while (take < all.length && (take === 0 || taken < maxPoints))
      taken += all[take++].points.length;
    const sealing = all.slice(0, take);
    const rest = all.slice(take);
    const seg = this.#nextSeg;
    const keep = rest.length === 0 ? Number.POSITIVE_INFINITY : rest[0].firstSeq;
    const tail = rest.length === 0 ? this.#nextSeq : rest[0].firstSeq;
    const deltas = new Map<number, number>();
    let range: Segment | undefined;
    this.#db.transaction(() => {
      for (const series of sealing) {
        const r = this.#sealSeries(seg, series, deltas);
        if (!r) continue;
        range = range
          ? { min: Math.min(range.min, r.min), max: Math.max(range.max, r.max) }
          : { ...r };
      }
      this.#writeLatest();
      if (keep === Number.POSITIVE_INFINITY) this.#s.clearLog.run();
      else this.#s.clearLogBelow.run(keep);
      if (tail !== this.#ring.tail) this.#s.setTail.run(tail);
    })();
    this.#ring.tail = tail;
    this.#nextSeg++;
    if (range) this.#segs.set(seg, range);
    this.#pendingLatest.clear();
    for (const series of sealing) {
      const byKey = this.#open.get(series.rid);
      byKey?.delete(series.keyId);
      if (byKey?.size === 0) this.#open.delete(series.rid);
      const left = (this.#openPerDevice.get(series.rid) ?? 0) - series.points.length;
      if (left > 0) this.#openPerDevice.set(series.rid, left);
      else this.#openPerDevice.delete(series.rid);
      this.#openPoints -= series.points.length;
      this.#openBytes -= series.bytes;
    }
    if (this.#openPoints === 0) this.#openBytes = 0;
    let added = 0;
    for (const [rid, n] of deltas) {
      const left = (this.#perDevice.get(rid) ?? 0) + n;
      if (left > 0) this.#perDevice.set(rid, left);
      else this.#perDevice.delete(rid);
      this.#total += n;
      added += n;
    }
    this.#largestOpen = rest.reduce((m, x) => Math.max(m, x.points.length), 0);
    if (this.#openPoints === 0) this.#openSince = undefined;
    return added;
  }

  /**
   * Writes one series' open points as blocks of segment `seg` (one per hour chunk), after
   * removing the sealed points they overwrite. Adds the change of the device's count to `deltas`
   * and returns the ts range written.
   */
  #sealSeries(seg: number, series: OpenSeries, deltas: Map<number, number>): Segment | undefined {
    const { rid, keyId } = series;
    const points = latestWins(series.points);
    if (points.length === 0) return undefined;
    const sealedMax = this.#maxTs.get(rid)?.get(keyId);
    let delta = 0;
    let i = 0;
    while (i < points.length) {
      const chunk = Math.floor(points[i].ts / CHUNK_MS);
      const end = (chunk + 1) * CHUNK_MS;
      let j = i + 1;
      while (j < points.length && points[j].ts < end) j++;
      const run = points.slice(i, j);
      if (sealedMax !== undefined && run[0].ts <= sealedMax) {
        delta -= this.#removeFromBlocks(rid, keyId, run[0].ts, run[run.length - 1].ts + 1, (ts) =>
          run.some((p) => p.ts === ts),
        );
      }
      const data = encodeBlock(run);
      this.#s.insertBlock.run(
        seg,
        rid,
        keyId,
        chunk,
        run.length,
        run[0].ts,
        run[run.length - 1].ts,
        data,
      );
      this.#bytes += data.length + BLOCK_OVERHEAD;
      delta += run.length;
      i = j;
    }
    deltas.set(rid, (deltas.get(rid) ?? 0) + delta);
    const newest = points[points.length - 1].ts;
    this.#noteSealed(rid, keyId, newest);
    // The newest point of the series is its latest value (written by the seal).
    const latest = this.#pendingLatest.get(rid);
    const pending = latest?.get(keyId);
    if (!pending) {
      let map = latest;
      if (!map) {
        map = new Map();
        this.#pendingLatest.set(rid, map);
      }
      map.set(keyId, points[points.length - 1]);
    }
    return { min: points[0].ts, max: newest };
  }

  #noteSealed(rid: number, keyId: number, ts: number): void {
    let byKey = this.#maxTs.get(rid);
    if (!byKey) {
      byKey = new Map();
      this.#maxTs.set(rid, byKey);
    }
    const have = byKey.get(keyId);
    if (have === undefined || ts > have) byKey.set(keyId, ts);
  }

  /**
   * Removes from the sealed blocks of one series the points with startTs <= ts < endTs that
   * `drop` selects; blocks left empty are deleted, others rewritten. Returns the number removed
   * (the caller adjusts the counts).
   */
  #removeFromBlocks(
    rid: number,
    keyId: number,
    startTs: number,
    endTs: number,
    drop: (ts: number) => boolean,
  ): number {
    let removed = 0;
    for (const row of this.#blocks(rid, keyId, startTs, endTs)) {
      const points = decodeBlock(row.data);
      const kept = points.filter((p) => p.ts < startTs || p.ts >= endTs || !drop(p.ts));
      if (kept.length === points.length) continue;
      removed += points.length - kept.length;
      if (kept.length === 0) this.#deleteBlock(row.seg, rid, keyId, row.chunk, row.data.length);
      else this.#rewriteBlock(row.seg, rid, keyId, row.chunk, kept, row.data.length);
    }
    return removed;
  }

  #rewriteBlock(
    seg: number,
    rid: number,
    keyId: number,
    chunk: number,
    points: StoredValue[],
    oldBytes: number,
  ): void {
    const data = encodeBlock(points);
    this.#s.updateBlock.run(
      points.length,
      points[0].ts,
      points[points.length - 1].ts,
      data,
      seg,
      rid,
      keyId,
      chunk,
    );
    this.#bytes += data.length - oldBytes;
  }

  #deleteBlock(seg: number, rid: number, keyId: number, chunk: number, oldBytes: number): void {
    this.#s.deleteBlock.run(seg, rid, keyId, chunk);
    this.#bytes -= oldBytes + BLOCK_OVERHEAD;
  }

  /** Sealed blocks of one series that may hold points with startTs <= ts < endTs. */
  #blocks(rid: number, keyId: number, startTs: number, endTs: number): BlockRow[] {
    if (endTs <= startTs) return [];
    const c0 = Math.floor(startTs / CHUNK_MS);
    const c1 = Math.floor((endTs - 1) / CHUNK_MS);
    const out: BlockRow[] = [];
    for (const [seg, r] of this.#segs) {
      if (r.max < startTs || r.min >= endTs) continue;
      for (const row of this.#s.seriesBlocks.all(seg, rid, keyId, c0, c1) as BlockRow[]) {
        if (row.last_ts >= startTs && row.first_ts < endTs) out.push({ ...row, seg });
      }
    }
    return out;
  }

  /**
   * Every point of one series with startTs <= ts < endTs, ascending, open ones included. With a
   * `limit`, blocks are decoded from the `order` end and no further once `limit` points are
   * certain: what is returned then holds at least the `limit` first (ASC) or last (DESC) points.
   */
  #points(
    rid: number,
    keyId: number,
    startTs: number,
    endTs: number,
    limit = Number.POSITIVE_INFINITY,
    order: 'ASC' | 'DESC' = 'ASC',
  ): StoredValue[] {
    const blocks = this.#blocks(rid, keyId, startTs, endTs).sort((a, b) =>
      order === 'ASC' ? a.first_ts - b.first_ts : b.last_ts - a.last_ts,
    );
    let out: StoredValue[] = [];
    let sorted = true;
    let last = Number.NEGATIVE_INFINITY;
    // The ts beyond which the blocks decoded so far hold `limit` points (DESC: below which).
    let bound: number | undefined;
    for (const row of blocks) {
      if (bound !== undefined && (order === 'ASC' ? row.first_ts > bound : row.last_ts < bound)) {
        break;
      }
      for (const p of decodeBlock(row.data)) {
        if (p.ts < startTs || p.ts >= endTs) continue;
        if (p.ts < last) sorted = false;
        last = p.ts;
        out.push(p);
      }
      if (out.length >= limit) {
        const ts = out.map((p) => p.ts).sort((a, b) => a - b);
        bound = order === 'ASC' ? ts[limit - 1] : ts[ts.length - limit];
      }
    }
    if (!sorted) out.sort((a, b) => a.ts - b.ts);
    const open = this.#open.get(rid)?.get(keyId);
    if (open) {
      const fresh = latestWins(open.points).filter((p) => p.ts >= startTs && p.ts < endTs);
      if (fresh.length > 0) {
        // Open points overwrite sealed ones with the same ts.
        const ts = new Set(fresh.map((p) => p.ts));
        out = out.filter((p) => !ts.has(p.ts)).concat(fresh);
        out.sort((a, b) => a.ts - b.ts);
      }
    }
    return out;
  }

  /** Upserts the pending latest values, in primary-key order (pages visited left to right). */
  #writeLatest(): void {
    const rows: unknown[][] = [];
    for (const rid of [...this.#pendingLatest.keys()].sort((a, b) => a - b)) {
      const byKey = this.#pendingLatest.get(rid) as Map<number, StoredValue>;
      for (const keyId of [...byKey.keys()].sort((a, b) => a - b)) {
        rows.push(latestArgs(rid, keyId, byKey.get(keyId) as StoredValue));
      }
    }
    const args: unknown[] = [];
    for (let p = 0; p < rows.length; ) {
      const n = groupSize(rows.length - p);
      args.length = 0;
      for (let q = p; q < p + n; q++) for (const v of rows[q]) args.push(v);
      this.#statement(`latest:${n}`, () => latestSql(n)).run(args);
      p += n;
    }
  }

  #statement(name: string, sql: () => string): Statement {
    let stmt = this.#stmts.get(name);
    if (!stmt) {
      stmt = this.#db.prepare(sql());
      this.#stmts.set(name, stmt);
    }
    return stmt;
  }

  /** Latest values of a device, all keys or the named ones (pending ones overlaid). */
  latest(rid: number, keys?: readonly string[]): Map<string, StoredValue> {
    const out = new Map<string, StoredValue>();
    const pending = this.#pendingLatest.get(rid);
    const overlay = (keyId: number, name: string, stored: StoredValue | undefined) => {
      const p = pending?.get(keyId);
      const v = p && (!stored || p.ts >= stored.ts) ? p : stored;
      if (v) out.set(name, v);
    };
    if (keys === undefined) {
      const seen = new Set<number>();
      for (const r of this.#s.latestAll.all(rid) as Array<ValueRow & { key_id: bigint }>) {
        const id = Number(r.key_id);
        const name = this.#keyNames.get(id);
        seen.add(id);
        if (name !== undefined) overlay(id, name, decode(r));
      }
      for (const id of pending?.keys() ?? []) {
        const name = this.#keyNames.get(id);
        if (!seen.has(id) && name !== undefined) overlay(id, name, undefined);
      }
      return out;
    }
    for (const key of keys) {
      const id = this.#keyIds.get(key);
      if (id === undefined) continue;
      const r = this.#s.latestOne.get(rid, id) as ValueRow | undefined;
      overlay(id, key, r ? decode(r) : undefined);
    }
    return out;
  }

  /** Keys with a latest value for the device, in key order. */
  keysOf(rid: number): string[] {
    const ids = new Set<number>(this.#pendingLatest.get(rid)?.keys() ?? []);
    for (const r of this.#s.keysOf.all(rid) as Array<{ key_id: bigint }>) ids.add(Number(r.key_id));
    const out: string[] = [];
    for (const id of ids) {
      const name = this.#keyNames.get(id);
      if (name !== undefined) out.push(name);
    }
    return out.sort();
  }

  /** Raw points of one series with startTs <= ts < endTs. */
  history(
    rid: number,
    key: string,
    startTs: number,
    endTs: number,
    limit: number,
    order: 'ASC' | 'DESC',
  ): StoredValue[] {
    const id = this.#keyIds.get(key);
    if (id === undefined) return [];
    const points = this.#points(rid, id, startTs, endTs, limit, order);
    if (order === 'ASC') return points.slice(0, limit);
    return points.slice(Math.max(0, points.length - limit)).reverse();
  }

  /**
   * Aggregates one series over `interval` buckets from `startTs` (ThingsBoard semantics: the
   * bucket ts is its middle, the last bucket ends at `endTs`, empty buckets are omitted).
   * AVG and SUM use numeric values only; MIN and MAX use numbers when a bucket has any, else
   * strings, else booleans; COUNT counts every value.
   */
  aggregate(
    rid: number,
    key: string,
    startTs: number,
    endTs: number,
    interval: number,
    agg: Aggregation,
  ): StoredValue[] {
    const id = this.#keyIds.get(key);
    if (id === undefined) return [];
    const end = Math.max(startTs + 1, endTs);
    const points = this.#points(rid, id, startTs, end);
    const out: StoredValue[] = [];
    let i = 0;
    while (i < points.length) {
      const k = Math.floor((points[i].ts - startTs) / interval);
      const bStart = startTs + k * interval;
      const bEnd = Math.min(bStart + interval, end);
      let j = i;
      while (j < points.length && points[j].ts < bEnd) j++;
      const v = aggregateBucket(agg, points, i, j);
      if (v)
        out.push({ ts: bStart + Math.floor((bEnd - bStart) / 2), kind: v.kind, value: v.value });
      i = j;
    }
    return out;
  }

  /**
   * Deletes the points of the given keys with startTs <= ts < endTs, and the latest value when
   * it lies in that range (`deleteLatest`), optionally replacing it with the newest remaining
   * point. The open range is sealed first, so the delete is durable. Returns the number of
   * points deleted.
   */
  deleteRange(
    rid: number,
    keys: readonly string[],
    startTs: number,
    endTs: number,
    opts: { deleteLatest: boolean; rewriteLatest: boolean },
  ): number {
    const s = this.#s;
    let deleted = 0;
    this.settle();
    this.#db.transaction(() => {
      for (const key of keys) {
        const id = this.#keyIds.get(key);
        if (id === undefined) continue;
        deleted += this.#removeFromBlocks(rid, id, startTs, endTs, () => true);
        if (!opts.deleteLatest) continue;
        const latest = s.latestOne.get(rid, id) as ValueRow | undefined;
        if (!latest || Number(latest.ts) < startTs || Number(latest.ts) >= endTs) continue;
        s.deleteLatest.run(rid, id);
        if (!opts.rewriteLatest) continue;
        const rest = this.#points(rid, id, 0, Number.MAX_SAFE_INTEGER);
        if (rest.length > 0) this.#upsertLatest(rid, id, rest[rest.length - 1]);
      }
    })();
    this.#subtract(rid, deleted);
    return deleted;
  }

  #upsertLatest(rid: number, keyId: number, v: StoredValue): void {
    this.#statement('latest:1', () => latestSql(1)).run(latestArgs(rid, keyId, v));
  }

  /**
   * The oldest chunk holding sealed points, of one device or of all. Open points are left out
   * (they are the newest, and the evictor asks after every commit).
   */
  oldestChunk(rid?: number): number | undefined {
    const r = (rid === undefined ? this.#s.oldestChunk.get() : this.#s.oldestChunkOf.get(rid)) as {
      c: number | null;
    };
    return r.c ?? undefined;
  }

  /**
   * Deletes up to `need` sealed points of one chunk (of one device, or of all), spread evenly
   * over its series (the fullest first, oldest points first in each): whole blocks while a
   * series' share covers them, and the rest of the share cut from the front of its next block.
   * A short transaction, so that eviction never stalls ingestion.
   */
  evictChunk(chunk: number, need: number, rid?: number): number {
    const s = this.#s;
    const rows = (
      rid === undefined ? s.chunkBlocks.all(chunk) : s.chunkBlocksOf.all(chunk, rid)
    ) as Array<{ seg: number; rid: number; key: number; n: number; f: number; b: number }>;
    if (rows.length === 0) return 0;
    const bySeries = new Map<
      string,
      { rid: number; key: number; points: number; blocks: typeof rows }
    >();
    for (const r of rows) {
      const id = `${r.rid},${r.key}`;
      let series = bySeries.get(id);
      if (!series) {
        series = { rid: r.rid, key: r.key, points: 0, blocks: [] };
        bySeries.set(id, series);
      }
      series.points += r.n;
      series.blocks.push(r);
    }
    const series = [...bySeries.values()].sort((a, b) => b.points - a.points);
    const inChunk = series.reduce((a, r) => a + r.points, 0);
    const quota =
      inChunk <= need ? Number.POSITIVE_INFINITY : Math.max(1, Math.ceil(need / series.length));
    const byDevice = new Map<number, number>();
    let deleted = 0;
    this.#db.transaction(() => {
      for (const r of series) {
        if (deleted >= need) break;
        let take = Math.min(r.points, quota, need - deleted);
        const got = take;
        for (const b of r.blocks.sort((x, y) => x.f - y.f)) {
          if (take <= 0) break;
          if (b.n <= take) {
            this.#deleteBlock(b.seg, r.rid, r.key, chunk, b.b);
            take -= b.n;
          } else {
            const row = s.oneBlock.get(b.seg, r.rid, r.key, chunk) as { data: Buffer };
            const kept = decodeBlock(row.data).slice(take);
            this.#rewriteBlock(b.seg, r.rid, r.key, chunk, kept, b.b);
            take = 0;
          }
        }
        byDevice.set(r.rid, (byDevice.get(r.rid) ?? 0) + got);
        deleted += got;
      }
    })();
    for (const [d, n] of byDevice) this.#subtract(d, n);
    return deleted;
  }

  #subtract(rid: number, n: number): void {
    if (n === 0) return;
    const left = (this.#perDevice.get(rid) ?? 0) - n;
    if (left > 0) this.#perDevice.set(rid, left);
    else this.#perDevice.delete(rid);
    this.#total -= n;
  }
}

const OLD_KIND: Record<TsKind, number> = { double: 0, long: 1, bool: 2, string: 3, json: 4 };

/** The store whose open points the `ts_kv_stage` view of a connection shows. */
const viewStores = new WeakMap<Db, TelemetryStore>();

/**
 * Read-only views of the former row tables on the gateway's connection (TEMP: nothing in the
 * file), for inspection and tests: `ts_kv` (sealed points, decoded from the blocks by the
 * table-valued function `ts_block_points(data)`), `ts_kv_stage` (open points: committed to the
 * log, not yet sealed) and `ts_kv_chunk` (sealed points per device, hour chunk and key). They
 * decode everything they show: not for the hot path.
 */
function registerViews(db: Db, store: TelemetryStore): void {
  const known = viewStores.has(db);
  viewStores.set(db, store);
  if (known) return;
  db.table('ts_block_points', {
    columns: ['ts', 'dbl_v', 'long_v', 'bool_v', 'str_v', 'json_v'],
    parameters: ['data'],
    *rows(data: unknown) {
      for (const p of decodeBlock(data as Uint8Array)) yield [p.ts, ...typedColumns(p)];
    },
  });
  db.table('ts_ring_entries', {
    columns: ['seq', 'device_rid', 'data'],
    parameters: ['slot', 'tail'],
    *rows(slot: unknown, tail: unknown) {
      const data = slot as Uint8Array;
      const seq = slotSeq(data);
      if (seq === 0 || seq < Number(tail)) return;
      for (const e of decodeSlot(data)) yield [e.seq, e.rid, e.data];
    },
  });
  db.table('ts_open_points', {
    columns: ['seq', 'device_rid', 'key_id', 'ts', 'kind', 'v'],
    *rows() {
      const current = viewStores.get(db);
      if (current) yield* current.openRows();
    },
  });
  db.exec(`
    CREATE TEMP VIEW IF NOT EXISTS ts_kv AS
      SELECT b.device_rid, b.key_id, p.ts, p.dbl_v, p.long_v, p.bool_v, p.str_v, p.json_v
      FROM ts_block b, ts_block_points(b.data) p;
    CREATE TEMP VIEW IF NOT EXISTS ts_kv_stage AS SELECT * FROM ts_open_points;
    CREATE TEMP VIEW IF NOT EXISTS ts_log AS
      SELECT e.seq, e.device_rid, e.data
      FROM main.ts_ring r, main.ts_ring_tail t, ts_ring_entries(r.data, t.seq) e
      UNION ALL SELECT seq, device_rid, data FROM main.ts_log_spill;
    CREATE TEMP VIEW IF NOT EXISTS ts_kv_chunk AS
      SELECT device_rid, chunk, key_id, sum(n) AS points FROM ts_block
      GROUP BY device_rid, chunk, key_id;
  `);
}

interface CommitOut {
  readonly newKeys: string[];
  readonly dropped: Set<number>;
  /** The committed log records: device, seq, points, bytes counted. */
  readonly rows: Array<[number, number, LogPoint[], number]>;
  /** The ring slots written: slot, seq. */
  readonly slots: Array<[number, number]>;
  /** The next log seq after the commit. */
  nextSeq: number;
  /** Runs last inside the commit's transaction (`TelemetryStore.write`). */
  readonly inCommit?: (kept: readonly WriteItem[]) => void;
}

/** Points sorted by ts (stable), one per ts: the last written wins. */
function latestWins(points: readonly StoredValue[]): StoredValue[] {
  let sorted = true;
  let unique = true;
  for (let i = 1; i < points.length; i++) {
    if (points[i].ts < points[i - 1].ts) sorted = false;
    else if (points[i].ts === points[i - 1].ts) unique = false;
  }
  if (sorted && unique) return points as StoredValue[];
  const ordered = sorted ? [...points] : [...points].sort((a, b) => a.ts - b.ts);
  const out: StoredValue[] = [];
  for (const p of ordered) {
    if (out.length > 0 && out[out.length - 1].ts === p.ts) out[out.length - 1] = p;
    else out.push(p);
  }
  return out;
}

/** A long within ±2^53 as a number (as reads return it), beyond as a bigint. */
function normalize(kind: TsKind, value: TsScalar): TsScalar {
  if (kind === 'long' && typeof value === 'bigint') {
    const n = Number(value);
    return Number.isSafeInteger(n) ? n : value;
  }
  return value;
}

/** The aggregate of points[i, j) (one bucket), or undefined when it has no value to give. */
function aggregateBucket(
  agg: Aggregation,
  points: readonly StoredValue[],
  i: number,
  j: number,
): { kind: TsKind; value: TsScalar } | undefined {
  if (agg === 'COUNT') return { kind: 'long', value: j - i };
  if (agg === 'AVG' || agg === 'SUM') {
    // The usual bucket: numbers only, summed in one pass (KBN as SQLite's total()).
    let sum = 0;
    let c = 0;
    let n = 0;
    let doubles = 0;
    let exact = true;
    for (let k = i; k < j; k++) {
      const p = points[k];
      let v: number;
      if (p.kind === 'double') {
        v = p.value as number;
        // SQLite stored NaN as NULL: it never took part in an aggregate.
        if (Number.isNaN(v)) continue;
        doubles++;
      } else if (p.kind === 'long') v = Number(p.value);
      else continue;
      n++;
      const t = sum + v;
      if (Math.abs(sum) >= Math.abs(v)) c += sum - t + v;
      else c += v - t + sum;
      if (!Number.isSafeInteger(t)) exact = false;
      sum = t;
    }
    if (n === 0) return undefined;
    const total = doubles === 0 && exact ? sum : sum + c;
    if (agg === 'AVG') return { kind: 'double', value: total / n };
    return doubles > 0 ? { kind: 'double', value: total } : { kind: 'long', value: total };
  }
  const doubles: number[] = [];
  const longs: number[] = [];
  const strings: string[] = [];
  const bools: boolean[] = [];
  for (let k = i; k < j; k++) {
    const p = points[k];
    if (p.kind === 'double') {
      // SQLite stored NaN as NULL: it never took part in an aggregate.
      if (!Number.isNaN(p.value)) doubles.push(p.value as number);
    } else if (p.kind === 'long') longs.push(Number(p.value));
    else if (p.kind === 'string') strings.push(p.value as string);
    else if (p.kind === 'bool') bools.push(p.value as boolean);
  }
  const numeric = doubles.length + longs.length;
  const min = agg === 'MIN';
  const pick = (a: number, b: number) => (min ? Math.min(a, b) : Math.max(a, b));
  if (numeric > 0) {
    const l = longs.length > 0 ? longs.reduce(pick) : undefined;
    if (doubles.length === 0) return { kind: 'long', value: l as number };
    const d = doubles.reduce(pick);
    return { kind: 'double', value: l === undefined ? d : pick(d, l) };
  }
  if (strings.length > 0) {
    return { kind: 'string', value: strings.reduce((a, b) => ((min ? b < a : b > a) ? b : a)) };
  }
  if (bools.length > 0) {
    return { kind: 'bool', value: min ? bools.every(Boolean) : bools.some(Boolean) };
  }
  return undefined;
}

/** Rows per multi-row statement: fewer statement calls per row, few statement shapes. */
function groupSize(left: number): number {
  return left >= 256 ? 256 : left >= 64 ? 64 : left >= 16 ? 16 : left >= 4 ? 4 : 1;
}

function logSql(n: number): string {
  return `INSERT INTO ts_log_spill (seq, device_rid, data) VALUES ${Array(n).fill('(?, ?, ?)').join(', ')}`;
}

function latestSql(n: number): string {
  return `INSERT INTO ts_kv_latest (device_rid, key_id, ts, dbl_v, long_v, bool_v, str_v, json_v)
    VALUES ${Array(n).fill('(?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}
    ON CONFLICT (device_rid, key_id) DO UPDATE SET ts = excluded.ts, dbl_v = excluded.dbl_v,
      long_v = excluded.long_v, bool_v = excluded.bool_v, str_v = excluded.str_v,
      json_v = excluded.json_v
    WHERE excluded.ts >= ts_kv_latest.ts`;
}

function latestArgs(rid: number, keyId: number, p: StoredValue): unknown[] {
  return [rid, keyId, p.ts, ...typedColumns(p)];
}

/** A value spread over the typed columns of the former `ts_kv` (one set, the others NULL). */
function typedColumns(p: StoredValue): unknown[] {
  const v = p.kind === 'bool' ? (p.value ? 1 : 0) : p.value;
  return [
    p.kind === 'double' ? v : null,
    p.kind === 'long' ? v : null,
    p.kind === 'bool' ? v : null,
    p.kind === 'string' ? v : null,
    p.kind === 'json' ? v : null,
  ];
}

export function decode(r: ValueRow): StoredValue {
  const ts = Number(r.ts);
  if (r.dbl_v !== null) return { ts, kind: 'double', value: r.dbl_v };
  if (r.long_v !== null) {
    const n = Number(r.long_v);
    return { ts, kind: 'long', value: Number.isSafeInteger(n) ? n : r.long_v };
  }
  if (r.bool_v !== null) return { ts, kind: 'bool', value: r.bool_v !== 0n };
  if (r.str_v !== null) return { ts, kind: 'string', value: r.str_v };
  return { ts, kind: 'json', value: r.json_v ?? 'null' };
}

function prepare(db: Db) {
  const values = 'ts, dbl_v, long_v, bool_v, str_v, json_v';
  const safe = (stmt: Statement) => stmt.safeIntegers(true);
  return {
    allKeys: db.prepare('SELECT id, key FROM ts_key'),
    deviceExists: db.prepare('SELECT 1 FROM device WHERE rid = ?').pluck(),
    insertKey: db.prepare('INSERT INTO ts_key (key) VALUES (?)'),
    blockMeta: db.prepare(
      `SELECT seg, device_rid AS rid, key_id AS key, n, first_ts AS f, last_ts AS l,
         length(data) AS b FROM ts_block`,
    ),
    clearLog: db.prepare('DELETE FROM ts_log_spill'),
    clearLogBelow: db.prepare('DELETE FROM ts_log_spill WHERE seq < ?'),
    ringSlots: db.prepare('SELECT count(*) FROM ts_ring').pluck(),
    addSlots: db.prepare(
      `WITH RECURSIVE s(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM s WHERE i < ?)
       INSERT INTO ts_ring (slot, data) SELECT i, zeroblob(${SLOT_BYTES}) FROM s`,
    ),
    updateSlot: db.prepare('UPDATE ts_ring SET data = ? WHERE slot = ?'),
    setTail: db.prepare('UPDATE ts_ring_tail SET seq = ?'),
    insertBlock: db.prepare(
      `INSERT INTO ts_block (seg, device_rid, key_id, chunk, n, first_ts, last_ts, data)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    updateBlock: db.prepare(
      `UPDATE ts_block SET n = ?, first_ts = ?, last_ts = ?, data = ?
       WHERE seg = ? AND device_rid = ? AND key_id = ? AND chunk = ?`,
    ),
    deleteBlock: db.prepare(
      'DELETE FROM ts_block WHERE seg = ? AND device_rid = ? AND key_id = ? AND chunk = ?',
    ),
    oneBlock: db.prepare(
      'SELECT data FROM ts_block WHERE seg = ? AND device_rid = ? AND key_id = ? AND chunk = ?',
    ),
    seriesBlocks: db.prepare(
      `SELECT chunk, n, first_ts, last_ts, data FROM ts_block
       WHERE seg = ? AND device_rid = ? AND key_id = ? AND chunk BETWEEN ? AND ?`,
    ),
    latestAll: safe(db.prepare(`SELECT key_id, ${values} FROM ts_kv_latest WHERE device_rid = ?`)),
    latestOne: safe(
      db.prepare(`SELECT ${values} FROM ts_kv_latest WHERE device_rid = ? AND key_id = ?`),
    ),
    keysOf: safe(db.prepare('SELECT key_id FROM ts_kv_latest WHERE device_rid = ?')),
    deleteLatest: db.prepare('DELETE FROM ts_kv_latest WHERE device_rid = ? AND key_id = ?'),
    oldestChunk: db.prepare('SELECT min(chunk) AS c FROM ts_block'),
    oldestChunkOf: db.prepare('SELECT min(chunk) AS c FROM ts_block WHERE device_rid = ?'),
    chunkBlocks: db.prepare(
      `SELECT seg, device_rid AS rid, key_id AS key, n, first_ts AS f, length(data) AS b
       FROM ts_block WHERE chunk = ?`,
    ),
    chunkBlocksOf: db.prepare(
      `SELECT seg, device_rid AS rid, key_id AS key, n, first_ts AS f, length(data) AS b
       FROM ts_block WHERE chunk = ? AND device_rid = ?`,
    ),
  };
}
