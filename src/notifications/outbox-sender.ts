/**
 * The outbox sender (STYLE §12): the only one that finishes outbox rows. It takes due rows in id
 * order, counts the attempt before sending, marks the row SENT on success, and otherwise retries
 * it after `min(cap, base·2^n·(1 + rand))`, holding the rest of its channel behind it so that
 * notifications to one SMTP server, SMS provider or webhook keep their order. After
 * `maxAttempts` a row is FAILED. Delayed escalation rows whose alarm reached a status of the
 * rule's `clearRule` are CANCELLED. Rows live in SQLite, so a restart (or SIGKILL) resumes them.
 */
import type { Logger } from 'pino';
import type { AlarmStatus } from '../alarms/types.js';
import { type Channels, isUnreachable } from './channels.js';
import { statusMatches } from './notification-service.js';
import type { NotificationStore, OutboxRow } from './notification-store.js';
import type { DeliveryAttempt, OutboxPayload } from './types.js';

export interface OutboxSenderDeps {
  readonly store: NotificationStore;
  readonly channels: Channels;
  readonly log: Logger;
  /** An alarm's status now; undefined when it is gone. */
  readonly alarmStatus: (alarmId: string) => AlarmStatus | undefined;
  /** A delayed WEB delivery is due: write it into the user's inbox. */
  readonly toInbox: (
    recipientId: string,
    payload: OutboxPayload & { web?: unknown },
    requestId: string | null,
  ) => void;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  readonly maxAttempts: number;
  /** Finished rows kept for REST. */
  readonly doneKept: number;
  readonly now?: () => number;
}

const BATCH = 100;
const HISTORY_KEPT = 10;

export class OutboxSender {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = true;
  #sent = 0;
  #failed = 0;
  #retried = 0;

  constructor(private readonly deps: OutboxSenderDeps) {}

  #now(): number {
    return this.deps.now?.() ?? Date.now();
  }

  start(): void {
    this.#stopped = false;
    this.kick();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  stats() {
    return { sent: this.#sent, failed: this.#failed, retried: this.#retried };
  }

  /** Something was queued: run now (or right after the current run). */
  kick(): void {
    if (this.#stopped) return;
    if (this.#running !== undefined) {
      this.#again = true;
      return;
    }
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#running = this.#run().finally(() => {
      this.#running = undefined;
      if (this.#again) {
        this.#again = false;
        this.kick();
      } else {
        this.#arm();
      }
    });
  }

  /** Re-arms a timer for the next due row (never setInterval; STYLE §12). */
  #arm(): void {
    if (this.#stopped) return;
    const next = this.deps.store.nextDue();
    if (next === null) return;
    // A timer fires at most ~24.8 days ahead; a later row is looked at again then.
    const wait = Math.min(Math.max(0, next - this.#now()), 2 ** 31 - 1);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.kick();
    }, wait);
    this.#timer.unref?.();
  }

  async #run(): Promise<void> {
    const { store } = this.deps;
    try {
      for (;;) {
        if (this.#stopped) return;
        const rows = store.due(this.#now(), BATCH);
        if (rows.length === 0) break;
        const held = new Set<string>();
        for (const row of rows) {
          if (this.#stopped) return;
          if (held.has(row.channel)) continue;
          if (!(await this.#one(row))) held.add(row.channel);
        }
      }
      store.pruneDone(this.deps.doneKept);
    } catch (err) {
      this.deps.log.error({ err }, 'notification outbox run failed');
    }
  }

  /** Delivers one row; false when it failed (its channel waits). */
  async #one(row: OutboxRow): Promise<boolean> {
    const { store } = this.deps;
    const history = JSON.parse(row.history) as DeliveryAttempt[];
    if (row.alarm_id && row.clear_statuses) {
      const status = this.deps.alarmStatus(row.alarm_id);
      const clear = JSON.parse(row.clear_statuses) as string[];
      if (status === undefined || (clear.length > 0 && statusMatches(status, clear))) {
        store.finish(
          row,
          'CANCELLED',
          status ? `alarm is ${status}` : 'alarm is gone',
          row.history,
          this.#now(),
        );
        return true;
      }
    }
    store.countAttempt(row.id);
    const attempt = row.attempts + 1;
    try {
      await this.#send(row);
      history.push({ ts: this.#now(), ok: true });
      store.finish(row, 'SENT', null, JSON.stringify(history.slice(-HISTORY_KEPT)), this.#now());
      this.#sent++;
      return true;
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      history.push({ ts: this.#now(), ok: false, error });
      const kept = JSON.stringify(history.slice(-HISTORY_KEPT));
      // A receiver that is down is waited for (bounded by the outbox cap); one that answers
      // with a refusal gets `maxAttempts`.
      if (attempt >= this.deps.maxAttempts && !isUnreachable(err)) {
        store.finish(row, 'FAILED', error, kept, this.#now());
        this.#failed++;
        this.deps.log.warn(
          { id: row.id, method: row.method, recipient: row.recipient, attempts: attempt, error },
          'notification delivery failed for good',
        );
        return true;
      }
      const { retryBaseMs: base, retryMaxMs: cap } = this.deps;
      const delay = Math.min(cap, base * 2 ** (attempt - 1) * (1 + Math.random()));
      const nextAt = this.#now() + Math.round(delay);
      store.retry(row.id, nextAt, error, kept);
      store.pushBack(row.channel, row.rid ?? 0, nextAt);
      this.#retried++;
      this.deps.log.debug(
        { id: row.id, method: row.method, attempt, retryInMs: Math.round(delay), error },
        'notification delivery failed; will retry',
      );
      return false;
    }
  }

  #send(row: OutboxRow): Promise<void> {
    const p = JSON.parse(row.payload) as OutboxPayload & { web?: unknown };
    const ch = this.deps.channels;
    switch (row.method) {
      case 'EMAIL':
        return ch.email({ to: row.recipient, subject: p.subject ?? '', body: p.body });
      case 'SMS':
        return ch.sms(row.recipient, p.body);
      case 'WEBHOOK':
        return ch.webhook(row.recipient, p.body, { method: p.httpMethod, headers: p.headers });
      case 'WEB':
        this.deps.toInbox(row.recipient, p, row.request_id);
        return Promise.resolve();
      default:
        return Promise.reject(new Error(`unknown delivery method ${row.method}`));
    }
  }
}
