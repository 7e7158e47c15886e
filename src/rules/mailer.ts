/**
 * Email over SMTP with nodemailer (issue 14: "SMTP via nodemailer, TLS, auth"). One transport per
 * distinct SMTP setting, kept while the gateway runs (at most a few: system settings plus the
 * nodes that have their own).
 */
import type { Transporter } from 'nodemailer';
import { UnavailableError } from '../errors.js';
import type { EmailMessage, SmtpSettings } from './types.js';

const MAX_TRANSPORTS = 16;

export class Mailer {
  readonly #transports = new Map<string, Transporter>();
  /**
   * nodemailer, evaluated on the first email: an idle gateway sends none, and evaluating it took
   * 1.6 MB of RSS (docs/benchmarks.md, "Lazy modules").
   */
  #nodemailer: Promise<typeof import('nodemailer')> | undefined;

  constructor(
    private readonly deps: {
      /** The system SMTP settings, when configured. */
      readonly systemSmtp?: () => SmtpSettings | undefined;
      /** Default sender when a message has none. */
      readonly defaultFrom?: string;
    } = {},
  ) {}

  async send(mail: EmailMessage, smtp?: SmtpSettings): Promise<void> {
    const settings = smtp ?? this.deps.systemSmtp?.();
    if (!settings) throw new UnavailableError('System SMTP settings are not configured');
    this.#nodemailer ??= import('nodemailer');
    const { createTransport } = await this.#nodemailer;
    await this.#transport(settings, createTransport).sendMail({
      from: mail.from ?? settings.from ?? this.deps.defaultFrom ?? 'edge-gateway@localhost',
      to: mail.to,
      cc: mail.cc,
      bcc: mail.bcc,
      subject: mail.subject,
      ...(mail.html ? { html: mail.body } : { text: mail.body }),
    });
  }

  #transport(
    s: SmtpSettings,
    createTransport: typeof import('nodemailer')['createTransport'],
  ): Transporter {
    const key = JSON.stringify([
      s.host,
      s.port,
      s.secure,
      s.requireTls,
      s.username,
      s.password,
      s.timeoutMs,
    ]);
    let t = this.#transports.get(key);
    if (!t) {
      if (this.#transports.size >= MAX_TRANSPORTS) this.close();
      // One pooled connection per setting: an outbox of queued emails goes out on one SMTP
      // session instead of a connect, greeting and login per email (issue 14's recovery target).
      t = createTransport({
        pool: true,
        maxConnections: 1,
        host: s.host,
        port: s.port,
        secure: s.secure,
        requireTLS: s.requireTls,
        ignoreTLS: !s.secure && !s.requireTls,
        auth: s.username ? { user: s.username, pass: s.password ?? '' } : undefined,
        connectionTimeout: s.timeoutMs,
        greetingTimeout: s.timeoutMs,
        socketTimeout: s.timeoutMs,
      });
      this.#transports.set(key, t);
    }
    return t;
  }

  close(): void {
    for (const t of this.#transports.values()) t.close();
    this.#transports.clear();
  }
}
