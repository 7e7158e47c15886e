/**
 * The notification center's entities in ThingsBoard's JSON (platform.md §8): targets, templates,
 * rules, inbox notifications, and the outbox rows that carry EMAIL, SMS and webhook deliveries.
 * Request bodies are checked with zod here; the service turns them into rows.
 */
import { z } from 'zod';
import { ALARM_SEVERITIES } from '../alarms/types.js';

/** Delivery methods the gateway sends (ThingsBoard's `NotificationDeliveryMethod` subset + ours). */
export const DELIVERY_METHODS = ['WEB', 'EMAIL', 'SMS', 'WEBHOOK'] as const;
export type DeliveryMethod = (typeof DELIVERY_METHODS)[number];

/** The triggers of notification rules (ThingsBoard's `NotificationRuleTriggerType` subset). */
export const TRIGGER_TYPES = [
  'ALARM',
  'ALARM_ASSIGNMENT',
  'ALARM_COMMENT',
  'DEVICE_ACTIVITY',
  'ENTITY_ACTION',
  'EDGE_CONNECTION',
] as const;
/** A notification's type: its rule's trigger, or GENERAL for an ad-hoc request. */
export const NOTIFICATION_TYPES = [...TRIGGER_TYPES, 'GENERAL'] as const;
export type NotificationType = (typeof NOTIFICATION_TYPES)[number];

export type TriggerType = (typeof TRIGGER_TYPES)[number];

/** `notifyOn` of an ALARM rule (ThingsBoard's `AlarmAction`). */
export const ALARM_NOTIFY_ON = ['CREATED', 'SEVERITY_CHANGED', 'ACKNOWLEDGED', 'CLEARED'] as const;
/** `clearRule.alarmStatuses` (ThingsBoard's `AlarmSearchStatus`). */
export const ALARM_CLEAR_STATUSES = ['ANY', 'ACTIVE', 'CLEARED', 'ACK', 'UNACK'] as const;

const idRef = z.looseObject({ id: z.uuid() });
const name = z.string().trim().min(1, 'name is required').max(255);

/** ThingsBoard's `usersFilter` types we resolve (the others need a system administrator). */
export const USERS_FILTERS = [
  'TENANT_ADMINISTRATORS',
  'CUSTOMER_USERS',
  'USER_LIST',
  'ALL_USERS',
  'ORIGINATOR_ENTITY_OWNER_USERS',
] as const;

const usersFilter = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('TENANT_ADMINISTRATORS') }),
  z.looseObject({ type: z.literal('ALL_USERS') }),
  z.looseObject({ type: z.literal('ORIGINATOR_ENTITY_OWNER_USERS') }),
  z.looseObject({ type: z.literal('CUSTOMER_USERS'), customerId: z.uuid() }),
  z.looseObject({ type: z.literal('USER_LIST'), usersIds: z.array(z.uuid()).min(1).max(1000) }),
]);

const email = z.string().trim().email().max(255);
const phone = z
  .string()
  .trim()
  .regex(/^\+?[0-9]{3,20}$/, 'a phone number is digits with an optional leading +');
const httpUrl = z
  .string()
  .url()
  .refine((u) => /^https?:\/\//i.test(u), 'only http and https URLs');
const headers = z.record(z.string(), z.string()).optional();

/**
 * A target: ThingsBoard's `PLATFORM_USERS`, plus plain lists of email addresses and phone
 * numbers and a webhook (issue 14 §7), which ThingsBoard covers with Slack/Teams targets.
 */
export const targetConfig = z.discriminatedUnion('type', [
  z.looseObject({
    type: z.literal('PLATFORM_USERS'),
    usersFilter,
    description: z.string().nullish(),
  }),
  z.looseObject({
    type: z.literal('EMAIL_ADDRESSES'),
    emails: z.array(email).min(1).max(100),
    description: z.string().nullish(),
  }),
  z.looseObject({
    type: z.literal('PHONE_NUMBERS'),
    phoneNumbers: z.array(phone).min(1).max(100),
    description: z.string().nullish(),
  }),
  z.looseObject({
    type: z.literal('WEBHOOK'),
    url: httpUrl,
    method: z.enum(['POST', 'PUT']).default('POST'),
    headers,
    description: z.string().nullish(),
  }),
]);
export type TargetConfig = z.infer<typeof targetConfig>;

export const targetBody = z.looseObject({
  id: idRef.nullish(),
  name,
  configuration: targetConfig,
});

const methodTemplate = z.looseObject({
  enabled: z.boolean().default(true),
  subject: z.string().max(1000).nullish(),
  body: z.string().max(10_000),
});
export type MethodTemplate = z.infer<typeof methodTemplate>;

export const templateBody = z.looseObject({
  id: idRef.nullish(),
  name,
  notificationType: z.enum(NOTIFICATION_TYPES),
  configuration: z.looseObject({
    deliveryMethodsTemplates: z
      .partialRecord(z.enum(DELIVERY_METHODS), methodTemplate)
      .refine((t) => Object.keys(t).length > 0, 'at least one delivery method'),
  }),
});

/** `POST /api/notification/request`: a template (stored or inline) sent to targets now. */
export const requestBody = z.looseObject({
  templateId: idRef.nullish(),
  template: templateBody.pick({ configuration: true }).nullish(),
  targets: z.array(z.uuid()).min(1).max(100),
  info: z.record(z.string(), z.unknown()).nullish(),
  /** ThingsBoard's `NotificationRequestConfig`: send later (at most a week). */
  additionalConfig: z
    .looseObject({ sendingDelayInSec: z.number().int().min(0).max(604_800).default(0) })
    .nullish(),
});

/**
 * ThingsBoard's `NotificationRequestStats`: sent per delivery method, errors per method and
 * recipient (at most 100 kept per method; `totalErrors` counts them all).
 */
export interface RequestStats {
  sent: Record<string, number>;
  errors: Record<string, Record<string, string>>;
  totalErrors: number;
  error: string | null;
}

/** A stored request as REST shows it (ThingsBoard's `NotificationRequestInfo`). */
export interface RequestInfo {
  readonly id: { entityType: 'NOTIFICATION_REQUEST'; id: string };
  readonly tenantId: { entityType: 'TENANT'; id: string };
  readonly createdTime: number;
  readonly targets: string[];
  readonly templateId: { entityType: 'NOTIFICATION_TEMPLATE'; id: string } | null;
  readonly template: { configuration: unknown } | null;
  readonly info: Record<string, unknown> | null;
  readonly additionalConfig: { sendingDelayInSec: number };
  /** The user who sent it. */
  readonly originatorEntityId: { entityType: 'USER'; id: string } | null;
  readonly ruleId: null;
  /** SCHEDULED until its delay passed, PROCESSING while deliveries are undelivered, then SENT. */
  readonly status: 'SCHEDULED' | 'PROCESSING' | 'SENT';
  readonly stats: RequestStats;
  readonly templateName: string | null;
  readonly deliveryMethods: DeliveryMethod[];
}

const alarmTrigger = z.looseObject({
  triggerType: z.literal('ALARM'),
  alarmTypes: z.array(z.string()).nullish(),
  alarmSeverities: z.array(z.enum(ALARM_SEVERITIES)).nullish(),
  notifyOn: z.array(z.enum(ALARM_NOTIFY_ON)).min(1),
  clearRule: z
    .looseObject({ alarmStatuses: z.array(z.enum(ALARM_CLEAR_STATUSES)).min(1) })
    .nullish(),
});
export type AlarmTrigger = z.infer<typeof alarmTrigger>;

const activityTrigger = z.looseObject({
  triggerType: z.literal('DEVICE_ACTIVITY'),
  devices: z.array(z.uuid()).nullish(),
  deviceProfiles: z.array(z.uuid()).nullish(),
  notifyOn: z.array(z.enum(['ACTIVE', 'INACTIVE'])).min(1),
});
export type ActivityTrigger = z.infer<typeof activityTrigger>;

/** The alarm filters ALARM_ASSIGNMENT and ALARM_COMMENT rules share (ThingsBoard's). */
const alarmFilters = {
  alarmTypes: z.array(z.string()).nullish(),
  alarmSeverities: z.array(z.enum(ALARM_SEVERITIES)).nullish(),
  alarmStatuses: z.array(z.enum(ALARM_CLEAR_STATUSES)).nullish(),
};

const assignmentTrigger = z.looseObject({
  triggerType: z.literal('ALARM_ASSIGNMENT'),
  ...alarmFilters,
  notifyOn: z.array(z.enum(['ASSIGNED', 'UNASSIGNED'])).min(1),
});
export type AssignmentTrigger = z.infer<typeof assignmentTrigger>;

const commentTrigger = z.looseObject({
  triggerType: z.literal('ALARM_COMMENT'),
  ...alarmFilters,
  /** True: the gateway's system comments (acknowledged, cleared, assigned...) do not notify. */
  onlyUserComments: z.boolean().nullish(),
  /** Also notify when a comment is edited (default false). */
  notifyOnCommentUpdate: z.boolean().nullish(),
});
export type CommentTrigger = z.infer<typeof commentTrigger>;

/** ENTITY_ACTION: devices created, updated or deleted (the gateway's entities that notify). */
const entityActionTrigger = z.looseObject({
  triggerType: z.literal('ENTITY_ACTION'),
  entityTypes: z.array(z.literal('DEVICE')).nullish(),
  created: z.boolean().nullish(),
  updated: z.boolean().nullish(),
  deleted: z.boolean().nullish(),
});
export type EntityActionTrigger = z.infer<typeof entityActionTrigger>;

/**
 * EDGE_CONNECTION: the gateway's own link to the cloud ThingsBoard went up or down (ThingsBoard's
 * trigger for an edge's connection; here the edge is this gateway, so `edges` is not used).
 */
const edgeConnectionTrigger = z.looseObject({
  triggerType: z.literal('EDGE_CONNECTION'),
  edges: z.array(z.uuid()).nullish(),
  notifyOn: z.array(z.enum(['CONNECTED', 'DISCONNECTED'])).min(1),
});
export type EdgeConnectionTrigger = z.infer<typeof edgeConnectionTrigger>;

export const ruleBody = z.looseObject({
  id: idRef.nullish(),
  name,
  enabled: z.boolean().default(true),
  templateId: idRef,
  triggerType: z.enum(TRIGGER_TYPES),
  triggerConfig: z.discriminatedUnion('triggerType', [
    alarmTrigger,
    assignmentTrigger,
    commentTrigger,
    activityTrigger,
    entityActionTrigger,
    edgeConnectionTrigger,
  ]),
  recipientsConfig: z.looseObject({
    triggerType: z.enum(TRIGGER_TYPES).optional(),
    /** ALARM: delay in seconds -> target ids. */
    escalationTable: z.record(z.string().regex(/^\d+$/), z.array(z.uuid())).optional(),
    /** Other triggers: target ids. */
    targets: z.array(z.uuid()).optional(),
  }),
  additionalConfig: z.looseObject({ description: z.string().nullish() }).nullish(),
});
export type RuleInput = z.infer<typeof ruleBody>;

export type TriggerConfig =
  | AlarmTrigger
  | AssignmentTrigger
  | CommentTrigger
  | ActivityTrigger
  | EntityActionTrigger
  | EdgeConnectionTrigger;

/** One inbox entry (ThingsBoard's `Notification`). */
export interface Notification {
  readonly id: { entityType: 'NOTIFICATION'; id: string };
  readonly requestId: { entityType: 'NOTIFICATION_REQUEST'; id: string } | null;
  readonly recipientId: { entityType: 'USER'; id: string };
  readonly type: NotificationType;
  readonly deliveryMethod: 'WEB';
  readonly subject: string | null;
  readonly text: string;
  readonly additionalConfig: null;
  readonly info: Record<string, unknown> | null;
  readonly status: 'SENT' | 'READ';
  readonly createdTime: number;
}

/** What an EMAIL, SMS or webhook delivery carries in its outbox row. */
export interface OutboxPayload {
  readonly subject?: string;
  readonly body: string;
  /** Webhooks: method and headers. */
  readonly httpMethod?: 'POST' | 'PUT';
  readonly headers?: Record<string, string>;
}

/** One attempt of an outbox delivery, as `GET /api/notification/deliveries` shows it. */
export interface DeliveryAttempt {
  readonly ts: number;
  readonly ok: boolean;
  readonly error?: string;
}

/** An outbox row as REST shows it. */
export interface Delivery {
  readonly id: string;
  /** WEB only for a delayed escalation level (it reaches the inbox when due). */
  readonly method: DeliveryMethod;
  readonly recipient: string;
  readonly ruleId: string | null;
  readonly alarmId: string | null;
  readonly subject: string | null;
  readonly status: 'PENDING' | 'SENT' | 'FAILED' | 'CANCELLED';
  readonly attempts: number;
  readonly nextAttemptTime: number | null;
  readonly lastError: string | null;
  readonly history: readonly DeliveryAttempt[];
  readonly createdTime: number;
  readonly doneTime: number | null;
}
