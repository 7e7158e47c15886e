/**
 * Reading the WebSocket command wrappers (platform reference §4.2, §4.4) into typed commands.
 * `/api/ws` sends `{"authCmd", "cmds": [{"type", "cmdId", ...}]}`; the legacy
 * `/api/ws/plugins/telemetry` sends `tsSubCmds`, `attrSubCmds`, `historyCmds` and the
 * `entityDataCmds`-style arrays. Both forms are accepted on both paths.
 */

import type { AttributeScope } from '../attributes/types.js';
import { ValidationError } from '../errors.js';
import {
  parseKeys,
  parseTimeseriesQuery,
  type TimeseriesQuery,
} from '../telemetry/telemetry-query.js';
import { WS_CMD_TYPES, type WsCmdType } from './types.js';

export type Raw = Readonly<Record<string, unknown>>;

/** One command of a wrapper, its type known and its body not yet read. */
export interface RawCmd {
  readonly type: WsCmdType;
  readonly body: Raw;
}

const LEGACY_ARRAYS: ReadonlyArray<readonly [string, WsCmdType]> = [
  ['attrSubCmds', 'ATTRIBUTES'],
  ['tsSubCmds', 'TIMESERIES'],
  ['historyCmds', 'TIMESERIES_HISTORY'],
  ['entityDataCmds', 'ENTITY_DATA'],
  ['entityDataUnsubscribeCmds', 'ENTITY_DATA_UNSUBSCRIBE'],
  ['alarmDataCmds', 'ALARM_DATA'],
  ['alarmDataUnsubscribeCmds', 'ALARM_DATA_UNSUBSCRIBE'],
  ['entityCountCmds', 'ENTITY_COUNT'],
  ['entityCountUnsubscribeCmds', 'ENTITY_COUNT_UNSUBSCRIBE'],
  ['alarmCountCmds', 'ALARM_COUNT'],
  ['alarmCountUnsubscribeCmds', 'ALARM_COUNT_UNSUBSCRIBE'],
];

export const isObj = (v: unknown): v is Raw =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The commands of one message, in order. A command of an unknown type is skipped, as
 * ThingsBoard skips it; a message that is not a wrapper object is a ValidationError.
 */
export function readWrapper(msg: unknown): { authToken?: string; cmds: RawCmd[] } {
  if (!isObj(msg)) throw new ValidationError('A command wrapper must be a JSON object');
  const cmds: RawCmd[] = [];
  const auth = msg.authCmd;
  const authToken = isObj(auth) && typeof auth.token === 'string' ? auth.token : undefined;
  for (const [field, type] of LEGACY_ARRAYS) {
    const list = msg[field];
    if (Array.isArray(list)) for (const body of list) if (isObj(body)) cmds.push({ type, body });
  }
  if (Array.isArray(msg.cmds)) {
    for (const body of msg.cmds) {
      if (isObj(body) && (WS_CMD_TYPES as readonly unknown[]).includes(body.type))
        cmds.push({ type: body.type as WsCmdType, body });
    }
  }
  return { authToken, cmds };
}

/** The client's `cmdId`: an integer ≥ 0 (ThingsBoard: "Cmd id is negative value!"). */
export function cmdIdOf(body: Raw): number {
  const id = body.cmdId;
  if (typeof id !== 'number' || !Number.isInteger(id))
    throw new ValidationError('cmdId is required');
  if (id < 0) throw new ValidationError('Cmd id is negative value!');
  return id;
}

export function num(body: Raw, name: string, dflt = 0): number {
  const v = body[name];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new ValidationError(`${name} must be a number`);
  return v;
}

export function strList(v: unknown): string[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const out = v.filter((x): x is string => typeof x === 'string' && x !== '');
  return out.length > 0 ? out : undefined;
}

/** `keys` of the telemetry commands: a comma-separated string (or a list); absent = all keys. */
function keysOf(body: Raw): string[] | undefined {
  const k = body.keys;
  if (Array.isArray(k)) return strList(k);
  return typeof k === 'string' ? parseKeys(k) : undefined;
}

/** What TIMESERIES, ATTRIBUTES and TIMESERIES_HISTORY name: one entity. */
interface EntityCmd {
  readonly cmdId: number;
  readonly entityType: string;
  readonly entityId: string;
  readonly keys?: readonly string[];
}

function entityCmd(body: Raw): EntityCmd {
  const cmdId = cmdIdOf(body);
  const entityId = typeof body.entityId === 'string' ? body.entityId.toLowerCase() : '';
  const entityType = typeof body.entityType === 'string' ? body.entityType : 'DEVICE';
  return { cmdId, entityType, entityId, keys: keysOf(body) };
}

export interface TsSubCmd extends EntityCmd {
  readonly unsubscribe: boolean;
  /** `scope: LATEST_TELEMETRY`: only values newer than the last one sent per key. */
  readonly latestOnly: boolean;
  /** History first (`timeWindow > 0` with keys), else the latest values. */
  readonly history?: TimeseriesQuery & { mode: 'history' };
}

export function readTsSubCmd(body: Raw): TsSubCmd {
  const base = entityCmd(body);
  const unsubscribe = body.unsubscribe === true;
  const latestOnly = body.scope === 'LATEST_TELEMETRY';
  if (unsubscribe) return { ...base, unsubscribe, latestOnly };
  if (!base.entityId) throw new ValidationError('Device id is empty!');
  const timeWindow = num(body, 'timeWindow');
  if (timeWindow <= 0 || !base.keys) return { ...base, unsubscribe, latestOnly };
  const startTs = num(body, 'startTs');
  const history = historyQuery(body, base.keys, startTs, startTs + timeWindow);
  return { ...base, unsubscribe, latestOnly, history };
}

export interface AttrSubCmd extends EntityCmd {
  readonly unsubscribe: boolean;
  /** Absent: every scope. */
  readonly scope?: AttributeScope;
}

const SCOPES: readonly string[] = ['CLIENT_SCOPE', 'SHARED_SCOPE', 'SERVER_SCOPE'];

export function readAttrSubCmd(body: Raw): AttrSubCmd {
  const base = entityCmd(body);
  const unsubscribe = body.unsubscribe === true;
  const scope = body.scope;
  if (scope !== undefined && scope !== null && scope !== '' && !SCOPES.includes(String(scope)))
    throw new ValidationError(`scope must be one of ${SCOPES.join(', ')}`);
  if (!unsubscribe && !base.entityId) throw new ValidationError('Device id is empty!');
  return { ...base, unsubscribe, scope: scope ? (scope as AttributeScope) : undefined };
}

export interface HistoryCmd extends EntityCmd {
  readonly query: TimeseriesQuery & { mode: 'history' };
}

export function readHistoryCmd(body: Raw): HistoryCmd {
  const base = entityCmd(body);
  if (!base.entityId) throw new ValidationError('Device id is empty!');
  const query = historyQuery(body, base.keys, num(body, 'startTs'), num(body, 'endTs'));
  return { ...base, query };
}

/**
 * A history read as the REST API's `GET .../values/timeseries` validates it (limit 0 = 100,
 * agg empty = NONE), oldest point first.
 */
export function historyQuery(
  body: Raw,
  keys: readonly string[] | undefined,
  startTs: number,
  endTs: number,
): TimeseriesQuery & { mode: 'history' } {
  const limit = num(body, 'limit');
  const agg = typeof body.agg === 'string' && body.agg !== '' ? body.agg : 'NONE';
  const q = parseTimeseriesQuery({
    keys: keys?.join(','),
    startTs: String(Math.max(0, Math.trunc(startTs))),
    endTs: String(Math.max(0, Math.trunc(endTs))),
    agg,
    interval: String(Math.max(0, Math.trunc(num(body, 'interval')))),
    limit: String(limit > 0 ? Math.trunc(limit) : 100),
    orderBy: 'ASC',
  });
  if (q.mode !== 'history') throw new ValidationError('startTs and endTs are required');
  return q;
}
