/**
 * `keyFilters` of WebSocket entity data and count queries (platform reference §1.4, §1.5, §4.4):
 * every filter must hold for an entity to match. A filter names a key (`TIME_SERIES`, `ATTRIBUTE`
 * of any scope, `CLIENT_ATTRIBUTE`, `SHARED_ATTRIBUTE`, `SERVER_ATTRIBUTE`, `ENTITY_FIELD`), a
 * `valueType` and a predicate; predicates are evaluated by the alarm rules' evaluator
 * (`evalFilter`), so both read values and compare them the same way. An entity without the key
 * does not match. Dynamic values fall back to the predicate's `defaultValue`.
 */

import { z } from 'zod';
import { evalFilter, type KeyKind, type SnapshotValue } from '../alarms/rule-eval.js';
import type { AttributeService } from '../attributes/attribute-service.js';
import type { AttributeScope } from '../attributes/types.js';
import { validate } from '../common/validate.js';
import {
  ALARM_VALUE_TYPES,
  type AlarmConditionFilter,
  DEVICE_ENTITY_FIELDS,
  keyFilterPredicateSchema,
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
  predicate: keyFilterPredicateSchema,
});
const keyFiltersSchema = z.array(keyFilterSchema).max(MAX_KEY_FILTERS);

export type KeyFilter = z.infer<typeof keyFilterSchema>;

/** Reads a query's `keyFilters` (absent or null: none); ValidationError names what is wrong. */
export function parseKeyFilters(raw: unknown): KeyFilter[] {
  if (raw === undefined || raw === null) return [];
  return validate(keyFiltersSchema, raw, 'keyFilters');
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
}

function fieldValue(d: Device, key: string): unknown {
  if (!(DEVICE_ENTITY_FIELDS as readonly string[]).includes(key)) return undefined;
  return key === 'createdTime' ? d.createdTime : (d[key as 'name' | 'type' | 'label'] ?? '');
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
  const src = { get, dynamic: () => undefined };
  return filters.every((f) => evalFilter(f as unknown as AlarmConditionFilter, src));
}

/** The time-series and attribute keys the filters read (an update of one may change a match). */
export function filterKeys(filters: readonly KeyFilter[]): {
  timeseries: Set<string>;
  attributes: Set<string>;
} {
  const timeseries = new Set<string>();
  const attributes = new Set<string>();
  for (const f of filters) {
    if (f.key.type === 'TIME_SERIES') timeseries.add(f.key.key);
    else if (f.key.type !== 'ENTITY_FIELD') attributes.add(f.key.key);
  }
  return { timeseries, attributes };
}
