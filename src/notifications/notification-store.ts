/** SQL of the notification center's tables (migration 013); statements are prepared once. */
import type { Db } from '../db/open.js';

export interface TargetRow {
  id: string;
  tenant_id: string;
  name: string;
  configuration: string;
  description: string | null;
  created_time: number;
}

export interface TemplateRow {
  id: string;
  tenant_id: string;
  name: string;
  notification_type: string;
  configuration: string;
  created_time: number;
}

export interface RuleRow {
  id: string;
  tenant_id: string;
  name: string;
  enabled: number;
  template_id: string;
  trigger_type: string;
  trigger_config: string;
  recipients_config: string;
  additional_config: string | null;
  created_time: number;
}

export interface InboxRow {
  id: string;
  recipient_id: string;
  rule_id: string | null;
  type: string;
  subject: string | null;
  text: string;
  info: string | null;
  status: 'SENT' | 'READ';
  created_time: number;
}

export interface OutboxRow {
  rid?: number;
  id: string;
  method: string;
  channel: string;
  recipient: string;
  rule_id: string | null;
  alarm_id: string | null;
  clear_statuses: string | null;
  payload: string;
  status: 'PENDING' | 'SENT' | 'FAILED' | 'CANCELLED';
  attempts: number;
  next_at: number;
  last_error: string | null;
  history: string;
  created_time: number;
  done_time: number | null;
}

/**
 * The three configuration tables (targets, templates, rules) share their SQL: insert or replace
 * by id, get, a page by name, count, delete.
 */
class ConfigTable<R extends { id: string; name: string }> {
  readonly #upsert;
  readonly #get;
  readonly #page;
  readonly #count;
  readonly #delete;
  readonly #all;

  constructor(db: Db, table: string, columns: readonly (keyof R & string)[]) {
    const cols = columns.join(', ');
    this.#upsert = db.prepare<[R]>(
      `INSERT INTO ${table} (${cols}) VALUES (${columns.map((c) => `@${c}`).join(', ')})
       ON CONFLICT(id) DO UPDATE SET ${columns
         .filter((c) => c !== 'id' && c !== 'created_time')
         .map((c) => `${c} = excluded.${c}`)
         .join(', ')}`,
    );
    this.#get = db.prepare<[string], R>(`SELECT * FROM ${table} WHERE id = ?`);
    this.#page = db.prepare<[string, number, number], R>(
      `SELECT * FROM ${table} WHERE instr(lower(name), ?) > 0
       ORDER BY created_time DESC, id LIMIT ? OFFSET ?`,
    );
    this.#count = db.prepare<[string], { n: number }>(
      `SELECT count(*) AS n FROM ${table} WHERE instr(lower(name), ?) > 0`,
    );
    this.#delete = db.prepare<[string]>(`DELETE FROM ${table} WHERE id = ?`);
    this.#all = db.prepare<[], R>(`SELECT * FROM ${table} ORDER BY created_time, id`);
  }

  put(row: R): void {
    this.#upsert.run(row);
  }
  get(id: string): R | undefined {
    return this.#get.get(id);
  }
  page(search: string, limit: number, offset: number): { rows: R[]; total: number } {
    const s = search.toLowerCase();
    return { rows: this.#page.all(s, limit, offset), total: this.#count.get(s)?.n ?? 0 };
  }
  count(): number {
    return this.#count.get('')?.n ?? 0;
  }
  delete(id: string): boolean {
    return this.#delete.run(id).changes > 0;
  }
  all(): R[] {
    return this.#all.all();
  }
}

export class NotificationStore {
  readonly targets: ConfigTable<TargetRow>;
  readonly templates: ConfigTable<TemplateRow>;
  readonly rules: ConfigTable<RuleRow>;
  readonly #insertInbox;
  readonly #inboxPage;
  readonly #inboxCount;
  readonly #unread;
  readonly #markRead;
  readonly #markAllRead;
  readonly #deleteInbox;
  readonly #inboxTotal;
  readonly #inboxGet;
  readonly #marker;
  readonly #setMarker;
  readonly #pruneInbox;
  readonly #insertOutbox;
  readonly #due;
  readonly #nextDue;
  readonly #outboxGet;
  readonly #attempt;
  readonly #finish;
  readonly #retry;
  readonly #pushBack;
  readonly #pendingCount;
  readonly #dropOldestPending;
  readonly #pruneDone;
  readonly #outboxPage;
  readonly #outboxCount;

  constructor(db: Db) {
    this.targets = new ConfigTable<TargetRow>(db, 'notification_target', [
      'id',
      'tenant_id',
      'name',
      'configuration',
      'description',
      'created_time',
    ]);
    this.templates = new ConfigTable<TemplateRow>(db, 'notification_template', [
      'id',
      'tenant_id',
      'name',
      'notification_type',
      'configuration',
      'created_time',
    ]);
    this.rules = new ConfigTable<RuleRow>(db, 'notification_rule', [
      'id',
      'tenant_id',
      'name',
      'enabled',
      'template_id',
      'trigger_type',
      'trigger_config',
      'recipients_config',
      'additional_config',
      'created_time',
    ]);
    this.#insertInbox = db.prepare<[InboxRow]>(
      `INSERT INTO notification (id, recipient_id, rule_id, type, subject, text, info, status,
         created_time)
       VALUES (@id, @recipient_id, @rule_id, @type, @subject, @text, @info, @status, @created_time)`,
    );
    this.#inboxPage = db.prepare<[string, number, number, number], InboxRow>(
      `SELECT * FROM notification WHERE recipient_id = ? AND (? = 0 OR status = 'SENT')
       ORDER BY rid DESC LIMIT ? OFFSET ?`,
    );
    this.#inboxCount = db.prepare<[string, number], { n: number }>(
      `SELECT count(*) AS n FROM notification WHERE recipient_id = ? AND (? = 0 OR status = 'SENT')`,
    );
    this.#unread = db.prepare<[string], { n: number }>(
      "SELECT count(*) AS n FROM notification WHERE recipient_id = ? AND status = 'SENT'",
    );
    this.#markRead = db.prepare<[string, string]>(
      "UPDATE notification SET status = 'READ' WHERE id = ? AND recipient_id = ? AND status = 'SENT'",
    );
    this.#markAllRead = db.prepare<[string]>(
      "UPDATE notification SET status = 'READ' WHERE recipient_id = ? AND status = 'SENT'",
    );
    this.#deleteInbox = db.prepare<[string, string]>(
      'DELETE FROM notification WHERE id = ? AND recipient_id = ?',
    );
    this.#inboxGet = db.prepare<[string], InboxRow>('SELECT * FROM notification WHERE id = ?');
    this.#marker = db.prepare<[string], { key: string }>(
      'SELECT key FROM admin_settings WHERE key = ?',
    );
    this.#setMarker = db.prepare<[string, number]>(
      `INSERT OR IGNORE INTO admin_settings (key, json_value, updated) VALUES (?, 'true', ?)`,
    );
    this.#inboxTotal = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM notification');
    this.#pruneInbox = db.prepare<[number]>(
      'DELETE FROM notification WHERE rid IN (SELECT rid FROM notification ORDER BY rid LIMIT ?)',
    );
    this.#insertOutbox = db.prepare<[OutboxRow]>(
      `INSERT INTO notification_outbox (id, method, channel, recipient, rule_id, alarm_id,
         clear_statuses, payload, status, attempts, next_at, last_error, history, created_time,
         done_time)
       VALUES (@id, @method, @channel, @recipient, @rule_id, @alarm_id, @clear_statuses, @payload,
         @status, @attempts, @next_at, @last_error, @history, @created_time, @done_time)`,
    );
    this.#due = db.prepare<[number, number], OutboxRow>(
      `SELECT * FROM notification_outbox WHERE status = 'PENDING' AND next_at <= ?
       ORDER BY rid LIMIT ?`,
    );
    this.#nextDue = db.prepare<[], { t: number | null }>(
      "SELECT min(next_at) AS t FROM notification_outbox WHERE status = 'PENDING'",
    );
    this.#outboxGet = db.prepare<[string], OutboxRow>(
      'SELECT * FROM notification_outbox WHERE id = ?',
    );
    this.#attempt = db.prepare<[string]>(
      'UPDATE notification_outbox SET attempts = attempts + 1 WHERE id = ?',
    );
    this.#finish = db.prepare<[string, string | null, string, number, string]>(
      `UPDATE notification_outbox SET status = ?, last_error = ?, history = ?, done_time = ?
       WHERE id = ?`,
    );
    this.#retry = db.prepare<[number, string, string, string]>(
      'UPDATE notification_outbox SET next_at = ?, last_error = ?, history = ? WHERE id = ?',
    );
    this.#pushBack = db.prepare<[{ nextAt: number; channel: string; rid: number }]>(
      `UPDATE notification_outbox SET next_at = @nextAt
       WHERE status = 'PENDING' AND channel = @channel AND next_at < @nextAt AND rid > @rid`,
    );
    this.#pendingCount = db.prepare<[], { n: number }>(
      "SELECT count(*) AS n FROM notification_outbox WHERE status = 'PENDING'",
    );
    this.#dropOldestPending = db.prepare<[number]>(
      `DELETE FROM notification_outbox WHERE rid IN (
         SELECT rid FROM notification_outbox WHERE status = 'PENDING' ORDER BY rid LIMIT ?)`,
    );
    this.#pruneDone = db.prepare<[number]>(
      `DELETE FROM notification_outbox WHERE status != 'PENDING' AND rid NOT IN (
         SELECT rid FROM notification_outbox WHERE status != 'PENDING' ORDER BY rid DESC LIMIT ?)`,
    );
    this.#outboxPage = db.prepare<[{ status: string; limit: number; offset: number }], OutboxRow>(
      `SELECT * FROM notification_outbox WHERE (@status = '' OR status = @status)
       ORDER BY rid DESC LIMIT @limit OFFSET @offset`,
    );
    this.#outboxCount = db.prepare<[{ status: string }], { n: number }>(
      "SELECT count(*) AS n FROM notification_outbox WHERE (@status = '' OR status = @status)",
    );
  }

  insertInbox(row: InboxRow): void {
    this.#insertInbox.run(row);
  }
  inbox(
    recipientId: string,
    unreadOnly: boolean,
    limit: number,
    offset: number,
  ): { rows: InboxRow[]; total: number } {
    const u = unreadOnly ? 1 : 0;
    return {
      rows: this.#inboxPage.all(recipientId, u, limit, offset),
      total: this.#inboxCount.get(recipientId, u)?.n ?? 0,
    };
  }
  unread(recipientId: string): number {
    return this.#unread.get(recipientId)?.n ?? 0;
  }
  markRead(id: string, recipientId: string): boolean {
    return this.#markRead.run(id, recipientId).changes > 0;
  }
  markAllRead(recipientId: string): number {
    return this.#markAllRead.run(recipientId).changes;
  }
  deleteInbox(id: string, recipientId: string): boolean {
    return this.#deleteInbox.run(id, recipientId).changes > 0;
  }
  inboxGet(id: string): InboxRow | undefined {
    return this.#inboxGet.get(id);
  }
  /** A one-time step (the default rule) was done; kept beside the system settings. */
  done(marker: string): boolean {
    return this.#marker.get(marker) !== undefined;
  }
  setDone(marker: string, now: number): void {
    this.#setMarker.run(marker, now);
  }
  inboxTotal(): number {
    return this.#inboxTotal.get()?.n ?? 0;
  }
  pruneInbox(n: number): number {
    return this.#pruneInbox.run(n).changes;
  }

  insertOutbox(row: OutboxRow): void {
    this.#insertOutbox.run(row);
  }
  due(now: number, limit: number): OutboxRow[] {
    return this.#due.all(now, limit);
  }
  nextDue(): number | null {
    return this.#nextDue.get()?.t ?? null;
  }
  outbox(id: string): OutboxRow | undefined {
    return this.#outboxGet.get(id);
  }
  /** Counts an attempt before it is made (a crash mid-send still counts it). */
  countAttempt(id: string): void {
    this.#attempt.run(id);
  }
  finish(
    id: string,
    status: OutboxRow['status'],
    error: string | null,
    history: string,
    now: number,
  ) {
    this.#finish.run(status, error, history, now, id);
  }
  retry(id: string, nextAt: number, error: string, history: string): void {
    this.#retry.run(nextAt, error, history, id);
  }
  /** Holds the rest of a channel behind a failed delivery, so they keep their order. */
  pushBack(channel: string, afterRid: number, nextAt: number): void {
    this.#pushBack.run({ nextAt, channel, rid: afterRid });
  }
  pending(): number {
    return this.#pendingCount.get()?.n ?? 0;
  }
  dropOldestPending(n: number): number {
    return this.#dropOldestPending.run(n).changes;
  }
  /** Keeps the newest `keep` finished deliveries (their attempts stay readable over REST). */
  pruneDone(keep: number): number {
    return this.#pruneDone.run(keep).changes;
  }
  outboxPage(status: string, limit: number, offset: number): { rows: OutboxRow[]; total: number } {
    return {
      rows: this.#outboxPage.all({ status, limit, offset }),
      total: this.#outboxCount.get({ status })?.n ?? 0,
    };
  }
}
