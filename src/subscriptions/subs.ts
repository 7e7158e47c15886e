/**
 * One class per kind of live subscription (platform reference §4): the legacy time-series and
 * attribute subscriptions, entity data, entity count, alarm data, alarm count and alarm status.
 * Each sends its first update from `start()` and later ones from the bus hooks the subscription
 * service calls.
 */

import type { AlarmService } from '../alarms/alarm-service.js';
import { ALARM_SORT, type AlarmFilter, type AlarmSort } from '../alarms/alarm-store.js';
import {
  ALARM_SEVERITIES,
  type AlarmEvent,
  type AlarmInfo,
  type AlarmSeverity,
  statusListFilter,
} from '../alarms/types.js';
import type { AttributeService } from '../attributes/attribute-service.js';
import type {
  OwnerAttributeService,
  OwnerScope,
  OwnerType,
} from '../attributes/owner-attributes.js';
import type { AttributeScope, TypedAttributeKv } from '../attributes/types.js';
import type { Principal } from '../auth/auth-service.js';
import { type OwnerRef, ownerAttributeAccess } from '../auth/authorization.js';
import type { Device } from '../devices/device-service.js';
import { ValidationError } from '../errors.js';
import type { TelemetryPoint } from '../events.js';
import type { TimeseriesQuery } from '../telemetry/telemetry-query.js';
import type { TelemetryService } from '../telemetry/telemetry-service.js';
import {
  type AttrSubCmd,
  historyQuery,
  isObj,
  num,
  type Raw,
  type RawCmd,
  readAttrSubCmd,
  readHistoryCmd,
  readTsSubCmd,
  strList,
  type TsSubCmd,
} from './commands.js';
import {
  type EntityFilter,
  type EntityResolver,
  MAX_ENTITIES,
  parseEntityFilter,
} from './entity-query.js';
import {
  type DynamicSource,
  dynamicSources,
  filterKeys,
  type KeyFilter,
  matchesKeyFilters,
  parseKeyFilters,
} from './key-filters.js';
import {
  type InboxChange,
  markRead,
  type NotificationInbox,
  NotificationsCountSub,
  NotificationsSub,
} from './notification-subs.js';
import type { ApiSession } from './subscription-service.js';
import {
  type EntityData,
  type EntityKey,
  type EntityKeyType,
  ERROR_CODE,
  type PageDataOut,
  type TelemetryUpdate,
  type TsValue,
  UNAUTHORIZED_MSG,
  type WsUpdate,
} from './types.js';
import { attributeText, pointText, queryText } from './values.js';

/** What a subscription works with (built by the subscription service per session). */
export interface SubContext {
  readonly session: ApiSession;
  readonly principal: Principal;
  send(update: WsUpdate): void;
  readonly resolver: EntityResolver;
  readonly telemetry: Pick<TelemetryService, 'query'>;
  readonly attributes: Pick<AttributeService, 'get'>;
  readonly alarms: Pick<AlarmService, 'list'>;
  /**
   * User, customer and tenant attributes: dynamic values of key filters (absent: defaults) and
   * `ATTRIBUTES` subscriptions on those entities (absent: refused).
   */
  readonly owners?: Pick<OwnerAttributeService, 'value' | 'get'>;
  /** The tenant, a customer or a user by id, for the attribute decision (absent: refused). */
  readonly ownerRef?: (type: OwnerType, id: string) => OwnerRef | undefined;
  /** The caller's inbox; absent when the gateway has no notification domain. */
  readonly notifications?: NotificationInbox;
  now(): number;
  /** Call after `devices()` changed. */
  reindex(sub: Sub): void;
  /** Ends the subscription (access lost). */
  end(sub: Sub): void;
}

export interface Sub {
  /** Devices whose telemetry and attributes this subscription receives. */
  devices(): Iterable<string>;
  start(): void;
  dispose(): void;
  /** Takes a follow-up command with the same `cmdId` (ENTITY_DATA without a query); true if taken. */
  amend?(cmd: RawCmd): boolean;
  onTelemetry?(deviceId: string, points: readonly TelemetryPoint[]): void;
  onAttributes?(deviceId: string, scope: AttributeScope, values: readonly TypedAttributeKv[]): void;
  onAlarm?(ev: AlarmEvent): void;
  /** A device was created, updated, deleted or changed owner. */
  onDevicesChanged?(): void;
  /** Some user's inbox changed. */
  onInbox?(change: InboxChange): void;
  /** The user, customer and tenant attributes its key filters' dynamic values read. */
  readonly dynamicSources?: readonly DynamicSource[];
  /** One of `dynamicSources` changed: the query runs again. */
  onDynamicValue?(): void;
  /** Attributes of a user, customer or tenant were saved or deleted. */
  onOwnerAttributes?(ev: OwnerAttributesChange): void;
}

/** What `ownerAttributes.updated` says: whose attributes of which scope changed. */
export interface OwnerAttributesChange {
  readonly entityType: OwnerType;
  readonly entityId: string;
  readonly scope: OwnerScope;
  readonly keys: readonly string[];
}

/** A subscription for `cmd`, or undefined for a one-shot command already answered. */
export function createSub(cmd: RawCmd, cmdId: number, ctx: SubContext): Sub | undefined {
  switch (cmd.type) {
    case 'TIMESERIES':
      return new TsSub(readTsSubCmd(cmd.body), ctx);
    case 'ATTRIBUTES': {
      const attr = readAttrSubCmd(cmd.body);
      return OWNER_TYPES.includes(attr.entityType)
        ? new OwnerAttrSub(attr, ctx)
        : new AttrSub(attr, ctx);
    }
    case 'TIMESERIES_HISTORY':
      history(cmd.body, ctx);
      return undefined;
    case 'ENTITY_DATA':
      return new EntityDataSub(cmdId, cmd.body, ctx);
    case 'ENTITY_COUNT':
      return new EntityCountSub(cmdId, cmd.body, ctx);
    case 'ALARM_DATA':
      return new AlarmDataSub(cmdId, cmd.body, ctx);
    case 'ALARM_COUNT':
      return new AlarmCountSub(cmdId, cmd.body, ctx);
    case 'ALARM_STATUS':
      return new AlarmStatusSub(cmdId, cmd.body, ctx);
    case 'NOTIFICATIONS':
      return new NotificationsSub(cmdId, cmd.body, ctx);
    case 'NOTIFICATIONS_COUNT':
      return new NotificationsCountSub(cmdId, ctx);
    case 'MARK_NOTIFICATIONS_AS_READ':
    case 'MARK_ALL_NOTIFICATIONS_AS_READ':
      markRead(cmd.body, cmd.type === 'MARK_ALL_NOTIFICATIONS_AS_READ', ctx);
      return undefined;
    default:
      throw new ValidationError(`${cmd.type} is not supported`);
  }
}

type LegacyData = Record<string, Array<[number, string | null]>>;

/** `rec[key]`, created by `make` when absent. */
function slot<K extends string, V>(rec: Partial<Record<K, V>>, key: K, make: () => V): V {
  const v = rec[key];
  if (v !== undefined) return v;
  const made = make();
  rec[key] = made;
  return made;
}

/** The legacy update with `latestValues` (key -> last ts) as ThingsBoard adds it. */
function legacyUpdate(cmdId: number, data: LegacyData): TelemetryUpdate {
  const latestValues: Record<string, number> = {};
  for (const [key, list] of Object.entries(data)) {
    latestValues[key] = list.reduce((m, [ts]) => Math.max(m, ts), 0);
  }
  return { subscriptionId: cmdId, errorCode: ERROR_CODE.none, errorMsg: null, data, latestValues };
}

function unauthorized(cmdId: number): TelemetryUpdate {
  return {
    subscriptionId: cmdId,
    errorCode: ERROR_CODE.unauthorized,
    errorMsg: UNAUTHORIZED_MSG,
    data: null,
  };
}

/** A REST-style query result as legacy data (values as text, keys without data left out). */
function queryData(result: Record<string, ReadonlyArray<{ ts: number; value: unknown }>>) {
  const data: LegacyData = {};
  for (const [key, list] of Object.entries(result)) {
    const pairs = list
      .map((v) => [v.ts, queryText(v.value)] as [number, string | null])
      .filter(([, v]) => v !== null);
    if (pairs.length > 0) data[key] = pairs;
  }
  return data;
}

/** The device a legacy command names, when the caller may read it. */
function legacyDevice(
  ctx: SubContext,
  cmd: { entityType: string; entityId: string },
): Device | undefined {
  if (cmd.entityType !== 'DEVICE') return undefined;
  return ctx.resolver.device(ctx.principal, cmd.entityId);
}

/** TIMESERIES_HISTORY / `historyCmds`: one answer, no live updates. */
function history(body: Raw, ctx: SubContext): void {
  const cmd = readHistoryCmd(body);
  const device = legacyDevice(ctx, cmd);
  if (!device) {
    ctx.send(unauthorized(cmd.cmdId));
    return;
  }
  ctx.send(legacyUpdate(cmd.cmdId, queryData(ctx.telemetry.query(device.id.id, cmd.query))));
}

/** Ends a legacy subscription whose device the caller may no longer read. */
abstract class LegacySub implements Sub {
  constructor(
    protected readonly cmd: { cmdId: number; entityType: string; entityId: string },
    protected readonly ctx: SubContext,
  ) {}

  devices(): Iterable<string> {
    return [this.cmd.entityId];
  }

  start(): void {
    if (!legacyDevice(this.ctx, this.cmd)) {
      this.ctx.send(unauthorized(this.cmd.cmdId));
      this.ctx.end(this);
      return;
    }
    this.ctx.send(legacyUpdate(this.cmd.cmdId, this.first()));
  }

  protected abstract first(): LegacyData;

  dispose(): void {}

  onDevicesChanged(): void {
    if (legacyDevice(this.ctx, this.cmd)) return;
    this.ctx.send(unauthorized(this.cmd.cmdId));
    this.ctx.end(this);
  }
}

/** A deleted key as the subscription service passes it on: ts 0 and an empty value. */
const isDeletion = (p: TelemetryPoint) => p.ts === 0 && p.value === '';

/** TIMESERIES / `tsSubCmds` (§4.2). */
class TsSub extends LegacySub {
  readonly #keys: ReadonlySet<string> | undefined;
  /** Last ts sent per key (LATEST_TELEMETRY sends only newer values). */
  readonly #last = new Map<string, number>();

  constructor(
    private readonly ts: TsSubCmd,
    ctx: SubContext,
  ) {
    super(ts, ctx);
    this.#keys = ts.keys ? new Set(ts.keys) : undefined;
  }

  protected first(): LegacyData {
    const q: TimeseriesQuery = this.ts.history ?? {
      mode: 'latest',
      keys: this.ts.keys,
      strict: false,
    };
    const data = queryData(this.ctx.telemetry.query(this.ts.entityId, q));
    for (const [key, list] of Object.entries(data))
      this.#last.set(key, Math.max(...list.map(([ts]) => ts)));
    return data;
  }

  onTelemetry(_deviceId: string, points: readonly TelemetryPoint[]): void {
    const data: LegacyData = {};
    for (const p of points) {
      if (this.#keys && !this.#keys.has(p.key)) continue;
      if (isDeletion(p)) this.#last.delete(p.key);
      else if (this.ts.latestOnly && p.ts <= (this.#last.get(p.key) ?? -1)) continue;
      else this.#last.set(p.key, Math.max(p.ts, this.#last.get(p.key) ?? 0));
      slot(data, p.key, () => []).push([p.ts, pointText(p)]);
    }
    if (Object.keys(data).length > 0) this.ctx.send(legacyUpdate(this.ts.cmdId, data));
  }
}

const ALL_SCOPES: readonly AttributeScope[] = ['CLIENT_SCOPE', 'SHARED_SCOPE', 'SERVER_SCOPE'];

/** ATTRIBUTES / `attrSubCmds` (§4.2): values with their `lastUpdateTs`. */
class AttrSub extends LegacySub {
  readonly #keys: ReadonlySet<string> | undefined;

  constructor(
    private readonly attr: AttrSubCmd,
    ctx: SubContext,
  ) {
    super(attr, ctx);
    this.#keys = attr.keys ? new Set(attr.keys) : undefined;
  }

  protected first(): LegacyData {
    const data: LegacyData = {};
    for (const scope of this.attr.scope ? [this.attr.scope] : ALL_SCOPES) {
      for (const kv of this.ctx.attributes.get(this.attr.entityId, scope, this.attr.keys))
        data[kv.key] = [[kv.lastUpdateTs, attributeText(kv)]];
    }
    return data;
  }

  onAttributes(_deviceId: string, scope: AttributeScope, values: readonly TypedAttributeKv[]) {
    if (this.attr.scope && scope !== this.attr.scope) return;
    const data: LegacyData = {};
    for (const kv of values) {
      if (this.#keys && !this.#keys.has(kv.key)) continue;
      data[kv.key] = [[kv.lastUpdateTs, attributeText(kv)]];
    }
    if (Object.keys(data).length > 0) this.ctx.send(legacyUpdate(this.attr.cmdId, data));
  }
}

const OWNER_TYPES: readonly string[] = ['USER', 'CUSTOMER', 'TENANT'];
const OWNER_SCOPES: readonly OwnerScope[] = ['SHARED_SCOPE', 'SERVER_SCOPE'];

/**
 * ATTRIBUTES / `attrSubCmds` on a user, customer or tenant (§4.2): allowed by the one attribute
 * decision (`ownerAttributeAccess`, READ_ATTRIBUTES), else ThingsBoard's Unauthorized update.
 * These entities hold server and shared attributes (CLIENT_SCOPE is devices' only: nothing comes).
 * A deleted key goes out as for devices: ts 0 and an empty value.
 */
class OwnerAttrSub implements Sub {
  readonly #type: OwnerType;
  readonly #keys: ReadonlySet<string> | undefined;
  readonly #scopes: readonly OwnerScope[];

  constructor(
    private readonly attr: AttrSubCmd,
    private readonly ctx: SubContext,
  ) {
    this.#type = attr.entityType as OwnerType;
    this.#keys = attr.keys ? new Set(attr.keys) : undefined;
    this.#scopes = OWNER_SCOPES.filter((s) => !attr.scope || s === attr.scope);
  }

  devices(): Iterable<string> {
    return [];
  }

  start(): void {
    const { ctx, attr } = this;
    const ref = ctx.ownerRef?.(this.#type, attr.entityId);
    if (!ctx.owners || !ref || ownerAttributeAccess(ctx.principal, ref) === 'none') {
      ctx.send(unauthorized(attr.cmdId));
      ctx.end(this);
      return;
    }
    const data: LegacyData = {};
    for (const scope of this.#scopes) {
      for (const kv of ctx.owners.get(this.#type, attr.entityId, scope, attr.keys))
        data[kv.key] = [[kv.lastUpdateTs, attributeText(kv)]];
    }
    ctx.send(legacyUpdate(attr.cmdId, data));
  }

  dispose(): void {}

  onOwnerAttributes(ev: OwnerAttributesChange): void {
    const { ctx, attr } = this;
    if (ev.entityType !== this.#type || ev.entityId !== attr.entityId) return;
    if (!this.#scopes.includes(ev.scope) || !ctx.owners) return;
    const keys = ev.keys.filter((k) => !this.#keys || this.#keys.has(k));
    if (keys.length === 0) return;
    const now = new Map(
      ctx.owners.get(this.#type, attr.entityId, ev.scope, keys).map((kv) => [kv.key, kv]),
    );
    const data: LegacyData = {};
    for (const key of keys) {
      const kv = now.get(key);
      data[key] = kv ? [[kv.lastUpdateTs, attributeText(kv)]] : [[0, '']];
    }
    ctx.send(legacyUpdate(attr.cmdId, data));
  }
}

// ---------------------------------------------------------------------------------------------
// Entity queries (§4.4)

interface PageLink {
  readonly page: number;
  readonly pageSize: number;
  readonly textSearch: string;
  readonly sortKey?: EntityKey;
  readonly desc: boolean;
}

const KEY_TYPES: readonly EntityKeyType[] = [
  'ATTRIBUTE',
  'CLIENT_ATTRIBUTE',
  'SHARED_ATTRIBUTE',
  'SERVER_ATTRIBUTE',
  'TIME_SERIES',
  'ENTITY_FIELD',
  'ALARM_FIELD',
];

function entityKeys(v: unknown, name: string): EntityKey[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new ValidationError(`${name} must be a list`);
  return v.map((k) => {
    if (!isObj(k) || typeof k.key !== 'string' || !KEY_TYPES.includes(k.type as EntityKeyType))
      throw new ValidationError(`${name}: each key needs a type (${KEY_TYPES.join(', ')}) and key`);
    return { type: k.type as EntityKeyType, key: k.key };
  });
}

function pageLinkOf(raw: unknown, dfltSize: number): PageLink {
  const p = isObj(raw) ? raw : {};
  const pageSize = Math.trunc(num(p, 'pageSize', dfltSize));
  const page = Math.trunc(num(p, 'page', 0));
  if (pageSize < 1 || pageSize > MAX_ENTITIES)
    throw new ValidationError(`pageLink.pageSize must be from 1 to ${MAX_ENTITIES}`);
  if (page < 0) throw new ValidationError('pageLink.page must not be negative');
  const order = isObj(p.sortOrder) ? p.sortOrder : undefined;
  const key = order && isObj(order.key) ? order.key : undefined;
  return {
    page,
    pageSize,
    textSearch: typeof p.textSearch === 'string' ? p.textSearch.toLowerCase() : '',
    sortKey:
      key && typeof key.key === 'string'
        ? { type: (key.type as EntityKeyType) ?? 'ENTITY_FIELD', key: key.key }
        : undefined,
    desc: order?.direction !== 'ASC',
  };
}

function pageOf<T>(all: readonly T[], link: { page: number; pageSize: number }): PageDataOut<T> {
  const start = link.page * link.pageSize;
  return {
    data: all.slice(start, start + link.pageSize),
    totalPages: Math.ceil(all.length / link.pageSize),
    totalElements: all.length,
    hasNext: start + link.pageSize < all.length,
  };
}

/** A device's entity field as text (`name`, `type`, `label`, `createdTime`, ...). */
function entityField(d: Device, key: string): string | undefined {
  switch (key) {
    case 'name':
    case 'type':
    case 'label':
      return d[key] ?? '';
    case 'createdTime':
      return String(d.createdTime);
    case 'id':
      return d.id.id;
    case 'deviceProfileName':
      return d.type;
    case 'additionalInfo':
      return d.additionalInfo === null ? '' : JSON.stringify(d.additionalInfo);
    default:
      return undefined;
  }
}

function fieldsOf(d: Device, keys: readonly string[]): Record<string, TsValue> {
  const out: Record<string, TsValue> = {};
  for (const key of keys) {
    const value = entityField(d, key);
    if (value !== undefined) out[key] = { ts: d.createdTime, value };
  }
  return out;
}

const SCOPE_OF: Partial<Record<EntityKeyType, AttributeScope>> = {
  CLIENT_ATTRIBUTE: 'CLIENT_SCOPE',
  SHARED_ATTRIBUTE: 'SHARED_SCOPE',
  SERVER_ATTRIBUTE: 'SERVER_SCOPE',
};

/** Whether an attribute of `scope` is what a key of `type` names (ATTRIBUTE: any scope). */
function scopeMatches(type: EntityKeyType, scope: AttributeScope): boolean {
  return type === 'ATTRIBUTE' || SCOPE_OF[type] === scope;
}

/** A value a query found nothing for, as ThingsBoard's entity query returns it. */
const NO_VALUE: TsValue = { ts: 0, value: '' };

/** ENTITY_DATA (§4.4): a page of entities with latest values, then live updates. */
class EntityDataSub implements Sub {
  readonly #cmdId: number;
  readonly #ctx: SubContext;
  #filter: EntityFilter | undefined;
  #link: PageLink = { page: 0, pageSize: 1024, textSearch: '', desc: true };
  #fields: string[] = [];
  /** Latest-value keys sent with the page and updated live. */
  #latest: EntityKey[] = [];
  /** Time-series keys of `tsCmd`, updated live. */
  #tsKeys = new Set<string>();
  #page: Device[] = [];
  /** The query's key filters; with any, every device of the entity filter is followed. */
  #keyFilters: KeyFilter[] = [];
  #filterKeys = filterKeys([]);
  /** Devices of the entity filter before the key filters (followed for their filter keys). */
  #candidates: string[] = [];
  readonly dynamicSources: readonly DynamicSource[];

  constructor(cmdId: number, body: Raw, ctx: SubContext) {
    this.#cmdId = cmdId;
    this.#ctx = ctx;
    if (!isObj(body.query)) throw new ValidationError('Query is empty!');
    const q = body.query;
    this.#filter = parseEntityFilter(q.entityFilter);
    this.#keyFilters = parseKeyFilters(q.keyFilters);
    this.#filterKeys = filterKeys(this.#keyFilters);
    this.dynamicSources = dynamicSources(this.#keyFilters, ctx.principal);
    this.#link = pageLinkOf(q.pageLink, 1024);
    const fields = entityKeys(q.entityFields, 'entityFields');
    this.#fields = fields.filter((k) => k.type === 'ENTITY_FIELD').map((k) => k.key);
    this.#latest = entityKeys(q.latestValues, 'latestValues').filter(
      (k) => k.type !== 'ENTITY_FIELD' && k.type !== 'ALARM_FIELD',
    );
    this.#pending = body;
  }

  /** The command that created the subscription: its latestCmd/tsCmd/historyCmd run on start. */
  #pending: Raw | undefined;

  devices(): Iterable<string> {
    return this.#keyFilters.length > 0 ? this.#candidates : this.#page.map((d) => d.id.id);
  }

  start(): void {
    this.#page = this.#query();
    this.#ctx.reindex(this);
    this.#sendPage();
    const body = this.#pending;
    this.#pending = undefined;
    if (body) this.#subCmds(body);
  }

  amend(cmd: RawCmd): boolean {
    if (cmd.type !== 'ENTITY_DATA' || isObj(cmd.body.query)) return false;
    this.#subCmds(cmd.body);
    return true;
  }

  dispose(): void {}

  #query(): Device[] {
    if (!this.#filter) return [];
    const link = this.#link;
    let all = this.#ctx.resolver.resolve(this.#ctx.principal, this.#filter);
    if (this.#keyFilters.length > 0) {
      this.#candidates = all.map((d) => d.id.id);
      all = all.filter((d) => matchesKeyFilters(d, this.#keyFilters, this.#ctx));
    }
    if (link.textSearch) {
      const t = link.textSearch;
      all = all.filter((d) =>
        [d.name, d.type, d.label ?? ''].some((s) => s.toLowerCase().includes(t)),
      );
    }
    const key = link.sortKey?.type === 'ENTITY_FIELD' ? link.sortKey.key : 'createdTime';
    const sign = link.desc ? -1 : 1;
    all.sort((a, b) => {
      const d =
        key === 'createdTime'
          ? a.createdTime - b.createdTime
          : (entityField(a, key) ?? '').localeCompare(entityField(b, key) ?? '');
      return sign * (d || a.createdTime - b.createdTime);
    });
    this.#total = all.length;
    return pageOf(all, link).data as Device[];
  }

  #total = 0;

  #sendPage(): void {
    const data = this.#page.map((d) => this.#entityData(d));
    const start = this.#link.page * this.#link.pageSize;
    this.#ctx.send({
      cmdId: this.#cmdId,
      cmdUpdateType: 'ENTITY_DATA',
      errorCode: ERROR_CODE.none,
      errorMsg: null,
      data: {
        data,
        totalPages: Math.ceil(this.#total / this.#link.pageSize),
        totalElements: this.#total,
        hasNext: start + this.#link.pageSize < this.#total,
      },
      update: null,
      allowedEntities: MAX_ENTITIES,
    });
  }

  #entityData(d: Device): EntityData {
    const id = d.id.id;
    const latest: EntityData['latest'] = {};
    if (this.#fields.length > 0) latest.ENTITY_FIELD = fieldsOf(d, this.#fields);
    const tsKeys = this.#latest.filter((k) => k.type === 'TIME_SERIES').map((k) => k.key);
    if (tsKeys.length > 0) {
      const found = this.#ctx.telemetry.query(id, { mode: 'latest', keys: tsKeys, strict: false });
      const out: Record<string, TsValue> = {};
      for (const key of tsKeys) {
        const v = found[key]?.[0];
        const text = v ? queryText(v.value) : null;
        out[key] = v && text !== null ? { ts: v.ts, value: text } : NO_VALUE;
      }
      latest.TIME_SERIES = out;
    }
    for (const k of this.#latest) {
      if (k.type === 'TIME_SERIES') continue;
      const scopes = k.type === 'ATTRIBUTE' ? ALL_SCOPES : [SCOPE_OF[k.type] as AttributeScope];
      let value = NO_VALUE;
      for (const scope of scopes) {
        const kv = this.#ctx.attributes.get(id, scope, [k.key])[0];
        if (kv) {
          value = { ts: kv.lastUpdateTs, value: attributeText(kv) };
          break;
        }
      }
      slot(latest, k.type, (): Record<string, TsValue> => ({}))[k.key] = value;
    }
    return { entityId: { entityType: 'DEVICE', id }, latest, timeseries: {} };
  }

  /** `latestCmd`, `tsCmd` and `historyCmd` of a command (the first one or a follow-up). */
  #subCmds(body: Raw): void {
    if (isObj(body.latestCmd)) {
      const keys = entityKeys(body.latestCmd.keys, 'latestCmd.keys').filter(
        (k) => k.type !== 'ENTITY_FIELD' && k.type !== 'ALARM_FIELD',
      );
      const known = new Set(this.#latest.map((k) => `${k.type}:${k.key}`));
      const added = keys.filter((k) => !known.has(`${k.type}:${k.key}`));
      this.#latest.push(...added);
      // The values of keys the page did not carry yet.
      if (added.length > 0) this.#sendUpdate(this.#page.map((d) => this.#entityData(d)));
    }
    if (isObj(body.tsCmd)) {
      const c = body.tsCmd;
      const keys = strList(c.keys) ?? [];
      this.#tsKeys = new Set(keys);
      const window = num(c, 'timeWindow');
      const startTs = c.startTs === undefined ? this.#ctx.now() - window : num(c, 'startTs');
      this.#sendHistory(historyQuery(c, keys, startTs, startTs + window));
    }
    if (isObj(body.historyCmd)) {
      const c = body.historyCmd;
      const keys = strList(c.keys) ?? [];
      this.#sendHistory(historyQuery(c, keys, num(c, 'startTs'), num(c, 'endTs')));
    }
  }

  #sendHistory(q: TimeseriesQuery & { mode: 'history' }): void {
    if (!q.keys || q.keys.length === 0) return;
    const update = this.#page.map((d): EntityData => {
      const result = this.#ctx.telemetry.query(d.id.id, q);
      const timeseries: Record<string, TsValue[]> = {};
      for (const key of q.keys ?? []) {
        timeseries[key] = (result[key] ?? []).flatMap((v) => {
          const text = queryText(v.value);
          return text === null ? [] : [{ ts: v.ts, value: text }];
        });
      }
      return { entityId: { entityType: 'DEVICE', id: d.id.id }, latest: {}, timeseries };
    });
    this.#sendUpdate(update);
  }

  #sendUpdate(update: EntityData[]): void {
    if (update.length === 0) return;
    this.#ctx.send({
      cmdId: this.#cmdId,
      cmdUpdateType: 'ENTITY_DATA',
      errorCode: ERROR_CODE.none,
      errorMsg: null,
      data: null,
      update,
      allowedEntities: MAX_ENTITIES,
    });
  }

  /** Whether `deviceId` is on the page (with key filters, candidates off the page are followed too). */
  #onPage(deviceId: string): boolean {
    return this.#keyFilters.length === 0 || this.#page.some((d) => d.id.id === deviceId);
  }

  onTelemetry(deviceId: string, points: readonly TelemetryPoint[]): void {
    // A filter key changed: the page is sent again when the match changed (with latest values).
    if (points.some((p) => this.#filterKeys.timeseries.has(p.key)) && this.#refresh()) return;
    if (!this.#onPage(deviceId)) return;
    const latestKeys = new Set(
      this.#latest.filter((k) => k.type === 'TIME_SERIES').map((k) => k.key),
    );
    const latest: Record<string, TsValue> = {};
    const timeseries: Record<string, TsValue[]> = {};
    for (const p of points) {
      const value = { ts: p.ts, value: pointText(p) };
      if (latestKeys.has(p.key) && (latest[p.key]?.ts ?? -1) <= p.ts) latest[p.key] = value;
      if (this.#tsKeys.has(p.key)) slot(timeseries, p.key, () => []).push(value);
    }
    const hasLatest = Object.keys(latest).length > 0;
    if (!hasLatest && Object.keys(timeseries).length === 0) return;
    this.#sendUpdate([
      {
        entityId: { entityType: 'DEVICE', id: deviceId },
        latest: hasLatest ? { TIME_SERIES: latest } : {},
        timeseries,
      },
    ]);
  }

  onAttributes(deviceId: string, scope: AttributeScope, values: readonly TypedAttributeKv[]) {
    if (values.some((v) => this.#filterKeys.attributes.has(v.key)) && this.#refresh()) return;
    if (!this.#onPage(deviceId)) return;
    const latest: EntityData['latest'] = {};
    let any = false;
    for (const k of this.#latest) {
      if (k.type === 'TIME_SERIES' || !scopeMatches(k.type, scope)) continue;
      const kv = values.find((v) => v.key === k.key);
      if (!kv) continue;
      slot(latest, k.type, (): Record<string, TsValue> => ({}))[k.key] = {
        ts: kv.lastUpdateTs,
        value: attributeText(kv),
      };
      any = true;
    }
    if (any)
      this.#sendUpdate([
        { entityId: { entityType: 'DEVICE', id: deviceId }, latest, timeseries: {} },
      ]);
  }

  onDevicesChanged(): void {
    this.#refresh();
  }

  onDynamicValue(): void {
    this.#refresh();
  }

  /** Runs the query again; sends the page and returns true when it changed. */
  #refresh(): boolean {
    const before = this.#page.map((d) => `${d.id.id}:${d.name}:${d.type}:${d.label}`).join();
    const total = this.#total;
    this.#page = this.#query();
    const after = this.#page.map((d) => `${d.id.id}:${d.name}:${d.type}:${d.label}`).join();
    const changed = before !== after || total !== this.#total;
    if (changed || this.#keyFilters.length > 0) this.#ctx.reindex(this);
    if (changed) this.#sendPage();
    return changed;
  }
}

/** ENTITY_COUNT: the number of entities a filter matches, sent again when it changes. */
class EntityCountSub implements Sub {
  readonly #filter: EntityFilter;
  readonly #keyFilters: KeyFilter[];
  readonly #filterKeys: ReturnType<typeof filterKeys>;
  #candidates: string[] = [];
  #count = -1;
  readonly dynamicSources: readonly DynamicSource[];

  constructor(
    private readonly cmdId: number,
    body: Raw,
    private readonly ctx: SubContext,
  ) {
    if (!isObj(body.query)) throw new ValidationError('Query is empty!');
    this.#filter = parseEntityFilter(body.query.entityFilter);
    this.#keyFilters = parseKeyFilters(body.query.keyFilters);
    this.#filterKeys = filterKeys(this.#keyFilters);
    this.dynamicSources = dynamicSources(this.#keyFilters, ctx.principal);
  }

  /** With key filters: every device of the entity filter (an update may change the count). */
  devices(): Iterable<string> {
    return this.#candidates;
  }

  start(): void {
    this.onDevicesChanged();
  }

  dispose(): void {}

  onTelemetry(_deviceId: string, points: readonly TelemetryPoint[]): void {
    if (points.some((p) => this.#filterKeys.timeseries.has(p.key))) this.onDevicesChanged();
  }

  onAttributes(_deviceId: string, _scope: AttributeScope, values: readonly TypedAttributeKv[]) {
    if (values.some((v) => this.#filterKeys.attributes.has(v.key))) this.onDevicesChanged();
  }

  onDynamicValue(): void {
    this.onDevicesChanged();
  }

  onDevicesChanged(): void {
    const all = this.ctx.resolver.resolve(this.ctx.principal, this.#filter);
    let count = all.length;
    if (this.#keyFilters.length > 0) {
      this.#candidates = all.map((d) => d.id.id);
      this.ctx.reindex(this);
      count = all.filter((d) => matchesKeyFilters(d, this.#keyFilters, this.ctx)).length;
    }
    if (count === this.#count) return;
    this.#count = count;
    this.ctx.send({
      cmdId: this.cmdId,
      cmdUpdateType: 'COUNT_DATA',
      errorCode: ERROR_CODE.none,
      errorMsg: null,
      count,
    });
  }
}

/** The alarm filter fields shared by ALARM_DATA's page link and ALARM_COUNT's query. */
function alarmFilterOf(p: Raw, now: number, originatorIds: readonly string[]): AlarmFilter {
  const severityList = strList(p.severityList);
  for (const s of severityList ?? []) {
    if (!(ALARM_SEVERITIES as readonly string[]).includes(s))
      throw new ValidationError(`severityList: ${s} is not one of ${ALARM_SEVERITIES.join(', ')}`);
  }
  const timeWindow = num(p, 'timeWindow');
  const startTs = num(p, 'startTs');
  const endTs = num(p, 'endTs');
  return {
    originatorIds,
    ...statusListFilter(strList(p.statusList) ?? []),
    severityList: severityList as AlarmSeverity[] | undefined,
    typeList: strList(p.typeList),
    assigneeId:
      isObj(p.assigneeId) && typeof p.assigneeId.id === 'string'
        ? p.assigneeId.id
        : typeof p.assigneeId === 'string'
          ? p.assigneeId
          : undefined,
    startTime: timeWindow > 0 ? now - timeWindow : startTs > 0 ? startTs : undefined,
    endTime: timeWindow <= 0 && endTs > 0 ? endTs : undefined,
  };
}

/** ALARM_DATA (§4.4): a page of alarms of the filter's entities, updated on every change. */
class AlarmDataSub implements Sub {
  readonly #filter: EntityFilter;
  readonly #link: Raw;
  readonly #page: { page: number; pageSize: number };
  readonly #sort: AlarmSort;
  readonly #desc: boolean;
  readonly #textSearch: string | undefined;
  readonly #fields: string[];
  #devices = new Map<string, Device>();
  #pageIds = '';

  constructor(
    private readonly cmdId: number,
    body: Raw,
    private readonly ctx: SubContext,
  ) {
    if (!isObj(body.query)) throw new ValidationError('Query is empty!');
    const q = body.query;
    this.#filter = parseEntityFilter(q.entityFilter);
    this.#link = isObj(q.pageLink) ? q.pageLink : {};
    const link = pageLinkOf(this.#link, 100);
    this.#page = link;
    const sortKey = link.sortKey?.key;
    this.#sort = (ALARM_SORT as readonly string[]).includes(sortKey ?? '')
      ? (sortKey as AlarmSort)
      : 'createdTime';
    this.#desc = link.desc;
    this.#textSearch = link.textSearch || undefined;
    this.#fields = entityKeys(q.entityFields, 'entityFields')
      .filter((k) => k.type === 'ENTITY_FIELD')
      .map((k) => k.key);
    alarmFilterOf(this.#link, 0, []); // validates before the subscription starts
  }

  devices(): Iterable<string> {
    return [];
  }

  start(): void {
    this.#resolve();
    this.#send(true);
  }

  dispose(): void {}

  #resolve(): void {
    const list = this.ctx.resolver.resolve(this.ctx.principal, this.#filter);
    this.#devices = new Map(list.map((d) => [d.id.id, d]));
  }

  #query() {
    const filter = {
      ...alarmFilterOf(this.#link, this.ctx.now(), [...this.#devices.keys()]),
      textSearch: this.#textSearch,
    };
    return this.ctx.alarms.list(filter, {
      page: this.#page.page,
      pageSize: this.#page.pageSize,
      sortProperty: this.#sort,
      sortOrder: this.#desc ? 'DESC' : 'ASC',
    });
  }

  #alarmData(a: AlarmInfo): Record<string, unknown> {
    const d = this.#devices.get(a.originator.id);
    const latest = d && this.#fields.length > 0 ? { ENTITY_FIELD: fieldsOf(d, this.#fields) } : {};
    return { ...a, entityId: a.originator, latest };
  }

  /** Sends the page (`full`), or only `changed` when the page holds the same alarms as before. */
  #send(full: boolean, changed?: string): void {
    const page = this.#query();
    const ids = page.data.map((a) => a.id.id).join();
    const same = ids === this.#pageIds;
    this.#pageIds = ids;
    const base = {
      cmdId: this.cmdId,
      cmdUpdateType: 'ALARM_DATA' as const,
      errorCode: ERROR_CODE.none,
      errorMsg: null,
      allowedEntities: MAX_ENTITIES,
      totalEntities: this.#devices.size,
    };
    if (!full && same) {
      const alarm = page.data.find((a) => a.id.id === changed);
      if (!alarm) return;
      this.ctx.send({ ...base, data: null, update: [this.#alarmData(alarm)] });
      return;
    }
    this.ctx.send({
      ...base,
      data: { ...page, data: page.data.map((a) => this.#alarmData(a)) },
      update: null,
    });
  }

  onAlarm(ev: AlarmEvent): void {
    if (!this.#devices.has(ev.alarm.originator.id)) return;
    this.#send(ev.action === 'DELETED', ev.alarm.id.id);
  }

  onDevicesChanged(): void {
    const before = [...this.#devices.keys()].join();
    this.#resolve();
    if ([...this.#devices.keys()].join() !== before) this.#send(true);
  }
}

/** ALARM_COUNT: the number of matching alarms, sent again when it changes. */
class AlarmCountSub implements Sub {
  readonly #filter: EntityFilter;
  readonly #query: Raw;
  #ids = new Set<string>();
  #count = -1;

  constructor(
    private readonly cmdId: number,
    body: Raw,
    private readonly ctx: SubContext,
  ) {
    if (!isObj(body.query)) throw new ValidationError('Query is empty!');
    this.#query = body.query;
    this.#filter = isObj(this.#query.entityFilter)
      ? parseEntityFilter(this.#query.entityFilter)
      : { type: 'entityType', entityType: 'DEVICE' };
    alarmFilterOf(this.#query, 0, []);
  }

  devices(): Iterable<string> {
    return [];
  }

  start(): void {
    this.onDevicesChanged();
  }

  dispose(): void {}

  #recount(): void {
    const filter = alarmFilterOf(this.#query, this.ctx.now(), [...this.#ids]);
    const count = this.ctx.alarms.list(filter, {
      page: 0,
      pageSize: 1,
      sortOrder: 'DESC',
    }).totalElements;
    if (count === this.#count) return;
    this.#count = count;
    this.ctx.send({
      cmdId: this.cmdId,
      cmdUpdateType: 'ALARM_COUNT_DATA',
      errorCode: ERROR_CODE.none,
      errorMsg: null,
      count,
    });
  }

  onAlarm(ev: AlarmEvent): void {
    if (this.#ids.has(ev.alarm.originator.id)) this.#recount();
  }

  onDevicesChanged(): void {
    const list = this.ctx.resolver.resolve(this.ctx.principal, this.#filter);
    this.#ids = new Set(list.map((d) => d.id.id));
    this.#recount();
  }
}

/** ALARM_STATUS: whether an entity has an active alarm (of the given types and severities). */
class AlarmStatusSub implements Sub {
  readonly #originatorId: string;
  readonly #entityType: string;
  readonly #typeList: string[] | undefined;
  readonly #severityList: AlarmSeverity[] | undefined;
  #active: boolean | undefined;
  #allowed = false;

  constructor(
    private readonly cmdId: number,
    body: Raw,
    private readonly ctx: SubContext,
  ) {
    const o = body.originatorId;
    if (!isObj(o) || typeof o.id !== 'string')
      throw new ValidationError('originatorId is required');
    this.#originatorId = o.id.toLowerCase();
    this.#entityType = typeof o.entityType === 'string' ? o.entityType : 'DEVICE';
    this.#typeList = strList(body.typeList);
    const severities = strList(body.severityList);
    for (const s of severities ?? []) {
      if (!(ALARM_SEVERITIES as readonly string[]).includes(s))
        throw new ValidationError(
          `severityList: ${s} is not one of ${ALARM_SEVERITIES.join(', ')}`,
        );
    }
    this.#severityList = severities as AlarmSeverity[] | undefined;
  }

  devices(): Iterable<string> {
    return [];
  }

  start(): void {
    this.onDevicesChanged();
  }

  dispose(): void {}

  #send(active: boolean, errorCode: number = ERROR_CODE.none, errorMsg: string | null = null) {
    this.ctx.send({
      cmdId: this.cmdId,
      cmdUpdateType: 'ALARM_STATUS',
      errorCode,
      errorMsg,
      active,
    });
  }

  #check(): void {
    const active =
      this.ctx.alarms.list(
        {
          originatorId: this.#originatorId,
          cleared: false,
          typeList: this.#typeList,
          severityList: this.#severityList,
        },
        { page: 0, pageSize: 1, sortOrder: 'DESC' },
      ).totalElements > 0;
    if (active === this.#active) return;
    this.#active = active;
    this.#send(active);
  }

  onAlarm(ev: AlarmEvent): void {
    if (this.#allowed && ev.alarm.originator.id === this.#originatorId) this.#check();
  }

  onDevicesChanged(): void {
    const allowed =
      this.#entityType === 'DEVICE' &&
      this.ctx.resolver.device(this.ctx.principal, this.#originatorId) !== undefined;
    if (!allowed) {
      this.#send(false, ERROR_CODE.unauthorized, UNAUTHORIZED_MSG);
      this.ctx.end(this);
      return;
    }
    this.#allowed = true;
    this.#check();
  }
}
