import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { modbusConfigSchema } from '../../connectors/modbus-config.js';
import type { ConnectorReading } from '../../connectors/types.js';
import type { ModbusConnection } from './connection.js';
import { Line, type LineClock } from './line.js';
import { backoffMs, interFrameMs, PollSchedule } from './schedule.js';

/**
 * Poll timing over an hour of simulated time (issue 17 §5): the clock is the only thing faked;
 * each request takes a random 5-80 ms of simulated time and every timer fires up to 30 ms late,
 * as on a loaded Pi. Readings must keep `pollPeriod` within 5 % and not drift from their grid.
 */
class SimClock implements LineClock {
  t = 0;
  readonly #timers: Array<{ at: number; fn: () => void; seq: number; live: boolean }> = [];
  #seq = 0;
  // A fixed-seed generator, so a failure can be replayed.
  #seed = 12345;

  random(): number {
    this.#seed = (this.#seed * 1103515245 + 12345) % 2 ** 31;
    return this.#seed / 2 ** 31;
  }

  now = () => this.t;
  wall = () => this.t;

  setTimer = (fn: () => void, ms: number) => {
    const timer = { at: this.t + ms + this.random() * 30, fn, seq: this.#seq++, live: true };
    this.#timers.push(timer);
    return () => {
      timer.live = false;
    };
  };

  /** Runs timers in time order until `end`; lets promise chains settle between them. */
  async run(end: number): Promise<void> {
    while (this.t < end) {
      await new Promise((r) => setImmediate(r));
      const live = this.#timers.filter((x) => x.live);
      if (live.length === 0) continue;
      live.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = live[0];
      next.live = false;
      this.#timers.splice(0, this.#timers.length, ...live.slice(1));
      this.t = Math.max(this.t, next.at);
      next.fn();
    }
  }
}

function simConnection(clock: SimClock): ModbusConnection {
  const after = <T>(value: T) =>
    new Promise<T>((resolve) => clock.setTimer(() => resolve(value), 5 + clock.random() * 50));
  return {
    isOpen: true,
    open: () => Promise.resolve(),
    close: () => Promise.resolve(),
    onClose: () => {},
    readBits: (_fc, _u, _a, count) => after(new Array<boolean>(count).fill(true)),
    readRegisters: (_fc, _u, _a, count) => after(new Array<number>(count).fill(7)),
    writeCoils: () => after(undefined),
    writeRegisters: () => after(undefined),
  };
}

const slave = (unitId: number, pollPeriod: number) => ({
  host: '127.0.0.1',
  port: 502,
  method: 'socket',
  unitId,
  deviceName: `d${unitId}`,
  pollPeriod,
  timeseries: [
    { tag: 'a', type: '16int', functionCode: 3, address: 0 },
    { tag: 'b', type: '32float', functionCode: 4, objectsCount: 2, address: 2 },
  ],
});

describe('poll timing', () => {
  it('keeps pollPeriod within 5 % over an hour of simulated time, without drift', async () => {
    const clock = new SimClock();
    const config = modbusConfigSchema.parse({
      master: { slaves: [slave(1, 1000), slave(2, 1000), slave(3, 500)] },
    });
    const readings = new Map<string, number[]>();
    const line = new Line({
      key: 'tcp://sim',
      slaves: config.slaves,
      connection: simConnection(clock),
      sink: {
        reading: (d, r: ConnectorReading) => {
          const list = readings.get(d.name) ?? [];
          list.push(r.ts);
          readings.set(d.name, list);
        },
        failure: (d, kind, message) => assert.fail(`${d.name}: ${kind} ${message}`),
      },
      log: pino({ level: 'silent' }),
      clock,
    });
    const HOUR = 3_600_000;
    line.start();
    await clock.run(HOUR);
    void line.stop();
    for (const [name, period] of [
      ['d1', 1000],
      ['d2', 1000],
      ['d3', 500],
    ] as const) {
      const ts = readings.get(name) ?? [];
      const expected = HOUR / period;
      assert.ok(Math.abs(ts.length - expected) <= expected * 0.05, `${name}: ${ts.length} polls`);
      const mean = (ts[ts.length - 1] - ts[0]) / (ts.length - 1);
      assert.ok(Math.abs(mean - period) <= period * 0.05, `${name}: mean period ${mean}`);
      // On absolute deadlines: the last reading is as close to its slot as the first.
      const lag = (t: number, k: number) => t - k * period;
      assert.ok(lag(ts[ts.length - 1], ts.length - 1) < period, `${name} drifted`);
      assert.ok(lag(ts[ts.length - 1], ts.length - 1) >= 0);
    }
  });

  it('skips missed deadlines instead of bunching up, and stays on its grid after a back-off', () => {
    const s = new PollSchedule(100, 0);
    assert.equal(s.advance(30), 0);
    assert.equal(s.due, 100);
    // The poll due at 100 ran until 350: 200 and 300 are skipped.
    assert.equal(s.advance(350), 2);
    assert.equal(s.due, 400);
    s.notBefore(555);
    assert.equal(s.due, 600);
  });

  it('backs off a silent slave exponentially, capped', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7, 8].map((n) => backoffMs(100, n, 3000)),
      [100, 200, 400, 800, 1600, 3000, 3000, 3000],
    );
    assert.equal(backoffMs(5000, 3, 1000), 5000);
  });

  it('reopens a connection that fails every request at once only connectAttemptTimeMs apart', async () => {
    // A UDP socket not bound yet answered every request "Port Not Open" at once; the line then
    // reopened it in a loop of promise callbacks that never let a timer or a socket run.
    const clock = new SimClock();
    const config = modbusConfigSchema.parse({
      master: { slaves: [{ ...slave(1, 100), connectAttemptTimeMs: 500 }] },
    });
    let opens = 0;
    const failures: string[] = [];
    const notOpen = () => Promise.reject(new Error('Port Not Open'));
    const line = new Line({
      key: 'udp://sim',
      slaves: config.slaves,
      connection: {
        isOpen: true,
        // A guard, so that the loop this test is about ends (as a failure) rather than hangs.
        open: () =>
          ++opens > 1000 ? Promise.reject(new Error('too many opens')) : Promise.resolve(),
        close: () => Promise.resolve(),
        onClose: () => {},
        readBits: notOpen,
        readRegisters: notOpen,
        writeCoils: notOpen,
        writeRegisters: notOpen,
      },
      sink: {
        reading: () => assert.fail('no reading expected'),
        failure: (_d, _kind, message) => failures.push(message),
      },
      log: pino({ level: 'silent' }),
      clock,
    });
    line.start();
    await clock.run(10_000);
    void line.stop();
    assert.ok(opens >= 10 && opens <= 21, `${opens} opens in 10 s`);
    assert.ok(
      failures.some((m) => m.includes('Port Not Open')),
      failures.slice(0, 3).join('; '),
    );
  });

  describe('the RTU silent interval (t3.5) between frames on a serial line', () => {
    // 9,600 baud 8E1: t3.5 is 3.5 characters of 11 bits, 4.01 ms. Real timers: the gap is real
    // time. Each answer's last byte is read 1 ms after its request and decoded 6 ms later (a
    // slow decode, longer than t3.5). Only lower bounds on time are asserted, so a loaded
    // machine cannot fail it.
    const T35 = interFrameMs(9600, 11);
    const DECODE_MS = 6;

    async function run(withReadTimes: boolean) {
      const config = modbusConfigSchema.parse({
        master: {
          slaves: [
            {
              type: 'serial',
              method: 'rtu',
              port: '/dev/ttyFAKE0',
              baudrate: 9600,
              parity: 'E',
              unitId: 1,
              deviceName: 'd1',
              pollPeriod: 60_000,
              timeseries: Array.from({ length: 12 }, (_, i) => ({
                tag: `r${i}`,
                type: '16uint',
                functionCode: 3,
                address: i,
              })),
            },
          ],
        },
      });
      const frames: Array<{ sent: number; read: number; decoded: number }> = [];
      let lastRead: number | undefined;
      const connection: ModbusConnection = {
        isOpen: true,
        open: () => Promise.resolve(),
        close: () => Promise.resolve(),
        onClose: () => {},
        readBits: () => Promise.reject(new Error('not used')),
        readRegisters: (_fc, _u, _a, count) => {
          const sent = performance.now();
          return new Promise((resolve) =>
            setTimeout(() => {
              const decoded = performance.now();
              // The answer was read DECODE_MS before it is decoded (never before it was asked).
              const read = Math.max(sent, decoded - DECODE_MS);
              lastRead = read;
              frames.push({ sent, read, decoded });
              resolve(new Array<number>(count).fill(1));
            }, 1 + DECODE_MS),
          );
        },
        writeCoils: () => Promise.reject(new Error('not used')),
        writeRegisters: () => Promise.reject(new Error('not used')),
        ...(withReadTimes ? { lastReadAt: () => lastRead } : {}),
      };
      let polled = false;
      const line = new Line({
        key: '/dev/ttyFAKE0',
        slaves: config.slaves,
        connection,
        sink: {
          reading: () => {
            polled = true;
          },
          failure: (d, kind, message) => assert.fail(`${d.name}: ${kind} ${message}`),
        },
        log: pino({ level: 'silent' }),
      });
      line.start();
      while (!polled) await new Promise((r) => setTimeout(r, 5));
      await line.stop();
      assert.equal(frames.length, 12);
      return frames;
    }

    it('starts a request no sooner than t3.5 after the last byte of the answer before it', async () => {
      for (const withReadTimes of [true, false]) {
        const frames = await run(withReadTimes);
        for (let i = 1; i < frames.length; i++) {
          // From the read when the port reports one, else from the decoded answer.
          const end = withReadTimes ? frames[i - 1].read : frames[i - 1].decoded;
          assert.ok(
            frames[i].sent >= end + T35,
            `frame ${i} (${withReadTimes ? 'read times' : 'no read times'}): sent ` +
              `${(frames[i].sent - end).toFixed(3)} ms after the answer before it`,
          );
        }
      }
    });

    it("counts t3.5 from the answer's read, not from the end of its decoding", async () => {
      const frames = await run(true);
      // The decode (6 ms) outlasts t3.5: the next request goes as soon as the answer is decoded.
      // Counting from the decode instead would put every request t3.5 after it.
      const early = frames.slice(1).filter((f, i) => f.sent < frames[i].decoded + T35).length;
      assert.ok(early >= (frames.length - 1) / 2, `${early} of ${frames.length - 1} early`);
    });
  });
});
