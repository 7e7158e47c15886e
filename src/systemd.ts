import { execFile } from 'node:child_process';
import type { Logger } from 'pino';

/**
 * sd_notify through `systemd-notify`: Node has no unix datagram sockets. A no-op without
 * NOTIFY_SOCKET, so the gateway runs the same outside systemd. The unit sets NotifyAccess=all
 * because the message comes from a child process.
 */
export class SystemdNotifier {
  #watchdog: NodeJS.Timeout | undefined;

  constructor(
    private readonly deps: { env: Readonly<Record<string, string | undefined>>; log: Logger },
  ) {}

  get enabled(): boolean {
    return Boolean(this.deps.env.NOTIFY_SOCKET);
  }

  notify(state: string): void {
    if (!this.enabled) return;
    // The child finds NOTIFY_SOCKET in the environment given here (tests pass their own).
    const env = { ...this.deps.env };
    execFile('systemd-notify', [`--pid=${process.pid}`, ...state.split('\n')], { env }, (err) => {
      if (err) this.deps.log.warn({ err, state }, 'systemd-notify failed');
    });
  }

  /**
   * Tells systemd the service is up and feeds its watchdog every half period while `alive()`
   * holds. The timer runs on the event loop, so a blocked loop stops the feeding as well; a
   * failing `alive()` (the database check) lets systemd restart the service.
   */
  ready(alive: () => boolean = () => true): void {
    this.notify('READY=1');
    const usec = Number(this.deps.env.WATCHDOG_USEC);
    if (this.enabled && usec > 0) {
      let starving = false;
      this.#watchdog = setInterval(() => {
        const ok = alive();
        if (ok) {
          if (starving) this.deps.log.info('health check passes: feeding the watchdog again');
          this.notify('WATCHDOG=1');
        } else if (!starving) {
          this.deps.log.error('health check failed: the watchdog is not fed');
        }
        starving = !ok;
      }, usec / 2000);
      this.#watchdog.unref();
    }
  }

  stopping(): void {
    if (this.#watchdog) clearInterval(this.#watchdog);
    this.#watchdog = undefined;
    this.notify('STOPPING=1');
  }
}
