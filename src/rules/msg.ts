/** Making new messages from old ones, and ThingsBoard's `${metadata}` / `$[data]` templates. */
import { randomUUID } from 'node:crypto';
import type { GatewayMsg } from '../messages/types.js';

export interface MsgChanges {
  readonly type?: string;
  readonly data?: unknown;
  readonly metadata?: Readonly<Record<string, string>>;
  /** A new message (fresh id and ts) rather than the same one changed. */
  readonly fresh?: boolean;
}

/**
 * A message derived from `msg`. It keeps `committed` only when what a save node would store is
 * unchanged: the same data (same object, or `sameData`), type, `ts` and `scope` metadata.
 */
export function derive(msg: GatewayMsg, changes: MsgChanges, sameData = false): GatewayMsg {
  const type = changes.type ?? msg.type;
  const data = changes.data === undefined ? msg.data : changes.data;
  const metadata = changes.metadata ?? msg.metadata;
  const unchanged =
    msg.committed === true &&
    (data === msg.data || sameData) &&
    type === msg.type &&
    metadata.ts === msg.metadata.ts &&
    metadata.scope === msg.metadata.scope;
  const next: GatewayMsg = {
    id: changes.fresh ? randomUUID() : msg.id,
    type,
    originator: msg.originator,
    customerId: msg.customerId ?? null,
    metadata,
    data,
    ts: changes.fresh ? Date.now() : msg.ts,
    ...(unchanged ? { committed: true } : {}),
    ...(msg.callers ? { callers: msg.callers } : {}),
  };
  return next;
}

/** Metadata values are strings (TbMsgMetaData); anything else is turned into its JSON text. */
export function toMetadata(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return out;
  // Already a string map (a script's metadata, changed or not): itself, as messages never change.
  if (Object.getPrototypeOf(value) === Object.prototype) {
    let strings = true;
    for (const k in value) {
      if (typeof (value as Record<string, unknown>)[k] !== 'string') {
        strings = false;
        break;
      }
    }
    if (strings) return value as Record<string, string>;
  }
  for (const [k, v] of Object.entries(value)) {
    if (v === null || v === undefined) continue;
    out[k] = typeof v === 'string' ? v : JSON.stringify(v);
  }
  return out;
}

function dataPath(data: unknown, path: string): unknown {
  let cur: unknown = data;
  for (const part of path.split('.')) {
    if (cur === null || typeof cur !== 'object' || Array.isArray(cur)) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

/**
 * ThingsBoard's `processPattern` (reference §6): `${*}` is the whole metadata as JSON, `${key}` a
 * metadata value, `$[*]` the whole data as JSON, `$[a.b]` a scalar of the data (strings
 * unquoted). Placeholders that resolve to nothing are left as written.
 */
export function processPattern(pattern: string, msg: GatewayMsg): string {
  if (!pattern.includes('${') && !pattern.includes('$[')) return pattern;
  let out = pattern.replaceAll('${*}', () => JSON.stringify(msg.metadata));
  out = out.replace(/\$\{([^}]+)\}/g, (whole, key: string) => {
    const v = msg.metadata[key];
    return v === undefined ? whole : v;
  });
  out = out.replaceAll('$[*]', () => JSON.stringify(msg.data ?? null));
  out = out.replace(/\$\[([^\]]+)\]/g, (whole, path: string) => {
    const v = dataPath(msg.data, path);
    if (v === undefined || v === null || typeof v === 'object') return whole;
    return String(v);
  });
  return out;
}
