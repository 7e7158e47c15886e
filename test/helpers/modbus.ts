import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { type AddressInfo, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import modbusSerial from 'modbus-serial';
import type { TestGateway } from './gateway.js';

/**
 * Simulated Modbus slaves for tests: modbus-serial's own TCP and serial servers over a register
 * bank, and `socat` virtual serial pairs. A unit in `silent` stops answering (the request is
 * never called back), as a slave that lost power.
 */

export interface UnitTables {
  coils: boolean[];
  discrete: boolean[];
  holding: number[];
  input: number[];
}

export class RegisterBank {
  readonly units = new Map<number, UnitTables>();
  readonly silent = new Set<number>();
  /** Requests served, per unit. */
  readonly served = new Map<number, number>();
  /** Registers one read may ask for, per unit (as many devices: more is an exception 03). */
  readonly maxRegisters = new Map<number, number>();

  unit(id: number): UnitTables {
    let u = this.units.get(id);
    if (!u) {
      u = {
        coils: new Array<boolean>(256).fill(false),
        discrete: new Array<boolean>(256).fill(false),
        holding: new Array<number>(256).fill(0),
        input: new Array<number>(256).fill(0),
      };
      this.units.set(id, u);
    }
    return u;
  }

  /** The service vector of modbus-serial's servers (callback forms, so silence is possible). */
  vector() {
    type Cb<T> = (err: unknown, value?: T) => void;
    const illegal = { modbusErrorCode: 0x02, msg: 'Illegal data address' };
    const tooMany = { modbusErrorCode: 0x03, msg: 'Illegal data value' };
    const serve = <T>(unit: number, cb: Cb<T>, get: (u: UnitTables) => T | undefined | Error) => {
      if (this.silent.has(unit)) return;
      const u = this.units.get(unit);
      if (!u) return;
      this.served.set(unit, (this.served.get(unit) ?? 0) + 1);
      const v = get(u);
      if (v === undefined) cb(illegal);
      else if (v instanceof Error) cb(tooMany);
      else cb(null, v);
    };
    const range = <T>(list: T[], addr: number, len: number, unit: number) =>
      len > (this.maxRegisters.get(unit) ?? 125)
        ? new Error('too many')
        : addr + len <= list.length
          ? list.slice(addr, addr + len)
          : undefined;
    return {
      getCoil: (addr: number, unit: number, cb: Cb<boolean>) =>
        serve(unit, cb, (u) => u.coils[addr]),
      getDiscreteInput: (addr: number, unit: number, cb: Cb<boolean>) =>
        serve(unit, cb, (u) => u.discrete[addr]),
      getInputRegister: (addr: number, unit: number, cb: Cb<number>) =>
        serve(unit, cb, (u) => u.input[addr]),
      getHoldingRegister: (addr: number, unit: number, cb: Cb<number>) =>
        serve(unit, cb, (u) => u.holding[addr]),
      getMultipleInputRegisters: (addr: number, len: number, unit: number, cb: Cb<number[]>) =>
        serve(unit, cb, (u) => range(u.input, addr, len, unit)),
      getMultipleHoldingRegisters: (addr: number, len: number, unit: number, cb: Cb<number[]>) =>
        serve(unit, cb, (u) => range(u.holding, addr, len, unit)),
      setCoil: (addr: number, value: boolean, unit: number, cb: Cb<boolean>) =>
        serve(unit, cb, (u) => {
          u.coils[addr] = value;
          return true;
        }),
      setCoilArray: (addr: number, values: boolean[], unit: number, cb: Cb<boolean>) =>
        serve(unit, cb, (u) => {
          values.forEach((v, i) => {
            u.coils[addr + i] = v;
          });
          return true;
        }),
      setRegister: (addr: number, value: number, unit: number, cb: Cb<boolean>) =>
        serve(unit, cb, (u) => {
          u.holding[addr] = value;
          return true;
        }),
      setRegisterArray: (addr: number, values: number[], unit: number, cb: Cb<boolean>) =>
        serve(unit, cb, (u) => {
          values.forEach((v, i) => {
            u.holding[addr + i] = v;
          });
          return true;
        }),
    };
  }
}

const { ServerTCP, ServerSerial } = modbusSerial;

export interface RunningSlave {
  readonly port: number;
  close(): Promise<void>;
}

/** A Modbus TCP slave on 127.0.0.1, port 0 (or `port`). */
export async function startTcpSlave(bank: RegisterBank, port = 0): Promise<RunningSlave> {
  // modbus-serial reads port 0 as "the default, 502": take a free port first.
  if (port === 0) port = await freePort();
  const server = new ServerTCP(bank.vector() as never, { host: '127.0.0.1', port, unitID: 255 });
  await new Promise<void>((resolve, reject) => {
    server.once('initialized', () => resolve());
    server.once('serverError', reject);
  });
  const net = (server as unknown as { _server: Server })._server;
  return {
    port: (net.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const sock of server.socks.keys()) sock.destroy();
        server.close(() => resolve());
      }),
  };
}

export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

/** A Modbus RTU slave on a serial device (one end of a socat pair). */
export async function startRtuSlave(
  bank: RegisterBank,
  path: string,
  baudRate = 115200,
): Promise<{ close(): Promise<void> }> {
  const server = new ServerSerial(
    bank.vector() as never,
    {
      port: path,
      baudRate,
      unitID: 255,
      interval: 2,
    } as never,
  );
  await new Promise<void>((resolve, reject) => {
    server.once('initialized', () => resolve());
    server.once('serverError', reject);
    server.once('error', reject);
  });
  return {
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        setTimeout(resolve, 500).unref();
      }),
  };
}

/** A socat virtual serial pair: `a` and `b` are symlinks to two linked ptys. */
export class SocatPair {
  #proc: ChildProcess | undefined;

  private constructor(
    readonly dir: string,
    readonly a: string,
    readonly b: string,
  ) {}

  static async create(): Promise<SocatPair> {
    const dir = await mkdtemp(join(tmpdir(), 'edge-gw-tty-'));
    const pair = new SocatPair(dir, join(dir, 'a'), join(dir, 'b'));
    await pair.up();
    return pair;
  }

  /** Starts socat (again): the links come (back). */
  async up(): Promise<void> {
    const proc = spawn(
      'socat',
      [`pty,raw,echo=0,link=${this.a}`, `pty,raw,echo=0,link=${this.b}`],
      { stdio: 'ignore' },
    );
    this.#proc = proc;
    const deadline = Date.now() + 10_000;
    while (!(existsSync(this.a) && existsSync(this.b))) {
      if (proc.exitCode !== null) throw new Error(`socat exited with ${proc.exitCode}`);
      if (Date.now() > deadline) throw new Error('socat did not create the pair');
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Ends socat: both ptys disappear, as an unplugged USB adapter. */
  async down(): Promise<void> {
    const proc = this.#proc;
    this.#proc = undefined;
    if (!proc || proc.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once('exit', () => resolve());
      proc.kill('SIGTERM');
    });
  }

  async close(): Promise<void> {
    await this.down();
    await rm(this.dir, { recursive: true, force: true });
  }
}
/**
 * A `socat` bridge between two addresses (e.g. a pty and a TCP listener): what carries Modbus RTU
 * framing over TCP to modbus-serial's RTU server, which has no TCP side. `ready` is waited for before it is used (a pty link exists).
 */
export async function socatBridge(
  a: string,
  b: string,
  ready: () => boolean = () => true,
): Promise<{ close(): Promise<void> }> {
  const proc = spawn('socat', [a, b], { stdio: 'ignore' });
  const deadline = Date.now() + 10_000;
  while (!ready()) {
    if (proc.exitCode !== null) throw new Error(`socat exited with ${proc.exitCode}`);
    if (Date.now() > deadline) throw new Error(`socat ${a} ${b} did not come up`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    close: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill('SIGTERM');
      }),
  };
}

/** A connector's `GET /api/connector/{id}/status`, as the serial tests read it. */
export interface ConnectorStatus {
  running: boolean;
  lines: Array<{ line: string; open: boolean; reopens: number; lastError: string | null }>;
  devices: Array<{
    name: string;
    active: boolean;
    lastError: string | null;
    counters: { polls: number; timeouts: number; connectionErrors: number; decodeErrors: number };
  }>;
}

/** REST reads of connectors and their devices: `session` gives the gateway and a user's token. */
export function connectorApi(session: () => { t: TestGateway; token: string }) {
  return {
    async status(id: string): Promise<ConnectorStatus> {
      const { t, token } = session();
      const res = await t.api(`/api/connector/${id}/status`, { token });
      assert.equal(res.status, 200);
      return (await res.json()) as ConnectorStatus;
    },
    /** The latest value of each key of the device named `name` ({} while it does not exist). */
    async latest(name: string): Promise<Record<string, string>> {
      const { t, token } = session();
      const res = await t.api(`/api/tenant/devices?deviceName=${encodeURIComponent(name)}`, {
        token,
      });
      if (res.status !== 200) return {};
      const id = ((await res.json()) as { id: { id: string } }).id.id;
      const ts = await t.api(`/api/plugins/telemetry/DEVICE/${id}/values/timeseries`, { token });
      const body = (await ts.json()) as Record<string, Array<{ value: string }>>;
      return Object.fromEntries(Object.entries(body).map(([k, v]) => [k, v[0].value]));
    },
  };
}
