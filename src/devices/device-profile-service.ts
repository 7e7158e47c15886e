import { randomUUID } from 'node:crypto';
import { type EntityId, entityId } from '../common/entity.js';
import type { Db } from '../db/open.js';
import { NotFoundError } from '../errors.js';
import type { TenantService } from '../tenant/tenant-service.js';

export const DEFAULT_PROFILE_NAME = 'Default';

export type ProvisionType =
  | 'DISABLED'
  | 'ALLOW_CREATE_NEW_DEVICES'
  | 'CHECK_PRE_PROVISIONED_DEVICES';

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
}

export interface DeviceProfile {
  readonly id: EntityId<'DEVICE_PROFILE'>;
  readonly createdTime: number;
  readonly tenantId: EntityId<'TENANT'>;
  readonly name: string;
  readonly description: string | null;
  readonly type: string;
  readonly transportType: string;
  readonly provisionType: ProvisionType;
  readonly provisionDeviceKey: string | null;
  readonly default: boolean;
  readonly profileData: unknown;
}

function defaultProfileData(): object {
  return {
    configuration: { type: 'DEFAULT' },
    transportConfiguration: { type: 'DEFAULT' },
    provisionConfiguration: { type: 'DISABLED', provisionDeviceSecret: null },
    alarms: null,
  };
}

/** Device profiles. The full REST surface (create, edit, alarm rules) comes with later issues. */
export class DeviceProfileService {
  readonly #byId;
  readonly #byName;
  readonly #default;
  readonly #insert;

  constructor(private readonly deps: { db: Db; tenants: TenantService }) {
    const db = deps.db;
    this.#byId = db.prepare<[string], ProfileRow>('SELECT * FROM device_profile WHERE id = ?');
    this.#byName = db.prepare<[string], ProfileRow>('SELECT * FROM device_profile WHERE name = ?');
    this.#default = db.prepare<[], ProfileRow>('SELECT * FROM device_profile WHERE is_default = 1');
    this.#insert = db.prepare<[ProfileRow]>(
      `INSERT INTO device_profile (id, tenant_id, name, description, type, transport_type,
         provision_type, provision_device_key, provision_device_secret, is_default, profile_data, created_time)
       VALUES (@id, @tenant_id, @name, @description, @type, @transport_type, @provision_type,
         @provision_device_key, @provision_device_secret, @is_default, @profile_data, @created_time)`,
    );
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
    };
    this.#insert.run(row);
    return row;
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
}

function toProfile(row: ProfileRow): DeviceProfile {
  return {
    id: entityId('DEVICE_PROFILE', row.id),
    createdTime: row.created_time,
    tenantId: entityId('TENANT', row.tenant_id),
    name: row.name,
    description: row.description,
    type: row.type,
    transportType: row.transport_type,
    provisionType: row.provision_type,
    provisionDeviceKey: row.provision_device_key,
    default: row.is_default === 1,
    profileData: JSON.parse(row.profile_data),
  };
}
