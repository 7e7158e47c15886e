import type { Statement } from 'better-sqlite3';
import type { Db } from '../db/open.js';
import type { TsEntry, TsKind } from './telemetry-parser.js';

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

interface Series {
  readonly rid: number;
  readonly keyId: number;
  readonly points: TsEntry[];
  sorted: boolean;
}

/** A committed batch in the stage table: its last seq, its points and their counts. */
interface StagedBatch {
  readonly hi: number;
  readonly n: number;
  /** `[rid, chunk, keyId, points]` per (device, chunk, key). */
  readonly counts: readonly number[][];
}

/** `#stageTx`'s arguments: the items, then what it fills in (new keys, counts, latest, dropped). */
type StageArgs = [
  items: readonly WriteItem[],
  newKeys: string[],
  counts: number[][],
  latest: Map<number, Map<number, TsEntry>>,
  gone: Set<number>,
];

/** Points of one device for one commit. */
export interface WriteItem {
  readonly rid: number;
  readonly points: readonly TsEntry[];
}

interface ValueRow {
  ts: bigint;
  dbl_v: number | null;
  long_v: bigint | null;
  bool_v: bigint | null;
  str_v: string | null;
  json_v: string | null;
}

/**
 * The SQL of the telemetry domain (tables of migration 002). Keeps the key dictionary and the
 * point counts (total and per device) in memory, loaded once by `init()`, so no write or
 * eviction decision needs a `count(*)`.
 */
export class TelemetryStore {
  readonly #db: Db;
  readonly #keyIds = new Map<string, number>();
  readonly #keyNames = new Map<number, string>();
  readonly #perDevice = new Map<number, number>();
  #total = 0;
  /** Points in `ts_kv_stage`, waiting to be moved into `ts_kv`. */
  #staged = 0;
  /** The committed batches in the stage table, oldest first, with their point counts. */
  #stageBatches: StagedBatch[] = [];
  /** Staged points per device (bounds are checked before the points are moved). */
  readonly #stagedPerDevice = new Map<number, number>();
  /** Staged rows whose counts are not in `#stageBatches` (after a restart or device delete). */
  #stageUnknown = false;
  /**
   * The newest staged point of each series (device, then key), not yet in `ts_kv_latest`: the
   * latest values are written once per series per move, not once per commit. After a crash
   * they are rebuilt from the stage table.
   */
  #pendingLatest = new Map<number, Map<number, TsEntry>>();
  readonly #insert = new Map<string, Statement>();
  readonly #s: ReturnType<typeof prepare>;
  /** One commit's transaction, made once (`db.transaction()` builds wrappers on every call). */
  readonly #stage: (...args: StageArgs) => number;

  constructor(db: Db) {
    this.#db = db;
    this.#s = prepare(db);
    this.#stage = db.transaction((...args: StageArgs) => this.#stageTx(...args));
  }

  /** Loads the key dictionary and the point counts. */
  init(): void {
    for (const r of this.#s.allKeys.all() as Array<{ id: number; key: string }>) {
      this.#keyIds.set(r.key, r.id);
      this.#keyNames.set(r.id, r.key);
    }
    // Points staged before a crash or kill were committed: reloadCounts() moves them now.
    this.reloadCounts();
  }

  /**
   * Reloads the point counts from the chunk and stage tables (after a device delete removed
   * rows).
   */
  reloadCounts(): void {
    this.#staged = this.#s.stagedCount.get() as number;
    this.#stageBatches = [];
    this.#stageUnknown = this.#staged > 0;
    this.#stagedPerDevice.clear();
    // Pending latest values belong to staged points: those left are rebuilt from the table.
    this.#pendingLatest.clear();
    this.#perDevice.clear();
    this.#total = 0;
    for (const r of this.#s.countsByDevice.all() as Array<{ rid: number; n: number }>) {
      this.#perDevice.set(r.rid, r.n);
      this.#total += r.n;
    }
    // Staged points of unknown count (after a restart or a device delete): move and count them.
    this.settle();
  }

  /**
   * Points stored: those in `ts_kv` (as counted by the chunk table) and the staged ones (which
   * may still overwrite stored points: exact after `settle()`).
   */
  get totalPoints(): number {
    return this.#total + this.#staged;
  }

  /** Points committed to the stage table and not yet moved into `ts_kv`. */
  get stagedPoints(): number {
    return this.#staged;
  }

  /** Points of one device, staged ones included (exact after `settle()`). */
  devicePoints(rid: number): number {
    return (this.#perDevice.get(rid) ?? 0) + (this.#stagedPerDevice.get(rid) ?? 0);
  }

  /** Devices with more than `cap` points, staged ones included. */
  devicesOver(cap: number): number[] {
    const rids = new Set([...this.#perDevice.keys(), ...this.#stagedPerDevice.keys()]);
    return [...rids].filter((rid) => this.devicePoints(rid) > cap);
  }

  keyId(key: string): number | undefined {
    return this.#keyIds.get(key);
  }

  keyName(id: number): string | undefined {
    return this.#keyNames.get(id);
  }

  /**
   * Commits the points of one batch in one transaction, appended to the stage table; `settle()`
   * moves them into `ts_kv` and their latest values into `ts_kv_latest` later. Returns the
   * devices whose points were dropped because the device no longer exists.
   */
  write(items: readonly WriteItem[]): { dropped: ReadonlySet<number> } {
    let points = 0;
    for (const item of items) points += item.points.length;
    if (points >= DIRECT_POINTS && points >= DIRECT_PER_SERIES * seriesIn(items)) {
      return this.#writeDirect(items);
    }
    const newKeys: string[] = [];
    const counts: number[][] = [];
    const latest = new Map<number, Map<number, TsEntry>>();
    const dropped = new Set<number>();
    try {
      const hi = this.#stage(items, newKeys, counts, latest, dropped);
      for (const [rid, byKey] of latest) {
        const pending = this.#pendingLatest.get(rid);
        if (!pending) {
          this.#pendingLatest.set(rid, byKey);
          continue;
        }
        for (const [keyId, p] of byKey) {
          const newest = pending.get(keyId);
          if (!newest || p.ts >= newest.ts) pending.set(keyId, p);
        }
      }
      let staged = 0;
      for (const c of counts) {
        staged += c[3];
        this.#stagedPerDevice.set(c[0], (this.#stagedPerDevice.get(c[0]) ?? 0) + c[3]);
      }
      if (staged > 0) this.#stageBatches.push({ hi, n: staged, counts });
      this.#staged += staged;
      return { dropped };
    } catch (err) {
      this.#forgetKeys(newKeys);
      throw err;
    }
  }

  /**
   * A large batch (a backlog behind the writer) goes straight into `ts_kv`: with many points
   * per series, one B-tree leaf per series is cheap per point, and staging would write every
   * point twice. Staged points are moved first, so the last value written still wins.
   */
  #writeDirect(items: readonly WriteItem[]): { dropped: ReadonlySet<number> } {
    this.settle();
    const newKeys: string[] = [];
    const deltas = new Map<number, number>();
    const dropped = new Set<number>();
    try {
      const added = this.#db.transaction(() =>
        this.#writeDirectTx(items, newKeys, deltas, dropped),
      )();
      for (const [rid, n] of deltas) this.#perDevice.set(rid, (this.#perDevice.get(rid) ?? 0) + n);
      this.#total += added;
      return { dropped };
    } catch (err) {
      this.#forgetKeys(newKeys);
      throw err;
    }
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

  #writeDirectTx(
    items: readonly WriteItem[],
    newKeys: string[],
    deltas: Map<number, number>,
    gone: Set<number>,
  ): number {
    const s = this.#s;
    // Group by series (device, key), in arrival order. Nested maps keep small-integer keys fast.
    const byDevice = new Map<number, Map<number, Series>>();
    for (const item of items) {
      let byKey = byDevice.get(item.rid);
      if (!byKey) {
        // A device deleted while its points waited for the batch: drop them, so that they
        // cannot outlive it (or reappear under a reused rid).
        if (gone.has(item.rid) || !s.deviceExists.get(item.rid)) {
          gone.add(item.rid);
          continue;
        }
        byKey = new Map();
        byDevice.set(item.rid, byKey);
      }
      for (const p of item.points) {
        const keyId = this.#keyIdOf(p.key, newKeys);
        let series = byKey.get(keyId);
        if (!series) {
          series = { rid: item.rid, keyId, points: [], sorted: true };
          byKey.set(keyId, series);
        } else if (series.sorted && p.ts < series.points[series.points.length - 1].ts) {
          series.sorted = false;
        }
        series.points.push(p);
      }
    }
    // Series in primary-key order: B-tree pages are visited left to right.
    const ordered: Series[] = [];
    for (const rid of [...byDevice.keys()].sort((a, b) => a - b)) {
      const byKey = byDevice.get(rid) as Map<number, Series>;
      for (const keyId of [...byKey.keys()].sort((a, b) => a - b)) {
        ordered.push(byKey.get(keyId) as Series);
      }
    }
    let added = 0;
    const latestRows: unknown[][] = [];
    const chunkRows: unknown[][] = [];
    for (const series of ordered) {
      // A stable sort: among equal ts the last written stays last and wins.
      if (!series.sorted) series.points.sort((a, b) => a.ts - b.ts);
      const n = this.#writeSeries(series, chunkRows);
      if (n > 0) {
        deltas.set(series.rid, (deltas.get(series.rid) ?? 0) + n);
        added += n;
      }
      // The newest ts of the series (the last written among equal ts) is its latest value.
      latestRows.push(
        latestArgs(series.rid, series.keyId, series.points[series.points.length - 1]),
      );
    }
    this.#upsertMany('latest', latestRows);
    this.#upsertMany('chunk', chunkRows);
    return added;
  }

  #stageTx(
    items: readonly WriteItem[],
    newKeys: string[],
    counts: number[][],
    latest: Map<number, Map<number, TsEntry>>,
    gone: Set<number>,
  ): number {
    const s = this.#s;
    let hi = 0;
    const live = new Set<number>();
    const rows: unknown[] = [];
    // Point counts by (device, chunk), then key: the points of one item share a device and
    // mostly a chunk, so the string key is built per item, not per point.
    const index = new Map<string, Map<number, number[]>>();
    for (const item of items) {
      const { rid } = item;
      if (!live.has(rid)) {
        // A device deleted while its points waited for the batch: drop them, so that they
        // cannot outlive it (or reappear under a reused rid).
        if (gone.has(rid) || !s.deviceExists.get(rid)) {
          gone.add(rid);
          continue;
        }
        live.add(rid);
        latest.set(rid, new Map());
      }
      // The newest point of each series (the last written among equal ts) is its latest value.
      const byKey = latest.get(rid) as Map<number, TsEntry>;
      let chunkOf = Number.NaN;
      let inChunk = new Map<number, number[]>();
      for (const p of item.points) {
        const keyId = this.#keyIdOf(p.key, newKeys);
        rows.push(rid, keyId, p.ts, KIND_CODE[p.kind], bindValue(p.kind, p.value));
        const chunk = Math.floor(p.ts / CHUNK_MS);
        if (chunk !== chunkOf) {
          chunkOf = chunk;
          const id = `${rid},${chunk}`;
          const found = index.get(id);
          if (found) inChunk = found;
          else {
            inChunk = new Map();
            index.set(id, inChunk);
          }
        }
        const c = inChunk.get(keyId);
        if (c) c[3]++;
        else {
          const fresh = [rid, chunk, keyId, 1];
          inChunk.set(keyId, fresh);
          counts.push(fresh);
        }
        const newest = byKey.get(keyId);
        if (!newest || p.ts >= newest.ts) byKey.set(keyId, p);
      }
    }
    const n = rows.length / STAGE_COLUMNS;
    for (let p = 0; p < n; ) {
      const g = groupSize(n - p);
      hi = Number(
        this.#statement(`stage:${g}`, () => stageSql(g)).run(
          rows.slice(p * STAGE_COLUMNS, (p + g) * STAGE_COLUMNS),
        ).lastInsertRowid,
      );
      p += g;
    }
    // The seq of the batch's last staged point.
    return hi;
  }

  /**
   * Moves staged points into `ts_kv` in one transaction, whole batches oldest first, at least
   * one and then up to `maxPoints` (all by default): a repeated device, key and ts overwrites,
   * the last written wins, and new points are added to the chunk counts. Cheap when nothing is
   * staged; the writer calls it off the acknowledgement path, and every read of `ts_kv` first.
   * Returns the number of new points.
   */
  settle(maxPoints = Number.POSITIVE_INFINITY): number {
    if (this.#staged === 0) {
      this.#flushLatest();
      return 0;
    }
    const s = this.#s;
    let take = 0;
    let moved = 0;
    if (this.#stageUnknown) take = this.#stageBatches.length;
    else {
      while (take < this.#stageBatches.length && (take === 0 || moved < maxPoints)) {
        moved += this.#stageBatches[take++].n;
      }
    }
    const batches = this.#stageBatches.slice(0, take);
    const hi = this.#stageUnknown ? Number.MAX_SAFE_INTEGER : batches[take - 1].hi;
    const deltas = new Map<number, number>();
    let added = 0;
    this.#db.transaction(() => {
      let counts: Iterable<number[]> | undefined;
      if (!this.#stageUnknown) {
        // Usually every staged point is new: a plain insert, with the counts taken at commit.
        // If some were not (an overwrite), the savepoint rolls back and the exact path runs.
        try {
          this.#db.transaction(() => {
            const move = moved >= SORTED_MOVE_POINTS ? s.moveNewSorted : s.moveNew;
            if (move.run(hi).changes !== moved) throw OVERWRITES;
          })();
          counts = mergeCounts(batches);
        } catch (err) {
          if (err !== OVERWRITES) throw err;
        }
      }
      if (!counts) {
        counts = s.countNew.raw().all(hi) as number[][];
        s.moveAll.run(hi);
      }
      const chunkRows: unknown[][] = [];
      for (const [rid, chunk, keyId, n] of counts) {
        if (n === 0) continue;
        chunkRows.push([rid, chunk, keyId, n]);
        deltas.set(rid, (deltas.get(rid) ?? 0) + n);
        added += n;
      }
      this.#upsertMany('chunk', chunkRows);
      if (this.#stageUnknown) {
        // Latest values of the staged points that were committed before a restart.
        s.latestFromStage.run(hi);
        this.#pendingLatest.clear();
      }
      this.#writeLatest();
      // Row by row even when the slice takes every row: emptying the table at once (SQLite's
      // truncate optimization) frees its pages, and the next commits allocate them again
      // (bench:http 7,000-7,800 req/s with it, 9,000-10,100 without).
      s.clearStage.run(hi);
    })();
    this.#pendingLatest.clear();
    for (const [rid, n] of deltas) this.#perDevice.set(rid, (this.#perDevice.get(rid) ?? 0) + n);
    this.#total += added;
    this.#stageBatches = this.#stageBatches.slice(take);
    if (this.#stageUnknown) {
      this.#staged = 0;
      this.#stagedPerDevice.clear();
      this.#stageUnknown = false;
    } else {
      this.#staged -= moved;
      for (const b of batches) {
        for (const [rid, , , n] of b.counts) {
          const left = (this.#stagedPerDevice.get(rid) ?? 0) - n;
          if (left > 0) this.#stagedPerDevice.set(rid, left);
          else this.#stagedPerDevice.delete(rid);
        }
      }
    }
    return added;
  }

  /** Writes the pending latest values (for reads of `ts_kv_latest`). */
  #flushLatest(): void {
    if (this.#pendingLatest.size === 0) return;
    this.#db.transaction(() => this.#writeLatest())();
    this.#pendingLatest.clear();
  }

  /** Upserts the pending latest values, in primary-key order (pages visited left to right). */
  #writeLatest(): void {
    const rows: unknown[][] = [];
    for (const rid of [...this.#pendingLatest.keys()].sort((a, b) => a - b)) {
      const byKey = this.#pendingLatest.get(rid) as Map<number, TsEntry>;
      for (const keyId of [...byKey.keys()].sort((a, b) => a - b)) {
        rows.push(latestArgs(rid, keyId, byKey.get(keyId) as TsEntry));
      }
    }
    this.#upsertMany('latest', rows);
  }

  /** Multi-row upserts of latest values or chunk counts, a few statements per batch. */
  #upsertMany(table: 'latest' | 'chunk', rows: readonly unknown[][]): void {
    const args: unknown[] = [];
    for (let p = 0; p < rows.length; ) {
      const n = groupSize(rows.length - p);
      args.length = 0;
      for (let q = p; q < p + n; q++) for (const v of rows[q]) args.push(v);
      this.#statement(`${table}:${n}`, () => upsertSql(table, n)).run(args);
      p += n;
    }
  }

  #statement(name: string, sql: () => string): Statement {
    let stmt = this.#insert.get(name);
    if (!stmt) {
      stmt = this.#db.prepare(sql());
      this.#insert.set(name, stmt);
    }
    return stmt;
  }

  /**
   * Inserts one series' points in runs of one kind and one chunk; returns new points and adds
   * the chunk counts to `chunkRows`.
   */
  #writeSeries(series: Series, chunkRows: unknown[][]): number {
    const s = this.#s;
    const { rid, keyId, points } = series;
    const args: unknown[] = [];
    let added = 0;
    let i = 0;
    while (i < points.length) {
      const first = points[i];
      const chunk = Math.floor(first.ts / CHUNK_MS);
      const chunkEnd = (chunk + 1) * CHUNK_MS;
      let j = i + 1;
      while (j < points.length && points[j].kind === first.kind && points[j].ts < chunkEnd) j++;
      let runAdded = 0;
      for (let p = i; p < j; ) {
        const left = j - p;
        const n = groupSize(left);
        args.length = 0;
        for (let q = p; q < p + n; q++) {
          const pt = points[q];
          args.push(rid, keyId, pt.ts, bindValue(pt.kind, pt.value));
        }
        const changes = this.#statement(`${first.kind}:${n}`, () => insertSql(first.kind, n)).run(
          args,
        ).changes;
        if (changes < n) {
          // Some (device, key, ts) existed, in the table or earlier in this run: overwrite in
          // arrival order, so that the last value written wins.
          for (let q = p; q < p + n; q++) s.overwrite.run(overwriteArgs(rid, keyId, points[q]));
        }
        runAdded += changes;
        p += n;
      }
      if (runAdded > 0) chunkRows.push([rid, chunk, keyId, runAdded]);
      added += runAdded;
      i = j;
    }
    return added;
  }

  /** Latest values of a device, all keys or the named ones. */
  latest(rid: number, keys?: readonly string[]): Map<string, StoredValue> {
    const out = new Map<string, StoredValue>();
    this.#flushLatest();
    if (keys === undefined) {
      for (const r of this.#s.latestAll.all(rid) as Array<ValueRow & { key_id: bigint }>) {
        const name = this.#keyNames.get(Number(r.key_id));
        if (name !== undefined) out.set(name, decode(r));
      }
      return out;
    }
    for (const key of keys) {
      const id = this.#keyIds.get(key);
      if (id === undefined) continue;
      const r = this.#s.latestOne.get(rid, id) as ValueRow | undefined;
      if (r) out.set(key, decode(r));
    }
    return out;
  }

  /** Keys with a latest value for the device, in key order. */
  keysOf(rid: number): string[] {
    const out: string[] = [];
    this.#flushLatest();
    for (const r of this.#s.keysOf.all(rid) as Array<{ key_id: bigint }>) {
      const name = this.#keyNames.get(Number(r.key_id));
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
    this.settle();
    const stmt = order === 'ASC' ? this.#s.historyAsc : this.#s.historyDesc;
    return (stmt.all(rid, id, startTs, endTs, limit) as ValueRow[]).map(decode);
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
    this.settle();
    const end = Math.max(startTs + 1, endTs);
    const out: StoredValue[] = [];
    const rows = this.#s.aggregate[agg].all({
      rid,
      key: id,
      start: startTs,
      end,
      interval,
    }) as Array<{
      s: number;
      a: string;
    }>;
    for (const row of rows) {
      const r = toAggRow(agg, JSON.parse(row.a));
      if (!r) continue;
      const bStart = row.s;
      const bEnd = Math.min(bStart + interval, end);
      const ts = bStart + Math.floor((bEnd - bStart) / 2);
      const v = aggValue(agg, r);
      if (v) out.push({ ts, kind: v.kind, value: v.value });
    }
    return out;
  }

  /**
   * Deletes the points of the given keys with startTs <= ts < endTs, and the latest value when
   * it lies in that range (`deleteLatest`), optionally replacing it with the newest remaining
   * point. Returns the number of points deleted.
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
        const counts = s.countByChunk.all(rid, id, startTs, endTs) as Array<{
          c: number;
          n: number;
        }>;
        s.deleteSeriesRange.run(rid, id, startTs, endTs);
        for (const { c, n } of counts) {
          s.subChunk.run(n, rid, c, id);
          s.dropEmptyChunk.run(rid, c, id);
          deleted += n;
        }
        if (!opts.deleteLatest) continue;
        const latest = s.latestOne.get(rid, id) as ValueRow | undefined;
        if (!latest || Number(latest.ts) < startTs || Number(latest.ts) >= endTs) continue;
        s.deleteLatest.run(rid, id);
        if (opts.rewriteLatest) s.rewriteLatest.run(rid, id);
      }
    })();
    this.#subtract(rid, deleted);
    return deleted;
  }

  /**
   * The oldest chunk holding points in `ts_kv`, of one device or of all. Staged points are left
   * out (they are the newest, and the evictor asks after every commit: moving them here would
   * move every batch on its own).
   */
  oldestChunk(rid?: number): number | undefined {
    const r = (rid === undefined ? this.#s.oldestChunk.get() : this.#s.oldestChunkOf.get(rid)) as {
      c: number | null;
    };
    return r.c ?? undefined;
  }

  /**
   * Deletes up to `need` points of one chunk (of one device, or of all), spread evenly over its
   * series (the fullest first, oldest points first in each): a short transaction, so that
   * eviction never stalls ingestion.
   */
  evictChunk(chunk: number, need: number, rid?: number): number {
    const s = this.#s;
    this.settle();
    const series = (
      rid === undefined ? s.chunkSeries.all(chunk) : s.chunkSeriesOf.all(rid, chunk)
    ) as Array<{ rid: number; key_id: number; points: number }>;
    if (series.length === 0) return 0;
    const c0 = chunk * CHUNK_MS;
    const c1 = c0 + CHUNK_MS;
    const inChunk = series.reduce((a, r) => a + r.points, 0);
    const quota =
      inChunk <= need ? Number.POSITIVE_INFINITY : Math.max(1, Math.ceil(need / series.length));
    const byDevice = new Map<number, number>();
    let deleted = 0;
    this.#db.transaction(() => {
      for (const r of series) {
        if (deleted >= need) break;
        const take = Math.min(r.points, quota, need - deleted);
        const n =
          take >= r.points
            ? s.deleteSeriesRange.run(r.rid, r.key_id, c0, c1).changes
            : s.deleteSeriesPrefix.run({ rid: r.rid, key: r.key_id, c0, c1, take }).changes;
        // n === 0 would mean the counts disagree with the table: drop the chunk row all the same.
        if (take >= r.points || n === 0 || n >= r.points) s.dropChunk.run(r.rid, chunk, r.key_id);
        else s.subChunk.run(n, r.rid, chunk, r.key_id);
        const accounted = take >= r.points || n === 0 ? r.points : n;
        byDevice.set(r.rid, (byDevice.get(r.rid) ?? 0) + accounted);
        deleted += accounted;
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

interface AggRow {
  n: number;
  nd: number;
  nl: number;
  ns: number;
  nb: number;
  d: number | null;
  l: number | null;
  s: string | null;
  bo: number | null;
}

function aggValue(agg: Aggregation, r: AggRow): { kind: TsKind; value: TsScalar } | undefined {
  const numeric = r.nd + r.nl;
  switch (agg) {
    case 'COUNT':
      return { kind: 'long', value: r.n };
    case 'AVG':
      if (numeric === 0) return undefined;
      return { kind: 'double', value: ((r.d ?? 0) + (r.l ?? 0)) / numeric };
    case 'SUM':
      if (numeric === 0) return undefined;
      return r.nd > 0
        ? { kind: 'double', value: (r.d ?? 0) + (r.l ?? 0) }
        : { kind: 'long', value: r.l ?? 0 };
    case 'MIN':
    case 'MAX': {
      if (numeric > 0) {
        const pick = agg === 'MIN' ? Math.min : Math.max;
        if (r.nd === 0) return { kind: 'long', value: r.l ?? 0 };
        const v = r.nl === 0 ? (r.d ?? 0) : pick(r.d ?? 0, r.l ?? 0);
        return { kind: 'double', value: v };
      }
      if (r.ns > 0 && r.s !== null) return { kind: 'string', value: r.s };
      if (r.nb > 0 && r.bo !== null) return { kind: 'bool', value: r.bo === 1 };
      return undefined;
    }
  }
}

/** The counts of several staged batches, summed per (device, chunk, key). */
function mergeCounts(batches: readonly StagedBatch[]): Iterable<number[]> {
  if (batches.length === 1) return batches[0].counts;
  const sum = new Map<string, number[]>();
  for (const b of batches) {
    for (const c of b.counts) {
      const id = `${c[0]},${c[1]},${c[2]}`;
      const have = sum.get(id);
      if (have) have[3] += c[3];
      else sum.set(id, [c[0], c[1], c[2], c[3]]);
    }
  }
  return sum.values();
}

/**
 * Moves of at least this many points are sorted by series first (bench:storage, 1,000 series:
 * +30 % with 300,000-point moves); a sort of a small move costs more than it saves (bench:http
 * fell from 8,500 to 5,500-7,200 requests/s with 5,000-point moves sorted).
 */
const SORTED_MOVE_POINTS = 50_000;

/** Rows per multi-row statement: fewer statement calls per point, few statement shapes. */
function groupSize(left: number): number {
  return left >= 256 ? 256 : left >= 64 ? 64 : left >= 16 ? 16 : left >= 4 ? 4 : 1;
}

/**
 * Batches of at least this many points, with at least `DIRECT_PER_SERIES` points per series on
 * average, are written straight into `ts_kv`.
 */
const DIRECT_POINTS = 5_000;
const DIRECT_PER_SERIES = 50;

/** The number of series (device and key) among the points of a batch. */
function seriesIn(items: readonly WriteItem[]): number {
  const keys = new Map<number, Set<string>>();
  for (const item of items) {
    let set = keys.get(item.rid);
    if (!set) {
      set = new Set();
      keys.set(item.rid, set);
    }
    for (const p of item.points) set.add(p.key);
  }
  let n = 0;
  for (const set of keys.values()) n += set.size;
  return n;
}

const COLUMN: Record<TsKind, string> = {
  double: 'dbl_v',
  long: 'long_v',
  bool: 'bool_v',
  string: 'str_v',
  json: 'json_v',
};

function insertSql(kind: TsKind, n: number): string {
  const rows = Array(n).fill('(?, ?, ?, ?)').join(', ');
  return `INSERT OR IGNORE INTO ts_kv (device_rid, key_id, ts, ${COLUMN[kind]}) VALUES ${rows}`;
}

function overwriteArgs(rid: number, keyId: number, p: TsEntry): unknown[] {
  return [...typedColumns(p), rid, keyId, p.ts];
}

/** Value types in `ts_kv_stage.kind`. */
const KIND_CODE: Record<TsKind, number> = { double: 0, long: 1, bool: 2, string: 3, json: 4 };
const STAGE_COLUMNS = 5;

/** Thrown inside the fast move to roll its savepoint back. */
const OVERWRITES = new Error('staged points overwrite stored ones');

function stageSql(n: number): string {
  const rows = Array(n).fill('(?, ?, ?, ?, ?)').join(', ');
  return `INSERT INTO ts_kv_stage (device_rid, key_id, ts, kind, v) VALUES ${rows}`;
}

/** The staged values, spread over the typed columns of `ts_kv`. */
const STAGED_VALUES = `device_rid, key_id, ts, ${(
  ['double', 'long', 'bool', 'string', 'json'] as const
)
  .map((k) => `CASE kind WHEN ${KIND_CODE[k]} THEN v END`)
  .join(', ')}`;

/** Every typed value column of a row taken from the conflicting insert. */
const SET_VALUES = `dbl_v = excluded.dbl_v, long_v = excluded.long_v, bool_v = excluded.bool_v,
  str_v = excluded.str_v, json_v = excluded.json_v`;

/** The upsert of a latest value: an older point never replaces a newer one. */
const LATEST_CONFLICT = `ON CONFLICT (device_rid, key_id) DO UPDATE SET ts = excluded.ts, ${SET_VALUES}
  WHERE excluded.ts >= ts_kv_latest.ts`;

/**
 * Latest values: an older point never replaces a newer latest value. Chunk counts add up; a
 * series may have two rows for one chunk in a batch (value kind changed), which the upsert sums.
 */
function upsertSql(table: 'latest' | 'chunk', n: number): string {
  if (table === 'latest') {
    return `INSERT INTO ts_kv_latest (device_rid, key_id, ts, dbl_v, long_v, bool_v, str_v, json_v)
      VALUES ${Array(n).fill('(?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}
      ${LATEST_CONFLICT}`;
  }
  return `INSERT INTO ts_kv_chunk (device_rid, chunk, key_id, points)
    VALUES ${Array(n).fill('(?, ?, ?, ?)').join(', ')}
    ON CONFLICT (device_rid, chunk, key_id) DO UPDATE SET points = points + excluded.points`;
}

function bindValue(kind: TsKind, value: TsScalar): TsScalar {
  return kind === 'bool' ? (value ? 1 : 0) : value;
}

function typedColumns(p: TsEntry): unknown[] {
  const v = bindValue(p.kind, p.value);
  return [
    p.kind === 'double' ? v : null,
    p.kind === 'long' ? v : null,
    p.kind === 'bool' ? v : null,
    p.kind === 'string' ? v : null,
    p.kind === 'json' ? v : null,
  ];
}

function latestArgs(rid: number, keyId: number, p: TsEntry): unknown[] {
  return [rid, keyId, p.ts, ...typedColumns(p)];
}

function decode(r: ValueRow): StoredValue {
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

/**
 * One correlated sub-select per bucket: each is an index range seek, and the buckets come out in
 * order without the sort that `GROUP BY (ts - start) / interval` would need (2-3x faster).
 */
function aggSql(fields: string): string {
  return `WITH RECURSIVE b(s) AS (
      SELECT CAST(@start AS INTEGER)
      UNION ALL SELECT s + CAST(@interval AS INTEGER) FROM b WHERE s + @interval < @end)
    SELECT s, (SELECT json_array(${fields}) FROM ts_kv
      WHERE device_rid = @rid AND key_id = @key AND ts >= s AND ts < min(s + @interval, @end)
    ) AS a FROM b`;
}

/** Fields of each aggregation's json_array, in AggRow order; only what the result needs. */
const AGG_FIELDS: Record<Aggregation, string> = {
  AVG: 'avg(coalesce(dbl_v, long_v))',
  SUM: 'count(coalesce(dbl_v, long_v)), total(coalesce(dbl_v, long_v)), count(dbl_v)',
  COUNT: 'count(*)',
  MIN: 'count(dbl_v), count(long_v), min(dbl_v), min(long_v), count(str_v), min(str_v), count(bool_v), min(bool_v)',
  MAX: 'count(dbl_v), count(long_v), max(dbl_v), max(long_v), count(str_v), max(str_v), count(bool_v), max(bool_v)',
};

function toAggRow(agg: Aggregation, a: Array<number | string | null>): AggRow | undefined {
  if (agg === 'COUNT') {
    const n = a[0] as number;
    return n > 0
      ? { n, nd: 0, nl: 0, ns: 0, nb: 0, d: null, l: null, s: null, bo: null }
      : undefined;
  }
  if (agg === 'AVG') {
    // avg() skips NULLs (strings, booleans, JSON) and is NULL for a bucket without numbers.
    const avg = a[0] as number | null;
    if (avg === null) return undefined;
    return { n: 1, nd: 1, nl: 0, ns: 0, nb: 0, d: avg, l: 0, s: null, bo: null };
  }
  if (agg === 'SUM') {
    // [numeric count, numeric sum, double count]: the sum is a double when doubles take part.
    const [n, sum, nd = 1] = a as [number, number, number?];
    if (n === 0) return undefined;
    const doubles = nd > 0;
    return {
      n,
      nd: doubles ? n : 0,
      nl: doubles ? 0 : n,
      ns: 0,
      nb: 0,
      d: doubles ? sum : 0,
      l: doubles ? 0 : sum,
      s: null,
      bo: null,
    };
  }
  const [nd, nl, d, l, ns = 0, str = null, nb = 0, bo = null] = a as [
    number,
    number,
    number | null,
    number | null,
    number?,
    string?,
    number?,
    number?,
  ];
  const n = nd + nl + (ns ?? 0) + (nb ?? 0);
  if (n === 0) return undefined;
  return { n, nd, nl, ns: ns ?? 0, nb: nb ?? 0, d, l, s: str ?? null, bo: bo ?? null };
}

function prepare(db: Db) {
  const values = 'ts, dbl_v, long_v, bool_v, str_v, json_v';
  const moveNew = `INSERT OR IGNORE INTO ts_kv (device_rid, key_id, ${values})
    SELECT ${STAGED_VALUES} FROM ts_kv_stage WHERE seq <= ?`;
  const safe = (stmt: Statement) => stmt.safeIntegers(true);
  return {
    allKeys: db.prepare('SELECT id, key FROM ts_key'),
    deviceExists: db.prepare('SELECT 1 FROM device WHERE rid = ?').pluck(),
    insertKey: db.prepare('INSERT INTO ts_key (key) VALUES (?)'),
    countsByDevice: db.prepare(
      'SELECT device_rid AS rid, sum(points) AS n FROM ts_kv_chunk GROUP BY device_rid',
    ),
    overwrite: db.prepare(
      `UPDATE ts_kv SET dbl_v = ?, long_v = ?, bool_v = ?, str_v = ?, json_v = ?
       WHERE device_rid = ? AND key_id = ? AND ts = ?`,
    ),
    stagedCount: db.prepare('SELECT count(*) FROM ts_kv_stage').pluck(),
    // Latest values from staged points of unknown counts: per series the newest ts, the last
    // written among equal ts; an older point never replaces a newer latest value.
    latestFromStage: db.prepare(
      `INSERT INTO ts_kv_latest (device_rid, key_id, ${values})
       SELECT ${STAGED_VALUES} FROM (
         SELECT *, row_number() OVER (PARTITION BY device_rid, key_id ORDER BY ts DESC, seq DESC) AS r
         FROM ts_kv_stage WHERE seq <= ?) WHERE r = 1
       ${LATEST_CONFLICT}`,
    ),
    // Fast move: fails to insert (and is rolled back) if a point exists or is staged twice.
    moveNew: db.prepare(moveNew),
    // A large move sorted first: each series' leaf pages are then visited once, in order.
    moveNewSorted: db.prepare(`${moveNew} ORDER BY device_rid, key_id, ts`),
    // Exact move: in (series, ts, arrival) order, so the last value written for a ts wins.
    moveAll: db.prepare(
      `INSERT INTO ts_kv (device_rid, key_id, ${values})
       SELECT ${STAGED_VALUES} FROM ts_kv_stage WHERE seq <= ? ORDER BY device_rid, key_id, ts, seq
       ON CONFLICT (device_rid, key_id, ts) DO UPDATE SET ${SET_VALUES}`,
    ),
    // New points per (device, chunk, key) among the staged ones, as `[rid, chunk, keyId, n]`.
    countNew: db.prepare(
      `SELECT device_rid, ts / ${CHUNK_MS} AS chunk, key_id, count(DISTINCT ts) FROM ts_kv_stage s
       WHERE seq <= ? AND NOT EXISTS (SELECT 1 FROM ts_kv k
         WHERE k.device_rid = s.device_rid AND k.key_id = s.key_id AND k.ts = s.ts)
       GROUP BY device_rid, chunk, key_id`,
    ),
    clearStage: db.prepare('DELETE FROM ts_kv_stage WHERE seq <= ?'),
    subChunk: db.prepare(
      'UPDATE ts_kv_chunk SET points = points - ? WHERE device_rid = ? AND chunk = ? AND key_id = ?',
    ),
    dropEmptyChunk: db.prepare(
      'DELETE FROM ts_kv_chunk WHERE device_rid = ? AND chunk = ? AND key_id = ? AND points <= 0',
    ),
    dropChunk: db.prepare(
      'DELETE FROM ts_kv_chunk WHERE device_rid = ? AND chunk = ? AND key_id = ?',
    ),
    latestAll: safe(db.prepare(`SELECT key_id, ${values} FROM ts_kv_latest WHERE device_rid = ?`)),
    latestOne: safe(
      db.prepare(`SELECT ${values} FROM ts_kv_latest WHERE device_rid = ? AND key_id = ?`),
    ),
    keysOf: safe(db.prepare('SELECT key_id FROM ts_kv_latest WHERE device_rid = ?')),
    deleteLatest: db.prepare('DELETE FROM ts_kv_latest WHERE device_rid = ? AND key_id = ?'),
    rewriteLatest: db.prepare(
      `INSERT INTO ts_kv_latest (device_rid, key_id, ${values})
       SELECT device_rid, key_id, ${values} FROM ts_kv WHERE device_rid = ? AND key_id = ?
       ORDER BY ts DESC LIMIT 1`,
    ),
    historyAsc: safe(
      db.prepare(
        `SELECT ${values} FROM ts_kv WHERE device_rid = ? AND key_id = ? AND ts >= ? AND ts < ?
         ORDER BY ts ASC LIMIT ?`,
      ),
    ),
    historyDesc: safe(
      db.prepare(
        `SELECT ${values} FROM ts_kv WHERE device_rid = ? AND key_id = ? AND ts >= ? AND ts < ?
         ORDER BY ts DESC LIMIT ?`,
      ),
    ),
    aggregate: {
      AVG: db.prepare(aggSql(AGG_FIELDS.AVG)),
      SUM: db.prepare(aggSql(AGG_FIELDS.SUM)),
      COUNT: db.prepare(aggSql(AGG_FIELDS.COUNT)),
      MIN: db.prepare(aggSql(AGG_FIELDS.MIN)),
      MAX: db.prepare(aggSql(AGG_FIELDS.MAX)),
    } satisfies Record<Aggregation, Statement>,
    countByChunk: db.prepare(
      `SELECT ts / ${CHUNK_MS} AS c, count(*) AS n FROM ts_kv
       WHERE device_rid = ? AND key_id = ? AND ts >= ? AND ts < ? GROUP BY c`,
    ),
    deleteSeriesRange: db.prepare(
      'DELETE FROM ts_kv WHERE device_rid = ? AND key_id = ? AND ts >= ? AND ts < ?',
    ),
    deleteSeriesPrefix: db.prepare(
      `DELETE FROM ts_kv WHERE device_rid = @rid AND key_id = @key AND ts >= @c0 AND ts < coalesce(
         (SELECT ts FROM ts_kv WHERE device_rid = @rid AND key_id = @key AND ts >= @c0
          ORDER BY ts LIMIT 1 OFFSET CAST(@take AS INTEGER)), @c1)`,
    ),
    oldestChunk: db.prepare('SELECT min(chunk) AS c FROM ts_kv_chunk'),
    oldestChunkOf: db.prepare('SELECT min(chunk) AS c FROM ts_kv_chunk WHERE device_rid = ?'),
    chunkSeries: db.prepare(
      'SELECT device_rid AS rid, key_id, points FROM ts_kv_chunk WHERE chunk = ? ORDER BY points DESC',
    ),
    chunkSeriesOf: db.prepare(
      'SELECT device_rid AS rid, key_id, points FROM ts_kv_chunk WHERE device_rid = ? AND chunk = ? ORDER BY points DESC',
    ),
  };
}
