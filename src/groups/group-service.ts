import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { AuditActor, AuditService } from '../audit/audit-service.js';
import type { Access } from '../auth/authorization.js';
import { type EntityId, entityId } from '../common/entity.js';
import { validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { EntityOwners } from './entity-owners.js';
import { GROUP_TYPES, type GroupRow, GroupStore, type GroupType } from './group-store.js';

export { GROUP_TYPES, type GroupType } from './group-store.js';

/** ThingsBoard PE's EntityGroup JSON (platform.md §6.3). */
export interface EntityGroup {
  readonly id: EntityId<'ENTITY_GROUP'>;
  readonly createdTime: number;
  readonly type: GroupType;
  readonly name: string;
  readonly ownerId: EntityId<'TENANT' | 'CUSTOMER'>;
  readonly groupAll: boolean;
  readonly additionalInfo: null;
  readonly configuration: null;
}

/** Who asks: a customer id for a customer user, null for the tenant administrator. */
export type GroupViewer = { readonly customerId: string | null };

const groupBody = z.object({
  name: z.string().trim().min(1, 'Entity group name should be specified!').max(255),
  type: z.enum(GROUP_TYPES),
  ownerId: z
    .object({ entityType: z.enum(['TENANT', 'CUSTOMER']), id: z.string().uuid() })
    .nullish(),
});

const idList = z.array(z.string().uuid()).max(10_000);

const shareBody = z.object({
  ownerId: z.object({ entityType: z.literal('CUSTOMER'), id: z.string().uuid() }),
  allUserGroup: z.literal(true, {
    error: 'only sharing with all users of a customer is supported',
  }),
  readElseWrite: z.boolean(),
  userGroupId: z.null().optional(),
  roleIds: z.null().optional(),
});

export const ALL_GROUP_NAME = 'All';

export interface GroupServiceDeps {
  readonly db: Db;
  readonly tenants: TenantService;
  readonly audit: AuditService;
  /** Whether a customer exists (group owner and share target). */
  readonly customerExists: (id: string) => boolean;
}

/**
 * Entity groups (PE, platform.md §6.3): per owner (the tenant or a customer) and type, a virtual
 * `All` group computed from ownership, plus custom groups holding entities of the same owner, as
 * PE requires. A custom group can be shared with all users of a customer, read-only or for
 * writing; that share is what `deviceShare` and `dashboardSharedWith` report to authorization.
 * Access rules are the transport's; this service checks data.
 */
export class GroupService {
  readonly #store: GroupStore;
  readonly #owners: EntityOwners;

  constructor(private readonly deps: GroupServiceDeps) {
    this.#store = new GroupStore(deps.db);
    this.#owners = new EntityOwners(deps.db);
  }

  /** `POST /api/entityGroup`: a custom group of the tenant (default) or of a customer. */
  create(body: unknown, actor: AuditActor): EntityGroup {
    const input = validate(groupBody, body, 'entity group');
    if (input.name === ALL_GROUP_NAME)
      throw new ValidationError(`Entity group name '${ALL_GROUP_NAME}' is reserved`);
    const customerId = input.ownerId?.entityType === 'CUSTOMER' ? input.ownerId.id : null;
    if (input.ownerId?.entityType === 'TENANT' && input.ownerId.id !== this.deps.tenants.id)
      throw new NotFoundError(`Tenant with id [${input.ownerId.id}] is not found`);
    if (customerId !== null && !this.deps.customerExists(customerId))
      throw new NotFoundError(`Customer with id [${customerId}] is not found`);
    const ownerId = customerId ?? this.deps.tenants.id;
    if (this.#store.ofOwner(ownerId, input.type).some((g) => g.name === input.name))
      throw new ConflictError('Entity group with such name already exists!');
    const row: GroupRow = {
      id: randomUUID(),
      type: input.type,
      name: input.name,
      owner_type: customerId === null ? 'TENANT' : 'CUSTOMER',
      owner_id: ownerId,
      created_time: Date.now(),
    };
    this.#store.insert(row);
    const group = toGroup(row);
    this.#audit('ADDED', group, actor);
    return group;
  }

  /** A group by id, custom or `All`; NotFoundError if unknown or `viewer` may not see it. */
  get(id: string, viewer: GroupViewer): EntityGroup {
    const group = this.#find(id);
    if (!group || !this.#canSee(group, viewer))
      throw new NotFoundError(`Entity group with id [${id}] is not found`);
    return group;
  }

  /**
   * `GET /api/entityGroups/{type}`: the viewer owner's `All` group and custom groups, and for a
   * customer user also the groups shared with its customer.
   */
  list(type: string, viewer: GroupViewer): EntityGroup[] {
    const t = groupType(type);
    const ownerId = viewer.customerId ?? this.deps.tenants.id;
    const own = [
      this.#allGroup(t, viewer.customerId),
      ...this.#store.ofOwner(ownerId, t).map(toGroup),
    ];
    if (viewer.customerId === null) return own;
    const shared = this.#store.sharedWith(viewer.customerId, t).map(toGroup);
    return [...own, ...shared.filter((s) => !own.some((o) => o.id.id === s.id.id))];
  }

  /** Entity ids of a group that still exist and belong to the group owner. */
  entities(id: string, viewer: GroupViewer): Array<EntityId> {
    const group = this.get(id, viewer);
    const owner = ownerCustomer(group);
    const ids = group.groupAll
      ? this.#owners.owned(group.type, owner)
      : this.#store.members(id).filter((e) => this.#owners.ownerOf(group.type, e) === owner);
    return ids.map((e) => entityId(group.type, e));
  }

  /** Deletes a custom group (its members and shares go with it); `All` cannot be deleted. */
  delete(id: string, actor: AuditActor): void {
    const group = this.#custom(id);
    this.#store.delete(id);
    this.#audit('DELETED', group, actor);
  }

  /** Adds entities owned by the group owner; an unknown id or another owner's entity is 400. */
  addEntities(id: string, body: unknown, actor: AuditActor): void {
    const group = this.#custom(id);
    const ids = validate(idList, body, 'entity ids');
    const owner = ownerCustomer(group);
    for (const e of ids) {
      const found = this.#owners.ownerOf(group.type, e);
      if (found === undefined)
        throw new NotFoundError(`${capitalized(group.type)} with id [${e}] is not found`);
      if (found !== owner)
        throw new ValidationError(
          `Entity [${e}] is not owned by the owner of entity group [${id}]`,
        );
    }
    this.#store.addMembers(id, ids, Date.now());
    this.#audit('ADDED_TO_ENTITY_GROUP', group, actor, { entityIds: ids });
  }

  removeEntities(id: string, body: unknown, actor: AuditActor): void {
    const group = this.#custom(id);
    const ids = validate(idList, body, 'entity ids');
    this.#store.removeMembers(id, ids);
    this.#audit('REMOVED_FROM_ENTITY_GROUP', group, actor, { entityIds: ids });
  }

  /** `POST /api/entityGroup/{id}/share` (ShareGroupRequest): all users of a customer. */
  share(id: string, body: unknown, actor: AuditActor): void {
    const group = this.#custom(id);
    const input = validate(shareBody, body, 'share request');
    const customerId = input.ownerId.id;
    if (!this.deps.customerExists(customerId))
      throw new NotFoundError(`Customer with id [${customerId}] is not found`);
    this.#store.share(id, customerId, input.readElseWrite, Date.now());
    this.#audit('UPDATED', group, actor, {
      sharedWith: customerId,
      readElseWrite: input.readElseWrite,
    });
  }

  /**
   * The best level at which a device reaches `customerId` through shared DEVICE groups: `write`
   * if any such group is shared for writing, `read` if only read-only, else `none`. A group
   * counts only while the device still belongs to the group's owner (PE drops an entity from the
   * old owner's groups on owner change).
   */
  deviceShare(customerId: string, device: { id: string; customerId: string | null }): Access {
    let best: Access = 'none';
    for (const s of this.#store.sharesOfEntity(device.id, 'DEVICE', customerId)) {
      const owner = s.owner_type === 'TENANT' ? null : s.owner_id;
      if (owner !== device.customerId) continue;
      if (s.read_else_write === 0) return 'write';
      best = 'read';
    }
    return best;
  }

  /**
   * Ids of devices in DEVICE groups shared with `customerId`: the candidates of `deviceShare`
   * for lists (alarms of every device a customer user sees); callers still decide per device.
   */
  sharedDeviceIds(customerId: string): string[] {
    const ids = new Set<string>();
    for (const g of this.#store.sharedWith(customerId, 'DEVICE')) {
      for (const id of this.#store.members(g.id)) ids.add(id);
    }
    return [...ids];
  }

  /** Whether a dashboard is in a DASHBOARD group shared with `customerId` (read or write). */
  dashboardSharedWith(customerId: string, dashboardId: string): boolean {
    return this.#store.sharesOfEntity(dashboardId, 'DASHBOARD', customerId).length > 0;
  }

  #find(id: string): EntityGroup | undefined {
    const row = this.#store.get(id);
    if (row) return toGroup(row);
    for (const type of GROUP_TYPES) {
      if (allGroupId(type, this.deps.tenants.id) === id) return this.#allGroup(type, null);
    }
    // An `All` id of a customer: derived, so match it against the owners that exist.
    return this.#owners
      .owned('CUSTOMER', null)
      .flatMap((c) => GROUP_TYPES.map((t) => ({ c, t })))
      .filter(({ c, t }) => allGroupId(t, c) === id)
      .map(({ c, t }) => this.#allGroup(t, c))[0];
  }

  /** A custom group for a write; the `All` group is not manually editable (400). */
  #custom(id: string): EntityGroup {
    const row = this.#store.get(id);
    if (row) return toGroup(row);
    if (this.#find(id))
      throw new ValidationError(`The '${ALL_GROUP_NAME}' group cannot be changed`);
    throw new NotFoundError(`Entity group with id [${id}] is not found`);
  }

  #canSee(group: EntityGroup, viewer: GroupViewer): boolean {
    if (viewer.customerId === null) return true;
    if (ownerCustomer(group) === viewer.customerId) return true;
    return this.#store.sharedWith(viewer.customerId, group.type).some((g) => g.id === group.id.id);
  }

  #allGroup(type: GroupType, customerId: string | null): EntityGroup {
    const ownerId = customerId ?? this.deps.tenants.id;
    return {
      id: entityId('ENTITY_GROUP', allGroupId(type, ownerId)),
      createdTime: this.deps.tenants.tenant.createdTime,
      type,
      name: ALL_GROUP_NAME,
      ownerId: entityId(customerId === null ? 'TENANT' : 'CUSTOMER', ownerId),
      groupAll: true,
      additionalInfo: null,
      configuration: null,
    };
  }

  #audit(
    actionType:
      | 'ADDED'
      | 'DELETED'
      | 'UPDATED'
      | 'ADDED_TO_ENTITY_GROUP'
      | 'REMOVED_FROM_ENTITY_GROUP',
    group: EntityGroup,
    user: AuditActor,
    actionData?: Record<string, unknown>,
  ): void {
    this.deps.audit.record({
      actionType,
      entityId: group.id,
      entityName: group.name,
      user,
      actionData: actionData ?? null,
    });
  }
}

function toGroup(row: GroupRow): EntityGroup {
  return {
    id: entityId('ENTITY_GROUP', row.id),
    createdTime: row.created_time,
    type: row.type,
    name: row.name,
    ownerId: entityId(row.owner_type, row.owner_id),
    groupAll: false,
    additionalInfo: null,
    configuration: null,
  };
}

function ownerCustomer(group: EntityGroup): string | null {
  return group.ownerId.entityType === 'CUSTOMER' ? group.ownerId.id : null;
}

function groupType(raw: string): GroupType {
  if ((GROUP_TYPES as readonly string[]).includes(raw)) return raw as GroupType;
  throw new ValidationError(`groupType must be one of ${GROUP_TYPES.join(', ')}`);
}

function capitalized(type: GroupType): string {
  return type.charAt(0) + type.slice(1).toLowerCase();
}

/**
 * The id of a virtual `All` group: a name-based UUID (RFC 9562 §5.5, version 5 layout) of owner
 * and type, stable across restarts without a row.
 */
export function allGroupId(type: GroupType, ownerId: string): string {
  const h = createHash('sha1').update(`entity-group-all:${ownerId}:${type}`).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
