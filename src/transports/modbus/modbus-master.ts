import type { Logger } from 'pino';
import type { ModbusConnectorConfig, ModbusSlave } from '../../connectors/modbus-config.js';
import type {
  ConnectorRuntime,
  ConnectorSink,
  DeviceRequest,
  LineStatus,
} from '../../connectors/types.js';
import type { EdgeNative } from '../../native/edge-native.js';
import { lineKey, type ModbusConnection, ModbusSerialConnection } from './connection.js';
import { Line, type LineClock } from './line.js';

export interface ModbusMasterDeps {
  readonly config: ModbusConnectorConfig;
  readonly sink: ConnectorSink;
  readonly log: Logger;
  readonly clock?: LineClock;
  /** Builds the connection of a line (default: modbus-serial). */
  readonly connect?: (first: ModbusSlave) => ModbusConnection;
  readonly backoffCapMs?: number;
  /** The native addon, for serial slaves' `rs485` / `lowLatency`. */
  readonly native?: EdgeNative;
}

/**
 * A Modbus master connector: the configured slaves grouped by connection (one serial port, one
 * TCP/UDP `host:port`), one `Line` each. Lines run in parallel; the slaves of a line share it.
 */
export class ModbusMaster implements ConnectorRuntime {
  readonly #lines: Line[];

  constructor(deps: ModbusMasterDeps) {
    const groups = new Map<string, ModbusSlave[]>();
    for (const slave of deps.config.slaves) {
      const key = lineKey(slave);
      const group = groups.get(key);
      if (group) group.push(slave);
      else groups.set(key, [slave]);
    }
    const { native, log } = deps;
    const connect =
      deps.connect ??
      ((s: ModbusSlave) =>
        new ModbusSerialConnection(s, undefined, native ? { native, log } : undefined));
    this.#lines = [...groups].map(
      ([key, slaves]) =>
        new Line({
          key,
          slaves,
          connection: connect(slaves[0]),
          sink: deps.sink,
          log: deps.log,
          clock: deps.clock,
          backoffCapMs: deps.backoffCapMs,
        }),
    );
  }

  start(): void {
    for (const line of this.#lines) line.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.#lines.map((l) => l.stop()));
  }

  lines(): LineStatus[] {
    return this.#lines.map((l) => l.status());
  }

  request(deviceName: string, req: DeviceRequest): Promise<unknown> {
    const line = this.#lines.find((l) => l.has(deviceName));
    if (!line) return Promise.reject(new Error(`no slave named ${deviceName}`));
    return line.request(deviceName, req);
  }
}
