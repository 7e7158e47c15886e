/**
 * Values as the WebSocket API sends them: always text (platform reference §4.3), doubles as Java
 * prints them (`22.0`), as the REST API does without `useStrictDataTypes`.
 */

import type { TypedAttributeKv } from '../attributes/types.js';
import type { TelemetryPoint } from '../events.js';
import { javaDouble } from '../telemetry/telemetry-query.js';

/** A committed time-series point's text. */
export function pointText(p: TelemetryPoint): string {
  const v = p.value;
  if (p.kind === 'double' && typeof v === 'number') return javaDouble(v);
  if (typeof v === 'object' && v !== null) return JSON.stringify(v);
  return String(v);
}

/** An attribute's text. */
export function attributeText(kv: TypedAttributeKv): string {
  const v = kv.value;
  switch (kv.type) {
    case 'DOUBLE':
      return javaDouble(Number(v));
    case 'JSON':
      return typeof v === 'string' ? v : JSON.stringify(v);
    default:
      return String(v);
  }
}

/** A value the REST formatter produced (text, or null for a key without data). */
export function queryText(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  return typeof v === 'string' ? v : JSON.stringify(v);
}
