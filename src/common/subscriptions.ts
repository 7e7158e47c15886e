/**
 * Transport-agnostic device subscriptions and long polls. A device session (an HTTP long poll
 * today, an MQTT subscription or a CoAP observation later) subscribes to what a domain pushes to
 * one device; unsubscribing leaves nothing behind (no empty sets, timers or abort listeners).
 */

import type { Logger } from 'pino';

export interface Subscription {
  /** False once unsubscribed (by the holder or because a one-shot wait completed). */
  readonly active: boolean;
  /** Idempotent. */
  unsubscribe(): void;
}

/** Listeners per device id. */
export class DeviceSubscribers<T> {
  readonly #byDevice = new Map<string, Set<(msg: T) => void>>();

  constructor(private readonly log?: Logger) {}

  add(deviceId: string, listener: (msg: T) => void): Subscription {
    let set = this.#byDevice.get(deviceId);
    if (!set) {
      set = new Set();
      this.#byDevice.set(deviceId, set);
    }
    const own = set;
    // A wrapper per call, so one function subscribed twice is two subscriptions.
    const entry = (msg: T) => listener(msg);
    own.add(entry);
    let active = true;
    const byDevice = this.#byDevice;
    return {
      get active() {
        return active;
      },
      unsubscribe() {
        if (!active) return;
        active = false;
        own.delete(entry);
        if (own.size === 0 && byDevice.get(deviceId) === own) byDevice.delete(deviceId);
      },
    };
  }

  has(deviceId: string): boolean {
    return this.#byDevice.has(deviceId);
  }

  /** Calls each listener of the device; a throwing listener is logged and skipped. */
  publish(deviceId: string, msg: T): number {
    const set = this.#byDevice.get(deviceId);
    if (!set) return 0;
    let n = 0;
    for (const listener of [...set]) {
      try {
        listener(msg);
        n++;
      } catch (err) {
        this.log?.error({ err, deviceId }, 'subscriber failed');
      }
    }
    return n;
  }

  /** Total number of active subscriptions (for leak checks and metrics). */
  get size(): number {
    let n = 0;
    for (const set of this.#byDevice.values()) n += set.size;
    return n;
  }

  clear(): void {
    this.#byDevice.clear();
  }
}

export type PollOutcome<T> =
  | { readonly kind: 'value'; readonly value: T }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'aborted' }
  /** Ended by the server: the gateway is stopping, or the device was deleted. */
  | { readonly kind: 'closed'; readonly reason: 'stopping' | 'deleted' };

export interface PollOptions {
  readonly deviceId: string;
  readonly timeoutMs: number;
  /** Aborted when the client goes away; the wait then ends and cleans up. */
  readonly signal?: AbortSignal;
}

/**
 * One-shot waits with a timeout: "give me the next thing for this device". Each wait owns
 * exactly one timer, one subscription and one abort listener, all released when it ends.
 */
export class LongPolls {
  readonly #active = new Map<(reason: 'stopping' | 'deleted') => void, string>();
  #closed = false;

  /**
   * `start` subscribes with the given `deliver` callback and returns the subscription; it may
   * call `deliver` synchronously (something was already pending).
   */
  wait<T>(
    start: (deliver: (value: T) => void) => Subscription,
    opts: PollOptions,
  ): Promise<PollOutcome<T>> {
    const { signal } = opts;
    return new Promise((resolve) => {
      if (this.#closed) return resolve({ kind: 'closed', reason: 'stopping' });
      if (signal?.aborted) return resolve({ kind: 'aborted' });
      let done = false;
      let sub: Subscription | undefined;
      let timer: NodeJS.Timeout | undefined;
      const finish = (outcome: PollOutcome<T>) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        sub?.unsubscribe();
        signal?.removeEventListener('abort', onAbort);
        this.#active.delete(close);
        resolve(outcome);
      };
      const onAbort = () => finish({ kind: 'aborted' });
      const close = (reason: 'stopping' | 'deleted') => finish({ kind: 'closed', reason });
      sub = start((value) => finish({ kind: 'value', value }));
      if (done) {
        sub.unsubscribe();
        return;
      }
      timer = setTimeout(() => finish({ kind: 'timeout' }), opts.timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#active.set(close, opts.deviceId);
    });
  }

  /** Ends every wait of one device (it was deleted). */
  closeDevice(deviceId: string): void {
    for (const [close, id] of [...this.#active]) if (id === deviceId) close('deleted');
  }

  /** Ends every wait and refuses new ones: the gateway is stopping. */
  closeAll(): void {
    this.#closed = true;
    for (const close of [...this.#active.keys()]) close('stopping');
  }

  /** Waits in progress; each holds one timer. */
  get size(): number {
    return this.#active.size;
  }
}
