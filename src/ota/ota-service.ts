import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import {
  type EntityId,
  entityId,
  type PageData,
  type PageQuery,
  pageData,
} from '../common/entity.js';
import { validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import type { DeviceProfileService } from '../devices/device-profile-service.js';
import type { DeviceService } from '../devices/device-service.js';
import { NotFoundError, PayloadTooLargeError, ValidationError } from '../errors.js';
import type { EventBus, TelemetryPoint } from '../events.js';
import type { Logger } from '../logger.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { CHECKSUM_ALGORITHMS, type ChecksumAlgorithm, checksum } from './checksum.js';
import { type OtaRow, type OtaSort, OtaStore, type OtaType } from './ota-store.js';

export type { OtaType } from './ota-store.js';
export const OTA_TYPES: readonly OtaType[] = ['FIRMWARE', 'SOFTWARE'];

/** ThingsBoard's OtaPackageInfo JSON (platform.md §3.11). */
export interface OtaPackageInfo {
  readonly id: EntityId<'OTA_PACKAGE'>;
  readonly createdTime: number;
  readonly tenantId: EntityId<'TENANT'>;
  readonly deviceProfileId: EntityId<'DEVICE_PROFILE'>;
  readonly type: OtaType;
  readonly title: string;
  readonly version: string;
  readonly tag: string | null;
  readonly url: string | null;
  readonly hasData: boolean;
  readonly fileName: string | null;
  readonly contentType: string | null;
  readonly checksumAlgorithm: string | null;
  readonly checksum: string | null;
  readonly dataSize: number | null;
  readonly additionalInfo: unknown;
  readonly name: string;
}

/** A slice of a package for a device: what HTTP, MQTT and CoAP send. */
export interface OtaChunk {
  readonly info: OtaPackageInfo;
  readonly data: Buffer;
}

/** The per-device OTA state this gateway tracks (device-api.md §7.1). */
export interface DeviceOtaState {
  /** Package whose `fw_*`/`sw_*` shared attributes were written last; null when unassigned. */
  readonly packageId: string | null;
  /** `INITIATED` after assignment, then what the device reports in `fw_state`/`sw_state`. */
  readonly state: string | null;
  readonly stateTs: number | null;
  /** Last `fw_error`/`sw_error` the device sent with its state. */
  readonly error: string | null;
}

/** The part of the attribute service OTA uses; the gateway passes the real AttributeService. */
export interface SharedAttributeWriter {
  save(
    deviceId: string,
    scope: 'SHARED_SCOPE',
    values: Record<string, unknown>,
  ): Promise<void> | void;
  delete(
    deviceId: string,
    scope: 'SHARED_SCOPE',
    keys: readonly string[],
  ): Promise<unknown> | unknown;
}

const idRef = z.object({ id: z.string().uuid() });

const packageBody = z
  .object({
    id: idRef.nullable().optional(),
    title: z.string().trim().min(1, 'must not be empty').max(255),
    version: z.string().trim().min(1, 'must not be empty').max(255),
    type: z.enum(['FIRMWARE', 'SOFTWARE']).nullable().optional(),
    deviceProfileId: idRef.nullable().optional(),
    tag: z.string().max(255).nullable().optional(),
    usesUrl: z.boolean().nullable().optional(),
    url: z.string().url().max(2048).nullable().optional(),
    additionalInfo: z.record(z.string(), z.unknown()).nullable().optional(),
  })
  .passthrough();

export interface UploadInput {
  readonly data: Buffer;
  readonly fileName?: string;
  readonly contentType?: string;
  /** Query parameter `checksumAlgorithm`; SHA256 when absent (device-api.md §7.1). */
  readonly checksumAlgorithm?: string;
  /** Query parameter `checksum`; empty → computed by the gateway, else verified. */
  readonly checksum?: string;
}

export interface DownloadOptions {
  /** Checked against the package when given (HTTP requires both; MQTT sends neither). */
  readonly title?: string;
  readonly version?: string;
  /** Chunk size in bytes; 0 or absent → the whole file. */
  readonly size?: number;
  readonly chunk?: number;
}

export interface OtaServiceDeps {
  readonly db: Db;
  readonly tenants: TenantService;
  readonly devices: DeviceService;
  readonly profiles: DeviceProfileService;
  readonly bus: EventBus;
  readonly log: Logger;
  /** Largest package file in bytes (`ota.maxBytes`). */
  readonly maxBytes: number;
  /** Shared-attribute writes on assignment; without it only the OTA state is kept. */
  readonly attributes?: SharedAttributeWriter;
}

const OWNER = 'ota';

/**
 * OTA packages (firmware and software): storage with checksum verification, assignment to device
 * profiles and devices (`firmwareId`/`softwareId`), the `fw_*`/`sw_*` shared attributes that tell
 * a device about its target package, `fw_state` tracking and chunked download.
 */
export class OtaService {
  readonly #store: OtaStore;
  /** Per-device chain of attribute updates, so that assignments apply in order. */
  readonly #pending = new Map<string, Promise<void>>();

  constructor(private readonly deps: OtaServiceDeps) {
    this.#store = new OtaStore(deps.db);
  }

  /** Subscribes to device, profile and telemetry events. */
  start(): void {
    const { bus } = this.deps;
    bus.on(OWNER, 'device.created', (e) => this.#schedule(e.device.id));
    bus.on(OWNER, 'device.updated', (e) => this.#schedule(e.device.id));
    bus.on(OWNER, 'deviceProfile.updated', (e) => {
      for (const id of this.#store.devicesOfProfile(e.profileId)) this.#schedule(id);
    });
    bus.on(OWNER, 'telemetry', (e) => this.#onTelemetry(e.deviceId, e.points));
  }

  async stop(): Promise<void> {
    this.deps.bus.removeOwner(OWNER);
    await this.settled();
  }

  /** Resolves when every scheduled attribute update has been applied. */
  async settled(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending.values()]);
  }

  /**
   * Checks that a package may be assigned to a device or profile of `profileId`; passed to the
   * device and profile services, which validate `firmwareId`/`softwareId` with it.
   */
  readonly check = (type: OtaType, packageId: string, profileId: string): void => {
    const label = type.toLowerCase();
    const row = this.#store.byId(packageId);
    if (!row) throw new ValidationError(`Can't assign non-existent ${label}!`);
    if (row.type !== type)
      throw new ValidationError(`Can't assign ${label} with type: ${row.type}`);
    if (row.device_profile_id !== profileId)
      throw new ValidationError(`Can't assign ${label} with different deviceProfile!`);
    if (row.data_size === null && row.url === null)
      throw new ValidationError(`Can't assign ${label} with empty data!`);
  };

  /** ThingsBoard's `POST /api/otaPackage`: creates package info (no `id`) or updates it. */
  save(body: unknown): OtaPackageInfo {
    const input = validate(packageBody, body, 'OTA package');
    const type = input.type ?? 'FIRMWARE';
    const profileId =
      input.deviceProfileId?.id.toLowerCase() ?? this.deps.profiles.getDefault().id.id;
    if (!this.deps.profiles.find(profileId))
      throw new ValidationError(`Device profile with id [${profileId}] is not found`);
    const url = input.usesUrl || input.url ? (input.url ?? null) : null;
    if (input.usesUrl && !url) throw new ValidationError('Invalid OTA package: url is required');
    const additionalInfo = input.additionalInfo ? JSON.stringify(input.additionalInfo) : null;

    if (input.id) {
      const id = input.id.id.toLowerCase();
      const row = this.#store.byId(id);
      if (!row) throw new NotFoundError(`OTA package with id [${id}] is not found`);
      if (
        row.title !== input.title ||
        row.version !== input.version ||
        row.type !== type ||
        row.device_profile_id !== profileId
      ) {
        throw new ValidationError(
          'Updating otaPackage title/version/type/deviceProfile is prohibited!',
        );
      }
      this.#store.updateInfo({ id, tag: input.tag ?? null, url, additional_info: additionalInfo });
      return this.get(id);
    }

    if (this.#store.byTitle(type, input.title, input.version))
      throw new ValidationError('OtaPackage with such title and version already exists!');
    const id = randomUUID();
    this.#store.insert({
      id,
      tenant_id: this.deps.tenants.id,
      device_profile_id: profileId,
      type,
      title: input.title,
      version: input.version,
      tag: input.tag ?? null,
      url,
      file_name: null,
      content_type: null,
      checksum_algorithm: null,
      checksum: null,
      data_size: null,
      additional_info: additionalInfo,
      created_time: Date.now(),
    });
    this.deps.log.info(
      { packageId: id, type, title: input.title, version: input.version },
      'OTA package created',
    );
    return this.get(id);
  }

  /**
   * Stores a package file once (`POST /api/otaPackage/{id}`). The checksum is computed with the
   * given algorithm (SHA256 by default); a checksum supplied by the uploader must match it.
   */
  upload(id: string, input: UploadInput): OtaPackageInfo {
    const row = this.#row(id);
    if (row.url !== null) throw new ValidationError('OTA package with url cannot have data');
    if (row.data_size !== null)
      throw new ValidationError('Updating otaPackage data is prohibited!');
    if (input.data.length === 0) throw new ValidationError('OTA package file is empty');
    if (input.data.length > this.deps.maxBytes)
      throw new PayloadTooLargeError(`OTA package is larger than ${this.deps.maxBytes} bytes`);
    const algorithm = (input.checksumAlgorithm || 'SHA256').toUpperCase();
    if (!(CHECKSUM_ALGORITHMS as readonly string[]).includes(algorithm)) {
      throw new ValidationError(
        `Invalid checksumAlgorithm ${input.checksumAlgorithm}: one of ${CHECKSUM_ALGORITHMS.join(', ')}`,
      );
    }
    const computed = checksum(algorithm as ChecksumAlgorithm, input.data);
    const given = input.checksum?.trim().toLowerCase();
    if (given && given !== computed) {
      throw new ValidationError(
        `Wrong checksum: ${algorithm} of the file is ${computed}, the request says ${given}`,
      );
    }
    const stored = this.#store.setData({
      id: row.id,
      file_name: input.fileName || `${row.title}-${row.version}.bin`,
      content_type: input.contentType || 'application/octet-stream',
      checksum_algorithm: algorithm,
      checksum: computed,
      data_size: input.data.length,
      data: input.data,
    });
    if (!stored) throw new ValidationError('Updating otaPackage data is prohibited!');
    this.deps.log.info(
      { packageId: row.id, size: input.data.length, algorithm },
      'OTA package data stored',
    );
    return this.get(row.id);
  }

  get(id: string): OtaPackageInfo {
    return toInfo(this.#row(id));
  }

  list(
    q: PageQuery<OtaSort>,
    filter: { profileId?: string; type?: OtaType; hasData?: boolean } = {},
  ): PageData<OtaPackageInfo> {
    const { rows, total } = this.#store.page(q, filter);
    return pageData(rows.map(toInfo), total, q);
  }

  /** Deletes a package that no device or profile references. */
  delete(id: string): void {
    const row = this.#row(id);
    if (this.#store.deviceRefs(row.id) > 0)
      throw new ValidationError('The otaPackage referenced by the devices cannot be deleted!');
    if (this.#store.profileRefs(row.id) > 0)
      throw new ValidationError(
        'The otaPackage referenced by the device profile cannot be deleted!',
      );
    this.#store.delete(row.id);
    this.deps.log.info({ packageId: row.id }, 'OTA package deleted');
  }

  /**
   * Deletes the packages of a device profile that is being deleted, inside the caller's
   * transaction (ThingsBoard's `ota_package` foreign key cascades). The profile service checks
   * first that no device uses the profile, and a device only takes packages of its own profile.
   */
  readonly deleteOfProfile = (profileId: string): void => {
    const n = this.#store.deleteOfProfile(profileId);
    if (n > 0)
      this.deps.log.info({ profileId, packages: n }, 'OTA packages of deleted profile deleted');
  };

  /** The whole file of a package (administrator download). */
  data(id: string): OtaChunk {
    const row = this.#row(id);
    if (row.data_size === null) throw new NotFoundError(`OTA package [${id}] has no data`);
    return { info: toInfo(row), data: this.#store.slice(row.id, 0, row.data_size) };
  }

  /**
   * The package assigned to a device: its own `firmwareId`/`softwareId`, else its profile's.
   * NotFoundError when nothing is assigned or the package is URL-only (device-api.md §7.2).
   */
  packageFor(deviceId: string, type: OtaType): OtaPackageInfo {
    const device = this.deps.devices.get(deviceId);
    const own = type === 'FIRMWARE' ? device.firmwareId : device.softwareId;
    const id = own?.id ?? this.deps.profiles.packageOf(device.deviceProfileId.id, type);
    const row = id ? this.#store.byId(id) : undefined;
    if (!row || row.data_size === null)
      throw new NotFoundError(`No ${type.toLowerCase()} assigned to device [${deviceId}]`);
    return toInfo(row);
  }

  /**
   * Bytes `[chunk*size, chunk*size+size)` of a package; `size` 0 → the whole file; past the end →
   * empty (device-api.md §7.2 chunk rules, the same on every transport).
   */
  chunk(packageId: string, size: number, chunk: number): Buffer {
    const row = this.#row(packageId);
    const total = row.data_size ?? 0;
    if (!size) return this.#store.slice(row.id, 0, total);
    const offset = chunk * size;
    if (offset >= total) return Buffer.alloc(0);
    return this.#store.slice(row.id, offset, Math.min(size, total - offset));
  }

  /**
   * The device download: resolves the assigned package, checks `title`/`version` when given
   * (mismatch → ValidationError) and returns the requested chunk.
   */
  download(deviceId: string, type: OtaType, opts: DownloadOptions = {}): OtaChunk {
    const info = this.packageFor(deviceId, type);
    if (opts.title !== undefined && opts.title !== info.title)
      throw new ValidationError(`title ${opts.title} does not match the assigned ${info.title}`);
    if (opts.version !== undefined && opts.version !== info.version)
      throw new ValidationError(
        `version ${opts.version} does not match the assigned ${info.version}`,
      );
    return { info, data: this.chunk(info.id.id, opts.size ?? 0, opts.chunk ?? 0) };
  }

  /** What the gateway knows of a device's OTA progress. */
  deviceState(deviceId: string, type: OtaType = 'FIRMWARE'): DeviceOtaState | undefined {
    const identity = this.deps.devices.identity(deviceId);
    const row = identity && this.#store.state(identity.rid, type);
    return (
      row && {
        packageId: row.package_id,
        state: row.state,
        stateTs: row.state_ts,
        error: row.error,
      }
    );
  }

  #row(id: string): OtaRow {
    const row = this.#store.byId(id);
    if (!row) throw new NotFoundError(`OTA package with id [${id}] is not found`);
    return row;
  }

  #schedule(deviceId: string): void {
    const prev = this.#pending.get(deviceId) ?? Promise.resolve();
    const next = prev
      .then(() => this.#reconcile(deviceId))
      .catch((err: unknown) => {
        this.deps.log.error({ err, deviceId }, 'OTA attribute update failed');
      })
      .finally(() => {
        if (this.#pending.get(deviceId) === next) this.#pending.delete(deviceId);
      });
    this.#pending.set(deviceId, next);
  }

  /**
   * Brings a device's `fw_*`/`sw_*` shared attributes in line with its effective package
   * (device's own assignment, else the profile's). Like ThingsBoard's OtaPackageStateService:
   * a new package writes title, version, size, checksum, algorithm (+ tag, url) and deletes
   * the keys the package lacks; no package deletes every key.
   */
  async #reconcile(deviceId: string): Promise<void> {
    for (const type of OTA_TYPES) {
      const identity = this.deps.devices.identity(deviceId);
      if (!identity) return;
      const device = this.deps.devices.get(deviceId);
      const own = type === 'FIRMWARE' ? device.firmwareId : device.softwareId;
      const target = own?.id ?? this.deps.profiles.packageOf(identity.profileId, type);
      const applied = this.#store.state(identity.rid, type)?.package_id ?? null;
      if (target === applied) continue;
      const row = target ? this.#store.byId(target) : undefined;
      const prefix = type === 'FIRMWARE' ? 'fw' : 'sw';
      const attrs = this.deps.attributes;
      if (attrs) {
        if (row) {
          const values = attributeValues(prefix, row);
          await attrs.save(deviceId, 'SHARED_SCOPE', values);
          const stale = ['tag', 'url', 'size', 'checksum', 'checksum_algorithm']
            .map((k) => `${prefix}_${k}`)
            .filter((k) => !(k in values));
          if (stale.length > 0) await attrs.delete(deviceId, 'SHARED_SCOPE', stale);
        } else {
          await attrs.delete(deviceId, 'SHARED_SCOPE', allKeys(prefix));
        }
      }
      // The device may have gone while the attributes were written.
      if (!this.deps.devices.identity(deviceId)) return;
      this.#store.setApplied(identity.rid, type, row ? row.id : null, Date.now());
      this.deps.log.info({ deviceId, type, packageId: row?.id ?? null }, 'OTA assignment applied');
    }
  }

  /** Tracks `fw_state`/`sw_state` (and `fw_error`) telemetry sent by devices. */
  #onTelemetry(deviceId: string, points: readonly TelemetryPoint[]): void {
    for (const type of OTA_TYPES) {
      const prefix = type === 'FIRMWARE' ? 'fw' : 'sw';
      const state = latest(points, `${prefix}_state`);
      if (!state) continue;
      const identity = this.deps.devices.identity(deviceId);
      if (!identity) return;
      const error = latest(points, `${prefix}_error`);
      this.#store.setReported(
        identity.rid,
        type,
        String(state.value),
        state.ts,
        error ? String(error.value) : null,
      );
      this.deps.log.debug({ deviceId, type, state: state.value }, 'OTA state reported');
    }
  }
}

function latest(points: readonly TelemetryPoint[], key: string): TelemetryPoint | undefined {
  let best: TelemetryPoint | undefined;
  for (const p of points) if (p.key === key && (!best || p.ts >= best.ts)) best = p;
  return best;
}

function allKeys(prefix: string): string[] {
  return [
    'title',
    'version',
    'ts',
    'state',
    'size',
    'checksum',
    'checksum_algorithm',
    'url',
    'tag',
  ].map((k) => `${prefix}_${k}`);
}

function attributeValues(prefix: string, row: OtaRow): Record<string, unknown> {
  const v: Record<string, unknown> = {
    [`${prefix}_title`]: row.title,
    [`${prefix}_version`]: row.version,
  };
  if (row.tag) v[`${prefix}_tag`] = row.tag;
  if (row.url) v[`${prefix}_url`] = row.url;
  if (row.data_size !== null) v[`${prefix}_size`] = row.data_size;
  if (row.checksum) {
    v[`${prefix}_checksum`] = row.checksum;
    v[`${prefix}_checksum_algorithm`] = row.checksum_algorithm;
  }
  return v;
}

function toInfo(row: OtaRow): OtaPackageInfo {
  return {
    id: entityId('OTA_PACKAGE', row.id),
    createdTime: row.created_time,
    tenantId: entityId('TENANT', row.tenant_id),
    deviceProfileId: entityId('DEVICE_PROFILE', row.device_profile_id),
    type: row.type,
    title: row.title,
    version: row.version,
    tag: row.tag,
    url: row.url,
    hasData: row.data_size !== null,
    fileName: row.file_name,
    contentType: row.content_type,
    checksumAlgorithm: row.checksum_algorithm,
    checksum: row.checksum,
    dataSize: row.data_size,
    additionalInfo: row.additional_info === null ? null : JSON.parse(row.additional_info),
    name: row.title,
  };
}
