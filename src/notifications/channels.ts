/**
 * How a notification leaves the gateway: email (nodemailer, through the rule engine's Mailer),
 * SMS (Twilio's REST API, a generic HTTP provider, or a GSM modem driven by the serial adapter)
 * and webhooks. Each `send` resolves when the other side accepted the message and rejects with
 * the reason otherwise; the outbox decides about retries.
 */
import type { Mailer } from '../rules/mailer.js';
import type { EmailMessage, SmtpSettings } from '../rules/types.js';
import type { SmsProviderConfig } from './system-settings.js';

/** A GSM modem on a serial port (transports/serial/gsm-modem.ts): sends one text message. */
export interface SmsModem {
  send(number: string, text: string): Promise<void>;
  close(): Promise<void>;
}
export type SmsModemFactory = (
  config: Extract<SmsProviderConfig, { type: 'GSM_MODEM' }>,
) => SmsModem;

/** `${name}` placeholders from `values`; unknown ones stay as written (ThingsBoard's way). */
export function fillTemplate(
  template: string,
  values: Readonly<Record<string, string>>,
  quote: (v: string) => string = (v) => v,
): string {
  return template.replace(/\$\{([A-Za-z0-9_.]+)\}/g, (whole, key: string) => {
    const v = values[key];
    return v === undefined ? whole : quote(v);
  });
}

/** A string as it goes inside a JSON string literal. */
const jsonEscape = (v: string) => JSON.stringify(v).slice(1, -1);

/** Socket and DNS error codes (Node, nodemailer) that mean "the receiver was not reached". */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'ECONNECTION',
  'ESOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
]);

/**
 * Whether a send failed without reaching the receiver (refused connection, timeout, a missing
 * serial port): such failures retry until the receiver is back, whatever the attempt count.
 */
export function isUnreachable(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const x = e as Error & { code?: unknown; unreachable?: unknown };
    if (x.unreachable === true) return true;
    if (x.name === 'TimeoutError' || x.name === 'AbortError') return true;
    if (typeof x.code === 'string' && UNREACHABLE.has(x.code)) return true;
  }
  return false;
}

/** A short reason from a fetch failure (its `cause` names the socket error). */
export function fetchError(err: unknown): string {
  if (err instanceof Error) return err.cause instanceof Error ? err.cause.message : err.message;
  return String(err);
}

async function checkedFetch(url: string, init: RequestInit, timeoutMs: number): Promise<void> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    throw new Error(`${init.method ?? 'GET'} ${url} failed: ${fetchError(err)}`, { cause: err });
  }
  const text = await res.text().catch(() => '');
  if (!res.ok) throw new Error(`${url} answered ${res.status}: ${text.slice(0, 200)}`);
}

export interface ChannelsDeps {
  readonly mailer: Mailer;
  /** The system SMTP settings and sender address, when configured. */
  readonly smtp: () => SmtpSettings | undefined;
  /** The system SMS provider, when configured. */
  readonly sms: () => SmsProviderConfig | undefined;
  readonly modem?: SmsModemFactory;
  /** Time limit of a webhook call. */
  readonly webhookTimeoutMs?: number;
}

export class Channels {
  /** One modem per serial port: AT sessions on one port must not interleave. */
  readonly #modems = new Map<string, { key: string; modem: SmsModem }>();

  constructor(private readonly deps: ChannelsDeps) {}

  /** Sends with `smtp`, or the system SMTP settings. */
  async email(mail: EmailMessage, smtp?: SmtpSettings): Promise<void> {
    const settings = smtp ?? this.deps.smtp();
    if (!settings) throw new Error('System SMTP settings are not configured');
    await this.deps.mailer.send(mail, settings);
  }

  /** Sends one SMS with `provider`, or the system provider. */
  async sms(number: string, text: string, provider?: SmsProviderConfig): Promise<void> {
    const p = provider ?? this.deps.sms();
    if (!p) throw new Error('System SMS settings are not configured');
    switch (p.type) {
      case 'TWILIO': {
        // Twilio's Messages resource: form-encoded To/From/Body, basic auth with SID and token.
        const url = `${p.baseUrl.replace(/\/$/, '')}/2010-04-01/Accounts/${encodeURIComponent(p.accountSid)}/Messages.json`;
        const auth = Buffer.from(`${p.accountSid}:${p.accountToken}`).toString('base64');
        await checkedFetch(
          url,
          {
            method: 'POST',
            headers: {
              Authorization: `Basic ${auth}`,
              'Content-Type': 'application/x-www-form-urlencoded',
            },
            body: new URLSearchParams({ To: number, From: p.numberFrom, Body: text }).toString(),
          },
          10_000,
        );
        return;
      }
      case 'HTTP': {
        const values = { phoneNumber: number, message: text };
        const json = /^\s*[[{]/.test(p.bodyTemplate);
        const url = fillTemplate(p.url, values, encodeURIComponent);
        const body =
          p.method === 'GET'
            ? undefined
            : fillTemplate(p.bodyTemplate, values, json ? jsonEscape : undefined);
        await checkedFetch(
          url,
          {
            method: p.method,
            headers: { ...(json ? { 'Content-Type': 'application/json' } : {}), ...p.headers },
            body,
          },
          p.timeoutMs,
        );
        return;
      }
      case 'GSM_MODEM': {
        await this.#modem(p).send(number, text);
        return;
      }
    }
  }

  async webhook(
    url: string,
    body: string,
    opts: { method?: 'POST' | 'PUT'; headers?: Record<string, string> } = {},
  ): Promise<void> {
    await checkedFetch(
      url,
      {
        method: opts.method ?? 'POST',
        headers: { 'Content-Type': 'application/json', ...opts.headers },
        body,
      },
      this.deps.webhookTimeoutMs ?? 10_000,
    );
  }

  #modem(p: Extract<SmsProviderConfig, { type: 'GSM_MODEM' }>): SmsModem {
    if (!this.deps.modem) throw new Error('GSM modems are not available in this build');
    const key = JSON.stringify([p.baudRate, p.pin, p.timeoutMs]);
    const known = this.#modems.get(p.port);
    if (known && known.key === key) return known.modem;
    if (known) void known.modem.close();
    const modem = this.deps.modem(p);
    this.#modems.set(p.port, { key, modem });
    return modem;
  }

  async close(): Promise<void> {
    const modems = [...this.#modems.values()];
    this.#modems.clear();
    await Promise.all(modems.map((m) => m.modem.close()));
  }
}
