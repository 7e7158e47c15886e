/**
 * Attribute payloads as devices and REST clients receive them, written with their stored types
 * (a DOUBLE `42.0` stays `42.0`). Shared by the HTTP, MQTT and CoAP adapters.
 */

import type { DeviceAttributeResponse } from './attribute-service.js';
import { writeKvObject, writeKvValue } from './kv-value.js';
import type { SharedAttributeUpdate, TypedAttributeKv } from './types.js';

const entries = (kvs: readonly TypedAttributeKv[]) => kvs.map((kv) => [kv.key, kv] as const);

/** §2.2: `{"client":{...},"shared":{...}}`, a section omitted when nothing was found. */
export function deviceAttributesJson(res: DeviceAttributeResponse): string {
  const parts: string[] = [];
  if (res.client) parts.push(`"client":${writeKvObject(entries(res.client))}`);
  if (res.shared) parts.push(`"shared":${writeKvObject(entries(res.shared))}`);
  return `{${parts.join(',')}}`;
}

/** §2.3: changed keys as a flat object, or `{"deleted":[...]}`. */
export function sharedUpdateJson(update: SharedAttributeUpdate): string {
  return update.kind === 'updated'
    ? writeKvObject(entries(update.values))
    : JSON.stringify({ deleted: update.keys });
}

/** All shared attributes as a flat object (the first CoAP observe notification, §2.3). */
export function flatAttributesJson(kvs: readonly TypedAttributeKv[]): string {
  return writeKvObject(entries(kvs));
}

/** REST `values/attributes`: `[{"key","value","lastUpdateTs"}]` with native JSON types. */
export function attributeListJson(kvs: readonly TypedAttributeKv[]): string {
  const items = kvs.map(
    (kv) =>
      `{"key":${JSON.stringify(kv.key)},"value":${writeKvValue(kv)},"lastUpdateTs":${kv.lastUpdateTs}}`,
  );
  return `[${items.join(',')}]`;
}
