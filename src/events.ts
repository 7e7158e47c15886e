import type { ActivitySnapshot } from './devices/activity-service.js';
/**
 * The in-process event bus: typed domain events emitted after their data is committed.
 * Listeners register under an owner key so that a subsystem's `stop()` removes all of its own.
 */

import type { Logger } from 'pino';
import type { AlarmEvent } from './alarms/types.js';
import type { AttributeScope, TypedAttributeKv } from './attributes/types.js';
import type { Device } from './devices/device-service.js';
import type { Notification } from './notifications/types.js';
import type { RpcStatus } from './rpc/types.js';
import type { TsKind } from './telemetry/telemetry-parser.js';

export interface DeviceRef {
  readonly id: string;
  readonly name: string;
}

export interface TelemetryPoint {
  readonly key: string;
  readonly ts: number;
  readonly value: boolean | number | string | object;
  /** The stored type (a whole double and a long print differently); absent from older emitters. */
  readonly kind?: TsKind;
}

/**
 * Who made a change: a device's own uplink, a user through the REST API, or the gateway itself
 * (device activity, OTA state). The device-message service turns user changes into
 * `ATTRIBUTES_UPDATED`-like messages; device uplinks have their own message types.
 */
export type ChangeSource =
  | { readonly kind: 'device' }
  | { readonly kind: 'user'; readonly userId: string; readonly userName: string }
  | { readonly kind: 'system' };

export interface GatewayEvents {
  /** A device became active or inactive (platform reference §7.4). */
  'device.activity': ActivitySnapshot;
  /** `entity`: the device as REST returns it (as it was, for a deleted one). */
  'device.created': { device: DeviceRef; entity?: Device };
  'device.updated': { device: DeviceRef; entity?: Device };
  'device.deleted': { device: DeviceRef; entity?: Device };
  'device.credentials': { deviceId: string };
  /** A device changed owner: a customer (`customerId`) or the tenant (null). */
  'device.owner': {
    device: DeviceRef;
    customerId: string | null;
    previousCustomerId: string | null;
  };
  /** A device profile was created or updated (provisioning settings, OTA assignment, ...). */
  'deviceProfile.updated': { profileId: string };
  /** A device profile was deleted (never the default one, never one that devices use). */
  'deviceProfile.deleted': { profileId: string };
  /** One event per device per committed batch. */
  telemetry: { deviceId: string; points: readonly TelemetryPoint[] };
  /** A server-side (REST) time-series write, committed; its points are also in `telemetry`. */
  'telemetry.saved': { deviceId: string; points: readonly TelemetryPoint[]; source?: ChangeSource };
  'telemetry.deleted': {
    deviceId: string;
    keys: readonly string[];
    startTs?: number;
    endTs?: number;
    source?: ChangeSource;
  };
  /** Attributes saved in one commit (any scope; shared ones are also pushed to the device). */
  'attributes.updated': {
    deviceId: string;
    scope: AttributeScope;
    values: readonly TypedAttributeKv[];
    /** Absent: the gateway itself (`system`). */
    source?: ChangeSource;
  };
  /** Attribute keys that existed and were deleted in one commit. */
  'attributes.deleted': {
    deviceId: string;
    scope: AttributeScope;
    keys: readonly string[];
    source?: ChangeSource;
  };
  /**
   * An alarm was created, updated (severity or not), acknowledged, cleared, assigned,
   * unassigned or deleted (platform.md §2); after its commit.
   */
  alarm: AlarmEvent;
  /** Attributes of a customer, the tenant or a user saved or deleted (dynamic values). */
  'ownerAttributes.updated': {
    entityType: 'CUSTOMER' | 'TENANT' | 'USER';
    entityId: string;
    scope: 'SERVER_SCOPE' | 'SHARED_SCOPE';
    keys: readonly string[];
  };
  /** A notification reached a user's inbox (committed): WebSocket `NOTIFICATIONS` pushes it. */
  'notification.created': { notification: Notification };
  /** Notifications of a user were marked read (`ALL`: every one); `unread` is the count now. */
  'notification.read': { recipientId: string; ids: readonly string[] | 'ALL'; unread: number };
  /** A user deleted one of their notifications; `unread` is the count now. */
  'notification.deleted': { recipientId: string; id: string; unread: number };
  /** A persistent server-side RPC changed status. */
  'rpc.status': { deviceId: string; rpcId: string; requestId: number; status: RpcStatus };
  /** The link to the cloud ThingsBoard came up (docs/upstream.md). */
  'upstream.connected': { url: string; ts: number };
  /** The link to the cloud went down (or a connection attempt failed after it was up). */
  'upstream.disconnected': { url: string; ts: number; error: string | null };
}

export type EventName = keyof GatewayEvents;
type Listener<E extends EventName> = (payload: GatewayEvents[E]) => void;

export class EventBus {
  readonly #listeners = new Map<EventName, Map<string, Set<Listener<EventName>>>>();

  constructor(private readonly log?: Logger) {}

  on<E extends EventName>(owner: string, event: E, listener: Listener<E>): void {
    let byOwner = this.#listeners.get(event);
    if (!byOwner) {
      byOwner = new Map();
      this.#listeners.set(event, byOwner);
    }
    let set = byOwner.get(owner);
    if (!set) {
      set = new Set();
      byOwner.set(owner, set);
    }
    set.add(listener as Listener<EventName>);
  }

  off<E extends EventName>(owner: string, event: E, listener: Listener<E>): void {
    this.#listeners
      .get(event)
      ?.get(owner)
      ?.delete(listener as Listener<EventName>);
  }

  /** Removes every listener registered by `owner`. */
  removeOwner(owner: string): void {
    for (const byOwner of this.#listeners.values()) byOwner.delete(owner);
  }

  /**
   * Calls listeners synchronously. A listener that throws is logged and does not stop the others
   * or the emitter: a broken consumer must not fail a commit that already happened.
   */
  emit<E extends EventName>(event: E, payload: GatewayEvents[E]): void {
    const byOwner = this.#listeners.get(event);
    if (!byOwner) return;
    for (const [owner, set] of byOwner) {
      for (const listener of set) {
        try {
          listener(payload);
        } catch (err) {
          this.log?.error({ err, event, owner }, 'event listener failed');
        }
      }
    }
  }

  listenerCount(event?: EventName): number {
    let n = 0;
    for (const [name, byOwner] of this.#listeners) {
      if (event && name !== event) continue;
      for (const set of byOwner.values()) n += set.size;
    }
    return n;
  }
}
