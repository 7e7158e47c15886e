/** SQL of the notification center's tables (migration 013); statements are prepared once. */
import type { Db } from '../db/open.js';
import type { RequestStats } from './types.js';

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
  request_id: string | null;
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
  request_id: string | null;
}

export interface RequestRow {
  rid?: number;
  id: string;
  tenant_id: string;
  template_id: string | null;
  template_name: string | null;
  /** The inline template's `configuration` (JSON), when no template id was given. */
  template: string | null;
  /** Target ids (JSON array). */
  targets: string;
  info: string | null;
  /** The template's enabled delivery methods (JSON array). */
  delivery_methods: string;
  sender_id: string | null;
  sending_delay_sec: number;
  /** RequestStats as JSON. */
  stats: string;
  created_time: number;
}

/** Errors kept per delivery method of one request (`totalErrors` counts them all). */
const ERRORS_KEPT = 100;

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
  readonly #db: Db;
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
  readonly #insertRequest;
  readonly #requestGet;
  readonly #requestStats;
  readonly #setRequestStats;
  readonly #requestPage;
  readonly #requestPageAsc;
  readonly #requestCount;
  readonly #pruneRequests;
  readonly #deleteRequest;
  readonly #requestPending;
  readonly #requestInbox;
  readonly #deleteRequestInbox;
  readonly #cancelRequestOutbox;
  readonly #oldestPending;

  constructor(db: Db) {
    this.#db = db;
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
         created_time, request_id)
       VALUES (@id, @recipient_id, @rule_id, @type, @subject, @text, @info, @status, @created_time,
         @request_id)`,
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
    this.#inboxTotal = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM notification');
    this.#pruneInbox = db.prepare<[number]>(
      'DELETE FROM notification WHERE rid IN (SELECT rid FROM notification ORDER BY rid LIMIT ?)',
    );
    this.#insertOutbox = db.prepare<[OutboxRow]>(
      `INSERT INTO notification_outbox (id, method, channel, recipient, rule_id, alarm_id,
         clear_statuses, payload, status, attempts, next_at, last_error, history, created_time,
         done_time, request_id)
       VALUES (@id, @method, @channel, @recipient, @rule_id, @alarm_id, @clear_statuses, @payload,
         @status, @attempts, @next_at, @last_error, @history, @created_time, @done_time,
         @request_id)`,
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
    this.#oldestPending = db.prepare<
      [number],
      { request_id: string; method: string; recipient: string }
    >(
      `SELECT request_id, method, recipient FROM (
         SELECT rid, request_id, method, recipient FROM notification_outbox
         WHERE status = 'PENDING' ORDER BY rid LIMIT ?)
       WHERE request_id IS NOT NULL`,
    );
    this.#insertRequest = db.prepare<[RequestRow]>(
      `INSERT INTO notification_request (id, tenant_id, template_id, template_name, template,
         targets, info, delivery_methods, sender_id, sending_delay_sec, stats, created_time)
       VALUES (@id, @tenant_id, @template_id, @template_name, @template, @targets, @info,
         @delivery_methods, @sender_id, @sending_delay_sec, @stats, @created_time)`,
    );
    this.#requestGet = db.prepare<[string], RequestRow>(
      'SELECT * FROM notification_request WHERE id = ?',
    );
    this.#requestStats = db.prepare<[string], { stats: string }>(
      'SELECT stats FROM notification_request WHERE id = ?',
    );
    this.#setRequestStats = db.prepare<[string, string]>(
      'UPDATE notification_request SET stats = ? WHERE id = ?',
    );
    const search = "instr(lower(coalesce(template_name, '')), ?) > 0";
    this.#requestPage = db.prepare<[string, number, number], RequestRow>(
      `SELECT * FROM notification_request WHERE ${search} ORDER BY rid DESC LIMIT ? OFFSET ?`,
    );
    this.#requestPageAsc = db.prepare<[string, number, number], RequestRow>(
      `SELECT * FROM notification_request WHERE ${search} ORDER BY rid LIMIT ? OFFSET ?`,
    );
    this.#requestCount = db.prepare<[string], { n: number }>(
      `SELECT count(*) AS n FROM notification_request WHERE ${search}`,
    );
    this.#pruneRequests = db.prepare<[number]>(
      `DELETE FROM notification_request WHERE rid IN (
         SELECT rid FROM notification_request ORDER BY rid LIMIT ?)`,
    );
    this.#deleteRequest = db.prepare<[string]>('DELETE FROM notification_request WHERE id = ?');
    this.#requestPending = db.prepare<[string], { n: number }>(
      `SELECT count(*) AS n FROM notification_outbox
       WHERE request_id = ? AND status = 'PENDING'`,
    );
    this.#requestInbox = db.prepare<[string], { id: string; recipient_id: string }>(
      'SELECT id, recipient_id FROM notification WHERE request_id = ?',
    );
    this.#deleteRequestInbox = db.prepare<[string]>(
      'DELETE FROM notification WHERE request_id = ?',
    );
    this.#cancelRequestOutbox = db.prepare<[number, string]>(
      `UPDATE notification_outbox SET status = 'CANCELLED', last_error = 'request deleted',
         done_time = ? WHERE request_id = ? AND status = 'PENDING'`,
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
  /**
   * Finishes a delivery; one of a request also counts in the request's stats (SENT as sent,
   * FAILED as an error), in the same transaction.
   */
  finish(
    row: Pick<OutboxRow, 'id' | 'method' | 'recipient' | 'request_id'>,
    status: OutboxRow['status'],
    error: string | null,
    history: string,
    now: number,
  ) {
    this.#db.transaction(() => {
      this.#finish.run(status, error, history, now, row.id);
      if (!row.request_id) return;
      if (status === 'SENT') this.reportSent(row.request_id, row.method, 1);
      else if (status === 'FAILED')
        this.reportError(row.request_id, row.method, row.recipient, error ?? 'failed');
    })();
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
  /** Drops the `n` oldest undelivered rows; those of a request count as its errors. */
  dropOldestPending(n: number): number {
    for (const r of this.#oldestPending.all(n))
      this.reportError(r.request_id, r.method, r.recipient, 'dropped: the outbox was full');
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

  // ---- ad-hoc requests ----

  insertRequest(row: RequestRow): void {
    this.#insertRequest.run(row);
  }
  request(id: string): RequestRow | undefined {
    return this.#requestGet.get(id);
  }
  requestPage(
    search: string,
    newestFirst: boolean,
    limit: number,
    offset: number,
  ): { rows: RequestRow[]; total: number } {
    const s = search.toLowerCase();
    const page = newestFirst ? this.#requestPage : this.#requestPageAsc;
    return { rows: page.all(s, limit, offset), total: this.#requestCount.get(s)?.n ?? 0 };
  }
  requestTotal(): number {
    return this.#requestCount.get('')?.n ?? 0;
  }
  pruneRequests(n: number): number {
    return this.#pruneRequests.run(n).changes;
  }
  /** Undelivered outbox rows of a request (it is PROCESSING or SCHEDULED while there are any). */
  requestPending(id: string): number {
    return this.#requestPending.get(id)?.n ?? 0;
  }
  #updateStats(id: string, change: (s: RequestStats) => void): void {
    const row = this.#requestStats.get(id);
    if (!row) return; // dropped at the bound or deleted: nothing to count in
    const stats = JSON.parse(row.stats) as RequestStats;
    change(stats);
    this.#setRequestStats.run(JSON.stringify(stats), id);
  }
  reportSent(id: string, method: string, n: number): void {
    this.#updateStats(id, (s) => {
      s.sent[method] = (s.sent[method] ?? 0) + n;
    });
  }
  reportError(id: string, method: string, recipient: string, error: string): void {
    this.#updateStats(id, (s) => {
      s.totalErrors++;
      s.errors[method] ??= {};
      const errors = s.errors[method];
      if (recipient in errors || Object.keys(errors).length < ERRORS_KEPT)
        errors[recipient] = error;
    });
  }
  /**
   * Deletes a request: its inbox entries go, its undelivered outbox rows are CANCELLED. Returns
   * the inbox entries removed (for the bus).
   */
  deleteRequest(id: string, now: number): Array<{ id: string; recipient_id: string }> {
    return this.#db.transaction(() => {
      const removed = this.#requestInbox.all(id);
      this.#deleteRequestInbox.run(id);
      this.#cancelRequestOutbox.run(now, id);
      this.#deleteRequest.run(id);
      return removed;
    })();
  }
}
