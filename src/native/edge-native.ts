import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The gateway's own native addon (native/edge_native.c, Node-API): the ioctls Node cannot make
 * and glibc's malloc_trim. `npm run build` compiles it beside the bundle (dist/edge_native.node)
 * when a C compiler is there; the single executable carries it (src/sea.ts). Without it the
 * gateway runs, and what needs it says so (`available: false` with the reason).
 */

/** Linux's struct serial_rs485 (linux/serial.h) as the configuration names it. */
export interface Rs485Settings {
  /** SER_RS485_ENABLED: the driver switches the transceiver's direction around each frame. */
  readonly enabled: boolean;
  /** SER_RS485_RTS_ON_SEND: RTS high while sending (else low). */
  readonly rtsOnSend: boolean;
  /** SER_RS485_RTS_AFTER_SEND: RTS high after sending (else low). */
  readonly rtsAfterSend: boolean;
  /** SER_RS485_RX_DURING_TX: receive while sending (hear its own frames). */
  readonly rxDuringTx: boolean;
  /** delay_rts_before_send, ms. */
  readonly delayRtsBeforeSend: number;
  /** delay_rts_after_send, ms. */
  readonly delayRtsAfterSend: number;
}

/** The addon's functions. A failed ioctl throws an Error with `code` (ENOTTY, EBADF) and `errno`. */
export interface EdgeNativeAddon {
  /** TIOCGRS485. */
  rs485Get(fd: number): Rs485Settings;
  /** TIOCSRS485; returns what the driver applied (it may clear flags or clamp delays). */
  rs485Set(fd: number, settings: Partial<Rs485Settings>): Rs485Settings;
  /** The struct serial_rs485 rs485Set passes to the kernel, as bytes. */
  rs485Encode(settings: Partial<Rs485Settings>): Buffer;
  /** ASYNC_LOW_LATENCY through TIOCGSERIAL/TIOCSSERIAL. */
  lowLatencySet(fd: number, on: boolean): void;
  /** glibc's malloc_trim(0): 1 when memory was handed back to the OS, else 0. */
  mallocTrim(): number;
}

export type EdgeNative =
  | { readonly available: true; readonly file: string; readonly addon: EdgeNativeAddon }
  | { readonly available: false; readonly reason: string };

export const ADDON_FILE = 'edge_native.node';

/**
 * Loads the addon from `file`, or from `edge_native.node` beside the bundle, or from dist/ when
 * running from source. Never throws: a missing or unloadable addon is `available: false`.
 */
export function loadEdgeNative(file?: string): EdgeNative {
  if (process.platform !== 'linux') {
    return {
      available: false,
      reason: `the native addon is built for Linux only, not ${process.platform}`,
    };
  }
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = file
    ? [file]
    : [join(here, ADDON_FILE), join(here, '..', '..', 'dist', ADDON_FILE)];
  const found = candidates.find((f) => existsSync(f));
  if (!found) {
    return {
      available: false,
      reason: `the native addon ${ADDON_FILE} was not built (no C compiler when the gateway was built)`,
    };
  }
  try {
    const module = { exports: {} };
    process.dlopen(module, found);
    return { available: true, file: found, addon: module.exports as EdgeNativeAddon };
  } catch (err) {
    return {
      available: false,
      reason: `the native addon ${found} did not load: ${(err as Error).message}`,
    };
  }
}
