/**
 * `keyFilters` of WebSocket entity data and count queries (platform reference §1.4, §1.5, §4.4):
 * every filter must hold for an entity to match. A filter names a key (`TIME_SERIES`, `ATTRIBUTE`
 * of any scope, `CLIENT_ATTRIBUTE`, `SHARED_ATTRIBUTE`, `SERVER_ATTRIBUTE`, `ENTITY_FIELD`), a
 * `valueType` and a predicate; predicates are evaluated by the alarm rules' evaluator
 * (`evalFilter`), so both read values and compare them the same way. An entity without the key
 * does not match. Dynamic values (`dynamicValue.sourceType`, §1.5) read an attribute: of the
 * device itself (`CURRENT_DEVICE`, any scope), or the server-scope one of the caller
 * (`CURRENT_USER`), of the caller's customer (`CURRENT_CUSTOMER`) or of the tenant
 * (`CURRENT_TENANT`); with `inherit` a missing one is looked up a level higher (device, then its
 * customer, then the tenant; user, then the caller's customer, then the tenant). Where nothing is
 * found the predicate's `defaultValue` is used. `dynamicSources` says which attributes those are,
 * so a subscription can run its query again when one changes.
 */

import { z } from 'zod';
import { evalFilter, type KeyKind, type SnapshotValue } from '../alarms/rule-eval.js';
import type { AttributeService } from '../attributes/attribute-service.js';
import type { OwnerAttributeService } from '../attributes/owner-attributes.js';
import type { AttributeScope } from '../attributes/types.js';
import { NULL_UUID } from '../common/entity.js';
import { validate } from '../common/validate.js';
import {
  ALARM_VALUE_TYPES,
  type AlarmConditionFilter,
  DEVICE_ENTITY_FIELDS,
  type DynamicValue,
  filterPredicateSchema,
  type KeyFilterPredicate,
} from '../devices/alarm-rule-schema.js';
import type { Device } from '../devices/device-service.js';
import type { TelemetryService } from '../telemetry/telemetry-service.js';

export const KEY_FILTER_KEY_TYPES = [
  'TIME_SERIES',
  'ATTRIBUTE',
  'CLIENT_ATTRIBUTE',
  'SHARED_ATTRIBUTE',
  'SERVER_ATTRIBUTE',
  'ENTITY_FIELD',
] as const;
type KeyType = (typeof KEY_FILTER_KEY_TYPES)[number];

/** At most this many filters in one query. */
export const MAX_KEY_FILTERS = 32;

const keyFilterSchema = z.looseObject({
  key: z.looseObject({
    type: z.enum(KEY_FILTER_KEY_TYPES),
    key: z.string().trim().min(1, 'must not be empty'),
  }),
  valueType: z.enum(ALARM_VALUE_TYPES),
  predicate: filterPredicateSchema,
});
const keyFiltersSchema = z.array(keyFilterSchema).max(MAX_KEY_FILTERS);

export type KeyFilter = z.infer<typeof keyFilterSchema>;

/** Reads a query's `keyFilters` (absent or null: none); ValidationError names what is wrong. */
export function parseKeyFilters(raw: unknown): KeyFilter[] {
  if (raw === undefined || raw === null) return [];
  const filters = Array.isArray(raw)
    ? raw.map((f) => (isRecord(f) ? { ...f, predicate: userValueFirst(f.predicate) } : f))
    : raw;
  return validate(keyFiltersSchema, filters, 'keyFilters');
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A value the dashboard's user typed (`userValue`, a filter's "user editable" field) is used
 * before a dynamic one and the default, as ThingsBoard's `FilterPredicateValue.getValue()` does:
 * it becomes the default and the dynamic value is dropped (nothing to follow).
 */
function userValueFirst(p: unknown): unknown {
  if (!isRecord(p)) return p;
  if (Array.isArray(p.predicates)) return { ...p, predicates: p.predicates.map(userValueFirst) };
  const v = p.value;
  if (!isRecord(v) || v.userValue === undefined || v.userValue === null) return p;
  return { ...p, value: { ...v, defaultValue: v.userValue, dynamicValue: null } };
}

/** Attribute scopes read for `ATTRIBUTE` keys: server over shared over client (§1.4). */
const ANY_SCOPE: readonly AttributeScope[] = ['SERVER_SCOPE', 'SHARED_SCOPE', 'CLIENT_SCOPE'];
const SCOPE_OF: Partial<Record<KeyType, AttributeScope>> = {
  CLIENT_ATTRIBUTE: 'CLIENT_SCOPE',
  SHARED_ATTRIBUTE: 'SHARED_SCOPE',
  SERVER_ATTRIBUTE: 'SERVER_SCOPE',
};

export interface KeyValueReader {
  readonly telemetry: Pick<TelemetryService, 'query'>;
  readonly attributes: Pick<AttributeService, 'get'>;
  /** User, customer and tenant attributes (dynamic values); absent: the defaults are used. */
  readonly owners?: Pick<OwnerAttributeService, 'value'>;
  /** Whose query it is: `CURRENT_USER`, `CURRENT_CUSTOMER` and `CURRENT_TENANT` are the caller's. */
  readonly principal?: Caller;
}

interface Caller {
  readonly userId: string;
  readonly tenantId: string;
  readonly customerId: string | null;
}

type Level = 'DEVICE' | 'USER' | 'CUSTOMER' | 'TENANT';

/** Where a dynamic value of `sourceType` is looked up, nearest first (`inherit` climbs). */
const DYNAMIC_LEVELS: Record<string, readonly Level[]> = {
  CURRENT_DEVICE: ['DEVICE', 'CUSTOMER', 'TENANT'],
  CURRENT_USER: ['USER', 'CUSTOMER', 'TENANT'],
  CURRENT_CUSTOMER: ['CUSTOMER', 'TENANT'],
  CURRENT_TENANT: ['TENANT'],
};

/** The levels a dynamic value reads: the first, or with `inherit` every one. */
function levelsOf(dv: DynamicValue): readonly Level[] {
  const levels = DYNAMIC_LEVELS[dv.sourceType ?? ''] ?? [];
  return dv.inherit ? levels : levels.slice(0, 1);
}

function fieldValue(d: Device, key: string): unknown {
  if (!(DEVICE_ENTITY_FIELDS as readonly string[]).includes(key)) return undefined;
  return key === 'createdTime' ? d.createdTime : (d[key as 'name' | 'type' | 'label'] ?? '');
}

/** The customer owning `device`, or null (the tenant's). */
function ownerOf(device: Device): string | null {
  const id = device.customerId?.id;
  return id && id !== NULL_UUID ? id : null;
}

/** Whether `device` meets every filter (true when there are none). */
export function matchesKeyFilters(
  device: Device,
  filters: readonly KeyFilter[],
  read: KeyValueReader,
): boolean {
  if (filters.length === 0) return true;
  const id = device.id.id;
  const get = (kind: KeyKind | KeyType, key: string): SnapshotValue | undefined => {
    if (kind === 'ENTITY_FIELD') {
      const value = fieldValue(device, key);
      return value === undefined ? undefined : { value, ts: device.createdTime };
    }
    if (kind === 'TIME_SERIES') {
      const v = read.telemetry.query(id, { mode: 'latest', keys: [key], strict: true })[key]?.[0];
      return v ? { value: v.value, ts: v.ts } : undefined;
    }
    const scope = SCOPE_OF[kind as KeyType];
    for (const s of scope ? [scope] : ANY_SCOPE) {
      const kv = read.attributes.get(id, s, [key])[0];
      if (kv) return { value: kv.value, ts: kv.lastUpdateTs };
    }
    return undefined;
  };
  const dynamic = (dv: DynamicValue): unknown => {
    const key = dv.sourceAttribute;
    if (!key || !read.owners) return undefined;
    const caller = read.principal;
    for (const level of levelsOf(dv)) {
      let v: unknown;
      if (level === 'DEVICE') v = get('ATTRIBUTE', key)?.value;
      else if (level === 'CUSTOMER') {
        // The device's customer when inherited from the device, else the caller's.
        const c = dv.sourceType === 'CURRENT_DEVICE' ? ownerOf(device) : caller?.customerId;
        if (c) v = read.owners.value('CUSTOMER', c, key);
      } else if (level === 'USER' && caller) {
        v = read.owners.value('USER', caller.userId, key);
      } else if (level === 'TENANT' && caller) {
        v = read.owners.value('TENANT', caller.tenantId, key);
      }
      if (v !== undefined && v !== null) return v;
    }
    return undefined;
  };
  const src = { get, dynamic };
  return filters.every((f) => evalFilter(f as unknown as AlarmConditionFilter, src));
}

/** The dynamic values of a predicate tree (none where a `userValue` overrides: `userValueFirst`). */
function dynamicValuesOf(p: KeyFilterPredicate, out: DynamicValue[]): DynamicValue[] {
  if (p.type === 'COMPLEX') for (const c of p.predicates) dynamicValuesOf(c, out);
  else if (p.value.dynamicValue?.sourceType && p.value.dynamicValue.sourceAttribute)
    out.push(p.value.dynamicValue);
  return out;
}

/**
 * The time-series and attribute keys the filters read (an update of one may change a match):
 * the filtered keys, and the device attributes dynamic values read (`CURRENT_DEVICE`).
 */
export function filterKeys(filters: readonly KeyFilter[]): {
  timeseries: Set<string>;
  attributes: Set<string>;
} {
  const timeseries = new Set<string>();
  const attributes = new Set<string>();
  for (const f of filters) {
    if (f.key.type === 'TIME_SERIES') timeseries.add(f.key.key);
    else if (f.key.type !== 'ENTITY_FIELD') attributes.add(f.key.key);
    for (const dv of dynamicValuesOf(f.predicate, [])) {
      if (levelsOf(dv).includes('DEVICE')) attributes.add(dv.sourceAttribute ?? '');
    }
  }
  return { timeseries, attributes };
}

/** An owner attribute a query's dynamic values read; `id` undefined: any customer's. */
export interface DynamicSource {
  readonly type: 'USER' | 'CUSTOMER' | 'TENANT';
  readonly id: string | undefined;
  readonly key: string;
}

/**
 * The user, customer and tenant attributes the filters' dynamic values read for `caller` (empty
 * when they have none): when one of them changes, the query's matches may change.
 */
export function dynamicSources(filters: readonly KeyFilter[], caller: Caller): DynamicSource[] {
  const out: DynamicSource[] = [];
  for (const f of filters) {
    for (const dv of dynamicValuesOf(f.predicate, [])) {
      const key = dv.sourceAttribute ?? '';
      for (const level of levelsOf(dv)) {
        if (level === 'USER') out.push({ type: 'USER', id: caller.userId, key });
        else if (level === 'TENANT') out.push({ type: 'TENANT', id: caller.tenantId, key });
        else if (level === 'CUSTOMER') {
          // Inherited from a device: the customer of whichever device it is.
          if (dv.sourceType === 'CURRENT_DEVICE')
            out.push({ type: 'CUSTOMER', id: undefined, key });
          else if (caller.customerId) out.push({ type: 'CUSTOMER', id: caller.customerId, key });
        }
      }
    }
  }
  return out;
}
