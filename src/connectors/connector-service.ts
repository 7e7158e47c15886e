import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { AttributeService } from '../attributes/attribute-service.js';
import { typeJsValue, typeNumberLiteral } from '../attributes/kv-value.js';
import type { KvValue, SharedAttributeUpdate } from '../attributes/types.js';
import { JsonNumber } from '../common/json-text.js';
import type { Subscription } from '../common/subscriptions.js';
import { validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import type { ActivityService } from '../devices/activity-service.js';
import type { DeviceIdentity, DeviceService } from '../devices/device-service.js';
import { NotFoundError, ValidationError } from '../errors.js';
import type { EventBus } from '../events.js';
import type { DeviceMessageService } from '../messages/device-message-service.js';
import type { RpcService, ToDeviceRpc } from '../rpc/rpc-service.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { type ConnectorRow, ConnectorStore } from './connector-store.js';
import {
  isWriteCode,
  type ModbusSlave,
  type ModbusTag,
  modbusConfigSchema,
  parseAdHocRpc,
  rangeKeys,
} from './modbus-config.js';
import { periodic, ReportFilter, type ReportStrategy } from './report-strategy.js';
import { serialConfigSchema } from './serial-config.js';
import {
  CONNECTOR_TYPES,
  type ConnectorDeviceRef,
  type ConnectorDriver,
  type ConnectorErrorKind,
  type ConnectorReading,
  type ConnectorRuntime,
  type ConnectorType,
  type DeviceRequest,
  type LineStatus,
  type ParsedConnectorConfig,
} from './types.js';

export interface ConnectorServiceDeps {
  readonly db: Db;
  readonly tenants: TenantService;
  readonly devices: DeviceService;
  /** The one way in: readings enter as any device's uplinks (issue 13). */
  readonly messages: DeviceMessageService;
  readonly attributes: AttributeService;
  readonly rpc: RpcService;
  readonly activity: ActivityService;
  readonly bus: EventBus;
  readonly log: Logger;
  /** The wire adapters, built by the composition root (the domain never imports serialport). */
  readonly drivers: Readonly<Record<ConnectorType, ConnectorDriver>>;
  /** Readings of one connector waiting for their commit; past it new readings are dropped. */
  readonly maxInFlight?: number;
  /** Devices one connector may name (serial lines naming their device in a field). */
  readonly maxDevices?: number;
  /** Connectors that may exist (the table's bound); a new one past it is refused (400). */
  readonly maxConnectors?: number;
}

/** One running connector's totals, as `/metrics` shows them. */
export interface ConnectorTotals {
  readonly name: string;
  readonly devicesActive: number;
  readonly devicesInactive: number;
  readonly linesOpen: number;
  readonly linesClosed: number;
  /** Per-device counters summed, plus readings of unknown devices dropped at the bound. */
  readonly counters: Readonly<DeviceCounters>;
}

/** A connector as the REST API shows it. */
export interface Connector {
  readonly id: string;
  readonly name: string;
  readonly type: ConnectorType;
  readonly enabled: boolean;
  readonly configuration: unknown;
  readonly createdTime: number;
  readonly updatedTime: number;
}

export interface DeviceCounters {
  polls: number;
  timeouts: number;
  crcErrors: number;
  exceptions: number;
  connectionErrors: number;
  decodeErrors: number;
  /** Readings not stored because the connector's commit queue was full. */
  dropped: number;
  writes: number;
  writeErrors: number;
}

export interface ConnectorDeviceStatus {
  readonly name: string;
  readonly deviceId: string | null;
  /** Answering: false once it stops answering (as its `active` attribute). */
  readonly active: boolean;
  readonly lastReadTime: number | null;
  readonly lastError: string | null;
  readonly lastErrorTime: number | null;
  readonly consecutiveFailures: number;
  readonly counters: Readonly<DeviceCounters>;
}

export interface ConnectorStatus {
  readonly id: string;
  readonly name: string;
  readonly type: ConnectorType;
  readonly enabled: boolean;
  readonly running: boolean;
  /** Why the connector could not start, if it could not. */
  readonly error: string | null;
  readonly lines: readonly LineStatus[];
  readonly devices: readonly ConnectorDeviceStatus[];
  /** Readings of unknown devices beyond `maxDevices`, and readings dropped at the commit bound. */
  readonly dropped: number;
}

interface DeviceState {
  readonly ref: ConnectorDeviceRef;
  readonly slave?: ModbusSlave;
  identity?: DeviceIdentity;
  subs: Subscription[];
  active: boolean;
  lastReadTime: number | null;
  lastError: string | null;
  lastErrorTime: number | null;
  consecutiveFailures: number;
  readonly counters: DeviceCounters;
  /** The slave's `reportStrategy` per read key, and what it remembers; none: every value. */
  readonly report?: {
    readonly telemetry: ReadonlyMap<string, ReportStrategy>;
    readonly attributes: ReadonlyMap<string, ReportStrategy>;
    readonly filter: ReportFilter;
  };
}

interface Running {
  readonly row: ConnectorRow;
  readonly parsed: ParsedConnectorConfig;
  runtime?: ConnectorRuntime;
  error: string | null;
  readonly devices: Map<string, DeviceState>;
  inFlight: number;
  dropped: number;
  stopped: boolean;
  /** Re-sends of ON_REPORT_PERIOD keys, when a slave has any. */
  reportTimer?: NodeJS.Timeout;
}

const OWNER = 'connectors';
const MAX_CONFIG_BYTES = 1024 * 1024;
/** A connector that has not stopped by then is left behind: a save or delete never hangs. */
const STOP_TIMEOUT_MS = 5000;

const bodySchema = z.looseObject({
  id: z
    .union([z.string(), z.looseObject({ id: z.string() }).transform((o) => o.id)])
    .optional()
    .nullable(),
  name: z
    .string()
    .min(1, 'must not be empty')
    .max(255, 'must be at most 255 characters')
    .refine((s) => s.trim() === s, 'must not start or end with a blank'),
  type: z.enum(CONNECTOR_TYPES, { error: 'must be MODBUS or SERIAL' }),
  enabled: z.boolean().default(true),
  configuration: z.unknown(),
});

/** Validates a connector's configuration; throws a ValidationError naming the field. */
export function parseConnectorConfig(
  type: ConnectorType,
  configuration: unknown,
): ParsedConnectorConfig {
  if (typeof configuration !== 'object' || configuration === null || Array.isArray(configuration)) {
    throw new ValidationError('Invalid connector: configuration: must be a JSON object');
  }
  const prefixed = <T>(schema: z.ZodType<T>): T =>
    validate(z.object({ configuration: schema }), { configuration }, 'connector').configuration;
  return type === 'MODBUS'
    ? { type, config: prefixed(modbusConfigSchema) }
    : { type, config: prefixed(serialConfigSchema) };
}

/**
 * Connectors (issue 17): Modbus masters and serial line readers, managed over REST and applied at
 * once (a change restarts that connector only).
 *
 * Every device a connector reads enters the core as any device does: found or created by name on
 * its first reading (profile from `deviceType`), telemetry and client attributes with the time
 * they were read, device activity on every reading, and `active` false at once when it stops
 * answering. Shared-attribute changes and server-side RPC to a Modbus device become register and
 * coil writes (or reads) on its bus.
 */
export class ConnectorService {
  readonly #store: ConnectorStore;
  readonly #running = new Map<string, Running>();
  readonly #maxInFlight: number;
  readonly #maxDevices: number;
  readonly #maxConnectors: number;
  #started = false;

  constructor(private readonly deps: ConnectorServiceDeps) {
    this.#store = new ConnectorStore(deps.db);
    this.#maxInFlight = deps.maxInFlight ?? 10_000;
    this.#maxDevices = deps.maxDevices ?? 1_000;
    this.#maxConnectors = deps.maxConnectors ?? 100;
  }

  /** Starts every enabled connector. */
  start(): void {
    this.#started = true;
    this.deps.bus.on(OWNER, 'device.deleted', ({ device }) => {
      for (const run of this.#running.values()) {
        for (const state of run.devices.values()) {
          if (state.identity?.id === device.id) this.#forget(state);
        }
      }
    });
    for (const row of this.#store.all()) {
      if (row.enabled) this.#launch(row);
    }
  }

  /** Stops every connector (ports closed, subscriptions ended). Safe to call twice. */
  async stop(): Promise<void> {
    this.#started = false;
    this.deps.bus.removeOwner(OWNER);
    await Promise.all([...this.#running.keys()].map((id) => this.#halt(id)));
  }

  /** Creates (no `id`) or updates a connector; a running one restarts with the new settings. */
  async save(body: unknown): Promise<Connector> {
    const text = JSON.stringify(body ?? null);
    if (text.length > MAX_CONFIG_BYTES) {
      throw new ValidationError(`Invalid connector: larger than ${MAX_CONFIG_BYTES} bytes`);
    }
    const b = validate(bodySchema, body, 'connector');
    parseConnectorConfig(b.type, b.configuration);
    const tenantId = this.deps.tenants.id;
    const now = Date.now();
    const existing = b.id ? this.#store.byId(b.id.toLowerCase()) : undefined;
    if (b.id && !existing) throw new NotFoundError(`Connector with id [${b.id}] is not found`);
    if (!existing && this.#store.count() >= this.#maxConnectors) {
      throw new ValidationError(
        `Invalid connector: at most ${this.#maxConnectors} connectors may exist; delete one first`,
      );
    }
    const clash = this.#store.byName(tenantId, b.name);
    if (clash && clash.id !== existing?.id) {
      throw new ValidationError(
        'Invalid connector: name: a connector with this name already exists',
      );
    }
    const row: ConnectorRow = {
      id: existing?.id ?? randomUUID(),
      tenant_id: tenantId,
      name: b.name,
      type: b.type,
      enabled: b.enabled ? 1 : 0,
      configuration: JSON.stringify(b.configuration),
      created_time: existing?.created_time ?? now,
      updated_time: now,
    };
    if (existing) this.#store.update(row);
    else this.#store.insert(row);
    await this.#halt(row.id);
    if (this.#started && row.enabled) this.#launch(row);
    this.deps.log.info(
      { connectorId: row.id, name: row.name, type: row.type, enabled: b.enabled },
      existing ? 'connector updated' : 'connector created',
    );
    return toConnector(row);
  }

  list(): Connector[] {
    return this.#store.all().map(toConnector);
  }

  get(id: string): Connector {
    return toConnector(this.#row(id));
  }

  async delete(id: string): Promise<void> {
    const row = this.#row(id);
    await this.#halt(row.id);
    this.#store.delete(row.id);
    this.deps.log.info({ connectorId: row.id, name: row.name }, 'connector deleted');
  }

  status(id: string): ConnectorStatus {
    const row = this.#row(id);
    const run = this.#running.get(row.id);
    return {
      id: row.id,
      name: row.name,
      type: row.type as ConnectorType,
      enabled: row.enabled === 1,
      running: run?.runtime !== undefined,
      error: run?.error ?? null,
      lines: run?.runtime?.lines() ?? [],
      devices: [...(run?.devices.values() ?? [])].map((s) => ({
        name: s.ref.name,
        deviceId: s.identity?.id ?? null,
        active: s.active,
        lastReadTime: s.lastReadTime,
        lastError: s.lastError,
        lastErrorTime: s.lastErrorTime,
        consecutiveFailures: s.consecutiveFailures,
        counters: { ...s.counters },
      })),
      dropped: run?.dropped ?? 0,
    };
  }

  /** Totals of every running connector (read when Prometheus scrapes). */
  totals(): ConnectorTotals[] {
    return [...this.#running.values()].map((run) => {
      const counters = emptyCounters();
      let active = 0;
      for (const s of run.devices.values()) {
        if (s.active) active++;
        for (const k of Object.keys(counters) as Array<keyof DeviceCounters>)
          counters[k] += s.counters[k];
      }
      counters.dropped += run.dropped;
      const lines = run.runtime?.lines() ?? [];
      const open = lines.filter((l) => l.open).length;
      return {
        name: run.row.name,
        devicesActive: active,
        devicesInactive: run.devices.size - active,
        linesOpen: open,
        linesClosed: lines.length - open,
        counters,
      };
    });
  }

  #row(id: string): ConnectorRow {
    const row = this.#store.byId(id.toLowerCase());
    if (!row) throw new NotFoundError(`Connector with id [${id}] is not found`);
    return row;
  }

  #launch(row: ConnectorRow): void {
    const type = row.type as ConnectorType;
    const parsed = parseConnectorConfig(type, JSON.parse(row.configuration));
    const run: Running = {
      row,
      parsed,
      error: null,
      devices: new Map(),
      inFlight: 0,
      dropped: 0,
      stopped: false,
    };
    if (parsed.type === 'MODBUS') {
      for (const slave of parsed.config.slaves) {
        run.devices.set(
          slave.deviceName,
          newState({ name: slave.deviceName, type: slave.deviceType }, slave),
        );
      }
    } else {
      for (const port of parsed.config.devices) {
        if (port.deviceName) {
          run.devices.set(
            port.deviceName,
            newState({ name: port.deviceName, type: port.deviceType }),
          );
        }
      }
    }
    this.#running.set(row.id, run);
    this.#armReports(run);
    try {
      run.runtime = this.deps.drivers[type](parsed, {
        reading: (ref, reading) => this.#reading(run, ref, reading),
        failure: (ref, kind, message, lost) => this.#failure(run, ref, kind, message, lost),
      });
      run.runtime.start();
      this.deps.log.info({ connectorId: row.id, name: row.name, type }, 'connector started');
    } catch (err) {
      run.runtime = undefined;
      run.error = (err as Error).message;
      this.deps.log.error({ err, connectorId: row.id, name: row.name }, 'connector did not start');
    }
  }

  async #halt(id: string): Promise<void> {
    const run = this.#running.get(id);
    if (!run) return;
    this.#running.delete(id);
    run.stopped = true;
    if (run.reportTimer) clearInterval(run.reportTimer);
    for (const state of run.devices.values()) this.#forget(state);
    let timer: NodeJS.Timeout | undefined;
    try {
      const stopped = await Promise.race([
        run.runtime?.stop().then(() => true),
        new Promise<false>((resolve) => {
          timer = setTimeout(() => resolve(false), STOP_TIMEOUT_MS);
        }),
      ]);
      if (stopped === false) {
        this.deps.log.warn(
          { connectorId: id, timeoutMs: STOP_TIMEOUT_MS },
          'connector did not stop in time; left to finish on its own',
        );
      }
    } catch (err) {
      this.deps.log.warn({ err, connectorId: id }, 'connector stop failed');
    } finally {
      clearTimeout(timer);
    }
    this.deps.log.info({ connectorId: id, name: run.row.name }, 'connector stopped');
  }

  #stateOf(run: Running, ref: ConnectorDeviceRef): DeviceState | undefined {
    let state = run.devices.get(ref.name);
    if (!state) {
      if (run.devices.size >= this.#maxDevices) return undefined;
      state = newState(ref);
      run.devices.set(ref.name, state);
    }
    return state;
  }

  #reading(run: Running, ref: ConnectorDeviceRef, reading: ConnectorReading): void {
    if (run.stopped) return;
    const state = this.#stateOf(run, ref);
    if (!state) {
      run.dropped++;
      return;
    }
    let device: DeviceIdentity;
    try {
      device = this.#device(run, state);
    } catch (err) {
      this.#record(state, 'decode', `device not created: ${(err as Error).message}`, reading.ts);
      return;
    }
    state.counters.polls++;
    state.lastReadTime = reading.ts;
    state.consecutiveFailures = 0;
    if (!state.active) {
      state.active = true;
      if (state.lastError !== null) {
        this.deps.log.info(
          { connector: run.row.name, device: ref.name },
          'connector device answers again',
        );
      }
    }
    let { telemetry, attributes } = reading;
    if (state.report) {
      const r = state.report;
      const now = Date.now();
      telemetry = r.filter.apply('telemetry', telemetry, (k) => r.telemetry.get(k), now);
      attributes = r.filter.apply('attributes', attributes, (k) => r.attributes.get(k), now);
    }
    this.#send(run, state, device, reading.ts, telemetry, attributes);
    this.deps.activity.record(device);
  }

  /** Values of one device into the core: telemetry (bounded in flight) and client attributes. */
  #send(
    run: Running,
    state: DeviceState,
    device: DeviceIdentity,
    ts: number,
    telemetry: Readonly<Record<string, unknown>>,
    attributes: Readonly<Record<string, unknown>>,
  ): void {
    const { messages } = this.deps;
    const reading = { ts, telemetry, attributes };
    if (Object.keys(reading.telemetry).length > 0) {
      if (run.inFlight >= this.#maxInFlight) {
        state.counters.dropped++;
        run.dropped++;
      } else {
        run.inFlight++;
        messages
          .postTelemetry(device, { ts: reading.ts, values: reading.telemetry }, reading.ts)
          .catch((err: Error) => {
            this.#record(state, 'decode', `telemetry not stored: ${err.message}`, reading.ts);
          })
          .finally(() => {
            run.inFlight--;
          });
      }
    }
    const typed = typeAttributes(reading.attributes);
    if (typed.size > 0) {
      try {
        messages.saveClientAttributes(device, typed, reading.ts);
      } catch (err) {
        this.#record(
          state,
          'decode',
          `attributes not stored: ${(err as Error).message}`,
          reading.ts,
        );
      }
    }
  }

  /**
   * ON_REPORT_PERIOD keys (reference §6): every period the newest value of each is sent again
   * with the current time, on a timer of the shortest period among the connector's keys.
   */
  #armReports(run: Running): void {
    let period = Number.POSITIVE_INFINITY;
    for (const state of run.devices.values()) {
      for (const m of [state.report?.telemetry, state.report?.attributes]) {
        for (const s of m?.values() ?? []) if (periodic(s)) period = Math.min(period, s.periodMs);
      }
    }
    if (!Number.isFinite(period)) return;
    run.reportTimer = setInterval(() => {
      const now = Date.now();
      for (const state of run.devices.values()) {
        if (!state.report || !state.identity || !state.active) continue;
        const due = state.report.filter.due(now);
        this.#send(run, state, state.identity, now, due.telemetry, due.attributes);
      }
    }, period);
    run.reportTimer.unref();
  }

  #failure(
    run: Running,
    ref: ConnectorDeviceRef,
    kind: ConnectorErrorKind,
    message: string,
    lost: boolean,
  ): void {
    if (run.stopped) return;
    const state = this.#stateOf(run, ref);
    if (!state) {
      run.dropped++;
      return;
    }
    const now = Date.now();
    this.#record(state, kind, message, now);
    if (!lost) return;
    state.consecutiveFailures++;
    if (state.active || state.consecutiveFailures === 1) {
      this.deps.log.warn(
        { connector: run.row.name, device: ref.name, kind, error: message },
        'connector device does not answer',
      );
    }
    state.active = false;
    const device = state.identity;
    if (device) this.deps.activity.lost(device);
  }

  #record(state: DeviceState, kind: ConnectorErrorKind, message: string, ts: number): void {
    const c = state.counters;
    if (kind === 'timeout') c.timeouts++;
    else if (kind === 'crc') c.crcErrors++;
    else if (kind === 'exception') c.exceptions++;
    else if (kind === 'connection') c.connectionErrors++;
    else c.decodeErrors++;
    state.lastError = `${kind}: ${message}`;
    state.lastErrorTime = ts;
  }

  /** The device of a reading: found or created by name, then subscribed to its downlinks. */
  #device(run: Running, state: DeviceState): DeviceIdentity {
    if (state.identity) return state.identity;
    const { devices } = this.deps;
    const device =
      devices.byName(state.ref.name) ??
      (devices.identity(
        devices.save({
          name: state.ref.name,
          type: state.ref.type,
          additionalInfo: { connector: run.row.name },
        }).id.id,
      ) as DeviceIdentity);
    state.identity = device;
    const slave = state.slave;
    const runtime = run.runtime;
    if (slave && runtime?.request) {
      const request = runtime.request.bind(runtime);
      state.subs = [
        this.deps.attributes.subscribe(device.id, (update) =>
          this.#sharedUpdate(run, state, slave, request, update),
        ),
        this.deps.rpc.subscribe(device.id, (req) => {
          void this.#rpc(state, slave, request, device.id, req);
        }),
      ];
      // Reference §4: the current shared attributes are written when the device comes up.
      const keys = [...new Set(slave.attributeUpdates.map((t) => t.tag))];
      if (keys.length > 0) {
        const current = this.deps.attributes.get(device.id, 'SHARED_SCOPE', keys);
        if (current.length > 0) {
          this.#sharedUpdate(run, state, slave, request, { kind: 'updated', values: current });
        }
      }
    }
    return device;
  }

  #forget(state: DeviceState): void {
    for (const sub of state.subs) sub.unsubscribe();
    state.subs = [];
    state.identity = undefined;
  }

  #sharedUpdate(
    run: Running,
    state: DeviceState,
    slave: ModbusSlave,
    request: Request,
    update: SharedAttributeUpdate,
  ): void {
    if (update.kind !== 'updated') return;
    for (const kv of update.values) {
      for (const tag of slave.attributeUpdates) {
        if (tag.tag !== kv.key) continue;
        state.counters.writes++;
        request(slave.deviceName, { kind: 'write', tag, value: kv.value }).catch((err: Error) => {
          state.counters.writeErrors++;
          state.lastError = `write: ${tag.tag}: ${err.message}`;
          state.lastErrorTime = Date.now();
          this.deps.log.warn(
            { connector: run.row.name, device: slave.deviceName, key: tag.tag, err },
            'shared attribute not written',
          );
        });
      }
    }
  }

  /** Reference §5: a configured method, or `get`/`set` with an ad-hoc request string. */
  async #rpc(
    state: DeviceState,
    slave: ModbusSlave,
    request: Request,
    deviceId: string,
    req: ToDeviceRpc,
  ): Promise<void> {
    const { rpc } = this.deps;
    rpc.delivered(deviceId, req.id);
    let result: unknown;
    const tag = slave.rpc.find((t) => t.tag === req.method);
    const adHoc =
      tag === undefined && (req.method === 'get' || req.method === 'set')
        ? parseAdHocRpc(req.params)
        : undefined;
    try {
      let op: DeviceRequest;
      if (tag) op = requestFor(tag, req.params);
      else if (adHoc) {
        op =
          adHoc.value === undefined
            ? { kind: 'read', tag: adHoc.tag }
            : requestFor(adHoc.tag, adHoc.value);
      } else if (req.method === 'get' || req.method === 'set') {
        throw new Error(
          'The requested RPC does not match the schema: type=<t>;functionCode=<fc>;objectsCount=<n>;address=<a>;[value=<v>;]',
        );
      } else {
        throw new Error(`Method not found for ${req.method}`);
      }
      if (op.kind === 'write') state.counters.writes++;
      const value = await request(slave.deviceName, op);
      result = { result: { value: op.kind === 'write' ? req.params : value } };
    } catch (err) {
      if (tag || adHoc) state.counters.writeErrors++;
      result = { result: { error: (err as Error).message } };
    }
    rpc.reply(deviceId, req.id, stringifyResult(result));
  }
}

type Request = (deviceName: string, req: DeviceRequest) => Promise<unknown>;

function requestFor(tag: ModbusTag, params: unknown): DeviceRequest {
  if (!isWriteCode(tag.functionCode)) return { kind: 'read', tag };
  // `params` is the value, or `{"value": v}` as some dashboards' widgets send it.
  const value =
    typeof params === 'object' && params !== null && !Array.isArray(params) && 'value' in params
      ? (params as { value: unknown }).value
      : params;
  return { kind: 'write', tag, value };
}

function stringifyResult(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x));
}

function newState(ref: ConnectorDeviceRef, slave?: ModbusSlave): DeviceState {
  const strategies = (tags: readonly ModbusTag[]) =>
    new Map(
      tags.flatMap((t) => {
        const r = t.report;
        if (!r || r.type === 'ON_RECEIVED' || r.type === 'DISABLED' || !slave) return [];
        return rangeKeys(t, slave.unitId).map(({ key }) => [key, r] as const);
      }),
    );
  const telemetry = strategies(slave?.timeseries ?? []);
  const attributes = strategies(slave?.attributes ?? []);
  const report =
    telemetry.size + attributes.size > 0
      ? { telemetry, attributes, filter: new ReportFilter() }
      : undefined;
  return {
    ref,
    slave,
    report,
    subs: [],
    active: false,
    lastReadTime: null,
    lastError: null,
    lastErrorTime: null,
    consecutiveFailures: 0,
    counters: emptyCounters(),
  };
}

function emptyCounters(): DeviceCounters {
  return {
    polls: 0,
    timeouts: 0,
    crcErrors: 0,
    exceptions: 0,
    connectionErrors: 0,
    decodeErrors: 0,
    dropped: 0,
    writes: 0,
    writeErrors: 0,
  };
}

/** Client attributes of a reading, typed as telemetry is (`21.0` a DOUBLE, `21` a LONG). */
function typeAttributes(values: Readonly<Record<string, unknown>>): Map<string, KvValue> {
  const typed = new Map<string, KvValue>();
  for (const [key, value] of Object.entries(values)) {
    const kv =
      value instanceof JsonNumber
        ? typeNumberLiteral(value.raw)
        : Array.isArray(value)
          ? { type: 'JSON' as const, value: JSON.parse(stringifyResult(value)) as unknown }
          : typeJsValue(value, { cast: true });
    if (kv) typed.set(key, kv);
  }
  return typed;
}

function toConnector(row: ConnectorRow): Connector {
  return {
    id: row.id,
    name: row.name,
    type: row.type as ConnectorType,
    enabled: row.enabled === 1,
    configuration: JSON.parse(row.configuration) as unknown,
    createdTime: row.created_time,
    updatedTime: row.updated_time,
  };
}
