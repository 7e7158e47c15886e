/**
 * The notification center (issue 14 §7-8, platform.md §8): targets, templates and rules as
 * ThingsBoard's JSON; the rules fire on alarm changes (inside the alarm's own transaction, so a
 * notification is never lost nor sent for an alarm that did not commit) and on device activity;
 * each recipient gets an inbox entry (WEB) or an outbox row (EMAIL, SMS, webhook) that the
 * outbox sender delivers with retries.
 *
 * The inbox API (`inbox`, `unreadCount`, `markRead`, `markAllRead`, `deleteNotification`) and the
 * bus events `notification.created`, `notification.read` and `notification.deleted` are what
 * transports use: REST here, and WebSocket subscriptions (`NOTIFICATIONS`, `NOTIFICATIONS_COUNT`).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { type AlarmEvent, type AlarmStatus, statusOf } from '../alarms/types.js';
import { type PageData, type PageQuery, pageData } from '../common/entity.js';
import { validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import type { ActivitySnapshot } from '../devices/activity-service.js';
import type { Device, DeviceAction } from '../devices/device-service.js';
import { NotFoundError, ValidationError } from '../errors.js';
import type { EventBus } from '../events.js';
import type { AdminSettingsStore } from '../settings/admin-settings-store.js';
import type { User } from '../users/user-service.js';
import { fillTemplate } from './channels.js';
import {
  type InboxRow,
  NotificationStore,
  type OutboxRow,
  type RequestRow,
  type RuleRow,
  type TargetRow,
  type TemplateRow,
} from './notification-store.js';
import {
  type ActivityTrigger,
  type AlarmTrigger,
  type AssignmentTrigger,
  type CommentTrigger,
  type Delivery,
  type DeliveryAttempt,
  type DeliveryMethod,
  type EdgeConnectionTrigger,
  type EntityActionTrigger,
  type MethodTemplate,
  type Notification,
  type NotificationType,
  type OutboxPayload,
  type RequestInfo,
  type RequestStats,
  requestBody,
  ruleBody,
  type TargetConfig,
  type TriggerConfig,
  targetBody,
  templateBody,
} from './types.js';

export interface NotificationLimits {
  /** Inbox entries kept (all users); past it the oldest go, counted. */
  readonly inboxMax: number;
  /** Ad-hoc requests kept; past it the oldest go, counted. */
  readonly requestsMax: number;
  /** Undelivered outbox rows; past it the oldest undelivered are dropped, counted. */
  readonly outboxMax: number;
  /** Finished deliveries kept for `GET /api/notification/deliveries`. */
  readonly doneKept: number;
  /** Targets, templates and rules each; a save past it is refused (400), counted. */
  readonly maxConfigs: number;
}

export interface NotificationServiceDeps {
  readonly db: Db;
  /** `admin_settings`: where the one-time defaults marker is kept. */
  readonly settings: AdminSettingsStore;
  readonly tenants: { readonly id: string };
  readonly bus: EventBus;
  readonly log: Logger;
  readonly users: {
    recipients(f: {
      authority?: 'TENANT_ADMIN' | 'CUSTOMER_USER';
      customerId?: string;
      ids?: readonly string[];
    }): User[];
  };
  /** A device's name, owner and profile; undefined when it is gone. */
  readonly device: (
    id: string,
  ) => { name: string; type: string; customerId: string | null; profileId: string } | undefined;
  readonly limits: NotificationLimits;
  /** Called after a commit that queued outbox rows (wakes the sender). */
  readonly onQueued?: () => void;
  readonly now?: () => number;
}

/** Counters of what the bounds refused or dropped (`GET /api/notification/stats`, `/metrics`). */
export interface NotificationStats {
  inbox: number;
  pending: number;
  requests: number;
  inboxDropped: number;
  outboxDropped: number;
  requestsDropped: number;
  configsRefused: number;
}

/** When a firing's deliveries are due later: an escalation level, or a delayed request. */
interface Later {
  readonly dueAt: number;
  /** The escalated alarm (its clear statuses cancel the delivery); null for a request. */
  readonly alarmId: string | null;
  readonly clear: readonly string[];
}

/** What one firing renders, before recipients: the template, its values, the inbox info. */
/** The cloud link's state change (`upstream.connected` / `upstream.disconnected`). */
export interface UpstreamLinkEvent {
  readonly connected: boolean;
  readonly url: string;
  readonly error: string | null;
}

interface Firing {
  readonly ruleId: string | null;
  readonly type: NotificationType;
  readonly template: Partial<Record<DeliveryMethod, MethodTemplate>>;
  readonly values: Record<string, string>;
  readonly info: Record<string, unknown>;
  /** Customer of the originator (ORIGINATOR_ENTITY_OWNER_USERS). */
  readonly customerId: string | null;
  /** The ad-hoc request this firing sends. */
  readonly requestId?: string;
}

const ACTION_OF: Partial<Record<AlarmEvent['action'], AlarmTrigger['notifyOn'][number]>> = {
  CREATED: 'CREATED',
  SEVERITY_UPDATED: 'SEVERITY_CHANGED',
  ACKNOWLEDGED: 'ACKNOWLEDGED',
  CLEARED: 'CLEARED',
};

/** Does an alarm status match one of `clearRule.alarmStatuses` (ThingsBoard's search statuses)? */
export function statusMatches(status: AlarmStatus, wanted: readonly string[]): boolean {
  return wanted.some(
    (w) =>
      w === 'ANY' ||
      (w === 'ACTIVE' && status.startsWith('ACTIVE')) ||
      (w === 'CLEARED' && status.startsWith('CLEARED')) ||
      (w === 'ACK' && status.endsWith('_ACK')) ||
      (w === 'UNACK' && status.endsWith('UNACK')),
  );
}

const DEFAULTS_MARKER = 'notification.defaults';
const MAX_RECIPIENTS_PER_FIRING = 1000;

export class NotificationService {
  readonly #store: NotificationStore;
  readonly #tx: <T>(fn: () => T) => T;
  /** A nested better-sqlite3 transaction is a SAVEPOINT: a failed firing undoes only itself. */
  readonly #savepoint: (fn: () => unknown) => unknown;
  /** Inbox entries written in transactions not yet known to be committed. */
  #created: string[] = [];
  #queued = false;
  #flush: NodeJS.Immediate | undefined;
  readonly #stats = { inboxDropped: 0, outboxDropped: 0, requestsDropped: 0, configsRefused: 0 };
  #lastDropLog = 0;

  constructor(private readonly deps: NotificationServiceDeps) {
    this.#store = new NotificationStore(deps.db);
    const tx = deps.db.transaction((fn: () => unknown) => fn());
    this.#savepoint = tx;
    this.#tx = <T>(fn: () => T) => (deps.db.inTransaction ? fn() : (tx(fn) as T));
  }

  get store(): NotificationStore {
    return this.#store;
  }

  #now(): number {
    return this.deps.now?.() ?? Date.now();
  }

  /** Creates the default "New alarm" rule once (platform.md §8: tenant admins, inbox). */
  init(): void {
    if (this.deps.settings.has(DEFAULTS_MARKER)) return;
    this.#tx(() => {
      const now = this.#now();
      const tenant = this.deps.tenants.id;
      const targetId = randomUUID();
      const templateId = randomUUID();
      this.#store.targets.put({
        id: targetId,
        tenant_id: tenant,
        name: 'Tenant administrators',
        configuration: JSON.stringify({
          type: 'PLATFORM_USERS',
          usersFilter: { type: 'TENANT_ADMINISTRATORS' },
        }),
        description: null,
        created_time: now,
      });
      this.#store.templates.put({
        id: templateId,
        tenant_id: tenant,
        name: 'New alarm',
        notification_type: 'ALARM',
        configuration: JSON.stringify({
          deliveryMethodsTemplates: {
            WEB: {
              method: 'WEB',
              enabled: true,
              subject: "New alarm '${alarmType}'",
              body: 'Severity: ${alarmSeverity}, originator: ${alarmOriginatorName}',
            },
          },
        }),
        created_time: now,
      });
      this.#store.rules.put({
        id: randomUUID(),
        tenant_id: tenant,
        name: 'New alarm',
        enabled: 1,
        template_id: templateId,
        trigger_type: 'ALARM',
        trigger_config: JSON.stringify({
          triggerType: 'ALARM',
          alarmTypes: null,
          alarmSeverities: null,
          notifyOn: ['CREATED'],
          clearRule: null,
        }),
        recipients_config: JSON.stringify({
          triggerType: 'ALARM',
          escalationTable: { '0': [targetId] },
        }),
        additional_config: JSON.stringify({
          description: 'Notifies tenant administrators of new alarms',
        }),
        created_time: now,
      });
      this.deps.settings.putIfAbsent(DEFAULTS_MARKER, true, now);
    });
  }

  /**
   * A device was created, updated or deleted. Called inside that change's transaction
   * (DeviceService `inCommit`): the inbox entries and outbox rows commit with the change, or not
   * at all. A broken rule is undone on its own; the change still commits.
   */
  onEntityAction(action: DeviceAction, device: Device): void {
    try {
      this.#savepoint(() => this.#onEntityAction(action, device));
    } catch (err) {
      this.deps.log.error({ err, deviceId: device.id.id }, 'entity action notifications failed');
    }
  }

  #onEntityAction(action: DeviceAction, device: Device): void {
    const rules = this.#store.rules
      .all()
      .filter((r) => r.enabled === 1 && r.trigger_type === 'ENTITY_ACTION')
      .filter((r) => (JSON.parse(r.trigger_config) as EntityActionTrigger)[action] === true);
    const id = device.id.id;
    const values = {
      entityType: 'DEVICE',
      entityId: id,
      entityName: device.name,
      actionType: action,
      deviceType: device.type,
    };
    for (const rule of rules) {
      this.#fire(
        {
          ruleId: rule.id,
          type: 'ENTITY_ACTION',
          template: this.#methods(rule.template_id),
          values,
          customerId: null,
          info: {
            type: 'ENTITY_ACTION',
            action,
            entityId: { entityType: 'DEVICE', id },
            entityName: device.name,
          },
        },
        ruleTargets(JSON.parse(rule.recipients_config)),
      );
    }
  }

  stop(): void {
    if (this.#flush) clearImmediate(this.#flush);
    this.#flush = undefined;
    this.#afterCommit();
  }

  // ---- targets, templates, rules (REST, tenant administrator) ----

  #checkRoom(count: number, isNew: boolean, what: string): void {
    if (isNew && count >= this.deps.limits.maxConfigs) {
      this.#stats.configsRefused++;
      throw new ValidationError(
        `At most ${this.deps.limits.maxConfigs} notification ${what}s can be stored`,
      );
    }
  }

  saveTarget(body: unknown): ReturnType<typeof toTarget> {
    const input = validate(targetBody, body, 'notification target');
    const existing = input.id ? this.#target(input.id.id) : undefined;
    this.#checkRoom(this.#store.targets.count(), !existing, 'target');
    const row: TargetRow = {
      id: existing?.id ?? randomUUID(),
      tenant_id: this.deps.tenants.id,
      name: input.name,
      configuration: JSON.stringify(input.configuration),
      description: input.configuration.description ?? null,
      created_time: existing?.created_time ?? this.#now(),
    };
    this.#store.targets.put(row);
    return toTarget(row);
  }

  getTarget(id: string) {
    return toTarget(this.#target(id));
  }

  listTargets(q: PageQuery) {
    return this.#page(this.#store.targets, q, toTarget);
  }

  deleteTarget(id: string): void {
    this.#target(id);
    const users = this.#store.rules
      .all()
      .filter((r) => ruleTargets(JSON.parse(r.recipients_config)).includes(id));
    if (users.length > 0)
      throw new ValidationError(
        `Notification target is used by rule(s): ${users.map((r) => r.name).join(', ')}`,
      );
    this.#store.targets.delete(id);
  }

  saveTemplate(body: unknown): ReturnType<typeof toTemplate> {
    const input = validate(templateBody, body, 'notification template');
    const existing = input.id ? this.#template(input.id.id) : undefined;
    this.#checkRoom(this.#store.templates.count(), !existing, 'template');
    const t = input.configuration.deliveryMethodsTemplates;
    if (t.SMS?.subject) delete t.SMS.subject;
    const row: TemplateRow = {
      id: existing?.id ?? randomUUID(),
      tenant_id: this.deps.tenants.id,
      name: input.name,
      notification_type: input.notificationType,
      configuration: JSON.stringify({
        ...input.configuration,
        deliveryMethodsTemplates: Object.fromEntries(
          Object.entries(t).map(([m, v]) => [m, { ...(v as MethodTemplate), method: m }]),
        ),
      }),
      created_time: existing?.created_time ?? this.#now(),
    };
    this.#store.templates.put(row);
    return toTemplate(row);
  }

  getTemplate(id: string) {
    return toTemplate(this.#template(id));
  }

  listTemplates(q: PageQuery) {
    return this.#page(this.#store.templates, q, toTemplate);
  }

  deleteTemplate(id: string): void {
    this.#template(id);
    const users = this.#store.rules.all().filter((r) => r.template_id === id);
    if (users.length > 0)
      throw new ValidationError(
        `Notification template is used by rule(s): ${users.map((r) => r.name).join(', ')}`,
      );
    this.#store.templates.delete(id);
  }

  saveRule(body: unknown): ReturnType<typeof toRule> {
    const input = validate(ruleBody, body, 'notification rule');
    if (input.triggerType !== input.triggerConfig.triggerType)
      throw new ValidationError('triggerType and triggerConfig.triggerType differ');
    const existing = input.id ? this.#rule(input.id.id) : undefined;
    this.#checkRoom(this.#store.rules.count(), !existing, 'rule');
    this.#template(input.templateId.id);
    const recipients = { ...input.recipientsConfig, triggerType: input.triggerType };
    const targets = ruleTargets(recipients);
    if (targets.length === 0)
      throw new ValidationError(
        input.triggerType === 'ALARM'
          ? 'recipientsConfig.escalationTable must name at least one target'
          : 'recipientsConfig.targets must name at least one target',
      );
    for (const t of targets) this.#target(t);
    const row: RuleRow = {
      id: existing?.id ?? randomUUID(),
      tenant_id: this.deps.tenants.id,
      name: input.name,
      enabled: input.enabled ? 1 : 0,
      template_id: input.templateId.id,
      trigger_type: input.triggerType,
      trigger_config: JSON.stringify(input.triggerConfig),
      recipients_config: JSON.stringify(recipients),
      additional_config: input.additionalConfig ? JSON.stringify(input.additionalConfig) : null,
      created_time: existing?.created_time ?? this.#now(),
    };
    this.#store.rules.put(row);
    return toRule(row);
  }

  getRule(id: string) {
    return toRule(this.#rule(id));
  }

  listRules(q: PageQuery) {
    return this.#page(this.#store.rules, q, toRule);
  }

  deleteRule(id: string): void {
    this.#rule(id);
    this.#store.rules.delete(id);
  }

  #page<R extends { id: string; name: string }, T>(
    table: {
      page(search: string, limit: number, offset: number): { rows: R[]; total: number };
    },
    q: PageQuery,
    map: (r: R) => T,
  ): PageData<T> {
    const { rows, total } = table.page(q.textSearch ?? '', q.pageSize, q.page * q.pageSize);
    return pageData(rows.map(map), total, q);
  }

  #target(id: string): TargetRow {
    const row = this.#store.targets.get(id);
    if (!row) throw new NotFoundError(`Notification target with id [${id}] is not found`);
    return row;
  }

  #template(id: string): TemplateRow {
    const row = this.#store.templates.get(id);
    if (!row) throw new NotFoundError(`Notification template with id [${id}] is not found`);
    return row;
  }

  #rule(id: string): RuleRow {
    const row = this.#store.rules.get(id);
    if (!row) throw new NotFoundError(`Notification rule with id [${id}] is not found`);
    return row;
  }

  // ---- triggers ----

  /**
   * An alarm changed. Called inside the alarm's transaction (AlarmService `inTransaction`): the
   * inbox entries and outbox rows commit with the alarm, or not at all.
   */
  onAlarm(event: AlarmEvent): void {
    try {
      this.#savepoint(() => {
        this.#onAlarm(event);
        this.#onAssignment(event);
      });
    } catch (err) {
      // The alarm still commits: a broken rule must not lose the alarm itself.
      this.deps.log.error({ err, alarmId: event.alarm.id.id }, 'alarm notifications failed');
    }
  }

  #onAlarm(event: AlarmEvent): void {
    const on = ACTION_OF[event.action];
    if (!on) return;
    const { alarm } = event;
    for (const rule of this.#store.rules.all()) {
      if (rule.enabled !== 1 || rule.trigger_type !== 'ALARM') continue;
      const trigger = JSON.parse(rule.trigger_config) as AlarmTrigger;
      if (!trigger.notifyOn.includes(on)) continue;
      if (trigger.alarmTypes?.length && !trigger.alarmTypes.includes(alarm.type)) continue;
      if (trigger.alarmSeverities?.length && !trigger.alarmSeverities.includes(alarm.severity))
        continue;
      const { values, status, customerId } = this.#alarmValues(alarm);
      values.action = on.toLowerCase().replace('_', ' ');
      const firing: Firing = {
        ruleId: rule.id,
        type: 'ALARM',
        template: this.#methods(rule.template_id),
        values,
        customerId,
        info: {
          type: 'ALARM',
          alarmId: alarm.id.id,
          alarmType: alarm.type,
          action: on.toLowerCase(),
          alarmOriginator: alarm.originator,
          alarmOriginatorName: values.alarmOriginatorName,
          alarmSeverity: alarm.severity,
          alarmStatus: status,
          acknowledged: alarm.acknowledged,
          cleared: alarm.cleared,
          alarmCustomerId: customerId && { entityType: 'CUSTOMER', id: customerId },
        },
      };
      const table =
        (JSON.parse(rule.recipients_config) as { escalationTable?: Record<string, string[]> })
          .escalationTable ?? {};
      for (const [delay, targets] of Object.entries(table)) {
        const seconds = Number(delay);
        // Escalation (later levels) starts with a new alarm; changes notify the first level.
        if (seconds > 0 && on !== 'CREATED') continue;
        const escalation: Later | undefined =
          seconds > 0
            ? {
                dueAt: this.#now() + seconds * 1000,
                alarmId: alarm.id.id,
                clear: trigger.clearRule?.alarmStatuses ?? [],
              }
            : undefined;
        this.#fire(firing, targets, escalation);
      }
    }
  }

  /** The placeholders of an alarm: key values of its details, then ThingsBoard's names. */
  #alarmValues(alarm: AlarmEvent['alarm']) {
    const device = this.deps.device(alarm.originator.id);
    const details =
      alarm.details && typeof alarm.details === 'object' && !Array.isArray(alarm.details)
        ? (alarm.details as Record<string, unknown>)
        : {};
    const values: Record<string, string> = {};
    for (const [k, v] of Object.entries(details)) {
      if (v !== null && typeof v !== 'object') values[k] = String(v);
    }
    const status = statusOf(alarm.acknowledged, alarm.cleared);
    Object.assign(values, {
      alarmType: alarm.type,
      alarmId: alarm.id.id,
      alarmSeverity: alarm.severity.toLowerCase(),
      alarmStatus: status,
      alarmOriginatorEntityType: alarm.originator.entityType,
      alarmOriginatorName: device?.name ?? alarm.originator.id,
      alarmOriginatorId: alarm.originator.id,
    });
    return { values, status, customerId: device?.customerId ?? null };
  }

  /** Rules of `type` whose alarm type, severity and status filters let `alarm` through. */
  #alarmRules<T extends AssignmentTrigger | CommentTrigger>(
    type: T['triggerType'],
    alarm: AlarmEvent['alarm'],
  ): Array<{ rule: RuleRow; trigger: T }> {
    const status = statusOf(alarm.acknowledged, alarm.cleared);
    const out: Array<{ rule: RuleRow; trigger: T }> = [];
    for (const rule of this.#store.rules.all()) {
      if (rule.enabled !== 1 || rule.trigger_type !== type) continue;
      const trigger = JSON.parse(rule.trigger_config) as T;
      if (trigger.alarmTypes?.length && !trigger.alarmTypes.includes(alarm.type)) continue;
      if (trigger.alarmSeverities?.length && !trigger.alarmSeverities.includes(alarm.severity))
        continue;
      if (trigger.alarmStatuses?.length && !statusMatches(status, trigger.alarmStatuses)) continue;
      out.push({ rule, trigger });
    }
    return out;
  }

  /** ALARM_ASSIGNMENT rules (in the alarm's transaction, from `onAlarm`). */
  #onAssignment(event: AlarmEvent): void {
    if (event.action !== 'ASSIGNED' && event.action !== 'UNASSIGNED') return;
    const { alarm } = event;
    const rules = this.#alarmRules<AssignmentTrigger>('ALARM_ASSIGNMENT', alarm).filter((r) =>
      r.trigger.notifyOn.includes(event.action as 'ASSIGNED' | 'UNASSIGNED'),
    );
    if (rules.length === 0) return;
    const { values, customerId } = this.#alarmValues(alarm);
    values.action = event.action.toLowerCase();
    const assignee = alarm.assigneeId
      ? this.deps.users.recipients({ ids: [alarm.assigneeId.id] })[0]
      : undefined;
    values.assigneeEmail = assignee?.email ?? '';
    values.assigneeFirstName = assignee?.firstName ?? '';
    values.assigneeLastName = assignee?.lastName ?? '';
    values.assigneeId = alarm.assigneeId?.id ?? '';
    for (const { rule } of rules) {
      this.#fire(
        {
          ruleId: rule.id,
          type: 'ALARM_ASSIGNMENT',
          template: this.#methods(rule.template_id),
          values,
          customerId,
          info: {
            type: 'ALARM_ASSIGNMENT',
            action: values.action,
            alarmId: alarm.id.id,
            alarmType: alarm.type,
            alarmOriginator: alarm.originator,
            alarmOriginatorName: values.alarmOriginatorName,
            assigneeId: alarm.assigneeId,
          },
        },
        ruleTargets(JSON.parse(rule.recipients_config)),
      );
    }
  }

  /**
   * A user commented on an alarm or edited a comment, or the gateway added a system comment
   * (`system`: acknowledged, cleared, assigned...; rules with `onlyUserComments` skip those).
   * Called inside the comment's transaction (AlarmService `onComment`): ALARM_COMMENT rules'
   * notifications commit with it.
   */
  onAlarmComment(c: {
    alarm: AlarmEvent['alarm'];
    text: string;
    user: { userId: string; email: string } | undefined;
    updated: boolean;
    system?: true;
  }): void {
    try {
      this.#savepoint(() => {
        const rules = this.#alarmRules<CommentTrigger>('ALARM_COMMENT', c.alarm).filter(
          (r) =>
            (!c.updated || r.trigger.notifyOnCommentUpdate === true) &&
            !(c.system && r.trigger.onlyUserComments === true),
        );
        if (rules.length === 0) return;
        const { values, customerId } = this.#alarmValues(c.alarm);
        const author = c.user && this.deps.users.recipients({ ids: [c.user.userId] })[0];
        Object.assign(values, {
          action: c.updated ? 'updated' : 'added',
          comment: c.text,
          userEmail: c.user?.email ?? '',
          userFirstName: author?.firstName ?? '',
          userLastName: author?.lastName ?? '',
        });
        for (const { rule } of rules) {
          this.#fire(
            {
              ruleId: rule.id,
              type: 'ALARM_COMMENT',
              template: this.#methods(rule.template_id),
              values,
              customerId,
              info: {
                type: 'ALARM_COMMENT',
                action: values.action,
                alarmId: c.alarm.id.id,
                alarmType: c.alarm.type,
                alarmOriginator: c.alarm.originator,
                alarmOriginatorName: values.alarmOriginatorName,
                comment: c.text,
                commentType: c.system ? 'SYSTEM' : 'OTHER',
              },
            },
            ruleTargets(JSON.parse(rule.recipients_config)),
          );
        }
      });
    } catch (err) {
      this.deps.log.error({ err, alarmId: c.alarm.id.id }, 'alarm comment notifications failed');
    }
  }

  /**
   * A device became active or inactive. Called inside the transaction that saves the change
   * (ActivityService `inCommit`): the inbox entries and outbox rows commit with the activity
   * attributes, or not at all. A broken rule is undone on its own; the activity still commits.
   */
  onActivity(s: ActivitySnapshot): void {
    try {
      this.#savepoint(() => this.#onActivity(s));
    } catch (err) {
      this.deps.log.error({ err, deviceId: s.deviceId }, 'device activity notifications failed');
    }
  }

  #onActivity(s: ActivitySnapshot): void {
    const rules = this.#store.rules
      .all()
      .filter((r) => r.enabled === 1 && r.trigger_type === 'DEVICE_ACTIVITY');
    if (rules.length === 0) return;
    const device = this.deps.device(s.deviceId);
    if (!device) return;
    const event = s.active ? 'ACTIVE' : 'INACTIVE';
    for (const rule of rules) {
      const trigger = JSON.parse(rule.trigger_config) as ActivityTrigger;
      if (!trigger.notifyOn.includes(event)) continue;
      if (trigger.devices?.length && !trigger.devices.includes(s.deviceId)) continue;
      if (trigger.deviceProfiles?.length && !trigger.deviceProfiles.includes(device.profileId))
        continue;
      const values = {
        deviceId: s.deviceId,
        deviceName: device.name,
        deviceType: device.type,
        eventType: event.toLowerCase(),
      };
      this.#fire(
        {
          ruleId: rule.id,
          type: 'DEVICE_ACTIVITY',
          template: this.#methods(rule.template_id),
          values,
          customerId: device.customerId,
          info: {
            type: 'DEVICE_ACTIVITY',
            deviceId: s.deviceId,
            deviceName: device.name,
            active: s.active,
          },
        },
        ruleTargets(JSON.parse(rule.recipients_config)),
      );
    }
  }

  /**
   * The link to the cloud ThingsBoard went up or down (the upstream service's bus events, sent
   * on each change, never on each failed reconnect attempt). Not caused by a device commit, so
   * its deliveries are written in a transaction of their own.
   */
  onUpstreamLink(e: UpstreamLinkEvent): void {
    try {
      this.#tx(() => this.#savepoint(() => this.#onUpstreamLink(e)));
    } catch (err) {
      this.deps.log.error({ err }, 'upstream link notifications failed');
    }
  }

  #onUpstreamLink(e: UpstreamLinkEvent): void {
    const event = e.connected ? 'CONNECTED' : 'DISCONNECTED';
    for (const rule of this.#store.rules.all()) {
      if (rule.enabled !== 1 || rule.trigger_type !== 'EDGE_CONNECTION') continue;
      const trigger = JSON.parse(rule.trigger_config) as EdgeConnectionTrigger;
      if (!trigger.notifyOn.includes(event)) continue;
      const values = {
        eventType: event.toLowerCase(),
        url: e.url,
        error: e.error ?? '',
      };
      this.#fire(
        {
          ruleId: rule.id,
          type: 'EDGE_CONNECTION',
          template: this.#methods(rule.template_id),
          values,
          customerId: null,
          info: { type: 'EDGE_CONNECTION', connected: e.connected, url: e.url, error: e.error },
        },
        ruleTargets(JSON.parse(rule.recipients_config)),
      );
    }
  }

  /**
   * `POST /api/notification/request`: sends a template (GENERAL) to targets now, or after
   * `additionalConfig.sendingDelayInSec`, and keeps the request (ThingsBoard's
   * `NotificationRequestInfo`) for `GET /api/notification/requests`; past `requestsMax` the
   * oldest request goes, counted. Inbox entries are counted as sent at once; EMAIL, SMS and
   * webhook deliveries count when the outbox sender finishes them.
   */
  send(body: unknown, senderId: string | null = null): RequestInfo {
    const input = validate(requestBody, body, 'notification request');
    for (const t of input.targets) this.#target(t);
    const stored = input.templateId ? this.#template(input.templateId.id) : undefined;
    const template = stored
      ? this.#methods(stored.id)
      : (input.template?.configuration.deliveryMethodsTemplates ?? {});
    if (Object.keys(template).length === 0)
      throw new ValidationError('Invalid notification request: templateId or template is required');
    const id = randomUUID();
    const now = this.#now();
    const delay = input.additionalConfig?.sendingDelayInSec ?? 0;
    const stats: RequestStats = { sent: {}, errors: {}, totalErrors: 0, error: null };
    const row: RequestRow = {
      id,
      tenant_id: this.deps.tenants.id,
      template_id: stored?.id ?? null,
      template_name: stored?.name ?? null,
      template: stored ? null : JSON.stringify(input.template?.configuration),
      targets: JSON.stringify(input.targets),
      info: input.info ? JSON.stringify(input.info) : null,
      delivery_methods: JSON.stringify(
        Object.entries(template)
          .filter(([, t]) => t && (t as MethodTemplate).enabled !== false)
          .map(([m]) => m),
      ),
      sender_id: senderId,
      sending_delay_sec: delay,
      stats: JSON.stringify(stats),
      created_time: now,
    };
    this.#tx(() => {
      const total = this.#store.requestTotal();
      if (total >= this.deps.limits.requestsMax) {
        const n = this.#store.pruneRequests(total - this.deps.limits.requestsMax + 1);
        this.#stats.requestsDropped += n;
        this.#logDrop('notification requests full: the oldest requests were removed');
      }
      this.#store.insertRequest(row);
      const inboxBefore = this.#created.length;
      this.#fire(
        {
          ruleId: null,
          type: 'GENERAL',
          template: template as Firing['template'],
          values: {},
          customerId: null,
          info: { type: 'GENERAL', requestId: id, ...(input.info ?? {}) },
          requestId: id,
        },
        input.targets,
        delay > 0 ? { dueAt: now + delay * 1000, alarmId: null, clear: [] } : undefined,
      );
      const web = this.#created.length - inboxBefore;
      if (web > 0) this.#store.reportSent(id, 'WEB', web);
    });
    return this.getRequest(id);
  }

  getRequest(id: string): RequestInfo {
    return this.#toRequest(this.#request(id));
  }

  /** Newest first, unless `sortProperty=createdTime` with `sortOrder=ASC`; text is the template's name. */
  listRequests(q: PageQuery): PageData<RequestInfo> {
    const newestFirst = q.sortProperty === undefined || q.sortOrder === 'DESC';
    const { rows, total } = this.#store.requestPage(
      q.textSearch ?? '',
      newestFirst,
      q.pageSize,
      q.page * q.pageSize,
    );
    return pageData(
      rows.map((r) => this.#toRequest(r)),
      total,
      q,
    );
  }

  /**
   * Deletes a request as ThingsBoard does: the inbox entries it made are removed and what it has
   * not delivered yet (a delayed request, retries) is cancelled.
   */
  deleteRequest(id: string): void {
    this.#request(id);
    const removed = this.#store.deleteRequest(id, this.#now());
    for (const n of removed)
      this.deps.bus.emit('notification.deleted', {
        recipientId: n.recipient_id,
        id: n.id,
        unread: this.unreadCount(n.recipient_id),
      });
  }

  #request(id: string): RequestRow {
    const row = this.#store.request(id);
    if (!row) throw new NotFoundError(`Notification request with id [${id}] is not found`);
    return row;
  }

  #toRequest(r: RequestRow): RequestInfo {
    const pending = this.#store.requestPending(r.id);
    const status =
      pending === 0
        ? 'SENT'
        : this.#now() < r.created_time + r.sending_delay_sec * 1000
          ? 'SCHEDULED'
          : 'PROCESSING';
    return {
      id: { entityType: 'NOTIFICATION_REQUEST', id: r.id },
      tenantId: { entityType: 'TENANT', id: r.tenant_id },
      createdTime: r.created_time,
      targets: JSON.parse(r.targets) as string[],
      templateId: r.template_id ? { entityType: 'NOTIFICATION_TEMPLATE', id: r.template_id } : null,
      template: r.template ? { configuration: JSON.parse(r.template) as unknown } : null,
      info: r.info === null ? null : (JSON.parse(r.info) as Record<string, unknown>),
      additionalConfig: { sendingDelayInSec: r.sending_delay_sec },
      originatorEntityId: r.sender_id ? { entityType: 'USER', id: r.sender_id } : null,
      ruleId: null,
      status,
      stats: JSON.parse(r.stats) as RequestStats,
      templateName: r.template_name,
      deliveryMethods: JSON.parse(r.delivery_methods) as DeliveryMethod[],
    };
  }

  #methods(templateId: string): Firing['template'] {
    const row = this.#store.templates.get(templateId);
    if (!row) return {};
    return (JSON.parse(row.configuration) as { deliveryMethodsTemplates: Firing['template'] })
      .deliveryMethodsTemplates;
  }

  /** Writes the deliveries of one firing to `targets` (inside the caller's transaction). */
  #fire(f: Firing, targetIds: readonly string[], escalation?: Later): void {
    const seen = new Set<string>();
    const once = (key: string) => !seen.has(key) && seen.add(key) && true;
    const enabled = (m: DeliveryMethod) => {
      const t = f.template[m];
      return t && t.enabled !== false ? t : undefined;
    };
    let count = 0;
    for (const targetId of targetIds) {
      const row = this.#store.targets.get(targetId);
      if (!row) continue;
      const target = JSON.parse(row.configuration) as TargetConfig;
      switch (target.type) {
        case 'PLATFORM_USERS': {
          for (const user of this.#users(target, f.customerId)) {
            if (count++ >= MAX_RECIPIENTS_PER_FIRING) return;
            const values = {
              ...f.values,
              recipientEmail: user.email,
              recipientFirstName: user.firstName ?? '',
              recipientLastName: user.lastName ?? '',
            };
            const web = enabled('WEB');
            if (web && once(`WEB:${user.id.id}`))
              this.#deliver(f, 'WEB', user.id.id, render(web, values), escalation);
            const email = enabled('EMAIL');
            if (email && once(`EMAIL:${user.email}`))
              this.#deliver(f, 'EMAIL', user.email, render(email, values), escalation);
            const sms = enabled('SMS');
            if (sms && user.phone && once(`SMS:${user.phone}`))
              this.#deliver(f, 'SMS', user.phone, render(sms, values), escalation);
          }
          break;
        }
        case 'EMAIL_ADDRESSES': {
          const email = enabled('EMAIL');
          if (!email) break;
          for (const address of target.emails) {
            if (once(`EMAIL:${address}`))
              this.#deliver(
                f,
                'EMAIL',
                address,
                render(email, { ...f.values, recipientEmail: address }),
                escalation,
              );
          }
          break;
        }
        case 'PHONE_NUMBERS': {
          const sms = enabled('SMS');
          if (!sms) break;
          for (const number of target.phoneNumbers) {
            if (once(`SMS:${number}`))
              this.#deliver(f, 'SMS', number, render(sms, f.values), escalation);
          }
          break;
        }
        case 'WEBHOOK': {
          if (!once(`WEBHOOK:${target.url}`)) break;
          const hook = enabled('WEBHOOK') ?? enabled('WEB') ?? enabled('EMAIL');
          const rendered = hook ? render(hook, f.values) : { body: '' };
          const custom = f.template.WEBHOOK?.enabled !== false && f.template.WEBHOOK;
          // Without a WEBHOOK template the receiver gets the notification as JSON.
          const body = custom
            ? rendered.body
            : JSON.stringify({
                type: f.type,
                subject: rendered.subject ?? null,
                text: rendered.body,
                info: f.info,
              });
          this.#deliver(
            f,
            'WEBHOOK',
            target.url,
            { body, httpMethod: target.method, headers: target.headers },
            escalation,
          );
          break;
        }
      }
    }
  }

  #users(
    target: Extract<TargetConfig, { type: 'PLATFORM_USERS' }>,
    customerId: string | null,
  ): User[] {
    const u = this.deps.users;
    const f = target.usersFilter;
    switch (f.type) {
      case 'TENANT_ADMINISTRATORS':
        return u.recipients({ authority: 'TENANT_ADMIN' });
      case 'CUSTOMER_USERS':
        return u.recipients({ authority: 'CUSTOMER_USER', customerId: f.customerId });
      case 'USER_LIST':
        return u.recipients({ ids: f.usersIds });
      case 'ALL_USERS':
        return u.recipients({});
      case 'ORIGINATOR_ENTITY_OWNER_USERS':
        return customerId
          ? u.recipients({ authority: 'CUSTOMER_USER', customerId })
          : u.recipients({ authority: 'TENANT_ADMIN' });
    }
  }

  #deliver(
    f: Firing,
    method: DeliveryMethod,
    recipient: string,
    content: OutboxPayload,
    escalation?: Later,
  ): void {
    const now = this.#now();
    if (method === 'WEB' && !escalation) {
      this.insertInbox({
        recipientId: recipient,
        ruleId: f.ruleId,
        type: f.type,
        subject: content.subject ?? null,
        text: content.body,
        info: f.info,
        requestId: f.requestId ?? null,
      });
      return;
    }
    const pending = this.#store.pending();
    if (pending >= this.deps.limits.outboxMax) {
      const n = this.#store.dropOldestPending(pending - this.deps.limits.outboxMax + 1);
      this.#stats.outboxDropped += n;
      this.#logDrop('notification outbox full: the oldest undelivered notifications were dropped');
    }
    const payload: OutboxPayload & { web?: unknown } =
      method === 'WEB' ? { ...content, web: { type: f.type, info: f.info } } : content;
    const row: OutboxRow = {
      id: randomUUID(),
      method,
      channel: method === 'WEBHOOK' ? `WEBHOOK:${recipient}` : method,
      recipient,
      rule_id: f.ruleId,
      alarm_id: escalation?.alarmId ?? null,
      clear_statuses: escalation ? JSON.stringify(escalation.clear) : null,
      payload: JSON.stringify(payload),
      status: 'PENDING',
      attempts: 0,
      next_at: escalation?.dueAt ?? now,
      last_error: null,
      history: '[]',
      created_time: now,
      done_time: null,
      request_id: f.requestId ?? null,
    };
    this.#store.insertOutbox(row);
    this.#queued = true;
    this.#scheduleAfterCommit();
  }

  /**
   * Writes one inbox entry (inside the caller's transaction); `notification.created` goes on the
   * bus once it is known to be committed. The oldest entries go past the bound.
   */
  insertInbox(n: {
    recipientId: string;
    ruleId: string | null;
    type: string;
    subject: string | null;
    text: string;
    info: unknown;
    requestId?: string | null;
  }): void {
    const total = this.#store.inboxTotal();
    if (total >= this.deps.limits.inboxMax) {
      this.#stats.inboxDropped += this.#store.pruneInbox(total - this.deps.limits.inboxMax + 1);
      this.#logDrop('notification inboxes full: the oldest notifications were removed');
    }
    const row: InboxRow = {
      id: randomUUID(),
      recipient_id: n.recipientId,
      rule_id: n.ruleId,
      type: n.type,
      subject: n.subject,
      text: n.text,
      info: n.info === undefined ? null : JSON.stringify(n.info),
      status: 'SENT',
      created_time: this.#now(),
      request_id: n.requestId ?? null,
    };
    this.#store.insertInbox(row);
    this.#created.push(row.id);
    this.#scheduleAfterCommit();
  }

  #logDrop(msg: string): void {
    const now = Date.now();
    if (now - this.#lastDropLog < 10_000) return;
    this.#lastDropLog = now;
    this.deps.log.warn({ ...this.#stats }, msg);
  }

  /**
   * better-sqlite3 has no commit hook: a later turn of the event loop runs after the synchronous
   * transaction ended; entries that are not in the table then were rolled back.
   */
  #scheduleAfterCommit(): void {
    this.#flush ??= setImmediate(() => {
      this.#flush = undefined;
      this.#afterCommit();
    });
  }

  #afterCommit(): void {
    const ids = this.#created;
    this.#created = [];
    for (const id of ids) {
      const row = this.#store.inboxGet(id);
      if (row) this.deps.bus.emit('notification.created', { notification: toNotification(row) });
    }
    if (this.#queued) {
      this.#queued = false;
      this.deps.onQueued?.();
    }
  }

  // ---- the inbox (core API for REST and WebSocket) ----

  inbox(userId: string, q: PageQuery, unreadOnly = false): PageData<Notification> {
    const { rows, total } = this.#store.inbox(userId, unreadOnly, q.pageSize, q.page * q.pageSize);
    return pageData(rows.map(toNotification), total, q);
  }

  unreadCount(userId: string): number {
    return this.#store.unread(userId);
  }

  /** Marks one notification of `userId` read; 404 when it has no such notification. */
  markRead(userId: string, id: string): void {
    const row = this.#store.inboxGet(id);
    if (!row || row.recipient_id !== userId)
      throw new NotFoundError(`Notification with id [${id}] is not found`);
    if (this.#store.markRead(id, userId))
      this.deps.bus.emit('notification.read', {
        recipientId: userId,
        ids: [id],
        unread: this.unreadCount(userId),
      });
  }

  markAllRead(userId: string): number {
    const n = this.#store.markAllRead(userId);
    if (n > 0)
      this.deps.bus.emit('notification.read', { recipientId: userId, ids: 'ALL', unread: 0 });
    return n;
  }

  deleteNotification(userId: string, id: string): void {
    if (!this.#store.deleteInbox(id, userId))
      throw new NotFoundError(`Notification with id [${id}] is not found`);
    this.deps.bus.emit('notification.deleted', {
      recipientId: userId,
      id,
      unread: this.unreadCount(userId),
    });
  }

  // ---- deliveries ----

  deliveries(q: PageQuery, status?: string): PageData<Delivery> {
    if (status && !['PENDING', 'SENT', 'FAILED', 'CANCELLED'].includes(status))
      throw new ValidationError('status must be PENDING, SENT, FAILED or CANCELLED');
    const { rows, total } = this.#store.outboxPage(status ?? '', q.pageSize, q.page * q.pageSize);
    return pageData(rows.map(toDelivery), total, q);
  }

  stats(): NotificationStats {
    return {
      inbox: this.#store.inboxTotal(),
      pending: this.#store.pending(),
      requests: this.#store.requestTotal(),
      ...this.#stats,
    };
  }
}

function render(t: MethodTemplate, values: Record<string, string>): OutboxPayload {
  return {
    subject: t.subject ? fillTemplate(t.subject, values) : undefined,
    body: fillTemplate(t.body, values),
  };
}

/** Every target id a rule's `recipientsConfig` names. */
function ruleTargets(r: {
  escalationTable?: Record<string, string[]>;
  targets?: string[];
}): string[] {
  return [...new Set([...Object.values(r.escalationTable ?? {}).flat(), ...(r.targets ?? [])])];
}

function toTarget(r: TargetRow) {
  return {
    id: { entityType: 'NOTIFICATION_TARGET', id: r.id },
    tenantId: { entityType: 'TENANT', id: r.tenant_id },
    createdTime: r.created_time,
    name: r.name,
    configuration: JSON.parse(r.configuration) as TargetConfig,
  };
}

function toTemplate(r: TemplateRow) {
  return {
    id: { entityType: 'NOTIFICATION_TEMPLATE', id: r.id },
    tenantId: { entityType: 'TENANT', id: r.tenant_id },
    createdTime: r.created_time,
    name: r.name,
    notificationType: r.notification_type,
    configuration: JSON.parse(r.configuration) as unknown,
  };
}

function toRule(r: RuleRow) {
  return {
    id: { entityType: 'NOTIFICATION_RULE', id: r.id },
    tenantId: { entityType: 'TENANT', id: r.tenant_id },
    createdTime: r.created_time,
    name: r.name,
    enabled: r.enabled === 1,
    templateId: { entityType: 'NOTIFICATION_TEMPLATE', id: r.template_id },
    triggerType: r.trigger_type,
    triggerConfig: JSON.parse(r.trigger_config) as TriggerConfig,
    recipientsConfig: JSON.parse(r.recipients_config) as unknown,
    additionalConfig:
      r.additional_config === null ? null : (JSON.parse(r.additional_config) as unknown),
  };
}

export function toNotification(r: InboxRow): Notification {
  return {
    id: { entityType: 'NOTIFICATION', id: r.id },
    requestId: r.request_id ? { entityType: 'NOTIFICATION_REQUEST', id: r.request_id } : null,
    recipientId: { entityType: 'USER', id: r.recipient_id },
    type: r.type as NotificationType,
    deliveryMethod: 'WEB',
    subject: r.subject,
    text: r.text,
    additionalConfig: null,
    info: r.info === null ? null : (JSON.parse(r.info) as Record<string, unknown>),
    status: r.status,
    createdTime: r.created_time,
  };
}

function toDelivery(r: OutboxRow): Delivery {
  const payload = JSON.parse(r.payload) as OutboxPayload;
  return {
    id: r.id,
    method: r.method as Delivery['method'],
    recipient: r.recipient,
    ruleId: r.rule_id,
    alarmId: r.alarm_id,
    subject: payload.subject ?? null,
    status: r.status,
    attempts: r.attempts,
    nextAttemptTime: r.status === 'PENDING' ? r.next_at : null,
    lastError: r.last_error,
    history: JSON.parse(r.history) as DeliveryAttempt[],
    createdTime: r.created_time,
    doneTime: r.done_time,
  };
}
