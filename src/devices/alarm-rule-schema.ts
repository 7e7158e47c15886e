/**
 * Device-profile alarm rules (`profileData.alarms`), ThingsBoard v4.2 JSON (platform.md §1.2–§1.7).
 *
 * The schema checks what an evaluator relies on and refuses what could never work (unknown
 * operations, a predicate type that does not fit the filter's value type, a schedule outside one
 * day, an unknown time zone, ...). Every object keeps fields it does not know, so a rule exported
 * from ThingsBoard round-trips unchanged. The alarm engine imports the types from here.
 */

import { z } from 'zod';

/** Highest first: the order in which create rules are evaluated (§1.9 step 2). */
export const ALARM_SEVERITIES = ['CRITICAL', 'MAJOR', 'MINOR', 'WARNING', 'INDETERMINATE'] as const;
export type AlarmSeverity = (typeof ALARM_SEVERITIES)[number];

export const ALARM_KEY_TYPES = ['TIME_SERIES', 'ATTRIBUTE', 'ENTITY_FIELD', 'CONSTANT'] as const;
export const ALARM_VALUE_TYPES = ['NUMERIC', 'STRING', 'BOOLEAN', 'DATE_TIME'] as const;
export type AlarmValueType = (typeof ALARM_VALUE_TYPES)[number];

/** Entity fields a device has (§1.4); other `ENTITY_FIELD` keys could never resolve. */
export const DEVICE_ENTITY_FIELDS = ['name', 'type', 'createdTime', 'label'] as const;

/**
 * Where a dynamic threshold comes from (§1.5). `CURRENT_USER` exists only for dashboard filters
 * (`FILTER_SOURCE_TYPES`): an alarm rule has no user, so it is refused here.
 */
export const DYNAMIC_SOURCE_TYPES = [
  'CURRENT_TENANT',
  'CURRENT_CUSTOMER',
  'CURRENT_DEVICE',
] as const;
/** The sources of a dashboard's key filters (WebSocket entity queries): also the user's. */
export const FILTER_SOURCE_TYPES = [...DYNAMIC_SOURCE_TYPES, 'CURRENT_USER'] as const;

export const NUMERIC_OPERATIONS = [
  'EQUAL',
  'NOT_EQUAL',
  'GREATER',
  'LESS',
  'GREATER_OR_EQUAL',
  'LESS_OR_EQUAL',
] as const;
export const STRING_OPERATIONS = [
  'EQUAL',
  'NOT_EQUAL',
  'STARTS_WITH',
  'ENDS_WITH',
  'CONTAINS',
  'NOT_CONTAINS',
  'IN',
  'NOT_IN',
] as const;
export const BOOLEAN_OPERATIONS = ['EQUAL', 'NOT_EQUAL'] as const;
export const COMPLEX_OPERATIONS = ['AND', 'OR'] as const;

/** Java `TimeUnit` names the UI offers for DURATION specs (§1.6). */
export const DURATION_UNITS = ['SECONDS', 'MINUTES', 'HOURS', 'DAYS'] as const;

/** Nested COMPLEX predicates deeper than this are refused (the UI builds two or three levels). */
export const MAX_PREDICATE_DEPTH = 8;

const DAY_MS = 86_400_000;

function dynamicValueSchemaOf(sources: readonly [string, ...string[]]): z.ZodType<DynamicValue> {
  return z
    .looseObject({
      sourceType: z.enum(sources).nullable().optional(),
      sourceAttribute: z.string().nullable().optional(),
      inherit: z.boolean().nullable().optional(),
    })
    .refine((v) => !v.sourceType || (v.sourceAttribute ?? '').trim() !== '', {
      message: 'sourceAttribute is required when sourceType is set',
      path: ['sourceAttribute'],
    }) as z.ZodType<DynamicValue>;
}
type DynamicValueSchema = z.ZodType<DynamicValue>;
const dynamicValueSchema = dynamicValueSchemaOf(DYNAMIC_SOURCE_TYPES);

export interface DynamicValue {
  readonly sourceType?: (typeof FILTER_SOURCE_TYPES)[number] | null;
  readonly sourceAttribute?: string | null;
  readonly inherit?: boolean | null;
  readonly [key: string]: unknown;
}

/** True when a dynamic value names an attribute to read; `{sourceType: null}` is the UI's "none". */
function isDynamic(d: DynamicValue | null | undefined): boolean {
  return Boolean(d?.sourceType);
}

/**
 * `FilterPredicateValue<T>` (§1.5): the effective value is the dynamic one when it resolves, else
 * `defaultValue`, which may only be missing when a dynamic source is set. `userValue` belongs to
 * dashboard filters and is kept as given.
 */
function predicateValue<T extends z.ZodType>(
  value: T,
  what: string,
  dynamic: DynamicValueSchema = dynamicValueSchema,
) {
  return z
    .looseObject({
      defaultValue: value.nullable().optional(),
      userValue: z.unknown().optional(),
      dynamicValue: dynamic.nullable().optional(),
    })
    .refine(
      (v) => (v.defaultValue !== undefined && v.defaultValue !== null) || isDynamic(v.dynamicValue),
      {
        message: `must be ${what} (it may only be null when dynamicValue.sourceType is set)`,
        path: ['defaultValue'],
      },
    );
}

export interface FilterPredicateValue<T> {
  readonly defaultValue?: T | null;
  readonly userValue?: unknown;
  readonly dynamicValue?: DynamicValue | null;
  readonly [key: string]: unknown;
}

export interface NumericFilterPredicate {
  readonly type: 'NUMERIC';
  readonly operation: (typeof NUMERIC_OPERATIONS)[number];
  readonly value: FilterPredicateValue<number>;
  readonly [key: string]: unknown;
}
export interface StringFilterPredicate {
  readonly type: 'STRING';
  readonly operation: (typeof STRING_OPERATIONS)[number];
  readonly value: FilterPredicateValue<string>;
  readonly ignoreCase?: boolean | null;
  readonly [key: string]: unknown;
}
export interface BooleanFilterPredicate {
  readonly type: 'BOOLEAN';
  readonly operation: (typeof BOOLEAN_OPERATIONS)[number];
  readonly value: FilterPredicateValue<boolean>;
  readonly [key: string]: unknown;
}
/** Nested predicates all apply to the filter's one key (§1.5). */
export interface ComplexFilterPredicate {
  readonly type: 'COMPLEX';
  readonly operation: (typeof COMPLEX_OPERATIONS)[number];
  readonly predicates: readonly KeyFilterPredicate[];
  readonly [key: string]: unknown;
}
export type KeyFilterPredicate =
  | NumericFilterPredicate
  | StringFilterPredicate
  | BooleanFilterPredicate
  | ComplexFilterPredicate;

/** The predicate schema whose dynamic values may come from the sources `dynamic` takes. */
function keyFilterPredicateSchemaOf(dynamic: DynamicValueSchema): z.ZodType<KeyFilterPredicate> {
  const schema: z.ZodType<KeyFilterPredicate> = z.lazy(() =>
    z.discriminatedUnion('type', [
      z.looseObject({
        type: z.literal('NUMERIC'),
        operation: z.enum(NUMERIC_OPERATIONS),
        value: predicateValue(z.number(), 'a number', dynamic),
      }),
      z.looseObject({
        type: z.literal('STRING'),
        operation: z.enum(STRING_OPERATIONS),
        value: predicateValue(z.string(), 'a string', dynamic),
        ignoreCase: z.boolean().nullable().optional(),
      }),
      z.looseObject({
        type: z.literal('BOOLEAN'),
        operation: z.enum(BOOLEAN_OPERATIONS),
        value: predicateValue(z.boolean(), 'a boolean', dynamic),
      }),
      z.looseObject({
        type: z.literal('COMPLEX'),
        operation: z.enum(COMPLEX_OPERATIONS),
        predicates: z
          .array(schema)
          .min(1, 'a COMPLEX predicate needs at least one nested predicate'),
      }),
    ]),
  );
  return schema;
}

/** Predicates of alarm rules (no `CURRENT_USER`). */
export const keyFilterPredicateSchema = keyFilterPredicateSchemaOf(dynamicValueSchema);
/** Predicates of dashboard key filters: dynamic values may also be the user's. */
export const filterPredicateSchema = keyFilterPredicateSchemaOf(
  dynamicValueSchemaOf(FILTER_SOURCE_TYPES),
);

/** The predicate type each filter value type takes (DATE_TIME compares epoch ms as numbers). */
const PREDICATE_TYPE_OF: Record<AlarmValueType, KeyFilterPredicate['type']> = {
  NUMERIC: 'NUMERIC',
  DATE_TIME: 'NUMERIC',
  STRING: 'STRING',
  BOOLEAN: 'BOOLEAN',
};

/** Walks nested COMPLEX predicates: the first leaf whose type does not fit, and the depth. */
function checkPredicateTree(
  root: KeyFilterPredicate,
  leafType: KeyFilterPredicate['type'],
): { mismatch?: { path: Array<string | number>; type: string }; depth: number } {
  let depth = 0;
  const stack: Array<{ p: KeyFilterPredicate; path: Array<string | number>; level: number }> = [
    { p: root, path: [], level: 1 },
  ];
  for (let item = stack.pop(); item; item = stack.pop()) {
    depth = Math.max(depth, item.level);
    const { p, path, level } = item;
    if (p.type === 'COMPLEX') {
      p.predicates.forEach((child, i) => {
        stack.push({ p: child, path: [...path, 'predicates', i], level: level + 1 });
      });
    } else if (p.type !== leafType) {
      return { mismatch: { path, type: p.type }, depth };
    }
  }
  return { depth };
}

const alarmConditionFilterSchema = z
  .looseObject({
    key: z.looseObject({
      type: z.enum(ALARM_KEY_TYPES),
      key: z.string().trim().min(1, 'must not be empty'),
    }),
    valueType: z.enum(ALARM_VALUE_TYPES),
    value: z.unknown().optional(),
    predicate: keyFilterPredicateSchema,
  })
  .superRefine((f, ctx) => {
    const leafType = PREDICATE_TYPE_OF[f.valueType];
    const { mismatch, depth } = checkPredicateTree(f.predicate, leafType);
    if (mismatch) {
      ctx.addIssue({
        code: 'custom',
        path: ['predicate', ...mismatch.path, 'type'],
        message: `a ${f.valueType} filter takes ${leafType} predicates, not ${mismatch.type}`,
      });
    }
    if (depth > MAX_PREDICATE_DEPTH) {
      ctx.addIssue({
        code: 'custom',
        path: ['predicate'],
        message: `COMPLEX predicates nest at most ${MAX_PREDICATE_DEPTH} levels deep`,
      });
    }
    if (
      f.key.type === 'ENTITY_FIELD' &&
      !(DEVICE_ENTITY_FIELDS as readonly string[]).includes(f.key.key)
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['key', 'key'],
        message: `a device has no entity field "${f.key.key}" (one of ${DEVICE_ENTITY_FIELDS.join(', ')})`,
      });
    }
    if (f.key.type === 'CONSTANT') {
      const expected = leafType === 'NUMERIC' ? 'number' : leafType.toLowerCase();
      if (typeof f.value !== expected) {
        ctx.addIssue({
          code: 'custom',
          path: ['value'],
          message: `a CONSTANT key needs a ${expected} value (valueType ${f.valueType})`,
        });
      }
    }
  });
export type AlarmConditionFilter = z.infer<typeof alarmConditionFilterSchema>;

const positiveInteger = z.number().int('must be an integer').min(1, 'must be at least 1');

const alarmConditionSpecSchema = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('SIMPLE') }),
  z.looseObject({
    type: z.literal('DURATION'),
    unit: z.enum(DURATION_UNITS),
    predicate: predicateValue(positiveInteger, 'a whole number of units, at least 1'),
  }),
  z.looseObject({
    type: z.literal('REPEATING'),
    predicate: predicateValue(positiveInteger, 'a whole number of events, at least 1'),
  }),
]);
export type AlarmConditionSpec = z.infer<typeof alarmConditionSpecSchema>;

function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

const timeZone = z
  .string()
  .refine(isTimeZone, { message: 'must be an IANA time zone such as Europe/Berlin' });
const dayOfWeek = z
  .number()
  .int()
  .min(1, 'days are 1 (Monday) to 7 (Sunday)')
  .max(7, 'days are 1 (Monday) to 7 (Sunday)');
/** Milliseconds since local midnight; `endsOn = 0` means the end of the day (§1.7). */
const msOfDay = z
  .number()
  .int('must be whole milliseconds')
  .min(0, 'must be 0 to 86400000 ms since midnight')
  .max(DAY_MS, 'must be 0 to 86400000 ms since midnight');

const alarmScheduleSchema = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('ANY_TIME') }),
  z.looseObject({
    type: z.literal('SPECIFIC_TIME'),
    timezone: timeZone,
    daysOfWeek: z
      .array(dayOfWeek)
      .min(1, 'select at least one day')
      .refine((d) => new Set(d).size === d.length, 'days must not repeat'),
    startsOn: msOfDay,
    endsOn: msOfDay,
    dynamicValue: dynamicValueSchema.nullable().optional(),
  }),
  z.looseObject({
    type: z.literal('CUSTOM'),
    timezone: timeZone,
    items: z
      .array(
        z.looseObject({
          enabled: z.boolean(),
          dayOfWeek,
          startsOn: msOfDay,
          endsOn: msOfDay,
        }),
      )
      .refine(
        (items) => new Set(items.map((i) => i.dayOfWeek)).size === items.length,
        'each dayOfWeek may appear once',
      ),
    dynamicValue: dynamicValueSchema.nullable().optional(),
  }),
]);
export type AlarmSchedule = z.infer<typeof alarmScheduleSchema>;

export const alarmRuleSchema = z.looseObject({
  condition: z.looseObject({
    // @NOTE: the doubled name `condition.condition` is ThingsBoard's (§1.3).
    condition: z
      .array(alarmConditionFilterSchema)
      .min(1, 'an alarm rule needs at least one key filter'),
    // Missing spec = SIMPLE (§1.3).
    spec: alarmConditionSpecSchema.nullable().optional(),
  }),
  schedule: alarmScheduleSchema.nullable().optional(),
  alarmDetails: z.string().nullable().optional(),
  dashboardId: z
    .looseObject({
      entityType: z.literal('DASHBOARD').optional(),
      id: z.uuid('must be a UUID'),
    })
    .nullable()
    .optional(),
});
export type AlarmRule = z.infer<typeof alarmRuleSchema>;

export const deviceProfileAlarmSchema = z.looseObject({
  id: z.string().trim().min(1, 'an alarm rule needs an id'),
  alarmType: z.string().trim().min(1, 'Alarm rule type should be specified!'),
  createRules: z
    .partialRecord(z.enum(ALARM_SEVERITIES), alarmRuleSchema)
    .refine((r) => Object.keys(r).length > 0, 'at least one create rule (severity) is required'),
  clearRule: alarmRuleSchema.nullable().optional(),
  propagate: z.boolean().nullable().optional(),
  propagateToOwner: z.boolean().nullable().optional(),
  propagateToTenant: z.boolean().nullable().optional(),
  propagateRelationTypes: z.array(z.string()).nullable().optional(),
});
export type DeviceProfileAlarm = z.infer<typeof deviceProfileAlarmSchema>;

/** `profileData.alarms`: null or a list whose alarm types and rule ids are unique. */
export const deviceProfileAlarmsSchema = z
  .array(deviceProfileAlarmSchema)
  .nullable()
  .superRefine((alarms, ctx) => {
    const types = new Set<string>();
    const ids = new Set<string>();
    alarms?.forEach((a, i) => {
      if (types.has(a.alarmType)) {
        ctx.addIssue({
          code: 'custom',
          path: [i, 'alarmType'],
          message: `Can't create device profile with the same alarm rule types: "${a.alarmType}"!`,
        });
      }
      if (ids.has(a.id)) {
        ctx.addIssue({
          code: 'custom',
          path: [i, 'id'],
          message: `alarm rule id "${a.id}" is used twice`,
        });
      }
      types.add(a.alarmType);
      ids.add(a.id);
    });
  });
