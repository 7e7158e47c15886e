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
  // `rs485.enabled: false` asks for RS-485 mode off: a port that has no such mode (or a gateway
  // that cannot ask) already is, so it is used and the fact logged, never refused.
  const switchOff = modes.rs485?.enabled === false;
  const wanted = [
    modes.rs485 && !switchOff && 'RS-485 mode',
    modes.lowLatency && 'low-latency mode',
  ].filter((w): w is string => typeof w === 'string');
  if (!native.available) {
    if (wanted.length > 0)
      throw new Error(`${wanted.join(' and ')} not available: ${native.reason}`);
    log?.warn({ port: path, reason: native.reason }, 'RS-485 mode left as the driver has it');
    return;
  }
  if (typeof fd !== 'number')
    throw new Error(`${wanted[0] ?? 'RS-485 mode'} not offered by ${path}: no descriptor`);
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
      const code = (err as NodeJS.ErrnoException).code;
      if (!switchOff || (code !== 'ENOTTY' && code !== 'ENOSYS')) throw refused('RS-485 mode', err);
      log?.info({ port: path, code }, 'RS-485 mode off: the driver has none');
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
