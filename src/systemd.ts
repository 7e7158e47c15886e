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
    execFile('systemd-notify', [`--pid=${process.pid}`, ...state.split('\n')], (err) => {
      if (err) this.deps.log.warn({ err, state }, 'systemd-notify failed');
    });
  }

  ready(): void {
    this.notify('READY=1');
    const usec = Number(this.deps.env.WATCHDOG_USEC);
    if (this.enabled && usec > 0) {
      this.#watchdog = setInterval(() => this.notify('WATCHDOG=1'), usec / 2000);
      this.#watchdog.unref();
    }
  }

  stopping(): void {
    if (this.#watchdog) clearInterval(this.#watchdog);
    this.#watchdog = undefined;
    this.notify('STOPPING=1');
  }
}
