import { ApiError, api, qs, session } from './api.js';

/**
 * Live data for the page: ThingsBoard's WebSocket API (`/api/ws`, `authCmd` + `cmds`, platform.md
 * §4.4) when the gateway serves it, REST polling while the socket is down or missing. The socket
 * reconnects by itself (backoff up to 10 s) and resubscribes everything; until it is back, every
 * subscription polls, so a gateway restart shows no gap beyond the poll period.
 */

/** ThingsBoard's update data: key -> [ts, value as text][] (platform.md §4.3). */
export type TsData = Record<string, Array<[number, string]>>;

export type SubCmd =
  | { type: 'TIMESERIES'; entityId: string; keys?: string[]; timeWindow?: number }
  | {
      type: 'ATTRIBUTES';
      /** `DEVICE` when absent; users, customers and the tenant have attributes too. */
      entityType?: 'DEVICE' | 'USER' | 'CUSTOMER' | 'TENANT';
      entityId: string;
      scope: AttributeScope;
      keys?: string[];
    };

/** The user's unread notification count (`NOTIFICATIONS_COUNT`, platform.md §4). */
const COUNT_KEY = 'totalUnreadCount';

export type AttributeScope = 'CLIENT_SCOPE' | 'SHARED_SCOPE' | 'SERVER_SCOPE';

/** An entity query (`ENTITY_DATA`, platform.md §4.4): an entity filter and key filters. */
export interface EntityQuery {
  entityFilter: unknown;
  keyFilters?: unknown[];
}

/** An alarm query (`ALARM_DATA`, platform.md §4.4): an entity filter and a page link. */
export interface AlarmQuery {
  entityFilter: unknown;
  pageLink: Record<string, unknown>;
}

/** A page of alarms as the gateway sends it (`data` of an ALARM_DATA update). */
export interface AlarmPage {
  data: Array<{ id: { id: string } }>;
  totalPages: number;
  totalElements: number;
  hasNext: boolean;
}

/** How subscriptions of these types end (the others send their command with `unsubscribe`). */
const UNSUBSCRIBE: Record<string, string> = {
  NOTIFICATIONS_COUNT: 'NOTIFICATIONS_UNSUBSCRIBE',
  ENTITY_DATA: 'ENTITY_DATA_UNSUBSCRIBE',
  ALARM_DATA: 'ALARM_DATA_UNSUBSCRIBE',
};

interface Sub {
  readonly cmdId: number;
  readonly cmd:
    | SubCmd
    | { type: 'NOTIFICATIONS_COUNT' }
    | { type: 'ENTITY_DATA'; query: EntityQuery }
    | { type: 'ALARM_DATA'; query: AlarmQuery };
  readonly onData: (data: TsData) => void;
  /** ENTITY_DATA: the ids of each page the gateway sends. */
  readonly onPage?: (ids: string[]) => void;
  /** ALARM_DATA: the page, again with every change of one of its alarms. */
  readonly onAlarms?: (page: AlarmPage) => void;
  alarms?: AlarmPage;
  poll?: ReturnType<typeof setInterval>;
  /** Newest ts seen per key: polling hands on only what is newer. */
  readonly seen: Map<string, number>;
}

const POLL_MS = 1000;

export type LiveState = 'connecting' | 'live' | 'polling';

export class LiveClient {
  readonly #subs = new Map<number, Sub>();
  #nextId = 1;
  #ws: WebSocket | undefined;
  #open = false;
  #retryMs = 500;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  #state: LiveState = 'connecting';
  readonly #stateListeners = new Set<(s: LiveState) => void>();

  get state(): LiveState {
    return this.#state;
  }

  onState(l: (s: LiveState) => void): () => void {
    this.#stateListeners.add(l);
    return () => this.#stateListeners.delete(l);
  }

  /** Opens the socket ahead of the first subscription (the header shows its state). */
  start(): void {
    this.#stopped = false;
    this.#connect();
  }

  subscribe(cmd: SubCmd, onData: (data: TsData) => void): () => void {
    return this.#add(cmd, onData);
  }

  /**
   * The ids of the devices an entity query matches (its key filters evaluated by the gateway),
   * again whenever the match changes. Socket only: while it is down the last match stays.
   */
  subscribeEntities(query: EntityQuery, onIds: (ids: string[]) => void): () => void {
    return this.#add({ type: 'ENTITY_DATA', query }, () => undefined, onIds);
  }

  /**
   * A page of the alarms of an entity filter's devices (its filters in the page link), again
   * whenever an alarm on it changes. Socket only: while it is down the last page stays.
   */
  subscribeAlarms(query: AlarmQuery, onAlarms: (page: AlarmPage) => void): () => void {
    return this.#add({ type: 'ALARM_DATA', query }, () => undefined, undefined, onAlarms);
  }

  #add(
    cmd: Sub['cmd'],
    onData: (data: TsData) => void,
    onPage?: (ids: string[]) => void,
    onAlarms?: (page: AlarmPage) => void,
  ): () => void {
    const sub: Sub = { cmdId: this.#nextId++, cmd, onData, onPage, onAlarms, seen: new Map() };
    this.#subs.set(sub.cmdId, sub);
    this.#connect();
    if (this.#open) this.#send([this.#wire(sub)]);
    else this.#startPoll(sub);
    return () => {
      this.#subs.delete(sub.cmdId);
      this.#stopPoll(sub);
      if (!this.#open) return;
      const end = UNSUBSCRIBE[sub.cmd.type];
      this.#send([
        end ? { type: end, cmdId: sub.cmdId } : { ...this.#wire(sub), unsubscribe: true },
      ]);
    };
  }

  /**
   * The unread notification count: a `NOTIFICATIONS_COUNT` subscription on the socket (pushed on
   * every change), `GET /api/notifications/unread/count` polled while the socket is down.
   * `onCount(undefined)` when the gateway has no inbox (404).
   */
  subscribeUnreadCount(onCount: (n: number | undefined) => void): () => void {
    return this.#add({ type: 'NOTIFICATIONS_COUNT' }, (data) => {
      const v = data[COUNT_KEY]?.[0]?.[1];
      onCount(v === undefined ? undefined : Number(v));
    });
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#ws?.close();
    for (const s of this.#subs.values()) this.#stopPoll(s);
  }

  #setState(s: LiveState): void {
    if (s === this.#state) return;
    this.#state = s;
    for (const l of this.#stateListeners) l(s);
  }

  #wire(sub: Sub): Record<string, unknown> {
    const c = sub.cmd;
    if (c.type === 'NOTIFICATIONS_COUNT') return { type: c.type, cmdId: sub.cmdId };
    if (c.type === 'ALARM_DATA') return { type: c.type, cmdId: sub.cmdId, query: c.query };
    if (c.type === 'ENTITY_DATA') {
      return {
        type: c.type,
        cmdId: sub.cmdId,
        query: {
          ...c.query,
          pageLink: { page: 0, pageSize: 1024 },
          entityFields: [{ type: 'ENTITY_FIELD', key: 'name' }],
        },
      };
    }
    const base = {
      type: c.type,
      cmdId: sub.cmdId,
      entityType: (c.type === 'ATTRIBUTES' && c.entityType) || 'DEVICE',
      entityId: c.entityId,
      keys: c.keys?.join(',') ?? '',
    };
    if (c.type === 'ATTRIBUTES') return { ...base, scope: c.scope };
    const tw = c.timeWindow ?? 0;
    return tw > 0
      ? {
          ...base,
          scope: 'LATEST_TELEMETRY',
          startTs: Date.now() - tw,
          timeWindow: tw,
          limit: 10000,
          agg: 'NONE',
        }
      : { ...base, scope: 'LATEST_TELEMETRY' };
  }

  #send(cmds: Array<Record<string, unknown>>): void {
    this.#ws?.send(JSON.stringify({ cmds }));
  }

  #connect(): void {
    if (this.#ws || this.#stopped || !session.token()) return;
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/api/ws`;
    const ws = new WebSocket(url);
    this.#ws = ws;
    ws.onopen = () => {
      ws.send(JSON.stringify({ authCmd: { cmdId: 0, token: session.token() } }));
      this.#open = true;
      this.#retryMs = 500;
      this.#setState('live');
      const subs = [...this.#subs.values()];
      for (const s of subs) this.#stopPoll(s);
      if (subs.length > 0) this.#send(subs.map((s) => this.#wire(s)));
    };
    ws.onmessage = (e) => {
      let msg: {
        subscriptionId?: number;
        cmdId?: number;
        errorCode?: number;
        data?: TsData | { data?: Array<{ entityId: { id: string } }> };
        update?: AlarmPage['data'] | null;
        cmdUpdateType?: string;
        totalUnreadCount?: number;
      };
      try {
        msg = JSON.parse(String(e.data));
      } catch {
        return;
      }
      const sub = this.#subs.get(msg.subscriptionId ?? msg.cmdId ?? -1);
      if (!sub || msg.errorCode) return;
      if (msg.cmdUpdateType === 'NOTIFICATIONS_COUNT')
        sub.onData({ [COUNT_KEY]: [[Date.now(), String(msg.totalUnreadCount ?? 0)]] });
      else if (msg.cmdUpdateType === 'ENTITY_DATA') {
        const page = msg.data as { data?: Array<{ entityId: { id: string } }> } | undefined;
        if (Array.isArray(page?.data)) sub.onPage?.(page.data.map((e) => e.entityId.id));
      } else if (msg.cmdUpdateType === 'ALARM_DATA') {
        // A whole page, or the changed alarms of the page last sent.
        const last = sub.alarms;
        if (msg.data) sub.alarms = msg.data as unknown as AlarmPage;
        else if (last && msg.update)
          sub.alarms = {
            ...last,
            data: last.data.map((a) => msg.update?.find((u) => u.id.id === a.id.id) ?? a),
          };
        if (sub.alarms) sub.onAlarms?.(sub.alarms);
      } else if (msg.data) this.#deliver(sub, msg.data as TsData);
    };
    ws.onclose = () => {
      this.#ws = undefined;
      this.#open = false;
      if (this.#stopped) return;
      this.#setState('polling');
      for (const s of this.#subs.values()) this.#startPoll(s);
      clearTimeout(this.#timer);
      this.#timer = setTimeout(() => this.#connect(), this.#retryMs);
      this.#retryMs = Math.min(this.#retryMs * 2, 10_000);
    };
  }

  #deliver(sub: Sub, data: TsData): void {
    for (const [k, points] of Object.entries(data)) {
      const newest = points.reduce((m, p) => Math.max(m, p[0]), 0);
      sub.seen.set(k, Math.max(sub.seen.get(k) ?? 0, newest));
    }
    sub.onData(data);
  }

  #startPoll(sub: Sub): void {
    if (sub.poll) return;
    const once = () => void this.#pollOnce(sub).catch(() => undefined);
    once();
    sub.poll = setInterval(once, POLL_MS);
  }

  #stopPoll(sub: Sub): void {
    clearInterval(sub.poll);
    sub.poll = undefined;
  }

  async #pollOnce(sub: Sub): Promise<void> {
    const c = sub.cmd;
    if (c.type === 'ENTITY_DATA' || c.type === 'ALARM_DATA') return;
    if (c.type === 'NOTIFICATIONS_COUNT') {
      const n = await api<number>('/api/notifications/unread/count').catch((err: unknown) => {
        if (err instanceof ApiError && err.status === 404) return undefined;
        throw err;
      });
      if (sub.poll) sub.onData(n === undefined ? {} : { [COUNT_KEY]: [[Date.now(), String(n)]] });
      return;
    }
    const type = (c.type === 'ATTRIBUTES' && c.entityType) || 'DEVICE';
    const base = `/api/plugins/telemetry/${type}/${c.entityId}`;
    const data: TsData = {};
    if (c.type === 'ATTRIBUTES') {
      const rows = await api<Array<{ key: string; value: unknown; lastUpdateTs: number }>>(
        `${base}/values/attributes/${c.scope}${qs({ keys: c.keys?.join(',') })}`,
      );
      for (const r of rows) {
        if ((sub.seen.get(r.key) ?? -1) >= r.lastUpdateTs) continue;
        data[r.key] = [[r.lastUpdateTs, text(r.value)]];
      }
    } else {
      const tw = c.timeWindow ?? 0;
      let keys = c.keys;
      if (tw > 0 && !keys?.length) keys = await api<string[]>(`${base}/keys/timeseries`);
      if (tw > 0 && !keys?.length) return;
      const now = Date.now();
      const since = Math.min(...(keys ?? []).map((k) => sub.seen.get(k) ?? now - tw));
      const q =
        tw > 0
          ? qs({
              keys: keys?.join(','),
              startTs: Math.max(since + 1, now - tw),
              endTs: now + 60_000,
              limit: 10000,
              orderBy: 'ASC',
            })
          : qs({ keys: keys?.join(',') });
      const res = await api<Record<string, Array<{ ts: number; value: unknown }>>>(
        `${base}/values/timeseries${q}`,
      );
      for (const [k, points] of Object.entries(res)) {
        const fresh = points.filter((p) => p.ts > (sub.seen.get(k) ?? -1));
        if (fresh.length > 0) data[k] = fresh.map((p) => [p.ts, text(p.value)]);
      }
    }
    if (sub.poll && Object.keys(data).length > 0) this.#deliver(sub, data);
  }
}

function text(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}
