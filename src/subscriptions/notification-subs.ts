/**
 * The notification commands of the WebSocket API (ThingsBoard's `NOTIFICATIONS`,
 * `NOTIFICATIONS_COUNT`, `MARK_NOTIFICATIONS_AS_READ`, `MARK_ALL_NOTIFICATIONS_AS_READ`): the
 * caller's own inbox, its unread count, and marking read. Updates follow the inbox's bus events.
 */

import type { PageData, PageQuery } from '../common/entity.js';
import { ValidationError } from '../errors.js';
import { num, type Raw, strList } from './commands.js';
import type { Sub, SubContext } from './subs.js';
import { ERROR_CODE } from './types.js';

/** A notification as the inbox returns it (ThingsBoard's `Notification` JSON). */
export interface InboxNotification {
  readonly id: { readonly id: string };
  readonly type?: string;
}

/** What the notification domain offers the WebSocket API: a user's own inbox. */
export interface NotificationInbox {
  inbox(userId: string, q: PageQuery, unreadOnly?: boolean): PageData<InboxNotification>;
  unreadCount(userId: string): number;
  markRead(userId: string, id: string): void;
  markAllRead(userId: string): number;
}

/** A committed change of some user's inbox. */
export type InboxChange =
  | {
      readonly kind: 'created';
      readonly recipientId: string;
      readonly notification: InboxNotification;
    }
  | { readonly kind: 'read' | 'deleted'; readonly recipientId: string; readonly unread: number };

/** Most notifications one NOTIFICATIONS subscription lists (`limit`). */
const MAX_LIMIT = 100;

function inboxOf(ctx: SubContext): NotificationInbox {
  if (!ctx.notifications) throw new ValidationError('Notifications are not available');
  return ctx.notifications;
}

/** NOTIFICATIONS: the latest `limit` unread notifications, then each new one. */
export class NotificationsSub implements Sub {
  readonly #limit: number;
  readonly #types: ReadonlySet<string> | undefined;
  readonly #inbox: NotificationInbox;
  #seq = 0;

  constructor(
    private readonly cmdId: number,
    body: Raw,
    private readonly ctx: SubContext,
  ) {
    this.#inbox = inboxOf(ctx);
    const limit = Math.trunc(num(body, 'limit', 10));
    if (limit < 1 || limit > MAX_LIMIT)
      throw new ValidationError(`limit must be from 1 to ${MAX_LIMIT}`);
    this.#limit = limit;
    const types = strList(body.types);
    this.#types = types ? new Set(types) : undefined;
  }

  devices(): Iterable<string> {
    return [];
  }

  start(): void {
    this.#sendList();
  }

  dispose(): void {}

  #user(): string {
    return this.ctx.principal.userId;
  }

  #sendList(): void {
    const page = this.#inbox.inbox(
      this.#user(),
      { page: 0, pageSize: this.#limit, sortOrder: 'DESC' },
      true,
    );
    const notifications = this.#types
      ? page.data.filter((n) => n.type !== undefined && this.#types?.has(n.type))
      : page.data;
    this.ctx.send({
      cmdId: this.cmdId,
      cmdUpdateType: 'NOTIFICATIONS',
      errorCode: ERROR_CODE.none,
      errorMsg: null,
      notifications,
      update: null,
      totalUnreadCount: page.totalElements,
      sequenceNumber: this.#seq++,
    });
  }

  onInbox(change: InboxChange): void {
    if (change.recipientId !== this.#user()) return;
    if (change.kind !== 'created') {
      this.#sendList();
      return;
    }
    const n = change.notification;
    if (this.#types && (n.type === undefined || !this.#types.has(n.type))) return;
    this.ctx.send({
      cmdId: this.cmdId,
      cmdUpdateType: 'NOTIFICATIONS',
      errorCode: ERROR_CODE.none,
      errorMsg: null,
      notifications: null,
      update: n,
      totalUnreadCount: this.#inbox.unreadCount(this.#user()),
      sequenceNumber: this.#seq++,
    });
  }
}

/** NOTIFICATIONS_COUNT: the unread count, sent again when it changes. */
export class NotificationsCountSub implements Sub {
  readonly #inbox: NotificationInbox;
  #seq = 0;
  #count = -1;

  constructor(
    private readonly cmdId: number,
    private readonly ctx: SubContext,
  ) {
    this.#inbox = inboxOf(ctx);
  }

  devices(): Iterable<string> {
    return [];
  }

  start(): void {
    this.#send(this.#inbox.unreadCount(this.ctx.principal.userId));
  }

  dispose(): void {}

  #send(count: number): void {
    if (count === this.#count) return;
    this.#count = count;
    this.ctx.send({
      cmdId: this.cmdId,
      cmdUpdateType: 'NOTIFICATIONS_COUNT',
      errorCode: ERROR_CODE.none,
      errorMsg: null,
      totalUnreadCount: count,
      sequenceNumber: this.#seq++,
    });
  }

  onInbox(change: InboxChange): void {
    if (change.recipientId !== this.ctx.principal.userId) return;
    this.#send(
      change.kind === 'created' ? this.#inbox.unreadCount(change.recipientId) : change.unread,
    );
  }
}

/** MARK_NOTIFICATIONS_AS_READ (`notifications`: ids) and MARK_ALL_NOTIFICATIONS_AS_READ. */
export function markRead(body: Raw, all: boolean, ctx: SubContext): void {
  const inbox = inboxOf(ctx);
  const user = ctx.principal.userId;
  if (all) {
    inbox.markAllRead(user);
    return;
  }
  const ids = strList(body.notifications);
  if (!ids) throw new ValidationError('notifications must list notification ids');
  for (const id of ids) inbox.markRead(user, id.toLowerCase());
}
