import { createHash, randomBytes, randomUUID, timingSafeEqual, X509Certificate } from 'node:crypto';
import { z } from 'zod';
import type { AuditActor, AuditService } from '../audit/audit-service.js';
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
import type { DeviceProfileService, OtaPackageCheck } from './device-profile-service.js';
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
  readonly firmwareId: EntityId<'OTA_PACKAGE'> | null;
  readonly softwareId: EntityId<'OTA_PACKAGE'> | null;
  readonly additionalInfo: unknown;
  readonly version: number;
}

export interface DeviceCredentials {
  readonly id: { readonly id: string };
  readonly createdTime: number;
  readonly deviceId: EntityId<'DEVICE'>;
  readonly credentialsType: CredentialsType;
  readonly credentialsId: string;
  /**
   * MQTT_BASIC: JSON text `{"clientId","userName","password"}`; X509_CERTIFICATE: the
   * certificate's base64 body (PEM without header, footer and line breaks); null for ACCESS_TOKEN.
   */
  readonly credentialsValue: string | null;
}

export type CredentialsType = 'ACCESS_TOKEN' | 'MQTT_BASIC' | 'X509_CERTIFICATE';

export interface MqttBasicCredentials {
  readonly clientId?: string | null;
  readonly userName?: string | null;
  readonly password?: string | null;
}

/**
 * Outcome of MQTT CONNECT credential resolution (reference §8.2); the MQTT adapter maps each
 * refusal to its CONNACK code (§8.3).
 */
export type MqttAuthResult =
  | { readonly kind: 'device'; readonly device: DeviceIdentity }
  | { readonly kind: 'provision' }
  | {
      readonly kind: 'refused';
      readonly reason: MqttRefusal;
    };

/**
 * Why a CONNECT was refused. The two certificate reasons answer as `not-authorized` does
 * (reference §8.3: an invalid or unknown X.509 certificate is CONNACK 5 / 0x87).
 */
export type MqttRefusal =
  | 'bad-credentials'
  | 'unknown-client-id'
  | 'not-authorized'
  | 'unknown-certificate'
  | 'certificate-not-valid-now';

/** What a transport needs after authenticating a device: kept small, looked up per connection. */
export interface DeviceIdentity {
  readonly rid: number;
  readonly id: string;
  readonly name: string;
  readonly profileId: string;
  /** `additionalInfo.gateway === true`: may use the gateway MQTT API for child devices. */
  readonly isGateway: boolean;
}

const TOKEN_CACHE_SIZE = 10_000;

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
  firmwareId: idRef.optional().nullable(),
  softwareId: idRef.optional().nullable(),
});

const mqttBasicValue = z
  .object({
    clientId: z.string().min(1).max(128).nullish(),
    userName: z.string().min(1).max(128).nullish(),
    password: z.string().max(128).nullish(),
  })
  .refine((v) => v.clientId || v.userName, 'clientId or userName is required')
  .refine((v) => v.userName || !v.password, 'a password needs a userName');

// A body without `credentialsType` is an access token, as it was before MQTT basic credentials.
const withDefaultType = (body: unknown) =>
  body !== null && typeof body === 'object' && !('credentialsType' in body)
    ? { ...body, credentialsType: 'ACCESS_TOKEN' }
    : body;

const credentialsBody = z.preprocess(
  withDefaultType,
  z.discriminatedUnion('credentialsType', [
    z.object({
      deviceId: idRef,
      credentialsType: z.literal('ACCESS_TOKEN'),
      credentialsId: z.string(),
    }),
    z.object({
      deviceId: idRef,
      credentialsType: z.literal('MQTT_BASIC'),
      credentialsValue: z.union([
        z.string().transform((text, ctx) => {
          try {
            return JSON.parse(text) as unknown;
          } catch {
            ctx.addIssue({ code: 'custom', message: 'must be a JSON object' });
            return z.NEVER;
          }
        }),
        z.record(z.string(), z.unknown()),
      ]),
    }),
    z.object({
      deviceId: idRef,
      credentialsType: z.literal('X509_CERTIFICATE'),
      credentialsValue: z.string({ error: 'must be the PEM of the device certificate' }),
    }),
  ]),
);

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----([^-]*)-----END CERTIFICATE-----/g;

/**
 * X.509 credentials as ThingsBoard stores them (reference §8.2): the certificate's base64 body
 * (the PEM without header, footer and line breaks) and, as the lookup key, the SHA3-256 hex of
 * that text. `pem` is one PEM certificate, or its base64 body alone; anything that is not
 * exactly one X.509 certificate is a ValidationError. The body is the DER re-encoded, so that it
 * is the same text a TLS handshake's certificate gives (`x509CredentialsOf`).
 */
export function x509Credentials(pem: string): { credentialsId: string; credentialsValue: string } {
  const blocks = [...pem.matchAll(PEM_CERTIFICATE)];
  const rest = pem.replace(PEM_CERTIFICATE, '').trim();
  const body = blocks.length === 0 ? pem : (blocks[0]?.[1] ?? '');
  const problem = 'credentialsValue must be one PEM X.509 certificate';
  if (blocks.length > 1 || (blocks.length === 1 && rest !== '')) throw new ValidationError(problem);
  const base64 = body.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(base64)) throw new ValidationError(problem);
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(Buffer.from(base64, 'base64'));
  } catch {
    throw new ValidationError(problem);
  }
  return x509CredentialsOf(cert.raw);
}

/** `x509Credentials` of a certificate's DER bytes (as a TLS peer presented it). */
export function x509CredentialsOf(der: Buffer): {
  credentialsId: string;
  credentialsValue: string;
} {
  const credentialsValue = der.toString('base64');
  const credentialsId = createHash('sha3-256').update(credentialsValue).digest('hex');
  return { credentialsId, credentialsValue };
}

/** Lookup key of MQTT_BASIC credentials: a hash of client id and user name, as ThingsBoard keys them. */
export function mqttBasicKey(
  clientId: string | null | undefined,
  userName: string | null | undefined,
): string {
  return createHash('sha256')
    .update(`${clientId ?? ''}\u0000${userName ?? ''}`)
    .digest('hex');
}

function samePassword(given: string | undefined, stored: string | null | undefined): boolean {
  if (!stored) return true;
  if (given === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(stored);
  return a.length === b.length && timingSafeEqual(a, b);
}

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
  /** Validates `firmwareId`/`softwareId` (OTA domain); without it those fields are refused. */
  readonly otaCheck?: OtaPackageCheck;
  /** Whether a customer exists (owner changes); without it every owner change is refused. */
  readonly customerExists?: (customerId: string) => boolean;
  /** Records owner changes; optional so that domain tests can leave it out. */
  readonly audit?: AuditService;
  /**
   * X.509 device certificates outside their validity period are accepted (ThingsBoard's
   * `transport.mqtt.ssl.skip_validity_check_for_client_cert`); refused when false or absent.
   */
  readonly skipCertificateValidity?: boolean;
  /** The clock certificate validity is checked against (default Date.now). */
  readonly now?: () => number;
  /**
   * Called inside the transaction of a device's creation, update or deletion, after its writes:
   * what must survive a crash with the change (ENTITY_ACTION notifications) is written here and
   * commits with it or not at all.
   */
  readonly inCommit?: (action: DeviceAction, device: Device) => void;
}

/** The entity actions of a device (ThingsBoard's ENTITY_ACTION trigger: created, updated, deleted). */
export type DeviceAction = 'created' | 'updated' | 'deleted';

/** The audit action an owner change is recorded under (ThingsBoard's `ActionType`). */
export type OwnerAction = 'CHANGE_OWNER' | 'ASSIGNED_TO_CUSTOMER' | 'UNASSIGNED_FROM_CUSTOMER';

/** A device's id and owner: what authorization decides from. `customerId` null = the tenant. */
export interface DeviceOwner {
  readonly id: string;
  readonly name: string;
  readonly customerId: string | null;
}

export class DeviceService {
  readonly #store: DeviceStore;
  /**
   * Access token → device, for the device API's per-request lookup (HTTP and CoAP carry the token
   * in every request). Cleared whenever a device, its token or its identity changes.
   */
  readonly #byToken = new Map<string, DeviceIdentity>();
  /** Id → device, for the per-message lookups (rule engine, upstream); cleared like `#byToken`. */
  readonly #byId = new Map<string, DeviceIdentity>();
  /** Profile ids as one string each, for the identities. */
  readonly #profileIds = new Map<string, string>();

  constructor(private readonly deps: DeviceServiceDeps) {
    this.#store = new DeviceStore(deps.db);
  }

  /** Creates a device (no `id` in the body) or updates one (with `id`). ThingsBoard's `POST /api/device`. */
  save(body: unknown, opts: { accessToken?: string } = {}): Device {
    const input = validate(deviceBody, body, 'device');
    const profileId = this.#resolveProfile(input.deviceProfileId?.id, input.type ?? undefined);
    const additionalInfo = input.additionalInfo ? JSON.stringify(input.additionalInfo) : null;
    const label = input.label ?? null;
    const firmwareId = input.firmwareId?.id.toLowerCase() ?? null;
    const softwareId = input.softwareId?.id.toLowerCase() ?? null;
    this.#checkOta(firmwareId, softwareId, profileId);

    if (input.id) {
      const id = input.id.id.toLowerCase();
      const existing = this.#store.byId(id);
      if (!existing) throw new NotFoundError(`Device with id [${id}] is not found`);
      this.#checkName(input.name, existing.rid);
      const device = this.deps.db.transaction(() => {
        this.#store.update({
          id,
          name: input.name,
          label,
          device_profile_id: profileId,
          additional_info: additionalInfo,
        });
        if (firmwareId || softwareId || existing.firmware_id || existing.software_id)
          this.#store.setOtaPackages(existing.rid, firmwareId, softwareId);
        if (opts.accessToken !== undefined)
          this.#setToken(existing.rid, checkToken(opts.accessToken));
        const updated = this.get(id);
        this.deps.inCommit?.('updated', updated);
        return updated;
      })();
      this.#forget();
      this.deps.bus.emit('device.updated', { device: { id, name: device.name }, entity: device });
      return device;
    }

    this.#checkName(input.name);
    const token = checkToken(opts.accessToken ?? randomAccessToken());
    if (this.#store.tokenInUse(token)) throw duplicateToken();
    const id = randomUUID();
    const now = Date.now();
    const created = this.deps.db.transaction(() => {
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
      if (firmwareId || softwareId) this.#store.setOtaPackages(rid, firmwareId, softwareId);
      this.#store.insertCredentials({
        id: randomUUID(),
        device_rid: rid,
        credentials_type: 'ACCESS_TOKEN',
        credentials_id: token,
        credentials_value: null,
        created_time: now,
      });
      const device = this.get(id);
      this.deps.inCommit?.('created', device);
      return device;
    })();
    this.deps.bus.emit('device.created', { device: { id, name: input.name }, entity: created });
    return created;
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
    const device = toDevice(view);
    this.deps.db.transaction(() => {
      this.#store.delete(id);
      this.deps.inCommit?.('deleted', device);
    })();
    this.#forget();
    this.deps.bus.emit('device.deleted', { device: { id, name: view.name }, entity: device });
  }

  list(q: PageQuery<DeviceSort>): PageData<Device> {
    const { rows, total } = this.#store.page(q);
    return pageData(rows.map(toDevice), total, q);
  }

  /** `GET /api/customer/{customerId}/devices`: the devices a customer owns, one page. */
  listByCustomer(customerId: string, q: PageQuery<DeviceSort>): PageData<Device> {
    const { rows, total } = this.#store.page(q, { customerId: customerId.toLowerCase() });
    return pageData(rows.map(toDevice), total, q);
  }

  /** Ids of every device of one profile. */
  idsOfProfile(profileId: string): string[] {
    return this.#store.idsOfProfile(profileId);
  }

  /** A device's owner; NotFoundError for an unknown id. */
  owner(id: string): DeviceOwner {
    const v = this.#view(id.toLowerCase());
    return { id: v.id, name: v.name, customerId: v.customer_id };
  }

  /** A device's owner by name; NotFoundError for an unknown name. */
  ownerByName(name: string): DeviceOwner {
    const v = this.#store.byName(name);
    if (!v) throw new NotFoundError(`Device with name [${name}] is not found`);
    return { id: v.id, name: v.name, customerId: v.customer_id };
  }

  /**
   * Makes a customer (`customerId`) or the tenant (null) the owner of a device: the PE owner
   * change and CE's assign/unassign (platform reference §3.6, §6.3). The customer must exist.
   * Emits `device.owner` and records `action` in the audit log, also when nothing changes (as
   * ThingsBoard logs a repeated assign).
   */
  setOwner(
    id: string,
    customerId: string | null,
    actor: AuditActor,
    action: OwnerAction = 'CHANGE_OWNER',
  ): Device {
    const view = this.#view(id.toLowerCase());
    const target = customerId?.toLowerCase() ?? null;
    if (target !== null && !this.deps.customerExists?.(target))
      throw new NotFoundError(`Customer with id [${customerId}] is not found`);
    const previous = view.customer_id;
    if (previous !== target) this.#store.setCustomer(view.id, target);
    const device = this.get(view.id);
    this.deps.audit?.record({
      actionType: action,
      entityId: device.id,
      entityName: device.name,
      user: actor,
      actionData: { previousCustomerId: previous, customerId: target },
    });
    if (previous !== target) {
      this.deps.bus.emit('device.owner', {
        device: { id: view.id, name: view.name },
        customerId: target,
        previousCustomerId: previous,
      });
    }
    return device;
  }

  credentials(id: string): DeviceCredentials {
    const view = this.#view(id);
    const row = this.#store.credentials(view.rid);
    if (!row) throw new NotFoundError(`Device credentials for device [${id}] are not found`);
    return toCredentials(row, view.id);
  }

  /**
   * ThingsBoard's `POST /api/device/credentials`: replaces a device's credentials with an access
   * token, MQTT basic credentials (client id / user name / password) or an X.509 certificate
   * (`credentialsValue` = its PEM; see `x509Credentials`).
   */
  updateCredentials(body: unknown): DeviceCredentials {
    const input = validate(credentialsBody, body, 'device credentials');
    const id = input.deviceId.id.toLowerCase();
    const view = this.#view(id);
    if (input.credentialsType === 'ACCESS_TOKEN') {
      this.#setToken(view.rid, checkToken(input.credentialsId));
    } else {
      this.#store.updateCredentials({ device_rid: view.rid, ...this.#storedForm(input, view.rid) });
    }
    this.#forget();
    this.deps.bus.emit('device.credentials', { deviceId: id });
    return this.credentials(id);
  }

  /**
   * Throws the ValidationError that `updateCredentials` would for MQTT basic or X.509 credentials
   * of a device not created yet (invalid, or another device's), writing nothing: provisioning
   * checks a device's credentials before it creates the device.
   */
  checkCredentials(
    credentialsType: 'MQTT_BASIC' | 'X509_CERTIFICATE',
    credentialsValue: unknown,
  ): void {
    const input = validate(
      credentialsBody,
      { deviceId: { id: NULL_UUID }, credentialsType, credentialsValue },
      'device credentials',
    );
    if (input.credentialsType !== 'ACCESS_TOKEN') this.#storedForm(input);
  }

  /** MQTT basic or X.509 credentials as stored; ValidationError when invalid or another device's. */
  #storedForm(
    input: Exclude<z.infer<typeof credentialsBody>, { credentialsType: 'ACCESS_TOKEN' }>,
    rid?: number,
  ): Pick<CredentialsRow, 'credentials_type' | 'credentials_id' | 'credentials_value'> {
    let row: Pick<CredentialsRow, 'credentials_type' | 'credentials_id' | 'credentials_value'>;
    if (input.credentialsType === 'X509_CERTIFICATE') {
      const cert = x509Credentials(input.credentialsValue);
      row = {
        credentials_type: 'X509_CERTIFICATE',
        credentials_id: cert.credentialsId,
        credentials_value: cert.credentialsValue,
      };
    } else {
      const value = validate(mqttBasicValue, input.credentialsValue, 'credentialsValue');
      row = {
        credentials_type: 'MQTT_BASIC',
        credentials_id: mqttBasicKey(value.clientId, value.userName),
        credentials_value: JSON.stringify({
          clientId: value.clientId ?? null,
          userName: value.userName ?? null,
          password: value.password ?? null,
        }),
      };
    }
    if (this.#store.tokenInUse(row.credentials_id, rid)) throw duplicateToken();
    return row;
  }

  /**
   * Resolves MQTT CONNECT credentials as ThingsBoard does (reference §8.2). The `provision` user
   * name or client id opens a provisioning-only session. A TLS client certificate (`clientCert`,
   * the leaf's DER bytes) decides alone: the device whose X509_CERTIFICATE credentials it is,
   * within its validity period unless `skipCertificateValidity`; user name and password are then
   * ignored. Without one: basic credentials by client id, by client id + user name, then the
   * user name as an access token or as a user-name-only basic credential.
   */
  resolveMqtt(
    clientId: string,
    userName: string | undefined,
    password: string | undefined,
    clientCert?: Buffer,
  ): MqttAuthResult {
    if (userName === 'provision' || clientId === 'provision') return { kind: 'provision' };
    const refuse = (reason: MqttRefusal): MqttAuthResult => ({ kind: 'refused', reason });
    if (clientCert) {
      const found = this.#store.byCredentialsId(
        x509CredentialsOf(clientCert).credentialsId,
        'X509_CERTIFICATE',
      );
      if (!found) return refuse('unknown-certificate');
      if (
        !this.deps.skipCertificateValidity &&
        !validNow(clientCert, this.deps.now?.() ?? Date.now())
      )
        return refuse('certificate-not-valid-now');
      return { kind: 'device', device: this.#identityOf(found.view) };
    }
    const basic = (key: string) => this.#store.byCredentialsId(key, 'MQTT_BASIC');
    if (!userName) {
      const found = clientId ? basic(mqttBasicKey(clientId, null)) : undefined;
      if (found) return { kind: 'device', device: this.#identityOf(found.view) };
      if (password !== undefined) return refuse('bad-credentials');
      return refuse(clientId ? 'unknown-client-id' : 'not-authorized');
    }
    const both = clientId ? basic(mqttBasicKey(clientId, userName)) : undefined;
    if (both) {
      const stored = JSON.parse(both.credentialsValue ?? '{}') as MqttBasicCredentials;
      return samePassword(password, stored.password)
        ? { kind: 'device', device: this.#identityOf(both.view) }
        : refuse('bad-credentials');
    }
    const token = this.#store.byAccessToken(userName);
    if (token) return { kind: 'device', device: this.#identityOf(token) };
    const userOnly = basic(mqttBasicKey(null, userName));
    if (userOnly) {
      const stored = JSON.parse(userOnly.credentialsValue ?? '{}') as MqttBasicCredentials;
      if (samePassword(password, stored.password))
        return { kind: 'device', device: this.#identityOf(userOnly.view) };
    }
    return refuse('bad-credentials');
  }

  /** Resolves a device access token; undefined when no device has it. */
  byAccessToken(token: string): DeviceIdentity | undefined {
    const cached = this.#byToken.get(token);
    if (cached) return cached;
    const v = this.#store.byAccessToken(token);
    if (!v) return undefined;
    // Bounded: a flood of distinct tokens cannot grow it beyond the number of devices it serves.
    if (this.#byToken.size >= TOKEN_CACHE_SIZE) this.#byToken.clear();
    const identity = this.#identityOf(v);
    this.#byToken.set(token, identity);
    return identity;
  }

  identity(id: string): DeviceIdentity | undefined {
    const cached = this.#byId.get(id);
    if (cached) return cached;
    const v = this.#store.byId(id);
    return v && this.#identityOf(v);
  }

  /**
   * A device's identity, one object per device while `#byId` holds it: the token lookup, the id
   * lookup and every MQTT session of the device share it (and the profile id string).
   *
   * @NOTE: each lookup made its own object with its own strings before (two or three copies per
   * connected device: docs/benchmarks.md, "5,000 idle MQTT connections: lighter connections, lazy
   * Protobuf, a trim that sees malloc"). Sharing is safe because identities are read-only and
   * `#forget` drops them all when any device, token or identity changes.
   */
  #identityOf(v: DeviceView): DeviceIdentity {
    const cached = this.#byId.get(v.id);
    if (cached) return cached;
    if (this.#byId.size >= TOKEN_CACHE_SIZE) this.#byId.clear();
    let profileId = this.#profileIds.get(v.device_profile_id);
    if (profileId === undefined) {
      // Bounded like the caches; a profile id is one string per profile, not per device.
      if (this.#profileIds.size >= TOKEN_CACHE_SIZE) this.#profileIds.clear();
      profileId = v.device_profile_id;
      this.#profileIds.set(profileId, profileId);
    }
    const identity = identityOf(v, profileId);
    this.#byId.set(v.id, identity);
    return identity;
  }

  /** A device, its token or its identity changed: the lookups answer from the database again. */
  #forget(): void {
    this.#byToken.clear();
    this.#byId.clear();
  }

  byName(name: string): DeviceIdentity | undefined {
    const v = this.#store.byName(name);
    return v && this.#identityOf(v);
  }

  /**
   * A gateway's child device by name, created on first sight (ThingsBoard `findOrCreateDevice`
   * behind `v1/gateway/connect`, reference §9). A new device gets the profile named `type`
   * (found or created), or the default profile when there is no type, and records the gateway
   * in `additionalInfo.lastConnectedGateway`. An existing device is returned unchanged.
   */
  findOrCreateChild(name: string, type: string | undefined, gatewayId: string): DeviceIdentity {
    // @NOTE: `save` trims names; an untrimmed name would never be found again by `byName`.
    if (name.trim() !== name || name === '') {
      throw new ValidationError('Device name must not be empty or start or end with a blank');
    }
    const found = this.#store.byName(name);
    if (found) return this.#identityOf(found);
    const device = this.save({
      name,
      type: type || undefined,
      additionalInfo: { lastConnectedGateway: gatewayId },
    });
    return this.#identityOf(this.#view(device.id.id));
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

  #checkOta(firmwareId: string | null, softwareId: string | null, profileId: string): void {
    if (!firmwareId && !softwareId) return;
    const check = this.deps.otaCheck;
    if (!check) throw new ValidationError('OTA packages are not available');
    if (firmwareId) check('FIRMWARE', firmwareId, profileId);
    if (softwareId) check('SOFTWARE', softwareId, profileId);
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

/** Whether `now` lies within a certificate's notBefore..notAfter (X.509 `checkValidity`). */
function validNow(der: Buffer, now: number): boolean {
  const cert = new X509Certificate(der);
  return cert.validFromDate.getTime() <= now && now <= cert.validToDate.getTime();
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
    firmwareId: v.firmware_id ? entityId('OTA_PACKAGE', v.firmware_id) : null,
    softwareId: v.software_id ? entityId('OTA_PACKAGE', v.software_id) : null,
    additionalInfo: v.additional_info === null ? null : JSON.parse(v.additional_info),
    version: v.version,
  };
}

function identityOf(v: DeviceView, profileId: string): DeviceIdentity {
  return {
    rid: v.rid,
    id: v.id,
    name: v.name,
    profileId,
    isGateway: isGatewayInfo(v.additional_info),
  };
}

function isGatewayInfo(additionalInfo: string | null): boolean {
  if (additionalInfo === null || !additionalInfo.includes('gateway')) return false;
  return (JSON.parse(additionalInfo) as { gateway?: unknown }).gateway === true;
}

function toCredentials(row: CredentialsRow, deviceId: string): DeviceCredentials {
  return {
    id: { id: row.id },
    createdTime: row.created_time,
    deviceId: entityId('DEVICE', deviceId),
    credentialsType: row.credentials_type as CredentialsType,
    credentialsId: row.credentials_id,
    credentialsValue: row.credentials_value,
  };
}
