/**
 * System settings of `/api/admin/settings/{key}` (ThingsBoard's `AdminSettings`): `mail` (SMTP)
 * and `sms` (the SMS provider). Stored as JSON in `admin_settings` (AdminSettingsStore); runtime
 * settings live in SQLite, not in the config file (STYLE §7). The SMTP password is never given back.
 */
import { z } from 'zod';
import { validate } from '../common/validate.js';
import { NotFoundError, ValidationError } from '../errors.js';
import type { SmtpSettings } from '../rules/types.js';
import type { AdminSettingsStore } from '../settings/admin-settings-store.js';

export const SETTINGS_KEYS = ['mail', 'sms'] as const;
export type SettingsKey = (typeof SETTINGS_KEYS)[number];

/** A number ThingsBoard's UI sends as a string ("25", "10000"). */
const intLike = (min: number, max: number) =>
  z
    .union([z.number(), z.string().regex(/^\d+$/).transform(Number)])
    .pipe(z.number().int().min(min).max(max));

const mailSettings = z.looseObject({
  mailFrom: z.string().trim().min(1, 'mailFrom is required').max(255),
  smtpProtocol: z.enum(['smtp', 'smtps']).default('smtp'),
  smtpHost: z.string().trim().min(1, 'smtpHost is required').max(255),
  smtpPort: intLike(1, 65_535),
  timeout: intLike(100, 600_000).default(10_000),
  enableTls: z.boolean().default(false),
  tlsVersion: z.string().nullish(),
  username: z.string().max(255).nullish(),
  password: z.string().max(255).nullish(),
  enableProxy: z.boolean().default(false),
});
export type MailSettings = z.infer<typeof mailSettings>;

const phone = z
  .string()
  .trim()
  .regex(/^\+?[0-9]{3,20}$/, 'a phone number');

/**
 * SMS providers: ThingsBoard's `TWILIO` (its REST API; `baseUrl` is ours, for a local relay),
 * a generic `HTTP` provider with templates (`${phoneNumber}`, `${message}`), and a GSM modem
 * on a serial port (AT commands), for a plant without internet (issue 14 §9).
 */
export const smsProviderConfig = z.discriminatedUnion('type', [
  z.looseObject({
    type: z.literal('TWILIO'),
    accountSid: z.string().trim().min(1, 'accountSid is required'),
    accountToken: z.string().min(1, 'accountToken is required'),
    numberFrom: z.string().trim().min(1, 'numberFrom is required'),
    baseUrl: z.url().default('https://api.twilio.com'),
  }),
  z.looseObject({
    type: z.literal('HTTP'),
    url: z.url(),
    method: z.enum(['POST', 'PUT', 'GET']).default('POST'),
    headers: z.record(z.string(), z.string()).default({}),
    bodyTemplate: z.string().max(10_000).default('{"to":"${phoneNumber}","text":"${message}"}'),
    timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
  }),
  z.looseObject({
    type: z.literal('GSM_MODEM'),
    port: z.string().trim().min(1, 'port is required (e.g. /dev/ttyUSB2)'),
    baudRate: z.number().int().positive().default(115_200),
    /** SIM PIN, sent with AT+CPIN when the modem asks for it. */
    pin: z
      .string()
      .regex(/^\d{4,8}$/)
      .nullish(),
    timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
  }),
]);
export type SmsProviderConfig = z.infer<typeof smsProviderConfig>;

export const testSmsBody = z.looseObject({
  providerConfiguration: smsProviderConfig.nullish(),
  numberTo: phone,
  message: z.string().min(1).max(1600),
});

const settingsBody = z.looseObject({
  key: z.enum(SETTINGS_KEYS).optional(),
  jsonValue: z.unknown(),
});

export interface AdminSettings {
  readonly key: SettingsKey;
  readonly jsonValue: Record<string, unknown>;
}

export function toSmtp(m: MailSettings): SmtpSettings {
  return {
    host: m.smtpHost,
    port: m.smtpPort,
    secure: m.smtpProtocol === 'smtps',
    requireTls: m.enableTls,
    username: m.username || undefined,
    password: m.password || undefined,
    timeoutMs: m.timeout,
  };
}

export function parseMailSettings(value: unknown): MailSettings {
  const m = validate(mailSettings, value, 'mail settings');
  if (m.enableProxy) throw new ValidationError('Invalid mail settings: proxies are not supported');
  return m;
}

/** The system settings: read on every send (a change applies to the next delivery). */
export class SystemSettings {
  constructor(private readonly store: AdminSettingsStore) {}

  #raw(key: SettingsKey): Record<string, unknown> | undefined {
    return this.store.get(key) as Record<string, unknown> | undefined;
  }

  /** `GET /api/admin/settings/{key}`; the SMTP password is left out. */
  get(key: string): AdminSettings {
    const k = settingsKey(key);
    const value = this.#raw(k);
    if (!value) throw new NotFoundError(`Admin settings with key [${k}] are not configured`);
    const { password: _hidden, ...shown } = value;
    return { key: k, jsonValue: k === 'mail' ? shown : value };
  }

  /** `POST /api/admin/settings`: a mail update without a password keeps the stored one. */
  save(body: unknown, pathKey?: string): AdminSettings {
    const input = validate(settingsBody, body, 'admin settings');
    const key = settingsKey(pathKey ?? input.key ?? '');
    let value: Record<string, unknown>;
    if (key === 'mail') {
      const m = parseMailSettings(input.jsonValue);
      value = { ...m, password: m.password || this.#raw('mail')?.password || '' };
    } else {
      value = validate(smsProviderConfig, input.jsonValue, 'SMS settings');
    }
    this.store.put(key, value);
    return this.get(key);
  }

  /** The system SMTP settings, when configured. */
  smtp(): SmtpSettings | undefined {
    const raw = this.#raw('mail');
    if (!raw) return undefined;
    const m = parseMailSettings(raw);
    return { ...toSmtp(m), from: m.mailFrom };
  }

  /** The system SMS provider, when configured. */
  sms(): SmsProviderConfig | undefined {
    const raw = this.#raw('sms');
    return raw ? smsProviderConfig.parse(raw) : undefined;
  }
}

function settingsKey(key: string): SettingsKey {
  if (!(SETTINGS_KEYS as readonly string[]).includes(key))
    throw new NotFoundError(`Admin settings with key [${key}] are not supported (mail, sms)`);
  return key as SettingsKey;
}
