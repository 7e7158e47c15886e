import { z } from 'zod';
import type { Rs485Settings } from '../native/edge-native.js';

/**
 * Per-port modes of a serial port beyond its line settings, for the serial line connector's ports
 * and Modbus serial slaves (our own extension of the IoT Gateway's format; docs/connectors.md):
 *
 * - `rs485`: Linux's RS-485 mode (ioctl TIOCSRS485, struct serial_rs485 of linux/serial.h), names
 *   as the kernel's flags. The driver then drives RTS as the transceiver's direction (DE) pin
 *   around every frame. Applied right after the port opens, and after every reopen.
 * - `lowLatency`: ASYNC_LOW_LATENCY (TIOCSSERIAL); on an FTDI USB adapter its latency timer
 *   drops from 16 ms to 1 ms.
 *
 * A port whose driver refuses either is not used: it is reported and retried as an unplugged one.
 */
/** Linux's struct serial_rs485 by the kernel's flag names (native/edge-native.ts documents each). */
export type Rs485Config = Rs485Settings;

export interface PortModes {
  /** Absent: the port's RS-485 settings are left as they are. */
  readonly rs485?: Rs485Config;
  readonly lowLatency: boolean;
}

/** The kernel clamps both delays to 100 ms (RS485_MAX_RTS_DELAY); we refuse more. */
const delay = z
  .number()
  .int('must be an integer (ms)')
  .min(0, 'must be 0 to 100 (ms)')
  .max(100, 'must be 0 to 100 (ms)')
  .default(0);

export const rs485Schema = z.strictObject(
  {
    enabled: z.boolean().default(true),
    rtsOnSend: z.boolean().default(true),
    rtsAfterSend: z.boolean().default(false),
    rxDuringTx: z.boolean().default(false),
    delayRtsBeforeSend: delay,
    delayRtsAfterSend: delay,
  },
  { error: (i) => (i.code === 'unrecognized_keys' ? undefined : 'must be an object') },
);

export const lowLatencySchema = z.boolean().default(false);
