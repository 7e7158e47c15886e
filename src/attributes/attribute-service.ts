import type { Logger } from 'pino';
import {
  DeviceSubscribers,
  LongPolls,
  type PollOutcome,
  type Subscription,
} from '../common/subscriptions.js';
import {
  checkStoredBytes,
  DEFAULT_MAX_REQUEST_STORED_BYTES,
  storedBytes,
} from '../common/value-typing.js';
import type { Db } from '../db/open.js';
import type { DeviceIdentity, DeviceService } from '../devices/device-service.js';
import { NotFoundError, ValidationError } from '../errors.js';
import type { ChangeSource, EventBus } from '../events.js';
import { AttributeStore } from './attribute-store.js';
import { typeJsValue } from './kv-value.js';
import {
  ATTRIBUTE_SCOPES,
  type AttributeScope,
  type KvValue,
  type SharedAttributeUpdate,
  type TypedAttributeKv,
} from './types.js';

export type {
  AttributeKv,
  AttributeScope,
  KvValue,
  SharedAttributeUpdate,
  TypedAttributeKv,
} from './types.js';

export interface AttributeServiceDeps {
  readonly db: Db;
  readonly devices: DeviceService;
  readonly bus: EventBus;
  readonly log: Logger;
  /** Most bytes of keys and values one save may store (issue 20). */
  readonly maxRequestStoredBytes?: number;
  /**
   * Runs in the transaction that saves a device's own client attributes (the upstream outbox):
   * `write` before the values are written, `settled` with the outcome.
   */
  readonly inCommit?: {
    write(items: readonly ClientAttributesItem[]): void;
    settled(ok: boolean): void;
  };
}

/** Client attributes of one device in one commit, as the commit hook sees them. */
export interface ClientAttributesItem {
  readonly rid: number;
  readonly deviceId: string;
  readonly values: readonly TypedAttributeKv[];
  readonly ts: number;
}

/** A device's own attribute request (reference device-api.md §2.2). */
export interface DeviceAttributeRequest {
  /** Undefined: not asked. When neither list is given, both scopes are returned in full. */
  readonly clientKeys?: readonly string[];
  readonly sharedKeys?: readonly string[];
}

export interface DeviceAttributeResponse {
  readonly client?: readonly TypedAttributeKv[];
  readonly shared?: readonly TypedAttributeKv[];
}

const OWNER = 'attributes';

const KIND = {
  BOOLEAN: 'bool',
  LONG: 'long',
  DOUBLE: 'double',
  STRING: 'string',
  JSON: 'json',
} as const;

/**
 * A device's key list (reference §2.2): a comma-separated string split without trimming; empty
 * or absent means "not asked". A one-element array holding that string also works (MQTT).
 */
export function parseKeyList(value: unknown, name: string): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  const text = Array.isArray(value) && value.length === 1 ? value[0] : value;
  if (typeof text !== 'string')
    throw new ValidationError(`${name} must be a comma-separated string`);
  return text === '' ? undefined : text.split(',');
}

export function isAttributeScope(value: string): value is AttributeScope {
  return (ATTRIBUTE_SCOPES as readonly string[]).includes(value);
}

/**
 * Attributes of devices in three scopes. Every write commits first, then emits
 * `attributes.updated`/`attributes.deleted` on the bus and, for the shared scope, pushes the
 * change to the device's subscribed sessions (reference §2.3).
 */
export class AttributeService {
  readonly #store: AttributeStore;
  readonly #subscribers: DeviceSubscribers<SharedAttributeUpdate>;
  readonly #polls = new LongPolls();

  /** One transaction around a save and its commit hook (made once). */
  readonly #hooked: (fn: () => void) => void;

  constructor(private readonly deps: AttributeServiceDeps) {
    this.#store = new AttributeStore(deps.db);
    this.#hooked = deps.db.transaction((fn: () => void) => fn());
    this.#subscribers = new DeviceSubscribers(deps.log);
  }

  /** Ends the long polls of deleted devices. */
  start(): void {
    this.deps.bus.on(OWNER, 'device.deleted', ({ device }) => this.#polls.closeDevice(device.id));
  }

  /** Saves JavaScript values (strings are not cast; integers are LONG, other numbers DOUBLE). */
  // biome-ignore lint/suspicious/useAwait: async by contract, so a later store may be asynchronous
  async save(
    deviceId: string,
    scope: AttributeScope,
    values: Record<string, unknown>,
    source?: ChangeSource,
  ): Promise<void> {
    this.saveValues(deviceId, scope, values, source);
  }

  /** `save` at once, for a caller inside its own transaction (device activity). */
  saveValues(
    deviceId: string,
    scope: AttributeScope,
    values: Record<string, unknown>,
    source?: ChangeSource,
  ): TypedAttributeKv[] {
    const typed = new Map<string, KvValue>();
    for (const [key, value] of Object.entries(values)) {
      const kv = typeJsValue(value);
      if (kv) typed.set(key, kv);
    }
    return this.saveTyped(deviceId, scope, typed, source);
  }

  /**
   * Saves values already typed by the transport (see `parseTypedObject`). `source` says who
   * changed them (absent: the gateway itself); it travels on the `attributes.updated` event.
   * `ts` is the update time (a connector passes the time the values were read).
   */
  saveTyped(
    deviceId: string,
    scope: AttributeScope,
    values: ReadonlyMap<string, KvValue>,
    source?: ChangeSource,
    ts = Date.now(),
  ): TypedAttributeKv[] {
    const device = this.#device(deviceId);
    let stored = 0;
    for (const [key, kv] of values) {
      checkAttributeKey(key);
      const text = kv.type === 'JSON' ? JSON.stringify(kv.value) : kv.value;
      stored += storedBytes(key, KIND[kv.type], text);
    }
    const max = this.deps.maxRequestStoredBytes ?? DEFAULT_MAX_REQUEST_STORED_BYTES;
    checkStoredBytes('Attribute payload', stored, max);
    if (values.size === 0) return [];
    const saved: TypedAttributeKv[] = [...values].map(([key, kv]) => ({
      key,
      type: kv.type,
      value: kv.value,
      lastUpdateTs: ts,
    }));
    const hook =
      scope === 'CLIENT_SCOPE' && source?.kind === 'device' ? this.deps.inCommit : undefined;
    if (hook) {
      try {
        this.#hooked(() => {
          hook.write([{ rid: device.rid, deviceId: device.id, values: saved, ts }]);
          this.#store.upsert(device.rid, scope, values, ts);
        });
      } catch (err) {
        hook.settled(false);
        throw err;
      }
      hook.settled(true);
    } else {
      this.#store.upsert(device.rid, scope, values, ts);
    }
    this.deps.bus.emit('attributes.updated', {
      deviceId: device.id,
      scope,
      values: saved,
      source,
    });
    if (scope === 'SHARED_SCOPE') {
      this.#subscribers.publish(device.id, { kind: 'updated', values: saved });
    }
    return saved;
  }

  // biome-ignore lint/suspicious/useAwait: async by contract, so a later store may be asynchronous
  async delete(
    deviceId: string,
    scope: AttributeScope,
    keys: readonly string[],
    source?: ChangeSource,
  ): Promise<void> {
    const device = this.#device(deviceId);
    if (keys.length === 0) return;
    const deleted = this.#store.delete(device.rid, scope, keys);
    if (deleted.length === 0) return;
    this.deps.bus.emit('attributes.deleted', { deviceId: device.id, scope, keys: deleted, source });
    if (scope === 'SHARED_SCOPE') {
      this.#subscribers.publish(device.id, { kind: 'deleted', keys: deleted });
    }
  }

  /** One attribute key of one scope across every device (start-up scans, e.g. device activity). */
  findByKey(scope: AttributeScope, key: string): Array<{ deviceId: string; kv: TypedAttributeKv }> {
    return this.#store.findByKey(scope, key);
  }

  /** Attributes of one scope, all or the given keys, sorted by key. */
  get(deviceId: string, scope: AttributeScope, keys?: readonly string[]): TypedAttributeKv[] {
    return this.#store.get(this.#device(deviceId).rid, scope, keys);
  }

  /** §2.2: client and shared attributes a device asks for; never the server scope. */
  forDevice(device: DeviceIdentity, req: DeviceAttributeRequest): DeviceAttributeResponse {
    const all = req.clientKeys === undefined && req.sharedKeys === undefined;
    const section = (scope: AttributeScope, keys: readonly string[] | undefined) => {
      if (!all && keys === undefined) return undefined;
      const found = this.#store.get(device.rid, scope, keys);
      return found.length > 0 ? found : undefined;
    };
    return {
      client: section('CLIENT_SCOPE', req.clientKeys),
      shared: section('SHARED_SCOPE', req.sharedKeys),
    };
  }

  /**
   * Subscribes a device session to shared-attribute changes (MQTT SUBSCRIBE
   * `v1/devices/me/attributes`, CoAP observe). No snapshot is sent (§2.3).
   */
  subscribe(deviceId: string, listener: (update: SharedAttributeUpdate) => void): Subscription {
    return this.#subscribers.add(deviceId, listener);
  }

  /** HTTP long poll: the first shared-attribute change within `timeoutMs` (§2.3). */
  waitForUpdate(
    deviceId: string,
    opts: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<PollOutcome<SharedAttributeUpdate>> {
    return this.#polls.wait<SharedAttributeUpdate>(
      (deliver) => this.#subscribers.add(deviceId, deliver),
      { deviceId, ...opts },
    );
  }

  /** Ends pending long polls (gateway stopping) and refuses new ones. */
  releasePolls(): void {
    this.#polls.closeAll();
  }

  stop(): void {
    this.#polls.closeAll();
    this.#subscribers.clear();
    this.deps.bus.removeOwner(OWNER);
  }

  /** Active subscriptions and long polls; both drop to 0 when every session has gone. */
  get counts(): { subscribers: number; polls: number } {
    return { subscribers: this.#subscribers.size, polls: this.#polls.size };
  }

  #device(deviceId: string): DeviceIdentity {
    const device = this.deps.devices.identity(deviceId.toLowerCase());
    if (!device) throw new NotFoundError(`Device with id [${deviceId}] is not found`);
    return device;
  }
}

/** Longest attribute key, in characters (as telemetry's). */
export const MAX_ATTRIBUTE_KEY_LENGTH = 255;

/**
 * Checks one attribute key from any source: an empty key (which telemetry refuses too) or one
 * longer than MAX_ATTRIBUTE_KEY_LENGTH is refused, and the whole payload with it.
 */
export function checkAttributeKey(key: string): void {
  if (key.length === 0) throw new ValidationError('Attribute key must not be empty');
  if (key.length > MAX_ATTRIBUTE_KEY_LENGTH) {
    throw new ValidationError(
      `Attribute key '${key.slice(0, 32)}…' is ${key.length} characters, longer than ${MAX_ATTRIBUTE_KEY_LENGTH}`,
    );
  }
}

/** Checks REST attribute keys: ThingsBoard answers 400 for a blank key. */
export function checkKeys(keys: Iterable<string>): void {
  for (const key of keys) {
    if (key.trim() === '') throw new ValidationError('Attribute key must not be blank');
  }
}
