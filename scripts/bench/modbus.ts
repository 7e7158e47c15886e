/**
 * Benchmark of issue 17: `npm run bench:modbus [-- --slaves 100 --registers 20 --duration 20
 * --warmup 5 --serial-duration 10]`.
 *
 * 1. Modbus TCP: `--slaves` slaves (one TCP endpoint each, modbus-serial's server, in a child
 *    process so their CPU is not counted), each polled every second for `--registers` 16-bit
 *    registers by the gateway bundle in its own process, as IoT Gateway entries: one 16-bit entry
 *    (one request) per register, the worst case, and side by side in the same run the same
 *    registers as 64-bit entries (one request per 4 registers). Prints the gateway's CPU in
 *    % of one core (target ≤ 15 %) and the values stored per second.
 * 2. A serial bus at 115,200 baud (8N1, or 8E1 with `--bits 11`): the master's poll loop (this
 *    tree's, and `--baseline <checkout>`'s side by side) polls 10-register reads back to back
 *    against a simulated slave that answers after the wire time of the request, the t3.5
 *    silence and the answer (ptys carry bytes at once). Two fixtures (`--fixtures socat,pty`):
 *    - socat: two ptys joined by socat, the slave in Node behind serialport (the fixture of the
 *      earlier measurements; its own hops are charged to the master);
 *    - pty: scripts/bench/rtu-slave.py holds the pty master itself (one pty, no thread pool).
 *    `--bindings event-loop,stock` runs this tree's master on serial-binding.ts and on
 *    serialport's stock binding. Prints requests/s against the bus's theoretical rate (target
 *    ≥ 90 %) and where each request's time goes, from both processes' CLOCK_MONOTONIC stamps.
 */

import { type ChildProcess, fork, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { autoDetect } from '@serialport/bindings-cpp';
import modbusSerial from 'modbus-serial';
import { pino } from 'pino';
import { SerialPort } from 'serialport';
import type { modbusConfigSchema } from '../../src/connectors/modbus-config.js';
import type { ModbusSerialConnection } from '../../src/transports/modbus/connection.js';
import type { ModbusMaster } from '../../src/transports/modbus/modbus-master.js';
import {
  type BindingInterface,
  serialBinding,
} from '../../src/transports/modbus/serial-binding.js';
import {
  adminToken,
  buildBundle,
  cpuSeconds,
  loadAverage,
  machineCpu,
  startGatewayProcess,
} from './support.js';

const BAUD = 115_200;
const GAP_MS = 1.75; // Modbus over serial line §2.5.1.1, above 19,200 baud
const READ_REGS = 10;
const REQ_BYTES = 8;
const RESP_BYTES = 5 + 2 * READ_REGS;
/** Wire time of `n` characters of `bits` bits (start + 8 data + parity + stop bits). */
const charMs = (n: number, bits: number) => (n * bits * 1000) / BAUD;

// ---------------------------------------------------------------------------------------------
// Child processes: the simulated slaves.

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as AddressInfo;
  await new Promise((r) => srv.close(r));
  return port;
}

async function tcpSlaves(count: number): Promise<void> {
  const { ServerTCP } = modbusSerial;
  const ports: number[] = [];
  const vector = {
    getMultipleHoldingRegisters: (addr: number, len: number) =>
      Array.from({ length: len }, (_, i) => (addr + i) * 3),
    getHoldingRegister: (addr: number) => addr * 3,
  };
  for (let i = 0; i < count; i++) {
    const port = await freePort();
    const server = new ServerTCP(vector as never, { host: '127.0.0.1', port, unitID: 255 });
    await new Promise<void>((resolve, reject) => {
      server.once('initialized', () => resolve());
      server.once('serverError', reject);
    });
    ports.push(port);
  }
  process.send?.({ kind: 'ready', ports });
}

function crc16(buf: Buffer): number {
  let crc = 0xffff;
  for (const byte of buf) {
    crc ^= byte;
    for (let i = 0; i < 8; i++) crc = crc & 1 ? (crc >>> 1) ^ 0xa001 : crc >>> 1;
  }
  return crc;
}

/** Waits until `until` (performance.now()) with a timer, then yields for the last millisecond. */
async function waitUntil(until: number): Promise<void> {
  const left = until - performance.now();
  if (left > 1.5) await new Promise((r) => setTimeout(r, Math.floor(left - 1)));
  while (performance.now() < until) await new Promise((r) => setImmediate(r));
}

/**
 * The "socat" fixture (the one of the earlier measurements): an RTU slave on the far end of a
 * socat pty pair, through serialport, that answers function code 3 after the wire time of the
 * request, the slave's turnaround (t3.5) and the answer, counted from the request's arrival.
 * Between the master and this slave: two ptys, socat, and serialport's thread-pool read and
 * write in this process. Reports (on SIGTERM, over IPC) when each request arrived and each
 * answer was handed to serialport, in process.hrtime nanoseconds.
 */
async function rtuSlave(path: string, bits: number): Promise<void> {
  const port = new SerialPort({ path, baudRate: BAUD, autoOpen: false });
  await new Promise<void>((resolve, reject) => port.open((e) => (e ? reject(e) : resolve())));
  const arrive: string[] = [];
  const sent: string[] = [];
  let buf = Buffer.alloc(0);
  let busy = false;
  const serve = async () => {
    if (busy) return;
    busy = true;
    while (buf.length >= REQ_BYTES) {
      const req = buf.subarray(0, REQ_BYTES);
      buf = buf.subarray(REQ_BYTES);
      const stamp = process.hrtime.bigint();
      const arrived = performance.now();
      const count = req.readUInt16BE(4);
      const resp = Buffer.alloc(5 + 2 * count);
      resp[0] = req[0];
      resp[1] = 3;
      resp[2] = 2 * count;
      for (let i = 0; i < count; i++) resp.writeUInt16BE(i, 3 + 2 * i);
      resp.writeUInt16LE(crc16(resp.subarray(0, resp.length - 2)), resp.length - 2);
      // The request was on the wire before it arrived here; its answer takes its own time.
      await waitUntil(arrived + charMs(REQ_BYTES, bits) + GAP_MS + charMs(resp.length, bits));
      port.write(resp);
      arrive.push(String(stamp));
      sent.push(String(process.hrtime.bigint()));
    }
    busy = false;
  };
  port.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    void serve();
  });
  process.on('message', () => {
    process.send?.({ arrive, sent }, () => process.exit(0));
  });
  process.send?.({ kind: 'ready' });
}

// ---------------------------------------------------------------------------------------------
// The benchmark.

function child(args: string[]): Promise<{ proc: ChildProcess; msg: { ports?: number[] } }> {
  const proc = fork(fileURLToPath(import.meta.url), args, { execArgv: ['--import', 'tsx'] });
  return new Promise((resolve, reject) => {
    proc.once('message', (msg) => resolve({ proc, msg: msg as { ports?: number[] } }));
    proc.once('exit', (code) => reject(new Error(`slave process exited with ${code}`)));
  });
}

function slave(i: number, port: number, registers: number, perRegister: boolean) {
  return {
    host: '127.0.0.1',
    port,
    type: 'tcp',
    method: 'socket',
    unitId: 1,
    deviceName: `bench-${perRegister ? 'r' : 'b'}-${i}`,
    deviceType: 'bench-meter',
    timeout: 2,
    retries: 1,
    pollPeriod: 1000,
    byteOrder: 'BIG',
    wordOrder: 'BIG',
    timeseries: perRegister
      ? Array.from({ length: registers }, (_, r) => ({
          tag: `r${r}`,
          type: '16uint',
          functionCode: 3,
          objectsCount: 1,
          address: r,
        }))
      : Array.from({ length: Math.ceil(registers / 4) }, (_, r) => ({
          tag: `q${r}`,
          type: '64uint',
          functionCode: 3,
          objectsCount: 4,
          address: 4 * r,
        })),
  };
}

async function tcpBench(opts: {
  slaves: number;
  registers: number;
  durationS: number;
  warmupS: number;
  /** Rebuild the bundle first (default); `--no-build` runs the one in dist/. */
  build: boolean;
}): Promise<void> {
  const slaves = await child(['--tcp-slaves', String(opts.slaves)]);
  const ports = slaves.msg.ports ?? [];
  if (opts.build) buildBundle();
  try {
    for (const perRegister of [true, false]) {
      const gw = await startGatewayProcess();
      try {
        const token = await adminToken(gw.baseUrl);
        const res = await fetch(`${gw.baseUrl}/api/connector`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-authorization': `Bearer ${token}` },
          body: JSON.stringify({
            name: 'bench',
            type: 'MODBUS',
            enabled: true,
            configuration: {
              master: {
                slaves: ports.map((p, i) => slave(i, p, opts.registers, perRegister)),
              },
            },
          }),
        });
        if (res.status !== 200) throw new Error(`connector: ${res.status} ${await res.text()}`);
        const { id } = (await res.json()) as { id: string };
        const status = async () => {
          const s = await fetch(`${gw.baseUrl}/api/connector/${id}/status`, {
            headers: { 'x-authorization': `Bearer ${token}` },
          });
          return (await s.json()) as {
            devices: Array<{ counters: { polls: number; timeouts: number } }>;
            lines: Array<{ overruns: number }>;
          };
        };
        const polls = async () =>
          (await status()).devices.reduce((n, d) => n + d.counters.polls, 0);
        await new Promise((r) => setTimeout(r, opts.warmupS * 1000));
        const cpu0 = await cpuSeconds(gw.pid);
        const m0 = machineCpu();
        const p0 = await polls();
        const t0 = performance.now();
        await new Promise((r) => setTimeout(r, opts.durationS * 1000));
        const cpu1 = await cpuSeconds(gw.pid);
        const m1 = machineCpu();
        const p1 = await polls();
        const wall = (performance.now() - t0) / 1000;
        const s = await status();
        const timeouts = s.devices.reduce((n, d) => n + d.counters.timeouts, 0);
        const overruns = s.lines.reduce((n, l) => n + l.overruns, 0);
        const pollsPerS = (p1 - p0) / wall;
        console.log(
          [
            `modbus tcp, ${opts.slaves} slaves × ${opts.registers} registers / 1 s, ` +
              (perRegister
                ? `one request per register (${opts.slaves * opts.registers} req/s nominal)`
                : `${opts.registers / 4} 4-register (64-bit) requests per slave (${(opts.slaves * opts.registers) / 4} req/s nominal)`),
            `  gateway CPU ${(((cpu1 - cpu0) / wall) * 100).toFixed(1)} % of one core ` +
              `(target ≤ 15 %) over ${wall.toFixed(1)} s`,
            `  polls ${pollsPerS.toFixed(1)}/s (nominal ${opts.slaves}), ` +
              `values stored ${(pollsPerS * (perRegister ? opts.registers : opts.registers / 4)).toFixed(0)}/s, timeouts ${timeouts}, overruns ${overruns}`,
            `  machine busy ${(((m1.busy - m0.busy) / (m1.total - m0.total)) * 100).toFixed(0)} % ` +
              `(load average ${loadAverage()})`,
          ].join('\n'),
        );
      } finally {
        await gw.close();
      }
    }
  } finally {
    slaves.proc.kill();
  }
}

type Fixture = 'socat' | 'pty';

/** A simulated slave on a fresh pty; `path` is the port the master opens. */
interface RtuFixture {
  readonly path: string;
  /** Stops the slave; when each request arrived and each answer left, in hrtime ns. */
  stop(): Promise<{ arrive: bigint[]; sent: bigint[] }>;
}

async function socatFixture(bits: number): Promise<RtuFixture> {
  const dir = await mkdtemp(join(tmpdir(), 'edge-gw-bench-tty-'));
  const a = join(dir, 'a');
  const b = join(dir, 'b');
  const socat = spawn('socat', [`pty,raw,echo=0,link=${a}`, `pty,raw,echo=0,link=${b}`], {
    stdio: 'ignore',
  });
  while (!(existsSync(a) && existsSync(b))) await new Promise((r) => setTimeout(r, 20));
  const slave = await child(['--rtu-slave', b, '--bits', String(bits)]);
  return {
    path: a,
    async stop() {
      const stamps = new Promise<{ arrive: string[]; sent: string[] }>((r) =>
        slave.proc.once('message', (m) => r(m as { arrive: string[]; sent: string[] })),
      );
      slave.proc.send('stop');
      const { arrive, sent } = await stamps;
      socat.kill();
      await rm(dir, { recursive: true, force: true });
      return { arrive: arrive.map(BigInt), sent: sent.map(BigInt) };
    },
  };
}

/** scripts/bench/rtu-slave.py: the slave holds the pty master itself (no socat, no thread pool). */
async function ptyFixture(bits: number): Promise<RtuFixture> {
  const script = fileURLToPath(new URL('./rtu-slave.py', import.meta.url));
  const proc = spawn(
    'python3',
    [script, '--baud', String(BAUD), '--bits', String(bits), '--gap-ms', String(GAP_MS)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  proc.stdout.setEncoding('utf8');
  proc.stdout.on('data', (d: string) => {
    out += d;
  });
  const path = await new Promise<string>((resolve, reject) => {
    const check = () => {
      const m = /^ready (\S+)\n/.exec(out);
      if (m) {
        proc.stdout.off('data', check);
        out = out.slice(m[0].length);
        resolve(m[1]);
      }
    };
    proc.stdout.on('data', check);
    proc.once('exit', (code) => reject(new Error(`rtu-slave.py exited with ${code}`)));
  });
  return {
    path,
    async stop() {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
      const { arrive, sent } = JSON.parse(out) as { arrive: number[]; sent: number[] };
      return { arrive: arrive.map(BigInt), sent: sent.map(BigInt) };
    },
  };
}

/** The master's modules, from this tree or from `root` (another checkout, for a before/after). */
async function masterModules(root: string | undefined) {
  const base = root
    ? new URL(`file://${resolve(root)}/src/`)
    : new URL('../../src/', import.meta.url);
  const [config, connection, master] = await Promise.all([
    import(new URL('connectors/modbus-config.ts', base).href),
    import(new URL('transports/modbus/connection.ts', base).href),
    import(new URL('transports/modbus/modbus-master.ts', base).href),
  ]);
  return {
    modbusConfigSchema: config.modbusConfigSchema as typeof modbusConfigSchema,
    ModbusSerialConnection: connection.ModbusSerialConnection as typeof ModbusSerialConnection,
    ModbusMaster: master.ModbusMaster as typeof ModbusMaster,
  };
}

type BindingName = 'event-loop' | 'stock';

/** Stamps (hrtime ns) taken at serialport's port layer: write called and done, each read's data. */
interface PortStamps {
  writeCalled: bigint[];
  writeDone: bigint[];
  readDone: bigint[];
}

/** `inner` with each port's write and read stamped into `stamps`. */
function stamped(inner: BindingInterface, stamps: PortStamps): BindingInterface {
  return {
    list: () => inner.list(),
    async open(options: Parameters<BindingInterface['open']>[0]) {
      const port = await inner.open(options);
      return new Proxy(port, {
        get(target, key) {
          if (key === 'write') {
            return async (buffer: Buffer) => {
              stamps.writeCalled.push(process.hrtime.bigint());
              await target.write(buffer);
              stamps.writeDone.push(process.hrtime.bigint());
            };
          }
          if (key === 'read') {
            return async (buffer: Buffer, offset: number, length: number) => {
              const r = await target.read(buffer, offset, length);
              stamps.readDone.push(process.hrtime.bigint());
              return r;
            };
          }
          const v = Reflect.get(target, key, target);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
    },
  };
}

/** The first stamp in `xs` at or after `from` and before `to`, else undefined. */
function stampIn(xs: bigint[], from: bigint, to: bigint): bigint | undefined {
  for (const x of xs) if (x >= from && x <= to) return x;
  return undefined;
}

const pct = (xs: number[], p: number) =>
  xs.length ? [...xs].sort((x, y) => x - y)[Math.floor(p * (xs.length - 1))].toFixed(3) : '-';
const spread = (xs: number[]) => `p10 ${pct(xs, 0.1)} p50 ${pct(xs, 0.5)} p90 ${pct(xs, 0.9)}`;

async function serialBench(opts: {
  durationS: number;
  fixture: Fixture;
  bits: 10 | 11;
  /** Another checkout whose master (connection, line) runs instead of this tree's. */
  root?: string;
  /** serialport's port layer for this tree's master (a baseline uses its own). */
  binding: BindingName;
  label: string;
}): Promise<void> {
  const { bits } = opts;
  const mods = await masterModules(opts.root);
  const fixture = opts.fixture === 'pty' ? await ptyFixture(bits) : await socatFixture(bits);
  const cycleMs = charMs(REQ_BYTES, bits) + charMs(RESP_BYTES, bits) + 2 * GAP_MS;
  const theoretical = 1000 / cycleMs;
  let readings = 0;
  const config = mods.modbusConfigSchema.parse({
    master: {
      // Several slaves always due: the loop runs back to back, as a busy bus does.
      slaves: Array.from({ length: 4 }, (_, i) => ({
        type: 'serial',
        method: 'rtu',
        port: fixture.path,
        baudrate: BAUD,
        // 8N1 (10 bits) or 8E1 (11 bits): the master's t3.5 and the fixture's byte time agree.
        parity: bits === 11 ? 'E' : 'N',
        unitId: i + 1,
        deviceName: `s${i}`,
        pollPeriod: 10,
        timeout: 1,
        retries: 0,
        byteOrder: 'BIG',
        wordOrder: 'BIG',
        timeseries: [
          { tag: 'v', type: '16uint', functionCode: 3, objectsCount: READ_REGS, address: 0 },
        ],
      })),
    },
  });
  const failures: string[] = [];
  // Where each request's time goes: in flight (request written → answer decoded: the wire, the
  // slave, and the pty and serialport hops on both sides) and idle (answer → next request: the
  // poll loop and its t3.5 gap). In hrtime ns, the clock the fixtures stamp with.
  const spans: Array<readonly [bigint, bigint]> = [];
  let measuring = false;
  const portStamps: PortStamps = { writeCalled: [], writeDone: [], readDone: [] };
  const binding = (onRead: (at: number) => void) =>
    stamped(opts.binding === 'stock' ? autoDetect() : serialBinding(onRead), portStamps);
  const master = new mods.ModbusMaster({
    config,
    connect: (s) => {
      const c = opts.root
        ? new mods.ModbusSerialConnection(s)
        : new mods.ModbusSerialConnection(s, binding);
      const read = c.readRegisters.bind(c);
      c.readRegisters = async (...args) => {
        const start = process.hrtime.bigint();
        const regs = await read(...args);
        if (measuring) spans.push([start, process.hrtime.bigint()]);
        return regs;
      };
      return c;
    },
    log: pino({ level: 'warn' }),
    sink: {
      reading: () => {
        readings++;
      },
      failure: (_d, kind, message) => {
        failures.push(`${kind}: ${message}`);
      },
    },
  });
  master.start();
  await new Promise((r) => setTimeout(r, 2000));
  const r0 = readings;
  measuring = true;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, opts.durationS * 1000));
  const wall = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const rate = (readings - r0) / wall;
  measuring = false;
  await master.stop();
  const stamps = await fixture.stop();
  const ms = (ns: bigint) => Number(ns) / 1e6;
  const inFlight = spans.map(([a, b]) => ms(b - a));
  const idle = spans.slice(1).map(([a], i) => ms(a - spans[i][1]));
  // Each request against the fixture's stamps: master → slave (the master's write, the ptys, the
  // slave's read), the slave's hold (wire time plus how late it answered), slave → master. With
  // this tree's master, the port layer's stamps split the master's part: modbus-serial and the
  // stream before the port's write, the write itself, the answer's read, then the decode.
  const there: number[] = [];
  const hold: number[] = [];
  const back: number[] = [];
  const beforeWrite: number[] = [];
  const writeToSlave: number[] = [];
  const slaveToRead: number[] = [];
  const decode: number[] = [];
  let j = 0;
  // Stamps are in time order; drop the ones before each span as we go.
  const upTo = (xs: bigint[], t: bigint) => {
    while (xs.length && xs[0] < t) xs.shift();
  };
  for (const [a, b] of spans) {
    while (j < stamps.arrive.length && stamps.arrive[j] < a) j++;
    if (j >= stamps.arrive.length || stamps.sent[j] > b) continue;
    const arrive = stamps.arrive[j];
    const sent = stamps.sent[j];
    there.push(ms(arrive - a));
    hold.push(ms(sent - arrive));
    back.push(ms(b - sent));
    upTo(portStamps.writeCalled, a);
    upTo(portStamps.readDone, sent);
    const w = stampIn(portStamps.writeCalled, a, arrive);
    const r = stampIn(portStamps.readDone, sent, b);
    if (w !== undefined && r !== undefined) {
      beforeWrite.push(ms(w - a));
      writeToSlave.push(ms(arrive - w));
      slaveToRead.push(ms(r - sent));
      decode.push(ms(b - r));
    }
  }
  const wireMs = charMs(REQ_BYTES, bits) + GAP_MS + charMs(RESP_BYTES, bits);
  console.log(
    [
      `modbus rtu [${opts.label}: ${opts.fixture} fixture, master ${opts.root ?? `this tree, ${opts.binding} binding`}], ` +
        `${BAUD} baud ${bits === 11 ? '8E1' : '8N1'}, ${READ_REGS}-register reads ` +
        `(${REQ_BYTES} + ${RESP_BYTES} bytes, 2 × ${GAP_MS} ms gaps: ${cycleMs.toFixed(3)} ms per request)`,
      `  ${rate.toFixed(1)} requests/s of ${theoretical.toFixed(1)} theoretical: ` +
        `${((rate / theoretical) * 100).toFixed(1)} % (target ≥ 90 %); mean ${(1000 / rate).toFixed(3)} ms a request`,
      `  in flight (request → answer; wire ${wireMs.toFixed(3)} ms): ${spread(inFlight)} ms`,
      `    master → slave (master's write, ptys, slave's read): ${spread(there)} ms`,
      ...(beforeWrite.length
        ? [
            `      modbus-serial + stream, up to the port's write: ${spread(beforeWrite)} ms`,
            `      port's write → slave has it (syscall, ptys, slave wakes): ${spread(writeToSlave)} ms`,
          ]
        : []),
      `    slave's hold (wire ${wireMs.toFixed(3)} ms + its lateness): ${spread(hold)} ms`,
      `    slave → master (slave's write, ptys, master's read, decode): ${spread(back)} ms`,
      ...(slaveToRead.length
        ? [
            `      slave wrote → port's read returns (ptys, wakeup, read): ${spread(slaveToRead)} ms`,
            `      port's read → answer decoded (stream, modbus-serial, promise): ${spread(decode)} ms`,
          ]
        : []),
      `  idle (answer → next request; t3.5 ${GAP_MS} ms): ${spread(idle)} ms`,
      `  master CPU ${(((cpu.user + cpu.system) / 1e6 / wall) * 100).toFixed(1)} % of one core, ` +
        `failures ${failures.length}${failures.length ? ` (first: ${failures[0]})` : ''}`,
      `  (load average ${loadAverage()})`,
    ].join('\n'),
  );
}

const { values } = parseArgs({
  options: {
    slaves: { type: 'string', default: '100' },
    registers: { type: 'string', default: '20' },
    duration: { type: 'string', default: '20' },
    warmup: { type: 'string', default: '5' },
    'serial-duration': { type: 'string', default: '10' },
    'tcp-slaves': { type: 'string' },
    'rtu-slave': { type: 'string' },
    bits: { type: 'string', default: '10' },
    fixtures: { type: 'string', default: 'socat,pty' },
    baseline: { type: 'string' },
    'serial-runs': { type: 'string', default: '1' },
    bindings: { type: 'string', default: 'event-loop,stock' },
    only: { type: 'string' },
    'no-build': { type: 'boolean', default: false },
  },
});

if (values['tcp-slaves']) {
  await tcpSlaves(Number(values['tcp-slaves']));
} else if (values['rtu-slave']) {
  await rtuSlave(values['rtu-slave'], Number(values.bits));
} else {
  console.log(`bench:modbus ${new Date().toISOString()} (load average ${loadAverage()})`);
  if (values.only !== 'serial') {
    await tcpBench({
      slaves: Number(values.slaves),
      registers: Number(values.registers),
      durationS: Number(values.duration),
      warmupS: Number(values.warmup),
      build: !values['no-build'],
    });
  }
  if (values.only !== 'tcp') {
    // Side by side: each fixture with this tree's master, and with --baseline's when given,
    // alternated run after run.
    const fixtures = values.fixtures.split(',') as Fixture[];
    const bits: 10 | 11 = Number(values.bits) === 11 ? 11 : 10;
    for (let run = 1; run <= Number(values['serial-runs']); run++) {
      for (const fixture of fixtures) {
        const base = { durationS: Number(values['serial-duration']), fixture, bits };
        if (values.baseline) {
          await serialBench({
            ...base,
            root: values.baseline,
            binding: 'stock',
            label: `run ${run} baseline`,
          });
        }
        for (const binding of values.bindings.split(',') as BindingName[]) {
          await serialBench({ ...base, binding, label: `run ${run}` });
        }
      }
    }
  }
}
