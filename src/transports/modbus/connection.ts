import type { Socket as UdpSocket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import modbusSerial from 'modbus-serial';
import type { Logger } from 'pino';
import type { ModbusSlave } from '../../connectors/modbus-config.js';
import type { EdgeNative } from '../../native/edge-native.js';
import { withPortModes } from '../serial/port-modes.js';
import { type BindingInterface, serialBinding } from './serial-binding.js';

/**
 * One Modbus connection (a serial port, or a TCP/UDP endpoint) through modbus-serial: the line
 * loop's only view of the wire. Requests carry the unit id; the line serializes them.
 */
export interface ModbusConnection {
  readonly isOpen: boolean;
  open(): Promise<void>;
  close(): Promise<void>;
  /** Function codes 1, 2: coils or discrete inputs, in address order. */
  readBits(
    fc: 1 | 2,
    unit: number,
    address: number,
    count: number,
    timeoutMs: number,
  ): Promise<boolean[]>;
  /** Function codes 3, 4. */
  readRegisters(
    fc: 3 | 4,
    unit: number,
    address: number,
    count: number,
    timeoutMs: number,
  ): Promise<number[]>;
  writeCoils(
    fc: 5 | 15,
    unit: number,
    address: number,
    values: readonly boolean[],
    timeoutMs: number,
  ): Promise<void>;
  writeRegisters(
    fc: 6 | 16,
    unit: number,
    address: number,
    values: readonly number[],
    timeoutMs: number,
  ): Promise<void>;
  /** Called once when an open connection closes (cable, USB adapter, peer). */
  onClose(listener: () => void): void;
  /**
   * When (performance.now()) the port last read bytes, if it knows: the last byte of an answer
   * was on the wire no later than the read that brought it in. Serial ports on Linux only.
   */
  lastReadAt?(): number | undefined;
}

/** The key that groups slaves on one connection: one port, or one `host:port` (reference §3). */
export function lineKey(s: ModbusSlave): string {
  if (s.type === 'serial') return s.serialPort;
  return `${s.type}${s.method === 'rtu' ? '+rtu' : ''}://${s.host}:${s.tcpPort}`;
}

// @NOTE: modbus-serial is CommonJS with `module.exports.default = module.exports`; under NodeNext
// its default import is the module object, whose `default` is the client class.
const ModbusRTU = modbusSerial.default;
type ModbusRTU = InstanceType<typeof ModbusRTU>;

const NO_ADDON: EdgeNative = { available: false, reason: 'no native addon was given' };

type Callback<T> = (err: Error | null, data?: T) => void;

export class ModbusSerialConnection implements ModbusConnection {
  #client: ModbusRTU | undefined;
  #closeListener: (() => void) | undefined;

  #lastReadAt: number | undefined;

  /**
   * @param binding serialport's port layer for a serial slave, given the callback for read times
   *   (default: serial-binding.ts; the bench passes others to compare).
   * @param modes the native addon and a logger, for the slave's `rs485` / `lowLatency`
   *   (port-modes.ts); without it a slave asking for them cannot open.
   */
  constructor(
    private readonly slave: ModbusSlave,
    private readonly binding: (onRead: (at: number) => void) => BindingInterface = serialBinding,
    private readonly modes?: { readonly native: EdgeNative; readonly log: Logger },
  ) {}

  lastReadAt(): number | undefined {
    return this.#lastReadAt;
  }

  get isOpen(): boolean {
    return this.#client?.isOpen === true;
  }

  async open(): Promise<void> {
    const s = this.slave;
    const client = new ModbusRTU();
    // A connect that hangs ends after the slave's timeout.
    client.setTimeout(s.timeoutMs);
    if (s.type === 'serial') {
      // @NOTE: modbus-serial hands these options to serialport's SerialPort as they are; its
      // types do not list `binding`, serialport's do. Reads and writes on the event loop, not
      // in the thread pool: serial-binding.ts.
      const options = {
        baudRate: s.baudrate,
        dataBits: s.bytesize,
        stopBits: s.stopbits,
        parity: s.parity,
        binding: withPortModes(
          this.binding((at) => {
            this.#lastReadAt = at;
          }),
          s.serialPort,
          s,
          this.modes?.native ?? NO_ADDON,
          this.modes?.log,
        ),
      };
      await client.connectRTUBuffered(s.serialPort, options);
    } else if (s.type === 'udp') {
      await openUdp(client, s);
    } else if (s.method === 'rtu') {
      // RTU frames (with their CRC) over TCP, as a serial-to-Ethernet converter carries them.
      // @NOTE: modbus-serial's TelnetPort; its "TcpRTUBuffered" port sends MBAP frames instead.
      await client.connectTelnet(s.host, { port: s.tcpPort });
    } else {
      await client.connectTCP(s.host, { port: s.tcpPort });
    }
    this.#client = client;
    let fired = false;
    const closed = () => {
      if (fired || this.#client !== client) return;
      fired = true;
      this.#closeListener?.();
    };
    client.on('close', closed);
    // An error on an open port (EIO of an unplugged adapter) may come without a close.
    client.on('error', closed);
  }

  close(): Promise<void> {
    const client = this.#client;
    this.#client = undefined;
    if (!client) return Promise.resolve();
    return new Promise((resolve) => {
      try {
        client.close(() => resolve());
      } catch {
        // Closing a port that the OS already removed throws; it is closed either way.
        resolve();
      }
      // A port whose close never calls back (removed device) must not hang stop().
      setTimeout(resolve, 1000).unref();
    });
  }

  onClose(listener: () => void): void {
    this.#closeListener = listener;
  }

  #call<T>(timeoutMs: number, run: (c: ModbusRTU, cb: Callback<T>) => void): Promise<T> {
    const client = this.#client;
    if (!client) return Promise.reject(new Error('Port Not Open'));
    client.setTimeout(timeoutMs);
    return new Promise<T>((resolve, reject) => {
      run(client, (err, data) => (err ? reject(toError(err)) : resolve(data as T)));
    });
  }

  readBits(
    fc: 1 | 2,
    unit: number,
    address: number,
    count: number,
    timeoutMs: number,
  ): Promise<boolean[]> {
    return this.#call<{ data: boolean[] }>(timeoutMs, (c, cb) =>
      fc === 1 ? c.writeFC1(unit, address, count, cb) : c.writeFC2(unit, address, count, cb),
    ).then((r) => r.data.slice(0, count));
  }

  readRegisters(
    fc: 3 | 4,
    unit: number,
    address: number,
    count: number,
    timeoutMs: number,
  ): Promise<number[]> {
    return this.#call<{ data: number[] }>(timeoutMs, (c, cb) =>
      fc === 3 ? c.writeFC3(unit, address, count, cb) : c.writeFC4(unit, address, count, cb),
    ).then((r) => r.data);
  }

  async writeCoils(
    fc: 5 | 15,
    unit: number,
    address: number,
    values: readonly boolean[],
    timeoutMs: number,
  ): Promise<void> {
    await this.#call<unknown>(timeoutMs, (c, cb) =>
      fc === 5
        ? c.writeFC5(unit, address, values[0], cb)
        : c.writeFC15(unit, address, [...values], cb),
    );
  }

  async writeRegisters(
    fc: 6 | 16,
    unit: number,
    address: number,
    values: readonly number[],
    timeoutMs: number,
  ): Promise<void> {
    await this.#call<unknown>(timeoutMs, (c, cb) =>
      fc === 6
        ? c.writeFC6(unit, address, values[0], cb)
        : c.writeFC16(unit, address, [...values], cb),
    );
  }
}

/**
 * Modbus UDP (MBAP frames in datagrams) through modbus-serial's UDP port, with three of its traps
 * closed:
 * - it keeps only replies whose source address equals the configured host *as written*, so a
 *   name (`localhost`, `plc-7.local`) never matches and every request times out: the host is
 *   resolved to an IPv4 address first (the port's socket is `udp4`);
 * - it reports itself open only once its socket is bound, which happens after `connectUDP` has
 *   called back, so a first request got "Port Not Open": we wait for `listening`;
 * - its socket has no `error` listener, so a socket error would end the process: one is added,
 *   and it closes the connection (the line reopens it).
 */
async function openUdp(client: ModbusRTU, s: ModbusSlave): Promise<void> {
  const { address } = await lookup(s.host, { family: 4 });
  await client.connectUDP(address, { port: s.tcpPort });
  // @NOTE: `_port._client` is the dgram socket of modbus-serial 8.0.25's ModbusUdpPort (private).
  const socket = (client as unknown as { _port: { _client: UdpSocket } })._port._client;
  socket.on('error', () => {
    try {
      socket.close();
    } catch {
      // already closed
    }
  });
  if (client.isOpen) return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.off('listening', listening);
      reject(new Error('UDP socket did not bind'));
    }, s.timeoutMs);
    const listening = () => {
      clearTimeout(timer);
      resolve();
    };
    socket.once('listening', listening);
  });
}

function toError(err: unknown): Error {
  if (err instanceof Error) return err;
  const e = err as { message?: unknown };
  return new Error(typeof e?.message === 'string' ? e.message : String(err));
}
