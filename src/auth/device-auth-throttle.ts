import type { Logger } from 'pino';
import { LoginThrottle } from './login-throttle.js';

export interface DeviceAuthThrottleOptions {
  /** Failed authentications from one address within the window before it is throttled. */
  readonly maxFailures: number;
  readonly windowMs: number;
  /** How long the address stays throttled. */
  readonly throttleMs: number;
  /** How long a transport that can wait (MQTT) holds each refusal to a throttled address. */
  readonly delayMs: number;
  /** Bound of the table of addresses (oldest dropped first). */
  readonly maxEntries?: number;
  readonly log: Logger;
  readonly now?: () => number;
}

/**
 * Failed device authentications (MQTT CONNECT, CoAP token) per source address, with a bounded
 * table (issue 20). After `maxFailures` in the window the address is throttled: its further
 * failures are refused slowly (MQTT) or with "too many requests" (CoAP 4.29). Valid credentials
 * from a throttled address are still accepted, so that one misconfigured device cannot lock the
 * other devices behind the same address out. Logged once per throttled period, counted.
 */
export class DeviceAuthThrottle {
  readonly #table: LoginThrottle;
  #failures = 0;
  #throttled = 0;

  constructor(private readonly opts: DeviceAuthThrottleOptions) {
    this.#table = new LoginThrottle({
      maxFailures: opts.maxFailures,
      windowMs: opts.windowMs,
      lockoutMs: opts.throttleMs,
      maxEntries: opts.maxEntries ?? 10_000,
      now: opts.now,
    });
  }

  /**
   * Records a failed authentication; returns how long to hold the refusal (ms), or undefined
   * when the address is not throttled.
   */
  failed(address: string, transport: 'mqtt' | 'coap'): number | undefined {
    const before = this.#table.retryAfterSec(address) > 0;
    this.#failures++;
    this.#table.recordFailure(address);
    if (this.#table.retryAfterSec(address) === 0) return undefined;
    this.#throttled++;
    if (!before) {
      this.opts.log.warn(
        { address, transport, throttleSec: this.opts.throttleMs / 1000 },
        'device authentication failures throttled',
      );
    }
    return this.opts.delayMs;
  }

  /**
   * Failed device authentications and how many of them were throttled, since start; addresses
   * tracked now and dropped at the table's bound.
   */
  get counts(): { failures: number; throttled: number; entries: number; dropped: number } {
    return { failures: this.#failures, throttled: this.#throttled, ...this.#table.counts };
  }
}
