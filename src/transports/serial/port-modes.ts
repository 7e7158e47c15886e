import type { BindingInterface, BindingPortInterface } from '@serialport/bindings-cpp';
import type { Logger } from 'pino';
import type { PortModes } from '../../connectors/port-modes.js';
import type { EdgeNative } from '../../native/edge-native.js';

/**
 * serialport's port layer with a port's modes (connectors/port-modes.ts) applied right after each
 * open, before the port is handed back: so before a first request, and again after every reopen
 * of an unplugged adapter. A driver that refuses (ENOTTY on a pty or a UART without RS-485
 * support) fails the open: the port is closed again and the caller reports it and retries as for
 * a port that is not there. Without modes the binding is returned as it is.
 */
export function withPortModes(
  base: BindingInterface,
  path: string,
  modes: PortModes,
  native: EdgeNative,
  log?: Logger,
): BindingInterface {
  if (modes.rs485 === undefined && !modes.lowLatency) return base;
  return {
    list: () => base.list(),
    async open(options) {
      const port = await base.open(options);
      try {
        applyPortModes(port, path, modes, native, log);
      } catch (err) {
        await port.close().catch(() => undefined);
        throw err;
      }
      return port;
    },
  };
}

function applyPortModes(
  port: BindingPortInterface,
  path: string,
  modes: PortModes,
  native: EdgeNative,
  log: Logger | undefined,
): void {
  const fd = (port as { fd?: unknown }).fd;
  const wanted = [modes.rs485 && 'RS-485 mode', modes.lowLatency && 'low-latency mode'].filter(
    (w): w is string => typeof w === 'string',
  );
  if (!native.available) throw new Error(`${wanted.join(' and ')} not available: ${native.reason}`);
  if (typeof fd !== 'number') throw new Error(`${wanted[0]} not offered by ${path}: no descriptor`);
  const { addon } = native;
  const refused = (what: string, err: unknown) =>
    new Error(
      `${what} not offered by ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  if (modes.rs485) {
    try {
      const applied = addon.rs485Set(fd, modes.rs485);
      log?.info({ port: path, rs485: applied }, 'RS-485 mode set');
    } catch (err) {
      throw refused('RS-485 mode', err);
    }
  }
  if (modes.lowLatency) {
    try {
      addon.lowLatencySet(fd, true);
    } catch (err) {
      throw refused('low-latency mode', err);
    }
  }
}
