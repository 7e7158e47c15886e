/**
 * A GSM modem on a serial port, sending text messages with AT commands (3GPP TS 27.005 text mode:
 * `AT+CMGF=1`, then `AT+CMGS="<number>"`, the `> ` prompt, the text and Ctrl-Z). The adapter only
 * frames the exchange; the notification outbox decides when to send and retries on failure.
 * One message at a time per port: a send opens the port, runs the exchange and closes it, so a
 * modem unplugged between messages is simply found again.
 */

import type { Logger } from 'pino';
import { SerialPort } from 'serialport';
import type { SmsModem } from '../../notifications/channels.js';

export interface GsmModemConfig {
  readonly port: string;
  readonly baudRate: number;
  readonly pin?: string | null;
  /** Longest wait for one reply. */
  readonly timeoutMs: number;
}

const CTRL_Z = '\x1a';
/** 3GPP TS 27.007 §9.2 / TS 27.005 §3.2.5 final result codes that end a command with an error. */
const ERROR = /(^|\r\n)(ERROR|\+CMS ERROR: ?\d+|\+CME ERROR: ?[^\r\n]+)\r\n/;

/** An error the outbox retries without counting it against the delivery (isUnreachable). */
function unreachable(message: string): Error {
  return Object.assign(new Error(message), { unreachable: true });
}

export class GsmModem implements SmsModem {
  #chain: Promise<unknown> = Promise.resolve();
  #port: SerialPort | undefined;

  constructor(
    private readonly config: GsmModemConfig,
    private readonly log: Logger,
  ) {}

  send(number: string, text: string): Promise<void> {
    const run = this.#chain.then(() => this.#session(number, text));
    this.#chain = run.catch(() => undefined);
    return run;
  }

  async close(): Promise<void> {
    await this.#chain;
    await this.#closePort();
  }

  async #session(number: string, text: string): Promise<void> {
    const port = new SerialPort({
      path: this.config.port,
      baudRate: this.config.baudRate,
      autoOpen: false,
    });
    this.#port = port;
    await new Promise<void>((resolve, reject) =>
      port.open((err) =>
        err ? reject(unreachable(`modem port ${this.config.port}: ${err.message}`)) : resolve(),
      ),
    );
    let buf = '';
    let waiter: (() => void) | undefined;
    port.on('data', (chunk: Buffer) => {
      buf += chunk.toString('latin1');
      waiter?.();
    });
    /** Waits until the reply so far matches `done` (or an error code), then clears the buffer. */
    const expect = (done: RegExp, what: string) =>
      new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiter = undefined;
          reject(unreachable(`modem did not answer ${what} within ${this.config.timeoutMs} ms`));
        }, this.config.timeoutMs);
        waiter = () => {
          const err = ERROR.exec(buf);
          if (err) {
            clearTimeout(timer);
            waiter = undefined;
            buf = '';
            reject(new Error(`modem answered ${what} with ${err[2]}`));
          } else if (done.test(buf)) {
            clearTimeout(timer);
            waiter = undefined;
            const reply = buf;
            buf = '';
            resolve(reply);
          }
        };
        waiter();
      });
    const command = (cmd: string, done = /(^|\r\n)OK\r\n/) => {
      port.write(`${cmd}\r`);
      return expect(done, cmd);
    };
    try {
      await command('AT');
      if (this.config.pin) {
        const state = await command('AT+CPIN?');
        if (/\+CPIN: ?SIM PIN/.test(state)) await command(`AT+CPIN=${this.config.pin}`);
      }
      await command('AT+CMGF=1');
      // The modem prompts with "> " (no line end) for the text.
      await command(`AT+CMGS="${number}"`, />\s?$/);
      port.write(`${text.replaceAll(CTRL_Z, '')}${CTRL_Z}`);
      const reply = await expect(/\+CMGS: ?\d+[\s\S]*(^|\r\n)OK\r\n/, 'the message text');
      this.log.debug({ port: this.config.port, reply: reply.trim() }, 'SMS sent through modem');
    } finally {
      await this.#closePort();
    }
  }

  async #closePort(): Promise<void> {
    const port = this.#port;
    this.#port = undefined;
    if (!port?.isOpen) return;
    await new Promise<void>((resolve) => port.close(() => resolve()));
  }
}
