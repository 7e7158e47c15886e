import { randomUUID } from 'node:crypto';
import type { Statement } from 'better-sqlite3';
import { z } from 'zod';
import {
  type EntityId,
  entityId,
  type PageData,
  type PageQuery,
  pageData,
} from '../common/entity.js';
import { exceedsJsonDepth, validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import { NotFoundError, ValidationError } from '../errors.js';
import type { EventBus } from '../events.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { type DeviceProfileAlarm, deviceProfileAlarmsSchema } from './alarm-rule-schema.js';
import { loadProtobuf, transportNeedsProtobuf } from './protobuf-lib.js';
import { compileTransportConfiguration, type TransportType } from './transport-config.js';

export const DEFAULT_PROFILE_NAME = 'Default';

export const PROVISION_TYPES = [
  'DISABLED',
  'ALLOW_CREATE_NEW_DEVICES',
  'CHECK_PRE_PROVISIONED_DEVICES',
] as const;
export type ProvisionType = (typeof PROVISION_TYPES)[number];

export type OtaPackageType = 'FIRMWARE' | 'SOFTWARE';

/**
 * Checks that an OTA package may be assigned to a device or profile of `profileId` (exists, has
 * the right type, belongs to that profile, has data). Throws a ValidationError otherwise. The OTA
 * domain supplies it; devices do not import the OTA domain.
 */
export type OtaPackageCheck = (type: OtaPackageType, packageId: string, profileId: string) => void;

/**
 * Deletes the OTA packages that belong to a profile being deleted. ThingsBoard's
 * `ota_package.device_profile_id` foreign key is `ON DELETE CASCADE`; ours (migration 004) is
 * not, so the OTA domain removes them first, inside the same transaction.
 */
export type OtaPackagesRemover = (profileId: string) => void;

/** ThingsBoard's DeviceProfileInfo (platform.md §3.5): what customer users may read. */
export interface DeviceProfileInfo {
  readonly id: EntityId<'DEVICE_PROFILE'>;
  readonly tenantId: EntityId<'TENANT'>;
  readonly name: string;
  readonly image: null;
  readonly defaultDashboardId: null;
  readonly type: string;
  readonly transportType: string;
}

/** ThingsBoard's EntityInfo, the items of `GET /api/deviceProfile/names`. */
export interface EntityInfo {
  readonly id: EntityId<'DEVICE_PROFILE'>;
  readonly name: string;
}

/** Nesting limit of a profile body, checked before the schema walks it. */
const MAX_PROFILE_DEPTH = 32;

export const PROFILE_SORT = [
  'createdTime',
  'name',
  'type',
  'transportType',
  'description',
] as const;
export type ProfileSort = (typeof PROFILE_SORT)[number];

const SORT_COLUMN: Record<ProfileSort, string> = {
  createdTime: 'created_time',
  name: 'name',
  type: 'type',
  transportType: 'transport_type',
  description: 'description',
};

interface ProfileRow {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  type: string;
  transport_type: string;
  provision_type: ProvisionType;
  provision_device_key: string | null;
  provision_device_secret: string | null;
  is_default: number;
  profile_data: string;
  created_time: number;
  /** Migration 004; undefined on an older schema. */
  firmware_id?: string | null;
  software_id?: string | null;
  /** Migration 015. */
  default_rule_chain_id?: string | null;
}

export interface ProvisionConfiguration {
  readonly type: ProvisionType;
  readonly provisionDeviceKey: string | null;
  readonly provisionDeviceSecret: string | null;
}

/** ThingsBoard's DeviceProfile JSON (platform.md §1.1), the parts this gateway keeps. */
export interface DeviceProfile {
  readonly id: EntityId<'DEVICE_PROFILE'>;
  readonly createdTime: number;
  readonly tenantId: EntityId<'TENANT'>;
  readonly name: string;
  readonly description: string | null;
  readonly image: null;
  readonly type: string;
  readonly transportType: string;
  readonly provisionType: ProvisionType;
  readonly provisionDeviceKey: string | null;
  readonly firmwareId: EntityId<'OTA_PACKAGE'> | null;
  readonly softwareId: EntityId<'OTA_PACKAGE'> | null;
  readonly defaultRuleChainId: EntityId<'RULE_CHAIN'> | null;
  readonly defaultDashboardId: null;
  readonly defaultQueueName: null;
  readonly default: boolean;
  readonly profileData: {
    readonly provisionConfiguration: {
      readonly type: ProvisionType;
      readonly provisionDeviceSecret: string | null;
    };
    /** Alarm rules (platform.md §1), validated on save by alarm-rule-schema.ts. */
    readonly alarms?: readonly DeviceProfileAlarm[] | null;
    readonly [key: string]: unknown;
  };
}

function defaultProfileData(): object {
  return {
    configuration: { type: 'DEFAULT' },
    transportConfiguration: { type: 'DEFAULT' },
    provisionConfiguration: { type: 'DISABLED' },
    alarms: null,
  };
}

const idRef = z.object({ id: z.string().uuid() });
const provisionTypeSchema = z.enum([...PROVISION_TYPES, 'X509_CERTIFICATE_CHAIN']);

const profileBody = z
  .object({
    id: idRef.nullable().optional(),
    name: z.string().trim().min(1, 'must not be empty').max(255),
    description: z.string().max(1024).nullable().optional(),
    type: z.literal('DEFAULT').nullable().optional(),
    transportType: z.enum(['DEFAULT', 'MQTT', 'COAP']).nullable().optional(),
    provisionType: provisionTypeSchema.nullable().optional(),
    provisionDeviceKey: z.string().max(255).nullable().optional(),
    firmwareId: idRef.nullable().optional(),
    softwareId: idRef.nullable().optional(),
    defaultRuleChainId: idRef.nullable().optional(),
    profileData: z
      .object({
        provisionConfiguration: z
          .object({
            type: provisionTypeSchema.optional(),
            provisionDeviceKey: z.string().max(255).nullable().optional(),
            provisionDeviceSecret: z.string().max(255).nullable().optional(),
          })
          .passthrough()
          .nullable()
          .optional(),
        alarms: deviceProfileAlarmsSchema.optional(),
      })
      .passthrough()
      .nullable()
      .optional(),
  })
  .passthrough();

export interface DeviceProfileServiceDeps {
  readonly db: Db;
  readonly tenants: TenantService;
  /** Receives `deviceProfile.updated` after a save; optional so that tools can run without one. */
  readonly bus?: EventBus;
  /** Validates `firmwareId`/`softwareId` on save; without it those fields are refused. */
  readonly otaCheck?: OtaPackageCheck;
  /** Deletes a deleted profile's OTA packages; without it a profile with packages cannot be deleted. */
  readonly otaRemove?: OtaPackagesRemover;
  /** Whether a rule chain exists (`defaultRuleChainId`); without it that field is refused. */
  readonly ruleChainExists?: (id: string) => boolean;
}

/**
 * Device profiles: the default profile, ThingsBoard's create/update/delete, lists and infos,
 * provisioning keys and alarm rules (validated by alarm-rule-schema.ts).
 */
export class DeviceProfileService {
  readonly #byId;
  #setChain: Statement<[string | null, string]> | undefined;
  /** Profile name -> `defaultRuleChainId`, loaded on first use and after each change. */
  #chainByName: Map<string, string> | undefined;
  /** The same by profile id (built with `#chainByName`). */
  #chainById = new Map<string, string>();
  readonly #byName;
  readonly #byKey;
  readonly #default;
  readonly #insert;
  readonly #update;
  readonly #delete;
  readonly #deviceCount;
  readonly #clearDefault;
  readonly #makeDefault;
  readonly #names;
  readonly #activeNames;
  #setOta: Statement<[string | null, string | null, string]> | undefined;

  constructor(private readonly deps: DeviceProfileServiceDeps) {
    const db = deps.db;
    this.#byId = db.prepare<[string], ProfileRow>('SELECT * FROM device_profile WHERE id = ?');
    this.#byName = db.prepare<[string], ProfileRow>('SELECT * FROM device_profile WHERE name = ?');
    this.#byKey = db.prepare<[string], ProfileRow>(
      'SELECT * FROM device_profile WHERE provision_device_key = ?',
    );
    this.#default = db.prepare<[], ProfileRow>('SELECT * FROM device_profile WHERE is_default = 1');
    this.#insert = db.prepare<[ProfileRow]>(
      `INSERT INTO device_profile (id, tenant_id, name, description, type, transport_type,
         provision_type, provision_device_key, provision_device_secret, is_default, profile_data,
         created_time)
       VALUES (@id, @tenant_id, @name, @description, @type, @transport_type, @provision_type,
         @provision_device_key, @provision_device_secret, @is_default, @profile_data, @created_time)`,
    );
    this.#update = db.prepare<[ProfileRow]>(
      `UPDATE device_profile SET name = @name, description = @description, type = @type,
         transport_type = @transport_type, provision_type = @provision_type,
         provision_device_key = @provision_device_key,
         provision_device_secret = @provision_device_secret, profile_data = @profile_data
       WHERE id = @id`,
    );
    this.#delete = db.prepare<[string]>('DELETE FROM device_profile WHERE id = ?');
    this.#deviceCount = db.prepare<[string], { n: number }>(
      'SELECT count(*) AS n FROM device WHERE device_profile_id = ?',
    );
    this.#clearDefault = db.prepare(
      'UPDATE device_profile SET is_default = 0 WHERE is_default = 1',
    );
    this.#makeDefault = db.prepare<[string]>(
      'UPDATE device_profile SET is_default = 1 WHERE id = ?',
    );
    this.#names = db.prepare<[], { id: string; name: string }>(
      'SELECT id, name FROM device_profile ORDER BY name, id',
    );
    this.#activeNames = db.prepare<[], { id: string; name: string }>(
      `SELECT p.id, p.name FROM device_profile p
       WHERE EXISTS (SELECT 1 FROM device d WHERE d.device_profile_id = p.id)
       ORDER BY p.name, p.id`,
    );
  }

  /**
   * Whether a stored profile has Protobuf payloads: the gateway then loads protobufjs before its
   * transports start (protobuf-lib.ts). One read at start; saves load it themselves.
   */
  usesProtobuf(): boolean {
    const rows = this.deps.db
      .prepare<[], string>('SELECT profile_data FROM device_profile')
      .pluck()
      .all();
    return rows.some((data) => {
      try {
        const parsed = JSON.parse(data) as { transportConfiguration?: unknown } | null;
        return transportNeedsProtobuf(parsed?.transportConfiguration);
      } catch {
        return false;
      }
    });
  }

  /** Creates the `Default` profile on first start. */
  init(): void {
    if (!this.#default.get()) this.#create(DEFAULT_PROFILE_NAME, true);
  }

  #create(name: string, isDefault: boolean): ProfileRow {
    const row: ProfileRow = {
      id: randomUUID(),
      tenant_id: this.deps.tenants.id,
      name,
      description: isDefault ? 'Default device profile' : null,
      type: 'DEFAULT',
      transport_type: 'DEFAULT',
      provision_type: 'DISABLED',
      provision_device_key: null,
      provision_device_secret: null,
      is_default: isDefault ? 1 : 0,
      profile_data: JSON.stringify(defaultProfileData()),
      created_time: Date.now(),
      firmware_id: null,
      software_id: null,
    };
    this.#insert.run(row);
    return row;
  }

  /**
   * `save` for any caller: first loads protobufjs when the profile's transport compiles Protobuf
   * schemas (it is imported on first use, protobuf-lib.ts), which `save` needs loaded.
   */
  async saveLoading(body: unknown): Promise<DeviceProfile> {
    const data = (body as { profileData?: { transportConfiguration?: unknown } } | null)
      ?.profileData;
    if (transportNeedsProtobuf(data?.transportConfiguration)) await loadProtobuf();
    return this.save(body);
  }

  /**
   * ThingsBoard's `POST /api/deviceProfile`: creates (no `id`) or updates (with `id`) a profile.
   * The provisioning strategy may come as top-level `provisionType`/`provisionDeviceKey` (TB's
   * JSON) and/or `profileData.provisionConfiguration` `{type, provisionDeviceKey,
   * provisionDeviceSecret}`; where both are given they must agree. A profile that provisions
   * needs a key and a secret; keys and names are unique.
   */
  save(body: unknown): DeviceProfile {
    if (exceedsJsonDepth(body, MAX_PROFILE_DEPTH))
      throw new ValidationError(
        `Invalid device profile: nested deeper than ${MAX_PROFILE_DEPTH} levels`,
      );
    const input = validate(profileBody, body, 'device profile');
    const pc = input.profileData?.provisionConfiguration ?? undefined;
    const problems: string[] = [];
    const type = agree(input.provisionType, pc?.type, 'provisionType', problems) ?? 'DISABLED';
    const key = emptyToNull(
      agree(input.provisionDeviceKey, pc?.provisionDeviceKey, 'provisionDeviceKey', problems),
    );
    const secret = emptyToNull(pc?.provisionDeviceSecret);
    if (type === 'X509_CERTIFICATE_CHAIN') {
      problems.push('provisionType X509_CERTIFICATE_CHAIN is not supported by this gateway');
    } else if (type !== 'DISABLED') {
      if (key === null) problems.push(`provisionDeviceKey is required for ${type}`);
      if (secret === null) problems.push(`provisionDeviceSecret is required for ${type}`);
    }
    if (problems.length > 0)
      throw new ValidationError(`Invalid device profile: ${problems.join('; ')}`);

    const existing = input.id ? this.#byId.get(input.id.id.toLowerCase()) : undefined;
    if (input.id && !existing)
      throw new NotFoundError(`Device profile with id [${input.id.id}] is not found`);
    const id = existing?.id ?? randomUUID();
    const sameName = this.#byName.get(input.name);
    if (sameName && sameName.id !== id)
      throw new ValidationError('Device profile with such name already exists!');
    const sameKey = key === null ? undefined : this.#byKey.get(key);
    if (sameKey && sameKey.id !== id)
      throw new ValidationError('Device profile with such provision device key already exists!');

    // Issue 21: the transport configuration is validated (schemas compiled) before anything is saved.
    const rawTransport = (input.profileData as { transportConfiguration?: unknown } | undefined)
      ?.transportConfiguration;
    const transportType = (input.transportType ??
      (rawTransport as { type?: TransportType } | null | undefined)?.type ??
      'DEFAULT') as TransportType;
    const transport = compileTransportConfiguration(rawTransport, transportType);
    if (
      existing &&
      existing.transport_type !== transportType &&
      (this.#deviceCount.get(id)?.n ?? 0) > 0
    ) {
      throw new ValidationError(
        "Can't change device profile transport type because devices referenced it!",
      );
    }

    const firmwareId = input.firmwareId?.id.toLowerCase() ?? null;
    const softwareId = input.softwareId?.id.toLowerCase() ?? null;
    for (const [kind, pkg] of [
      ['FIRMWARE', firmwareId],
      ['SOFTWARE', softwareId],
    ] as const) {
      if (pkg === null) continue;
      if (!this.deps.otaCheck) throw new ValidationError('OTA packages are not available');
      this.deps.otaCheck(kind, pkg, id);
    }

    const chainId = input.defaultRuleChainId?.id.toLowerCase() ?? null;
    if (chainId !== null && !this.deps.ruleChainExists?.(chainId))
      throw new ValidationError(
        `Invalid device profile: defaultRuleChainId: rule chain [${chainId}] is not found`,
      );
    const { provisionConfiguration: _pc, ...restData } = input.profileData ?? {};
    const profileData = {
      ...defaultProfileData(),
      ...restData,
      transportConfiguration: transport.json,
      provisionConfiguration: { type },
    };
    const row: ProfileRow = {
      id,
      tenant_id: this.deps.tenants.id,
      name: input.name,
      description: input.description ?? null,
      type: input.type ?? 'DEFAULT',
      transport_type: transportType,
      provision_type: type as ProvisionType,
      provision_device_key: key,
      provision_device_secret: secret,
      is_default: existing?.is_default ?? 0,
      profile_data: JSON.stringify(profileData),
      created_time: existing?.created_time ?? Date.now(),
      firmware_id: firmwareId,
      software_id: softwareId,
      default_rule_chain_id: chainId,
    };
    this.deps.db.transaction(() => {
      if (existing) this.#update.run(row);
      else this.#insert.run(row);
      // Prepared on first use: the column comes with migration 015.
      this.#setChain ??= this.deps.db.prepare(
        'UPDATE device_profile SET default_rule_chain_id = ? WHERE id = ?',
      );
      this.#setChain.run(chainId, id);
      if (existing || firmwareId || softwareId) {
        // Prepared on first use: the columns come with migration 004.
        this.#setOta ??= this.deps.db.prepare(
          'UPDATE device_profile SET firmware_id = ?, software_id = ? WHERE id = ?',
        );
        this.#setOta.run(firmwareId, softwareId, id);
      }
    })();
    this.#chainByName = undefined;
    this.deps.bus?.emit('deviceProfile.updated', { profileId: id });
    return toProfile(row);
  }

  get(id: string): DeviceProfile {
    const row = this.#byId.get(id);
    if (!row) throw new NotFoundError(`Device profile with id [${id}] is not found`);
    return toProfile(row);
  }

  find(id: string): DeviceProfile | undefined {
    const row = this.#byId.get(id);
    return row && toProfile(row);
  }

  getDefault(): DeviceProfile {
    const row = this.#default.get();
    if (!row) throw new Error('no default device profile');
    return toProfile(row);
  }

  /** ThingsBoard semantics: a device saved with a `type` gets the profile of that name, created if new. */
  findOrCreateByName(name: string): DeviceProfile {
    return toProfile(this.#byName.get(name) ?? this.#create(name, false));
  }

  /** The profile whose provisioning key is `key`, with its secret (provisioning only). */
  byProvisionKey(
    key: string,
  ): { readonly profile: DeviceProfile; readonly config: ProvisionConfiguration } | undefined {
    const row = this.#byKey.get(key);
    return (
      row && {
        profile: toProfile(row),
        config: {
          type: row.provision_type,
          provisionDeviceKey: row.provision_device_key,
          provisionDeviceSecret: row.provision_device_secret,
        },
      }
    );
  }

  /** The OTA package assigned to a profile, or null. */
  packageOf(profileId: string, type: OtaPackageType): string | null {
    const row = this.#byId.get(profileId);
    if (!row) return null;
    return (type === 'FIRMWARE' ? row.firmware_id : row.software_id) ?? null;
  }

  /** The profile's info (platform.md §3.5), the shape customer users may read. */
  info(id: string): DeviceProfileInfo {
    return toInfo(this.get(id));
  }

  defaultInfo(): DeviceProfileInfo {
    return toInfo(this.getDefault());
  }

  /**
   * ThingsBoard's `DELETE /api/deviceProfile/{id}`: refused (400) for the default profile and
   * for a profile that devices use, with ThingsBoard's messages. The profile's OTA packages are
   * deleted with it, as ThingsBoard's cascading foreign key does.
   */
  delete(id: string): void {
    const row = this.#byId.get(id);
    if (!row) throw new NotFoundError(`Device profile with id [${id}] is not found`);
    if (row.is_default === 1)
      throw new ValidationError('Deletion of Default Device Profile is prohibited!');
    if ((this.#deviceCount.get(id)?.n ?? 0) > 0)
      throw new ValidationError('The device profile referenced by the devices cannot be deleted!');
    const { db } = this.deps;
    try {
      db.transaction(() => {
        // The profile points at its own packages: drop that reference before deleting them.
        if (row.firmware_id || row.software_id) {
          this.#setOta ??= db.prepare(
            'UPDATE device_profile SET firmware_id = ?, software_id = ? WHERE id = ?',
          );
          this.#setOta.run(null, null, id);
        }
        this.deps.otaRemove?.(id);
        this.#delete.run(id);
      })();
    } catch (err) {
      if ((err as { code?: unknown }).code === 'SQLITE_CONSTRAINT_FOREIGNKEY') {
        throw new ValidationError(
          'The device profile is still referenced by other entities and cannot be deleted!',
          { cause: err },
        );
      }
      throw err;
    }
    this.#chainByName = undefined;
    this.deps.bus?.emit('deviceProfile.deleted', { profileId: id });
  }

  /** ThingsBoard's `POST /api/deviceProfile/{id}/default`: the profile new devices get. */
  /**
   * The `defaultRuleChainId` of the profile named `name` (a message's `deviceType`), or null.
   * Called per message: answered from memory.
   */
  defaultChainOf(name: string): string | null {
    return this.#chains().get(name) ?? null;
  }

  /** The same for the profile with this id (a device's `profileId`). */
  defaultChainOfProfile(profileId: string): string | null {
    this.#chains();
    return this.#chainById.get(profileId) ?? null;
  }

  #chains(): Map<string, string> {
    if (!this.#chainByName) {
      this.#chainByName = new Map();
      this.#chainById = new Map();
      const rows = this.deps.db
        .prepare<[], { id: string; name: string; chain: string }>(
          'SELECT id, name, default_rule_chain_id AS chain FROM device_profile WHERE default_rule_chain_id IS NOT NULL',
        )
        .all();
      for (const r of rows) {
        this.#chainByName.set(r.name, r.chain);
        this.#chainById.set(r.id, r.chain);
      }
    }
    return this.#chainByName;
  }

  setDefault(id: string): DeviceProfile {
    const row = this.#byId.get(id);
    if (!row) throw new NotFoundError(`Device profile with id [${id}] is not found`);
    if (row.is_default === 1) return toProfile(row);
    this.deps.db.transaction(() => {
      // @NOTE: clear first: a partial unique index allows one row with is_default = 1.
      this.#clearDefault.run();
      this.#makeDefault.run(id);
    })();
    // @NOTE: no `deviceProfile.updated`: only the flag changed, and that event makes the OTA
    // service re-check every device of the profile.
    return this.get(id);
  }

  /** `GET /api/deviceProfile/names`: every profile's id and name by name; `activeOnly` = used by devices. */
  names(activeOnly = false): EntityInfo[] {
    const rows = (activeOnly ? this.#activeNames : this.#names).all();
    return rows.map((r) => ({ id: entityId('DEVICE_PROFILE', r.id), name: r.name }));
  }

  list(q: PageQuery<ProfileSort>): PageData<DeviceProfile> {
    const { rows, total } = this.#page(q);
    return pageData(rows.map(toProfile), total, q);
  }

  /** `GET /api/deviceProfileInfos`; `transportType` keeps the profiles of that transport. */
  listInfos(
    q: PageQuery<ProfileSort>,
    filter: { transportType?: string } = {},
  ): PageData<DeviceProfileInfo> {
    const { rows, total } = this.#page(q, filter);
    return pageData(
      rows.map((r) => toInfo(toProfile(r))),
      total,
      q,
    );
  }

  #page(
    q: PageQuery<ProfileSort>,
    filter: { transportType?: string } = {},
  ): { rows: ProfileRow[]; total: number } {
    const params: Record<string, unknown> = {};
    const where: string[] = [];
    if (q.textSearch) {
      where.push(`lower(name) LIKE @search ESCAPE '\\'`);
      params.search = `%${q.textSearch.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    }
    if (filter.transportType) {
      where.push('transport_type = @transportType');
      params.transportType = filter.transportType;
    }
    const clause = where.length ? ` WHERE ${where.join(' AND ')}` : '';
    const { db } = this.deps;
    const total = (
      db.prepare(`SELECT count(*) AS n FROM device_profile${clause}`).get(params) as { n: number }
    ).n;
    const column = SORT_COLUMN[q.sortProperty ?? 'createdTime'];
    const rows = db
      .prepare(
        `SELECT * FROM device_profile${clause} ORDER BY ${column} ${q.sortOrder}, id ${q.sortOrder}
         LIMIT @limit OFFSET @offset`,
      )
      .all({ ...params, limit: q.pageSize, offset: q.page * q.pageSize }) as ProfileRow[];
    return { rows, total };
  }
}

function toInfo(p: DeviceProfile): DeviceProfileInfo {
  return {
    id: p.id,
    tenantId: p.tenantId,
    name: p.name,
    image: p.image,
    defaultDashboardId: p.defaultDashboardId,
    type: p.type,
    transportType: p.transportType,
  };
}

function emptyToNull(v: string | null | undefined): string | null {
  return v === undefined || v === null || v.trim() === '' ? null : v;
}

/** Two places for one setting: either may be given; when both are, they must be equal. */
function agree<T>(
  top: T | null | undefined,
  nested: T | null | undefined,
  name: string,
  problems: string[],
): T | undefined {
  const a = top ?? undefined;
  const b = nested ?? undefined;
  if (a !== undefined && b !== undefined && a !== b) {
    problems.push(
      `${name} differs from profileData.provisionConfiguration.${name === 'provisionType' ? 'type' : name}`,
    );
  }
  return a ?? b;
}

function toProfile(row: ProfileRow): DeviceProfile {
  const data = JSON.parse(row.profile_data) as Record<string, unknown>;
  return {
    id: entityId('DEVICE_PROFILE', row.id),
    createdTime: row.created_time,
    tenantId: entityId('TENANT', row.tenant_id),
    name: row.name,
    description: row.description,
    image: null,
    type: row.type,
    transportType: row.transport_type,
    provisionType: row.provision_type,
    provisionDeviceKey: row.provision_device_key,
    firmwareId: row.firmware_id ? entityId('OTA_PACKAGE', row.firmware_id) : null,
    softwareId: row.software_id ? entityId('OTA_PACKAGE', row.software_id) : null,
    defaultRuleChainId: row.default_rule_chain_id
      ? entityId('RULE_CHAIN', row.default_rule_chain_id)
      : null,
    defaultDashboardId: null,
    defaultQueueName: null,
    default: row.is_default === 1,
    profileData: {
      ...data,
      provisionConfiguration: {
        type: row.provision_type,
        provisionDeviceSecret: row.provision_device_secret,
      },
    },
  };
}
