import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { type ModbusSlave, type ModbusTag, rangeKeys } from '../../connectors/modbus-config.js';
import type {
  ConnectorErrorKind,
  ConnectorSink,
  DeviceRequest,
  LineStatus,
} from '../../connectors/types.js';
import { decodeBits, decodeRegisters, encodeValue, type ModbusValue } from './codec.js';
import type { ModbusConnection } from './connection.js';
import { backoffMs, interFrameMs, PollSchedule } from './schedule.js';

/** Time as the line sees it; tests run an hour of polls on a simulated one. */
export interface LineClock {
  /** Monotonic milliseconds (deadlines). */
  now(): number;
  /** Epoch milliseconds (the time a value was read). */
  wall(): number;
  /** Calls `fn` after `ms`; returns a cancel function. */
  setTimer(fn: () => void, ms: number): () => void;
}

export const SYSTEM_CLOCK: LineClock = {
  now: () => performance.now(),
  wall: () => Date.now(),
  setTimer(fn, ms) {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
};

export interface LineDeps {
  /** `/dev/ttyUSB0`, `tcp://host:port`. */
  readonly key: string;
  /** The slaves on this connection; the first one's settings open it. */
  readonly slaves: readonly ModbusSlave[];
  readonly connection: ModbusConnection;
  readonly sink: ConnectorSink;
  readonly log: Logger;
  readonly clock?: LineClock;
  /** Reads and writes waiting for the bus; past it a new one is refused. */
  readonly maxQueued?: number;
  /** Longest back-off of a slave that does not answer, ms. */
  readonly backoffCapMs?: number;
}

interface Read {
  readonly tag: ModbusTag;
  readonly attribute: boolean;
  /** The keys and addresses of its values (several for a wide range). */
  readonly keys: ReadonlyArray<{ readonly key: string; readonly address: number }>;
}

interface SlaveRun {
  readonly slave: ModbusSlave;
  readonly schedule: PollSchedule;
  readonly reads: readonly Read[];
  failures: number;
}

interface Job {
  readonly slave: ModbusSlave;
  readonly req: DeviceRequest;
  resolve(value: unknown): void;
  reject(err: Error): void;
}

class RequestError extends Error {
  constructor(
    readonly kind: ConnectorErrorKind,
    message: string,
  ) {
    super(message);
  }
}

/**
 * One Modbus connection and its poll loop (issue 17 §4). A connection is half duplex to the loop:
 * one request at a time, with the RTU inter-frame delay on a serial port (and the slaves'
 * `delayBetweenRequestsMs`); separate lines (TCP endpoints) run in parallel.
 *
 * Each slave is polled on absolute deadlines (`PollSchedule`). A slave that does not answer (a
 * timeout, a CRC error) is reported, tried once per back-off step without retries, and the other
 * slaves on the bus keep their schedule. Writes and RPC reads go before the next poll. A closed
 * connection (an unplugged USB adapter, a TCP peer gone) is reopened with the slaves'
 * `connectAttemptTimeMs` / `connectAttemptCount` / `waitAfterFailedAttemptsMs`.
 */
export class Line {
  readonly #deps: LineDeps;
  readonly #clock: LineClock;
  readonly #runs: SlaveRun[];
  readonly #jobs: Job[] = [];
  readonly #maxQueued: number;
  readonly #serialGapMs: number;
  #loop: Promise<void> | undefined;
  #stopped = false;
  #wake: (() => void) | undefined;
  #open = false;
  #opened = 0;
  #openedAt = Number.NEGATIVE_INFINITY;
  #attempts = 0;
  #lastError: string | null = null;
  #lastFrameEnd = Number.NEGATIVE_INFINITY;
  #dropped = 0;
  #overruns = 0;

  constructor(deps: LineDeps) {
    this.#deps = deps;
    this.#clock = deps.clock ?? SYSTEM_CLOCK;
    this.#maxQueued = deps.maxQueued ?? 64;
    const start = this.#clock.now();
    this.#runs = deps.slaves.map((slave) => ({
      slave,
      schedule: new PollSchedule(slave.pollPeriod, start),
      reads: [
        ...slave.timeseries.map((tag) => ({ tag, attribute: false })),
        ...slave.attributes.map((tag) => ({ tag, attribute: true })),
      ].map((r) => ({ ...r, keys: rangeKeys(r.tag, slave.unitId) })),
      failures: 0,
    }));
    const first = deps.slaves[0];
    const parityBits = first.parity === 'none' ? 0 : 1;
    this.#serialGapMs =
      first.type === 'serial'
        ? interFrameMs(first.baudrate, 1 + first.bytesize + parityBits + first.stopbits)
        : 0;
    deps.connection.onClose(() => {
      this.#open = false;
      this.#lastError = 'connection closed';
      deps.log.warn({ line: deps.key }, 'modbus line closed; reopening');
      this.#wake?.();
    });
  }

  start(): void {
    this.#loop ??= this.#run().catch((err: unknown) => {
      this.#deps.log.error({ err, line: this.#deps.key }, 'modbus line loop failed');
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#wake?.();
    for (const job of this.#jobs.splice(0)) job.reject(new Error('connector stopped'));
    await this.#deps.connection.close();
    // A request in flight ends with its timeout at the latest; stop does not wait that long.
    const loop = this.#loop;
    if (loop !== undefined) {
      await Promise.race([loop, new Promise((r) => setTimeout(r, 2000).unref())]);
    }
  }

  has(deviceName: string): boolean {
    return this.#runs.some((r) => r.slave.deviceName === deviceName);
  }

  /** Queues a read or write for a slave on this line; it runs before the next poll. */
  request(deviceName: string, req: DeviceRequest): Promise<unknown> {
    const run = this.#runs.find((r) => r.slave.deviceName === deviceName);
    if (!run) return Promise.reject(new Error(`no slave ${deviceName} on ${this.#deps.key}`));
    if (this.#stopped) return Promise.reject(new Error('connector stopped'));
    if (this.#jobs.length >= this.#maxQueued) {
      this.#dropped++;
      return Promise.reject(new Error(`too many requests waiting for ${this.#deps.key}`));
    }
    return new Promise((resolve, reject) => {
      this.#jobs.push({ slave: run.slave, req, resolve, reject });
      this.#wake?.();
    });
  }

  status(): LineStatus {
    return {
      line: this.#deps.key,
      open: this.#open,
      reopens: Math.max(0, this.#opened - 1),
      lastError: this.#lastError,
      queued: this.#jobs.length,
      dropped: this.#dropped,
      overruns: this.#overruns,
    };
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      if (!this.#open) {
        await this.#connect();
        continue;
      }
      const job = this.#jobs.shift();
      if (job) {
        await this.#exec(job);
        continue;
      }
      let next = this.#runs[0];
      for (const r of this.#runs) if (r.schedule.due < next.schedule.due) next = r;
      const wait = next.schedule.due - this.#clock.now();
      if (wait > 0) {
        await this.#sleep(wait);
        continue;
      }
      await this.#poll(next);
    }
  }

  /** Sleeps `ms`, or less when a request is queued, the line closes or it stops. */
  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        cancel();
        this.#wake = undefined;
        resolve();
      };
      const cancel = this.#clock.setTimer(done, ms);
      this.#wake = done;
    });
  }

  async #connect(): Promise<void> {
    const s = this.#deps.slaves[0];
    const { connection, log, key } = this.#deps;
    // A connection that opens and fails at once (a peer that refuses every request, a socket not
    // ready) is not reopened in a loop of promise callbacks that would starve the event loop:
    // reopens are `connectAttemptTimeMs` apart, and always wait for a timer.
    const since = this.#clock.now() - this.#openedAt;
    if (since < s.connectAttemptTimeMs || since < 10) {
      await this.#sleep(Math.max(s.connectAttemptTimeMs - since, 10));
      if (this.#stopped) return;
    }
    try {
      await connection.close();
      await connection.open();
      if (this.#stopped) return;
      this.#open = true;
      this.#opened++;
      this.#openedAt = this.#clock.now();
      this.#attempts = 0;
      this.#lastError = null;
      // Slaves backed off while the line was down are polled at once, not after their back-off.
      const now = this.#clock.now();
      for (const r of this.#runs) {
        if (r.failures === 0) continue;
        r.failures = 0;
        r.schedule.restart(now);
      }
      log.info({ line: key, reopens: this.#opened - 1 }, 'modbus line open');
      return;
    } catch (err) {
      const message = (err as Error).message;
      this.#lastError = message;
      this.#attempts++;
      if (this.#attempts === 1) log.warn({ line: key, error: message }, 'modbus line cannot open');
      for (const r of this.#runs) {
        this.#deps.sink.failure(ref(r.slave), 'connection', `${key}: ${message}`, true);
      }
    }
    const wait =
      this.#attempts % s.connectAttemptCount === 0
        ? s.waitAfterFailedAttemptsMs
        : s.connectAttemptTimeMs;
    if (!this.#stopped) await this.#sleep(Math.max(wait, 10));
  }

  async #poll(run: SlaveRun): Promise<void> {
    const { slave } = run;
    const telemetry: Record<string, ModbusValue> = {};
    const attributes: Record<string, ModbusValue> = {};
    let readAt: number | undefined;
    let failed: RequestError | undefined;
    for (const { tag, attribute, keys } of run.reads) {
      try {
        const retries = run.failures > 0 ? 0 : slave.retries;
        const out = attribute ? attributes : telemetry;
        if (tag.end === undefined) {
          out[tag.tag] = await this.#read(slave, tag, retries);
        } else {
          Object.assign(out, await this.#readRange(slave, tag, keys, retries));
        }
        readAt ??= this.#clock.wall();
      } catch (err) {
        const e = asRequestError(err);
        if (e.kind === 'exception' || e.kind === 'decode') {
          this.#deps.sink.failure(ref(slave), e.kind, `${tag.tag}: ${e.message}`, false);
          continue;
        }
        failed = e;
        break;
      }
    }
    if (this.#stopped) return;
    if (readAt !== undefined)
      this.#deps.sink.reading(ref(slave), { ts: readAt, telemetry, attributes });
    const now = this.#clock.now();
    if (failed) {
      run.failures++;
      this.#deps.sink.failure(ref(slave), failed.kind, failed.message, true);
      run.schedule.advance(now);
      run.schedule.notBefore(
        now + backoffMs(slave.pollPeriod, run.failures, this.#deps.backoffCapMs ?? 30_000),
      );
    } else {
      run.failures = 0;
      this.#overruns += run.schedule.advance(now);
    }
  }

  async #exec(job: Job): Promise<void> {
    const { slave, req } = job;
    try {
      if (req.kind === 'read' && req.tag.end !== undefined) {
        const keys = rangeKeys(req.tag, slave.unitId);
        job.resolve(await this.#readRange(slave, req.tag, keys, slave.retries));
      } else if (req.kind === 'read') {
        job.resolve(await this.#read(slave, req.tag, slave.retries));
      } else {
        await this.#write(slave, req.tag, req.value);
        job.resolve(req.value);
      }
    } catch (err) {
      job.reject(err as Error);
    }
  }

  async #read(slave: ModbusSlave, tag: ModbusTag, retries: number): Promise<ModbusValue> {
    const fc = tag.functionCode;
    if (fc === 1 || fc === 2) {
      const bits = await this.#request(slave, retries, (c) =>
        c.readBits(fc, slave.unitId, tag.address, tag.objectsCount, slave.timeoutMs),
      );
      return decodeBits(bits, tag);
    }
    if (fc === 3 || fc === 4) {
      const regs = await this.#request(slave, retries, (c) =>
        c.readRegisters(fc, slave.unitId, tag.address, tag.objectsCount, slave.timeoutMs),
      );
      try {
        return decodeRegisters(regs, tag, slave);
      } catch (err) {
        throw new RequestError('decode', (err as Error).message);
      }
    }
    throw new RequestError('decode', `function code ${fc} does not read`);
  }

  /**
   * A wide-range read (reference §3): `end - address + objectsCount` objects in requests of at
   * most `maxRegistersPerRequest`, one value per `objectsCount` objects, under its key.
   */
  async #readRange(
    slave: ModbusSlave,
    tag: ModbusTag,
    keys: Read['keys'],
    retries: number,
  ): Promise<Record<string, ModbusValue>> {
    const fc = tag.functionCode;
    const end = (tag.end ?? tag.address) + tag.objectsCount;
    const objects: Array<boolean | number> = [];
    for (let at = tag.address; at < end; at += tag.maxRegistersPerRequest) {
      const n = Math.min(tag.maxRegistersPerRequest, end - at);
      if (fc === 1 || fc === 2) {
        objects.push(
          ...(await this.#request(slave, retries, (c) =>
            c.readBits(fc, slave.unitId, at, n, slave.timeoutMs),
          )),
        );
      } else if (fc === 3 || fc === 4) {
        objects.push(
          ...(await this.#request(slave, retries, (c) =>
            c.readRegisters(fc, slave.unitId, at, n, slave.timeoutMs),
          )),
        );
      } else {
        throw new RequestError('decode', `function code ${fc} does not read`);
      }
    }
    const values: Record<string, ModbusValue> = {};
    for (const { key, address } of keys) {
      const from = address - tag.address;
      const slice = objects.slice(from, from + tag.objectsCount);
      try {
        values[key] =
          fc === 1 || fc === 2
            ? decodeBits(slice as boolean[], tag)
            : decodeRegisters(slice as number[], tag, slave);
      } catch (err) {
        throw new RequestError('decode', `${key}: ${(err as Error).message}`);
      }
    }
    return values;
  }

  async #write(slave: ModbusSlave, tag: ModbusTag, value: unknown): Promise<void> {
    let payload: ReturnType<typeof encodeValue>;
    try {
      payload = encodeValue(value, tag, slave);
    } catch (err) {
      throw new RequestError('decode', (err as Error).message);
    }
    const { unitId, timeoutMs, retries } = slave;
    if (payload.kind === 'coils') {
      const fc = tag.functionCode === 5 && payload.values.length === 1 ? 5 : 15;
      await this.#request(slave, retries, (c) =>
        c.writeCoils(fc, unitId, tag.address, payload.values, timeoutMs),
      );
      return;
    }
    // Reference §9: a value of several registers is written whole (function code 16), even
    // when the entry says 6 (the IoT Gateway writes only its first register).
    const fc = tag.functionCode === 6 && payload.values.length === 1 ? 6 : 16;
    await this.#request(slave, retries, (c) =>
      c.writeRegisters(fc, unitId, tag.address, payload.values, timeoutMs),
    );
  }

  /** One request with retries (timeouts and CRC errors only), after the inter-frame delay. */
  async #request<T>(
    slave: ModbusSlave,
    retries: number,
    send: (c: ModbusConnection) => Promise<T>,
  ): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      if (!this.#open) throw new RequestError('connection', `${this.#deps.key}: not open`);
      await this.#gap(Math.max(this.#serialGapMs, slave.delayBetweenRequestsMs));
      const sentAt = performance.now();
      try {
        const answer = await send(this.#deps.connection);
        // The silence after an answer runs from its last byte, which was on the wire no later
        // than the read that brought it in; decoding it is not bus time. Without that read's
        // time (TCP, another platform), from now.
        const read = this.#deps.connection.lastReadAt?.();
        this.#lastFrameEnd = read !== undefined && read >= sentAt ? read : performance.now();
        return answer;
      } catch (err) {
        // A failed request (a timeout, a broken answer): the silence runs from now.
        this.#lastFrameEnd = performance.now();
        const e = classify(err);
        if (e.kind === 'connection') this.#open = false;
        if ((e.kind === 'timeout' || e.kind === 'crc') && attempt < retries && !this.#stopped) {
          continue;
        }
        throw e;
      }
    }
  }

  /**
   * Waits until `ms` after the end of the last frame. Timers are only as fine as a millisecond,
   * so the last part of a short gap is spent yielding to the event loop.
   */
  async #gap(ms: number): Promise<void> {
    if (ms <= 0) return;
    const until = this.#lastFrameEnd + ms;
    let left = until - performance.now();
    if (left <= 0) return;
    if (left > 1.5) await new Promise((r) => setTimeout(r, Math.floor(left - 1)));
    left = until - performance.now();
    while (left > 0) {
      await new Promise((r) => setImmediate(r));
      left = until - performance.now();
    }
  }
}

function ref(s: ModbusSlave) {
  return { name: s.deviceName, type: s.deviceType };
}

function asRequestError(err: unknown): RequestError {
  return err instanceof RequestError ? err : classify(err);
}

/** modbus-serial reports by message: "Timed out", "CRC error", "Modbus exception N: ...". */
function classify(err: unknown): RequestError {
  if (err instanceof RequestError) return err;
  const message = err instanceof Error ? err.message : String(err);
  if (/timed out/i.test(message)) return new RequestError('timeout', message);
  if (/crc/i.test(message)) return new RequestError('crc', message);
  if (/modbus exception/i.test(message)) return new RequestError('exception', message);
  if (/data length|unexpected data/i.test(message)) return new RequestError('crc', message);
  return new RequestError('connection', message);
}
