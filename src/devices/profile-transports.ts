import type { Logger } from 'pino';
import type { EventBus } from '../events.js';
import type { DeviceProfileService } from './device-profile-service.js';
import {
  compileTransportConfiguration,
  DEFAULT_TRANSPORT_SETTINGS,
  type TransportSettings,
  type TransportType,
} from './transport-config.js';

export interface ProfileTransportsDeps {
  readonly profiles: Pick<DeviceProfileService, 'find'>;
  readonly bus: EventBus;
  readonly log: Logger;
}

/** Why sessions must pick up new rules: a profile changed, or a device moved to another. */
export type TransportChange =
  | { readonly kind: 'profile'; readonly profileId: string }
  | { readonly kind: 'device'; readonly deviceId: string; readonly profileId: string };

/** Profiles whose compiled settings stay in memory (each holds a few protobuf types). */
const CACHE_SIZE = 1000;
const OWNER = 'profile-transports';

/**
 * Each profile's transport settings, compiled once (issue 21) and kept in a bounded cache that a
 * profile save or delete invalidates. Transports ask per message (`settings`) and hear of changes
 * (`onChange`) to close the sessions that must reconnect under the new rules.
 */
export class ProfileTransports {
  /** Settings by profile id, with the configuration they were compiled from. */
  readonly #cache = new Map<
    string,
    { readonly key: string; readonly settings: TransportSettings }
  >();
  readonly #listeners = new Set<(change: TransportChange) => void>();
  #evicted = 0;

  constructor(private readonly deps: ProfileTransportsDeps) {}

  start(): void {
    const { bus } = this.deps;
    bus.on(OWNER, 'deviceProfile.updated', ({ profileId }) => {
      // Only a changed transport configuration closes sessions (not a new alarm rule).
      const old = this.#cache.get(profileId);
      this.#cache.delete(profileId);
      if (!old || old.key !== this.#load(profileId).key)
        this.#notify({ kind: 'profile', profileId });
    });
    bus.on(OWNER, 'deviceProfile.deleted', ({ profileId }) => this.#cache.delete(profileId));
    bus.on(OWNER, 'device.updated', ({ device, entity }) => {
      if (entity) {
        this.#notify({ kind: 'device', deviceId: device.id, profileId: entity.deviceProfileId.id });
      }
    });
  }

  stop(): void {
    this.deps.bus.removeOwner(OWNER);
    this.#listeners.clear();
  }

  /** The settings of a profile; the defaults for an unknown profile. */
  settings(profileId: string): TransportSettings {
    return (this.#cache.get(profileId) ?? this.#load(profileId)).settings;
  }

  #load(profileId: string): { readonly key: string; readonly settings: TransportSettings } {
    const profile = this.deps.profiles.find(profileId);
    let settings = DEFAULT_TRANSPORT_SETTINGS;
    const config = profile?.profileData.transportConfiguration;
    const key = `${profile?.transportType}:${JSON.stringify(config)}`;
    if (profile) {
      try {
        settings = compileTransportConfiguration(
          config,
          profile.transportType as TransportType,
        ).settings;
      } catch (err) {
        // Saved profiles were validated; a row written by an older version is served as DEFAULT.
        this.deps.log.warn({ err, profileId }, 'profile transport configuration not usable');
      }
    }
    if (this.#cache.size >= CACHE_SIZE) {
      const oldest = this.#cache.keys().next().value;
      if (oldest !== undefined) this.#cache.delete(oldest);
      this.#evicted++;
    }
    const entry = { key, settings };
    this.#cache.set(profileId, entry);
    return entry;
  }

  /** Registers a listener for changes; returns its removal. */
  onChange(listener: (change: TransportChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Cached profiles and those evicted at the bound since start. */
  stats(): { cached: number; evicted: number } {
    return { cached: this.#cache.size, evicted: this.#evicted };
  }

  #notify(change: TransportChange): void {
    for (const listener of this.#listeners) {
      try {
        listener(change);
      } catch (err) {
        this.deps.log.error({ err }, 'transport change listener failed');
      }
    }
  }
}
