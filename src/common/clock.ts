/**
 * Server time that never runs backwards (issue 20 fault drill): a Pi without a real-time clock
 * boots with a stale time, then NTP moves it, forward a day or back an hour.
 *
 * Each reading is the wall clock, unless the wall clock is behind the previous reading plus the
 * monotonic time elapsed since: then it is that sum. So a jump forward is taken at once, and after
 * a jump back readings keep advancing at the real rate, distinct and in order, until the wall
 * clock catches up. Durations measured with it are never negative.
 */
export class ServerClock {
  #last = Number.NEGATIVE_INFINITY;
  #lastMono = 0;

  constructor(
    private readonly wall: () => number = Date.now,
    private readonly mono: () => number = () => performance.now(),
  ) {}

  readonly now = (): number => {
    const wall = this.wall();
    const mono = this.mono();
    // Whole elapsed milliseconds only, so that fractions never add up to drift.
    const elapsed = Math.floor(mono - this.#lastMono);
    const carried = this.#last + elapsed;
    if (wall >= carried) {
      this.#last = wall;
      this.#lastMono = mono;
    } else {
      this.#last = carried;
      this.#lastMono += elapsed;
    }
    return this.#last;
  };
}
