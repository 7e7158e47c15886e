/**
 * Poll timing on absolute deadlines (issue 17 §5): the n-th poll of a slave is due at
 * `start + n × period`, whatever the previous polls cost, so the period does not drift under load;
 * a poll that ends after its next deadline skips the deadlines it missed (counted as overruns)
 * rather than bunching up.
 */
export class PollSchedule {
  #next: number;

  constructor(
    readonly period: number,
    start: number,
  ) {
    this.#next = start;
  }

  /** When the next poll is due. */
  get due(): number {
    return this.#next;
  }

  /**
   * Moves to the first deadline after `now` (the poll that was due has run); returns how many
   * deadlines were skipped because the poll ended late.
   */
  advance(now: number): number {
    const next = this.#next + this.period;
    if (next > now) {
      this.#next = next;
      return 0;
    }
    const missed = Math.floor((now - next) / this.period) + 1;
    this.#next = next + missed * this.period;
    return missed;
  }

  /** Starts a new grid at `at` (a line that was closed is open again). */
  restart(at: number): void {
    this.#next = at;
  }

  /** Puts the next poll at `at` at the earliest (a backed-off slave), staying on the grid. */
  notBefore(at: number): void {
    if (at <= this.#next) return;
    this.#next += Math.ceil((at - this.#next) / this.period) * this.period;
  }
}

/**
 * Back-off of a slave that stopped answering: the k-th consecutive failed poll waits
 * `period × 2^(k-1)` more, at most `max(period, capMs)`, so a dead slave costs the bus one
 * timeout per back-off step instead of one per period (IoT Gateway issue 343).
 */
export function backoffMs(period: number, failures: number, capMs: number): number {
  if (failures <= 0) return 0;
  return Math.min(period * 2 ** Math.min(failures - 1, 20), Math.max(period, capMs));
}

/**
 * Modbus over serial line v1.02 §2.5.1.1: frames are separated by 3.5 character times; above
 * 19,200 baud a fixed 1.75 ms. A character is start + data + parity + stop bits.
 */
export function interFrameMs(baud: number, bitsPerChar: number): number {
  if (baud > 19200) return 1.75;
  return (3.5 * bitsPerChar * 1000) / baud;
}
