/**
 * Counts failed logins per client address. After `maxFailures` inside `windowMs`, the address
 * is locked out for `lockoutMs`. Memory stays bounded: old entries are dropped.
 */
export class LoginThrottle {
  readonly #entries = new Map<string, { failures: number[]; lockedUntil: number }>();
  /** Entries dropped at the table's bound since start. */
  #dropped = 0;

  constructor(
    private readonly opts: {
      maxFailures: number;
      windowMs: number;
      lockoutMs: number;
      maxEntries?: number;
      now?: () => number;
    },
  ) {}

  #now(): number {
    return this.opts.now?.() ?? Date.now();
  }

  /** Seconds until the address may try again, or 0 when it may try now. */
  retryAfterSec(address: string): number {
    const e = this.#entries.get(address);
    if (!e) return 0;
    const left = e.lockedUntil - this.#now();
    return left > 0 ? Math.ceil(left / 1000) : 0;
  }

  recordFailure(address: string): void {
    const now = this.#now();
    const e = this.#entries.get(address) ?? { failures: [], lockedUntil: 0 };
    e.failures = e.failures.filter((t) => now - t < this.opts.windowMs);
    e.failures.push(now);
    if (e.failures.length >= this.opts.maxFailures) e.lockedUntil = now + this.opts.lockoutMs;
    this.#entries.delete(address);
    this.#entries.set(address, e);
    const max = this.opts.maxEntries ?? 10_000;
    if (this.#entries.size > max) {
      // Map keeps insertion order: the first key is the least recently failed address.
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
      this.#dropped++;
    }
  }

  /** Addresses (or keys) tracked now, and entries dropped at the bound since start. */
  get counts(): { entries: number; dropped: number } {
    return { entries: this.#entries.size, dropped: this.#dropped };
  }

  recordSuccess(address: string): void {
    this.#entries.delete(address);
  }
}
