/**
 * The notification center's part of the composition root: system settings, channels (email,
 * SMS, webhook), the service (targets, templates, rules, inbox) and the outbox sender.
 */
import type { Logger } from 'pino';
import type { AlarmStatus } from '../alarms/types.js';
import { NULL_UUID } from '../common/entity.js';
import { validate } from '../common/validate.js';
import type { Config } from '../config.js';
import type { Db } from '../db/open.js';
import type { DeviceService } from '../devices/device-service.js';
import { ValidationError } from '../errors.js';
import type { EventBus } from '../events.js';
import { Mailer } from '../rules/mailer.js';
import type { AdminSettingsStore } from '../settings/admin-settings-store.js';
import type { UserService } from '../users/user-service.js';
import { Channels, type SmsModemFactory } from './channels.js';
import { NotificationService } from './notification-service.js';
import { OutboxSender } from './outbox-sender.js';
import { parseMailSettings, SystemSettings, testSmsBody, toSmtp } from './system-settings.js';

export interface NotificationsDeps {
  readonly db: Db;
  /** `admin_settings`: the mail and SMS settings, the defaults marker. */
  readonly settings: AdminSettingsStore;
  readonly tenants: { readonly id: string };
  readonly bus: EventBus;
  readonly log: Logger;
  readonly users: Pick<UserService, 'recipients'>;
  readonly devices: Pick<DeviceService, 'get'>;
  /** An alarm's status now (escalation stops at the rule's clear statuses). */
  readonly alarmStatus: (alarmId: string) => AlarmStatus | undefined;
  readonly config: Config['notifications'];
  /** GSM modems on serial ports (the serial adapter). */
  readonly modem?: SmsModemFactory;
  readonly now?: () => number;
}

export interface Notifications {
  readonly service: NotificationService;
  readonly settings: SystemSettings;
  readonly channels: Channels;
  readonly sender: OutboxSender;
  /** `POST /api/admin/settings/testMail`: the given settings, to `to` (the caller's email). */
  testMail(body: unknown, to: string): Promise<void>;
  /** `POST /api/admin/settings/testSms`: `{providerConfiguration?, numberTo, message}`. */
  testSms(body: unknown): Promise<void>;
  start(): void;
  stop(): Promise<void>;
}

/** Finished deliveries kept for REST. */
const DONE_KEPT = 1000;

export function createNotifications(deps: NotificationsDeps): Notifications {
  const settings = new SystemSettings(deps.settings);
  const mailer = new Mailer();
  const channels = new Channels({
    mailer,
    smtp: () => settings.smtp(),
    sms: () => settings.sms(),
    modem: deps.modem,
  });
  let sender: OutboxSender | undefined;
  const service = new NotificationService({
    db: deps.db,
    settings: deps.settings,
    tenants: deps.tenants,
    bus: deps.bus,
    log: deps.log,
    users: deps.users,
    device: (id) => {
      try {
        const d = deps.devices.get(id);
        return {
          name: d.name,
          type: d.type,
          customerId: d.customerId.id === NULL_UUID ? null : d.customerId.id,
          profileId: d.deviceProfileId.id,
        };
      } catch {
        // A deleted device: its name is unknown, the notification still goes out.
        return undefined;
      }
    },
    limits: {
      inboxMax: deps.config.inboxMax,
      requestsMax: deps.config.requestsMax,
      outboxMax: deps.config.outboxMax,
      doneKept: DONE_KEPT,
      maxConfigs: 1000,
    },
    onQueued: () => sender?.kick(),
    now: deps.now,
  });
  sender = new OutboxSender({
    store: service.store,
    channels,
    log: deps.log,
    alarmStatus: deps.alarmStatus,
    toInbox: (recipientId, p, requestId) => {
      const web = (p.web ?? {}) as { type?: string; info?: unknown };
      service.insertInbox({
        recipientId,
        ruleId: null,
        type: web.type ?? 'GENERAL',
        subject: p.subject ?? null,
        text: p.body,
        info: web.info,
        requestId,
      });
    },
    retryBaseMs: deps.config.retryBaseMs,
    retryMaxMs: deps.config.retryMaxMs,
    maxAttempts: deps.config.maxAttempts,
    doneKept: DONE_KEPT,
    now: deps.now,
  });
  const outbox = sender;
  return {
    service,
    settings,
    channels,
    sender: outbox,
    async testMail(body, to) {
      const value = (body as { jsonValue?: unknown } | null)?.jsonValue;
      if (value === undefined)
        throw new ValidationError('Invalid mail settings: jsonValue is required');
      const m = parseMailSettings(value);
      // A blank password in the form means "the stored one" (it is never sent back).
      const password = m.password || settings.smtp()?.password;
      try {
        await channels.email(
          {
            to,
            subject: 'Test message from edge-gateway',
            body: 'This is a test message: the SMTP settings work.',
          },
          { ...toSmtp({ ...m, password }), from: m.mailFrom },
        );
      } catch (err) {
        throw new ValidationError(`Test mail failed: ${(err as Error).message}`, { cause: err });
      }
    },
    async testSms(body) {
      const input = validate(testSmsBody, body, 'test SMS request');
      try {
        await channels.sms(input.numberTo, input.message, input.providerConfiguration ?? undefined);
      } catch (err) {
        throw new ValidationError(`Test SMS failed: ${(err as Error).message}`, { cause: err });
      }
    },
    start() {
      service.init();
      outbox.start();
    },
    async stop() {
      service.stop();
      await outbox.stop();
      await channels.close();
      mailer.close();
    },
  };
}
