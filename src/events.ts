/**
 * The in-process event bus: typed domain events emitted after their data is committed.
 * Listeners register under an owner key so that a subsystem's `stop()` removes all of its own.
 */

import type { Logger } from 'pino';

export interface DeviceRef {
  readonly id: string;
  readonly name: string;
}

export interface TelemetryPoint {
  readonly key: string;
  readonly ts: number;
  readonly value: boolean | number | string | object;
}

export interface GatewayEvents {
  'device.created': { device: DeviceRef };
  'device.updated': { device: DeviceRef };
  'device.deleted': { device: DeviceRef };
  'device.credentials': { deviceId: string };
  /** One event per device per committed batch. */
  telemetry: { deviceId: string; points: readonly TelemetryPoint[] };
  'telemetry.deleted': { deviceId: string; keys: readonly string[] };
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
