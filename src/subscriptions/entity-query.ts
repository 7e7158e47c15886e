/**
 * Entity filters of the WebSocket entity and alarm queries (platform reference §4.4:
 * `singleEntity`, `entityList`, `entityName`, `entityType`, `deviceType`), resolved to the
 * devices the caller may see. Devices are the gateway's only entities with telemetry, so other
 * entity types match nothing.
 */

import type { Principal } from '../auth/auth-service.js';
import { deviceAccess, type SharedDeviceAccess } from '../auth/authorization.js';
import { NULL_UUID } from '../common/entity.js';
import type { Device, DeviceService } from '../devices/device-service.js';
import { NotFoundError, ValidationError } from '../errors.js';

/** Most entities one subscription follows (ThingsBoard's `maxEntitiesPerDataSubscription`). */
export const MAX_ENTITIES = 10_000;
const SCAN_PAGE = 1000;

export const ENTITY_FILTER_TYPES = [
  'singleEntity',
  'entityList',
  'entityName',
  'entityType',
  'deviceType',
] as const;

export type EntityFilter =
  | { readonly type: 'singleEntity'; readonly entityType: string; readonly id: string }
  | { readonly type: 'entityList'; readonly entityType: string; readonly ids: readonly string[] }
  | { readonly type: 'entityName'; readonly entityType: string; readonly prefix: string }
  | { readonly type: 'entityType'; readonly entityType: string }
  | {
      readonly type: 'deviceType';
      readonly deviceTypes: readonly string[];
      readonly namePrefix: string;
    };

type Raw = Record<string, unknown>;

const isObj = (v: unknown): v is Raw => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** Reads ThingsBoard's entity filter JSON; ValidationError names what is wrong. */
export function parseEntityFilter(raw: unknown): EntityFilter {
  if (!isObj(raw)) throw new ValidationError('entityFilter is required');
  switch (raw.type) {
    case 'singleEntity': {
      const e = raw.singleEntity;
      if (!isObj(e) || !str(e.id)) throw new ValidationError('singleEntity.id is required');
      return { type: 'singleEntity', entityType: str(e.entityType), id: str(e.id).toLowerCase() };
    }
    case 'entityList': {
      if (!Array.isArray(raw.entityList)) throw new ValidationError('entityList is required');
      return {
        type: 'entityList',
        entityType: str(raw.entityType),
        ids: raw.entityList.map((id) => str(id).toLowerCase()).filter(Boolean),
      };
    }
    case 'entityName':
      return {
        type: 'entityName',
        entityType: str(raw.entityType),
        prefix: str(raw.entityNameFilter),
      };
    case 'entityType':
      return { type: 'entityType', entityType: str(raw.entityType) };
    case 'deviceType': {
      // ThingsBoard 3.x sends `deviceType`, 4.x `deviceTypes`.
      const list = Array.isArray(raw.deviceTypes) ? raw.deviceTypes.map(str) : [];
      if (str(raw.deviceType)) list.push(str(raw.deviceType));
      return {
        type: 'deviceType',
        deviceTypes: list.filter(Boolean),
        namePrefix: str(raw.deviceNameFilter),
      };
    }
    default:
      throw new ValidationError(
        `entityFilter.type ${JSON.stringify(raw.type)} is not supported (supported: ${ENTITY_FILTER_TYPES.join(', ')})`,
      );
  }
}

export interface EntityResolverDeps {
  readonly devices: Pick<DeviceService, 'get' | 'list'>;
  readonly shared: SharedDeviceAccess;
}

/** Resolves filters to visible devices, in creation order, at most MAX_ENTITIES. */
export class EntityResolver {
  constructor(private readonly deps: EntityResolverDeps) {}

  canRead(principal: Principal, device: Device): boolean {
    const ref = { id: device.id.id, customerId: ownerOf(device) };
    return deviceAccess(principal, ref, this.deps.shared) !== 'none';
  }

  /** One device when the caller may see it, else undefined (unknown and foreign look alike). */
  device(principal: Principal, id: string): Device | undefined {
    const d = this.#get(id);
    return d && this.canRead(principal, d) ? d : undefined;
  }

  resolve(principal: Principal, filter: EntityFilter): Device[] {
    switch (filter.type) {
      case 'singleEntity':
        return filter.entityType === 'DEVICE'
          ? [this.device(principal, filter.id)].filter((d): d is Device => d !== undefined)
          : [];
      case 'entityList': {
        if (filter.entityType !== 'DEVICE') return [];
        const out: Device[] = [];
        for (const id of new Set(filter.ids)) {
          const d = this.device(principal, id);
          if (d) out.push(d);
          if (out.length >= MAX_ENTITIES) break;
        }
        return out;
      }
      case 'entityName': {
        if (filter.entityType !== 'DEVICE') return [];
        const p = filter.prefix.toLowerCase();
        return this.#scan(principal, (d) => d.name.toLowerCase().startsWith(p));
      }
      case 'entityType':
        return filter.entityType === 'DEVICE' ? this.#scan(principal, () => true) : [];
      case 'deviceType': {
        const types = new Set(filter.deviceTypes);
        const p = filter.namePrefix.toLowerCase();
        return this.#scan(
          principal,
          (d) => (types.size === 0 || types.has(d.type)) && d.name.toLowerCase().startsWith(p),
        );
      }
    }
  }

  #get(id: string): Device | undefined {
    try {
      return this.deps.devices.get(id);
    } catch (err) {
      // An unknown or malformed id is simply not visible.
      if (err instanceof NotFoundError || err instanceof ValidationError) return undefined;
      throw err;
    }
  }

  #scan(principal: Principal, match: (d: Device) => boolean): Device[] {
    const out: Device[] = [];
    for (let page = 0; ; page++) {
      const p = this.deps.devices.list({ pageSize: SCAN_PAGE, page, sortOrder: 'ASC' });
      for (const d of p.data) {
        if (match(d) && this.canRead(principal, d)) out.push(d);
        if (out.length >= MAX_ENTITIES) return out;
      }
      if (!p.hasNext) return out;
    }
  }
}

/** The owning customer of a device as authorization sees it (null: the tenant). */
export function ownerOf(device: Device): string | null {
  const id = device.customerId.id;
  return id === NULL_UUID ? null : id;
}
