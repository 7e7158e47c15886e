import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import {
  type EntityId,
  entityId,
  NULL_UUID,
  type PageData,
  type PageQuery,
  pageData,
} from '../common/entity.js';
import { validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import { NotFoundError, ValidationError } from '../errors.js';
import type { EventBus } from '../events.js';
import type { TenantService } from '../tenant/tenant-service.js';
import type { DeviceProfileService } from './device-profile-service.js';
import {
  type CredentialsRow,
  type DeviceSort,
  DeviceStore,
  type DeviceView,
} from './device-store.js';

export interface Device {
  readonly id: EntityId<'DEVICE'>;
  readonly createdTime: number;
  readonly tenantId: EntityId<'TENANT'>;
  readonly customerId: EntityId<'CUSTOMER'>;
  readonly name: string;
  readonly type: string;
  readonly label: string | null;
  readonly deviceProfileId: EntityId<'DEVICE_PROFILE'>;
  readonly deviceData: object;
  readonly firmwareId: null;
  readonly softwareId: null;
  readonly additionalInfo: unknown;
  readonly version: number;
}

export interface DeviceCredentials {
  readonly id: { readonly id: string };
  readonly createdTime: number;
  readonly deviceId: EntityId<'DEVICE'>;
  readonly credentialsType: 'ACCESS_TOKEN';
  readonly credentialsId: string;
  readonly credentialsValue: null;
}

/** What a transport needs after authenticating a device: kept small, looked up per connection. */
export interface DeviceIdentity {
  readonly rid: number;
  readonly id: string;
  readonly name: string;
  readonly profileId: string;
}

// @NOTE: tokens travel as URL path segments and MQTT user names: no separators, no blanks.
const TOKEN_RE = /^[A-Za-z0-9._~-]{1,128}$/;
const TOKEN_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

const idRef = z.object({ id: z.string().uuid() });

const deviceBody = z.object({
  id: idRef.optional().nullable(),
  name: z.string().trim().min(1, 'must not be empty').max(255),
  label: z.string().max(255).optional().nullable(),
  type: z.string().trim().max(255).optional().nullable(),
  deviceProfileId: idRef.optional().nullable(),
  additionalInfo: z.record(z.string(), z.unknown()).optional().nullable(),
});

const credentialsBody = z.object({
  deviceId: idRef,
  credentialsType: z.literal('ACCESS_TOKEN').optional(),
  credentialsId: z.string(),
});

export function randomAccessToken(length = 20): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const b of bytes) out += TOKEN_ALPHABET[b % TOKEN_ALPHABET.length];
  return out;
}

function checkToken(token: string): string {
  if (!TOKEN_RE.test(token)) {
    throw new ValidationError('Access token must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ -');
  }
  return token;
}

export interface DeviceServiceDeps {
  readonly db: Db;
  readonly tenants: TenantService;
  readonly profiles: DeviceProfileService;
  readonly bus: EventBus;
}

export class DeviceService {
  readonly #store: DeviceStore;

  constructor(private readonly deps: DeviceServiceDeps) {
    this.#store = new DeviceStore(deps.db);
  }

  /** Creates a device (no `id` in the body) or updates one (with `id`). ThingsBoard's `POST /api/device`. */
  save(body: unknown, opts: { accessToken?: string } = {}): Device {
    const input = validate(deviceBody, body, 'device');
    const profileId = this.#resolveProfile(input.deviceProfileId?.id, input.type ?? undefined);
    const additionalInfo = input.additionalInfo ? JSON.stringify(input.additionalInfo) : null;
    const label = input.label ?? null;

    if (input.id) {
      const id = input.id.id.toLowerCase();
      const existing = this.#store.byId(id);
      if (!existing) throw new NotFoundError(`Device with id [${id}] is not found`);
      this.#checkName(input.name, existing.rid);
      this.deps.db.transaction(() => {
        this.#store.update({
          id,
          name: input.name,
          label,
          device_profile_id: profileId,
          additional_info: additionalInfo,
        });
        if (opts.accessToken !== undefined)
          this.#setToken(existing.rid, checkToken(opts.accessToken));
      })();
      const device = this.get(id);
      this.deps.bus.emit('device.updated', { device: { id, name: device.name } });
      return device;
    }

    this.#checkName(input.name);
    const token = checkToken(opts.accessToken ?? randomAccessToken());
    if (this.#store.tokenInUse(token)) throw duplicateToken();
    const id = randomUUID();
    const now = Date.now();
    this.deps.db.transaction(() => {
      const rid = this.#store.insert({
        id,
        tenant_id: this.deps.tenants.id,
        customer_id: null,
        name: input.name,
        label,
        device_profile_id: profileId,
        additional_info: additionalInfo,
        created_time: now,
        version: 1,
      });
      this.#store.insertCredentials({
        id: randomUUID(),
        device_rid: rid,
        credentials_type: 'ACCESS_TOKEN',
        credentials_id: token,
        credentials_value: null,
        created_time: now,
      });
    })();
    this.deps.bus.emit('device.created', { device: { id, name: input.name } });
    return this.get(id);
  }

  get(id: string): Device {
    return toDevice(this.#view(id));
  }

  getByName(name: string): Device {
    const view = this.#store.byName(name);
    if (!view) throw new NotFoundError(`Device with name [${name}] is not found`);
    return toDevice(view);
  }

  delete(id: string): void {
    const view = this.#view(id);
    this.#store.delete(id);
    this.deps.bus.emit('device.deleted', { device: { id, name: view.name } });
  }

  list(q: PageQuery<DeviceSort>): PageData<Device> {
    const { rows, total } = this.#store.page(q);
    return pageData(rows.map(toDevice), total, q);
  }

  credentials(id: string): DeviceCredentials {
    const view = this.#view(id);
    const row = this.#store.credentials(view.rid);
    if (!row) throw new NotFoundError(`Device credentials for device [${id}] are not found`);
    return toCredentials(row, view.id);
  }

  /** ThingsBoard's `POST /api/device/credentials`: replaces the access token of a device. */
  updateCredentials(body: unknown): DeviceCredentials {
    const input = validate(credentialsBody, body, 'device credentials');
    const id = input.deviceId.id.toLowerCase();
    const view = this.#view(id);
    this.#setToken(view.rid, checkToken(input.credentialsId));
    this.deps.bus.emit('device.credentials', { deviceId: id });
    return this.credentials(id);
  }

  /** Resolves a device access token; undefined when no device has it. */
  byAccessToken(token: string): DeviceIdentity | undefined {
    const v = this.#store.byAccessToken(token);
    return v && { rid: v.rid, id: v.id, name: v.name, profileId: v.device_profile_id };
  }

  identity(id: string): DeviceIdentity | undefined {
    const v = this.#store.byId(id);
    return v && { rid: v.rid, id: v.id, name: v.name, profileId: v.device_profile_id };
  }

  byName(name: string): DeviceIdentity | undefined {
    const v = this.#store.byName(name);
    return v && { rid: v.rid, id: v.id, name: v.name, profileId: v.device_profile_id };
  }

  #view(id: string): DeviceView {
    const view = this.#store.byId(id);
    if (!view) throw new NotFoundError(`Device with id [${id}] is not found`);
    return view;
  }

  #setToken(rid: number, token: string): void {
    if (this.#store.tokenInUse(token, rid)) throw duplicateToken();
    this.#store.updateCredentials({
      device_rid: rid,
      credentials_type: 'ACCESS_TOKEN',
      credentials_id: token,
      credentials_value: null,
    });
  }

  #checkName(name: string, exceptRid?: number): void {
    const other = this.#store.byName(name);
    if (other && other.rid !== exceptRid)
      throw new ValidationError('Device with such name already exists!');
  }

  #resolveProfile(profileId: string | undefined, type: string | undefined): string {
    const { profiles } = this.deps;
    if (profileId) {
      const profile = profiles.find(profileId.toLowerCase());
      if (!profile) throw new ValidationError(`Device profile with id [${profileId}] is not found`);
      return profile.id.id;
    }
    if (type) return profiles.findOrCreateByName(type).id.id;
    return profiles.getDefault().id.id;
  }
}

function duplicateToken(): ValidationError {
  return new ValidationError('Device credentials are already assigned to another device!');
}

function toDevice(v: DeviceView): Device {
  return {
    id: entityId('DEVICE', v.id),
    createdTime: v.created_time,
    tenantId: entityId('TENANT', v.tenant_id),
    customerId: entityId('CUSTOMER', v.customer_id ?? NULL_UUID),
    name: v.name,
    type: v.profile_name,
    label: v.label,
    deviceProfileId: entityId('DEVICE_PROFILE', v.device_profile_id),
    deviceData: { configuration: { type: 'DEFAULT' }, transportConfiguration: { type: 'DEFAULT' } },
    firmwareId: null,
    softwareId: null,
    additionalInfo: v.additional_info === null ? null : JSON.parse(v.additional_info),
    version: v.version,
  };
}

function toCredentials(row: CredentialsRow, deviceId: string): DeviceCredentials {
  return {
    id: { id: row.id },
    createdTime: row.created_time,
    deviceId: entityId('DEVICE', deviceId),
    credentialsType: 'ACCESS_TOKEN',
    credentialsId: row.credentials_id,
    credentialsValue: null,
  };
}
