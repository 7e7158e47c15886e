import { readFileSync, statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Db } from '../db/open.js';
import type { DeviceIdentity, DeviceService } from '../devices/device-service.js';
import { NotFoundError, UnavailableError, ValidationError } from '../errors.js';
import type { ChangeSource, EventBus, TelemetryPoint } from '../events.js';
import type { PeriodicJobs } from '../scheduler/scheduler.js';
import { type TelemetryBounds, TelemetryEvictor } from './telemetry-evictor.js';
import {
  DecodedTelemetry,
  parseTelemetry,
  parseTelemetryText,
  TELEMETRY_LIMITS,
  type TelemetryLimits,
  type TsEntry,
} from './telemetry-parser.js';
import {
  type DeleteQuery,
  formatValue,
  type TimeseriesQuery,
  type TsKvOut,
} from './telemetry-query.js';
import { SLOT_PAYLOAD } from './telemetry-ring.js';
import { TelemetryStore } from './telemetry-store.js';
import { type CommittedItem, TelemetryWriter } from './telemetry-writer.js';

export interface TelemetryServiceDeps {
  readonly db: Db;
  readonly bus: EventBus;
  readonly log: Logger;
  readonly devices: Pick<DeviceService, 'identity'>;
  readonly config: Config['telemetry'];
  readonly limits?: TelemetryLimits;
  /** The scheduler host that runs the age-limit check (`gateway.telemetry-age`). */
  readonly jobs?: PeriodicJobs;
  /** Clock for server timestamps and the age limit (tests). */
  readonly now?: () => number;
  /** Points per eviction transaction. */
  readonly evictStepPoints?: number;
  /** Each group commit's duration and outcome (metrics, health). */
  readonly onCommitTiming?: (ms: number, ok: boolean) => void;
  /**
   * Runs inside each group commit's transaction with the committed points (TelemetryWriter's
   * `inCommit`): rows that must survive with their cause (an upstream outbox) are written here.
   */
  readonly inCommit?: (items: readonly CommittedItem[]) => void;
}

/** `{"key": [{"ts": .., "value": ..}, ...]}`, the REST shape of ThingsBoard. */
export type TimeseriesResult = Record<string, TsKvOut[]>;

const OWNER = 'telemetry';
const AGE_JOB = 'gateway.telemetry-age';
/** Ring bytes per open point (a plant-floor message of 3 readings uses about 10 of a slot). */
const RING_BYTES_PER_OPEN_POINT = 16;

/**
 * The telemetry domain: one ingest path for every transport (parse, type, group commit),
 * ring-buffer eviction, queries and deletes. Emits one `telemetry` event per device per
 * committed batch.
 */
export class TelemetryService {
  readonly #deps: TelemetryServiceDeps;
  #store: TelemetryStore | undefined;
  #writer: TelemetryWriter | undefined;
  #effectiveMaxBytes = 0;
  readonly #writeBytesAtStart = processWriteBytes();
  #evictor: TelemetryEvictor | undefined;

  constructor(deps: TelemetryServiceDeps) {
    this.#deps = deps;
  }

  /** Loads counts and the key dictionary, starts eviction. */
  start(): void {
    const { db, log, config, bus } = this.#deps;
    // The open range counts towards the bound: at most 5 % of it.
    const openMaxPoints = Math.min(
      config.openMaxPoints ?? 200_000,
      Math.max(5_000, Math.floor(config.maxPoints / 20)),
    );
    // The log ring holds the open range: about 10 bytes of slot per open numeric point at the
    // plant floor, with room to spare (a commit that does not fit goes to spill rows).
    const store = new TelemetryStore(db, {
      ringSlots: Math.ceil((openMaxPoints * RING_BYTES_PER_OPEN_POINT) / SLOT_PAYLOAD),
    });
    store.init();
    this.#store = store;
    const evictor = new TelemetryEvictor({
      store,
      log,
      maxPoints: config.maxPoints,
      maxBytes: this.#maxBytes(store),
      maxPointsPerDevice: config.maxPointsPerDevice,
      ttlDays: config.ttlDays,
      // The scheduler host checks the age limit (`gateway.telemetry-age`): no timer of its own.
      ttlCheckMs: this.#deps.jobs ? 0 : undefined,
      stepPoints: this.#deps.evictStepPoints,
      now: this.#deps.now,
    });
    this.#evictor = evictor;
    this.#writer = new TelemetryWriter({
      store,
      log,
      maxWaitMs: config.batchMaxWaitMs,
      lingerMs: config.batchLingerMs,
      // A batch over 2 % of the bound overshoots it while eviction catches up (bench:storage,
      // bound 1,000,000: 105.8 % with 20,000-point batches, 117.7 % with 50,000).
      maxBatchPoints: Math.min(
        config.batchMaxPoints,
        Math.max(5_000, Math.floor(config.maxPoints / 50)),
      ),
      flushIntervalMs: (config.flushIntervalSec ?? 600) * 1000,
      blockPoints: config.blockPoints,
      openMaxPoints,
      onCommitTiming: this.#deps.onCommitTiming,
      inCommit: this.#deps.inCommit,
      onCommit: (items) => {
        this.#emit(items);
        evictor.kick();
      },
    });
    // The delete trigger of migration 002 removed the device's rows: recount.
    bus.on(OWNER, 'device.deleted', () => store.reloadCounts());
    evictor.start();
    this.#armAgeJob(config.ttlDays);
    log.info(
      {
        points: store.totalPoints,
        maxPoints: config.maxPoints,
        batchMaxWaitMs: config.batchMaxWaitMs,
      },
      'telemetry started',
    );
  }

  /** The age limit is checked every minute on the scheduler host, only while there is one. */
  #armAgeJob(ttlDays: number): void {
    const evictor = this.#evictor;
    if (ttlDays > 0 && evictor) this.#deps.jobs?.every(AGE_JOB, 60_000, () => evictor.kick());
    else this.#deps.jobs?.cancel(AGE_JOB);
  }

  /**
   * The retention settings (`/api/admin/settings/retention`): new ring bounds and age limit
   * without a restart. The writer's batch size stays as sized at start from `maxPoints`.
   */
  setBounds(bounds: TelemetryBounds): void {
    const evictor = this.#requireStarted().evictor;
    evictor.setBounds(bounds);
    this.#armAgeJob(bounds.ttlDays);
  }

  /** Commits every pending point, then stops eviction. Safe to call twice. */
  stop(): Promise<void> {
    this.#writer?.stop();
    this.#evictor?.stop();
    this.#deps.jobs?.cancel(AGE_JOB);
    this.#deps.bus.removeOwner(OWNER);
    return Promise.resolve();
  }

  /**
   * The ingest path of every transport. `payload` is the raw body (string or bytes: numbers are
   * typed by their literal), an already parsed JSON value, or a `DecodedTelemetry` (a binary
   * payload a transport decoded, typed straight into points). Resolves with the number of points
   * once they are committed; rejects with a ValidationError for a bad payload, of which nothing
   * is stored.
   */
  async ingest(
    device: DeviceIdentity,
    payload: unknown,
    receivedTs = this.#now(),
  ): Promise<number> {
    return (await this.ingestPoints(device, payload, receivedTs)).length;
  }

  /** `ingest`, resolving with the committed points (the device-message service builds on them). */
  async ingestPoints(
    device: DeviceIdentity,
    payload: unknown,
    receivedTs = this.#now(),
  ): Promise<readonly TsEntry[]> {
    const points = this.#parse(payload, receivedTs);
    await this.#write(device.rid, device.id, points, true);
    return points;
  }

  /** Writes points that are already typed (benchmarks, internal producers). */
  async writePoints(device: DeviceIdentity, points: readonly TsEntry[]): Promise<number> {
    return await this.#write(device.rid, device.id, points);
  }

  /**
   * Server-side write (`POST .../timeseries/{scope}`): same forms; a payload without any data
   * point is an error, as in ThingsBoard.
   */
  async save(deviceId: string, payload: unknown, source?: ChangeSource): Promise<number> {
    const device = this.#device(deviceId);
    const points = this.#parse(payload, this.#now());
    if (points.length === 0) throw new ValidationError('No timeseries data found in request body');
    const n = await this.#write(device.rid, device.id, points);
    this.#deps.bus.emit('telemetry.saved', {
      deviceId: device.id,
      points: points.map((p) => ({ key: p.key, ts: p.ts, value: telemetryValue(p) })),
      source,
    });
    return n;
  }

  /** Commits pending points and moves staged ones into the time-series table (tests, shutdown). */
  flush(): void {
    this.#writer?.flush();
    this.#store?.settle();
  }

  /** Runs eviction until every bound holds (tests, benchmarks). */
  evictNow(): number {
    return this.#requireStarted().evictor.runUntilDone();
  }

  get stats(): { points: number; pending: number; evicted: number; batches: number } {
    this.#store?.settle();
    return {
      points: this.#store?.totalPoints ?? 0,
      pending: this.#writer?.pending ?? 0,
      evicted: this.#evictor?.evicted ?? 0,
      batches: this.#writer?.stats.batches ?? 0,
    };
  }

  /** Counters for metrics, read without moving staged points (unlike `stats`). */
  get gauges(): {
    points: number;
    staged: number;
    pending: number;
    evicted: number;
    bytes: number;
    maxBytes: number;
  } {
    return {
      points: this.#store?.totalPoints ?? 0,
      staged: this.#store?.stagedPoints ?? 0,
      pending: this.#writer?.pending ?? 0,
      evicted: this.#evictor?.evicted ?? 0,
      bytes: this.#store?.totalBytes ?? 0,
      maxBytes: this.#effectiveMaxBytes,
    };
  }

  /**
   * The write budget: points committed since start and the bytes this process has written to
   * storage since start (Linux `/proc/self/io` `write_bytes`: the database, its WAL and the
   * checkpoint worker; logs to a pipe or the journal are not block-device writes). Undefined
   * bytes where the kernel does not count them.
   */
  writeBudget(): { points: number; bytesWritten?: number; bytesPerPoint?: number } {
    const points = this.#writer?.stats.points ?? 0;
    const now = processWriteBytes();
    if (now === undefined || this.#writeBytesAtStart === undefined) return { points };
    const bytesWritten = now - this.#writeBytesAtStart;
    return { points, bytesWritten, bytesPerPoint: points > 0 ? bytesWritten / points : undefined };
  }

  /**
   * The byte bound: `--telemetry-max-bytes`, or sized to the disk (0): a quarter of the data
   * directory's filesystem, at most 80 % of its free space plus what telemetry holds already.
   */
  #maxBytes(store: TelemetryStore): number {
    const configured = this.#deps.config.maxBytes ?? 0;
    this.#effectiveMaxBytes = configured;
    if (configured > 0) return configured;
    try {
      const fs = statfsSync(dirname(this.#deps.db.name));
      const total = fs.blocks * fs.bsize;
      const free = fs.bavail * fs.bsize;
      this.#effectiveMaxBytes = Math.floor(Math.min(total / 4, 0.8 * (free + store.totalBytes)));
    } catch {
      this.#effectiveMaxBytes = 0;
    }
    return this.#effectiveMaxBytes;
  }

  devicePoints(deviceId: string): number {
    const { store } = this.#requireStarted();
    store.settle();
    return store.devicePoints(this.#device(deviceId).rid);
  }

  /** Keys with data for the device (`GET .../keys/timeseries`). */
  keys(deviceId: string): string[] {
    const { store } = this.#requireStarted();
    return store.keysOf(this.#device(deviceId).rid);
  }

  /** `GET .../values/timeseries`: latest values, raw history or aggregates. */
  query(deviceId: string, q: TimeseriesQuery): TimeseriesResult {
    const { store } = this.#requireStarted();
    const { rid } = this.#device(deviceId);
    const out: TimeseriesResult = {};
    if (q.mode === 'latest') {
      const found = store.latest(rid, q.keys);
      for (const [key, v] of found) out[key] = [{ ts: v.ts, value: formatValue(v, q.strict) }];
      // platform.md §3.8: a requested key without data comes back with a null value.
      for (const key of q.keys ?? []) out[key] ??= [{ ts: this.#now(), value: null }];
      return out;
    }
    const keys = q.keys ?? store.keysOf(rid);
    for (const key of keys) {
      let values =
        q.agg === 'NONE'
          ? store.history(rid, key, q.startTs, q.endTs, q.limit, q.orderBy)
          : store.aggregate(rid, key, q.startTs, q.endTs, q.interval, q.agg);
      if (values.length === 0) continue;
      if (q.agg !== 'NONE' && q.orderBy === 'DESC') values = values.reverse();
      out[key] = values.map((v) => ({ ts: v.ts, value: formatValue(v, q.strict) }));
    }
    return out;
  }

  /** `DELETE .../timeseries/delete`; returns the number of points deleted. */
  delete(deviceId: string, q: DeleteQuery, source?: ChangeSource): number {
    const { store } = this.#requireStarted();
    const device = this.#device(deviceId);
    const n = store.deleteRange(device.rid, q.keys, q.startTs, q.endTs, q);
    this.#deps.bus.emit('telemetry.deleted', {
      deviceId: device.id,
      keys: q.keys,
      startTs: q.startTs,
      endTs: q.endTs,
      source,
    });
    return n;
  }

  #parse(payload: unknown, now: number): TsEntry[] {
    const limits = this.#deps.limits ?? TELEMETRY_LIMITS;
    if (payload instanceof DecodedTelemetry) return payload.points(now, limits);
    return typeof payload === 'string' || payload instanceof Uint8Array
      ? parseTelemetryText(payload, now, limits)
      : parseTelemetry(payload, now, limits);
  }

  async #write(
    rid: number,
    deviceId: string,
    points: readonly TsEntry[],
    uplink = false,
  ): Promise<number> {
    const { writer } = this.#requireStarted();
    await writer.write(rid, deviceId, points, uplink);
    return points.length;
  }

  #emit(items: readonly CommittedItem[]): void {
    const { bus } = this.#deps;
    if (bus.listenerCount('telemetry') === 0) return;
    const byDevice = new Map<string, TelemetryPoint[]>();
    for (const item of items) {
      let list = byDevice.get(item.deviceId);
      if (!list) {
        list = [];
        byDevice.set(item.deviceId, list);
      }
      for (const p of item.points)
        list.push({ key: p.key, ts: p.ts, value: telemetryValue(p), kind: p.kind });
    }
    for (const [deviceId, points] of byDevice) bus.emit('telemetry', { deviceId, points });
  }

  #device(deviceId: string): DeviceIdentity {
    const device = this.#deps.devices.identity(deviceId.toLowerCase());
    if (!device) throw new NotFoundError(`Device with id [${deviceId}] is not found`);
    return device;
  }

  #requireStarted() {
    if (!this.#store || !this.#writer || !this.#evictor) {
      throw new UnavailableError('Telemetry service is not started');
    }
    return { store: this.#store, writer: this.#writer, evictor: this.#evictor };
  }

  #now(): number {
    return this.#deps.now?.() ?? Date.now();
  }
}

/** Bytes this process has caused to be written to storage (Linux), or undefined. */
function processWriteBytes(): number | undefined {
  try {
    const m = /^write_bytes: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Event values: JSON parsed; a long beyond 2^53 as its exact decimal string. */
export function telemetryValue(p: TsEntry): TelemetryPoint['value'] {
  if (p.kind === 'json') return JSON.parse(p.value as string) as object;
  if (typeof p.value === 'bigint') return p.value.toString();
  return p.value;
}
