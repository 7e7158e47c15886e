import { z } from 'zod';
import { validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import type { DeviceProfileService } from '../devices/device-profile-service.js';
import {
  type DeviceCredentials,
  type DeviceService,
  randomAccessToken,
} from '../devices/device-service.js';
import { GatewayError } from '../errors.js';
import type { Logger } from '../logger.js';
import { ProvisionStore } from './provision-store.js';

export const CREDENTIALS_TYPES = ['ACCESS_TOKEN', 'MQTT_BASIC', 'X509_CERTIFICATE'] as const;
export type CredentialsType = (typeof CREDENTIALS_TYPES)[number];

/** A provisioning request (device-api.md §6.1), the same for HTTP, MQTT and CoAP. */
export interface ProvisionRequest {
  readonly provisionDeviceKey: string;
  readonly provisionDeviceSecret: string;
  readonly deviceName?: string;
  readonly credentialsType?: CredentialsType;
  readonly token?: string;
  readonly clientId?: string;
  readonly username?: string;
  readonly password?: string;
  readonly hash?: string;
  readonly gateway?: boolean;
}

/** Response bodies with ThingsBoard's exact keys (device-api.md §6.2). */
export type ProvisionResponse =
  | {
      readonly credentialsValue: string;
      readonly credentialsType: 'ACCESS_TOKEN';
      readonly status: 'SUCCESS';
    }
  | {
      readonly credentialsValue: {
        readonly clientId: string | null;
        readonly userName: string | null;
        readonly password: string | null;
      };
      readonly credentialsType: 'MQTT_BASIC';
      readonly status: 'SUCCESS';
    }
  | {
      /** The certificate's base64 body: its PEM without header, footer and line breaks. */
      readonly credentialsValue: string;
      readonly credentialsType: 'X509_CERTIFICATE';
      readonly status: 'SUCCESS';
    }
  | { readonly errorMsg: 'Provision data was not found!'; readonly status: 'NOT_FOUND' }
  | { readonly errorMsg: 'Failed to provision device!'; readonly status: 'FAILURE' };

/** A provisioning answer and what it was about: the device provisioned, or the profile refusing. */
export interface ProvisionOutcome {
  readonly response: ProvisionResponse;
  readonly deviceId?: string;
  readonly profileId?: string;
}

const NOT_FOUND: ProvisionResponse = {
  errorMsg: 'Provision data was not found!',
  status: 'NOT_FOUND',
};
const FAILURE: ProvisionResponse = { errorMsg: 'Failed to provision device!', status: 'FAILURE' };

const optionalText = z.string().nullable().optional();
const required = (issue: { input?: unknown }) =>
  issue.input === undefined ? 'is required' : 'must be a string';

// @NOTE: ThingsBoard answers a missing key/secret field or an unknown credentialsType with 500;
// our contract makes that a 400 naming the field. Empty strings are NOT_FOUND (§6.3).
const provisionBody = z
  .object({
    provisionDeviceKey: z.string({ error: required }),
    provisionDeviceSecret: z.string({ error: required }),
    deviceName: optionalText,
    credentialsType: z.enum(CREDENTIALS_TYPES).nullable().optional(),
    token: optionalText,
    clientId: optionalText,
    username: optionalText,
    password: optionalText,
    hash: optionalText,
    gateway: z.boolean().nullable().optional(),
  })
  .passthrough();

export interface ProvisionServiceDeps {
  readonly db: Db;
  readonly devices: DeviceService;
  readonly profiles: DeviceProfileService;
  readonly log: Logger;
}

/**
 * Device provisioning (device-api.md §6): a device presents its profile's provisioning key and
 * secret and gets credentials, either for a new device (ALLOW_CREATE_NEW_DEVICES) or for one
 * the administrator created beforehand (CHECK_PRE_PROVISIONED_DEVICES).
 */
export class ProvisionService {
  readonly #store: ProvisionStore;

  constructor(private readonly deps: ProvisionServiceDeps) {
    this.#store = new ProvisionStore(deps.db);
  }

  /** Validates a request body; ValidationError names every problem. */
  parseRequest(body: unknown): ProvisionRequest {
    const input = validate(provisionBody, body, 'provision request');
    const opt = (v: string | null | undefined) => (v === null || v === undefined ? undefined : v);
    return {
      provisionDeviceKey: input.provisionDeviceKey,
      provisionDeviceSecret: input.provisionDeviceSecret,
      deviceName: opt(input.deviceName),
      credentialsType: input.credentialsType ?? undefined,
      token: opt(input.token),
      clientId: opt(input.clientId),
      username: opt(input.username),
      password: opt(input.password),
      hash: opt(input.hash),
      gateway: input.gateway ?? undefined,
    };
  }

  /** Applies the decision rules of device-api.md §6.3; never throws for a refused request. */
  provision(req: ProvisionRequest): ProvisionResponse {
    return this.provisionDevice(req).response;
  }

  /** `provision`, also naming the device provisioned or the profile that refused it. */
  provisionDevice(req: ProvisionRequest): ProvisionOutcome {
    const log = this.deps.log;
    const found = req.provisionDeviceKey
      ? this.deps.profiles.byProvisionKey(req.provisionDeviceKey)
      : undefined;
    if (
      !found ||
      !req.provisionDeviceSecret ||
      !found.config.provisionDeviceSecret ||
      found.config.provisionDeviceSecret !== req.provisionDeviceSecret ||
      found.config.type === 'DISABLED'
    ) {
      log.info({ reason: 'key, secret or strategy' }, 'provisioning refused: NOT_FOUND');
      return { response: NOT_FOUND };
    }
    const { profile, config } = found;
    const trimmed = req.deviceName?.trim();
    if (trimmed === '') return this.#failure(profile, 'blank device name');

    if (config.type === 'CHECK_PRE_PROVISIONED_DEVICES') {
      const device = trimmed === undefined ? undefined : this.deps.devices.byName(trimmed);
      if (!device || device.profileId !== profile.id.id)
        return this.#failure(profile, 'no such device in the profile');
      if (this.#store.state(device.rid) !== undefined)
        return this.#failure(profile, 'device already provisioned');
      this.#store.markProvisioned(device.rid, profile.id.id);
      const creds = this.deps.devices.credentials(device.id);
      log.info(
        { deviceId: device.id, profile: profile.name },
        'pre-provisioned device provisioned',
      );
      const response = successOf(creds);
      return { response, deviceId: device.id, profileId: profile.id.id };
    }

    // ALLOW_CREATE_NEW_DEVICES
    const name = trimmed ?? randomAccessToken(20);
    if (this.deps.devices.byName(name)) return this.#failure(profile, 'name taken');
    // TB: any device-chosen credential selects `credentialsType`; none → a generated token.
    const chosen = [req.token, req.clientId, req.username, req.password, req.hash].some((v) => v);
    const type = chosen ? (req.credentialsType ?? 'ACCESS_TOKEN') : 'ACCESS_TOKEN';
    const token = (type === 'ACCESS_TOKEN' && req.token) || randomAccessToken();
    // MQTT basic credentials, or (X.509) the certificate PEM in `hash` (§6.1).
    const credentials =
      type === 'MQTT_BASIC'
        ? {
            clientId: req.clientId || null,
            userName: req.username || null,
            password: req.password || null,
          }
        : (req.hash ?? '');
    if (type !== 'ACCESS_TOKEN') {
      // Invalid or taken credentials: FAILURE before any device exists (§6.3), so that no
      // device is created and deleted again (ENTITY_ACTION rules would tell of both).
      try {
        this.deps.devices.checkCredentials(type, credentials);
      } catch (err) {
        if (err instanceof GatewayError) return this.#failure(profile, err.message);
        throw err;
      }
    }
    let deviceId: string;
    try {
      const device = this.deps.devices.save(
        {
          name,
          deviceProfileId: { id: profile.id.id },
          additionalInfo: req.gateway ? { gateway: true } : undefined,
        },
        { accessToken: token },
      );
      deviceId = device.id.id;
    } catch (err) {
      // A taken or malformed token, or a name taken meanwhile: FAILURE, as TB does (§6.3).
      if (err instanceof GatewayError) return this.#failure(profile, err.message);
      throw err;
    }
    if (type !== 'ACCESS_TOKEN') {
      try {
        this.deps.devices.updateCredentials({
          deviceId: { id: deviceId },
          credentialsType: type,
          credentialsValue: credentials,
        });
      } catch (err) {
        // Checked above; should the write still fail, the device goes and the answer is FAILURE.
        this.deps.devices.delete(deviceId);
        if (err instanceof GatewayError) return this.#failure(profile, err.message);
        throw err;
      }
    }
    const response = successOf(this.deps.devices.credentials(deviceId));
    const identity = this.deps.devices.identity(deviceId);
    if (identity) this.#store.markProvisioned(identity.rid, profile.id.id);
    log.info({ deviceId, profile: profile.name, type }, 'device provisioned');
    return { response, deviceId, profileId: profile.id.id };
  }

  /** Whether a device completed provisioning (ThingsBoard `provisionState = "provisioned"`). */
  isProvisioned(deviceId: string): boolean {
    const identity = this.deps.devices.identity(deviceId);
    return identity !== undefined && this.#store.state(identity.rid) !== undefined;
  }

  /** Lets a pre-provisioned device provision again (TB: delete the `provisionState` attribute). */
  reset(deviceId: string): boolean {
    const identity = this.deps.devices.identity(deviceId);
    return identity !== undefined && this.#store.clear(identity.rid);
  }

  #failure(profile: { name: string; id: { id: string } }, reason: string): ProvisionOutcome {
    this.deps.log.info({ profile: profile.name, reason }, 'provisioning refused: FAILURE');
    return { response: FAILURE, profileId: profile.id.id };
  }
}

/** The SUCCESS body for a device's stored credentials, in ThingsBoard's shape (§6.2). */
function successOf(creds: DeviceCredentials): ProvisionResponse {
  switch (creds.credentialsType) {
    case 'MQTT_BASIC': {
      const v = JSON.parse(creds.credentialsValue ?? '{}') as Record<string, string | null>;
      return {
        credentialsValue: {
          clientId: v.clientId ?? null,
          userName: v.userName ?? null,
          password: v.password ?? null,
        },
        credentialsType: 'MQTT_BASIC',
        status: 'SUCCESS',
      };
    }
    case 'X509_CERTIFICATE':
      return {
        credentialsValue: creds.credentialsValue ?? '',
        credentialsType: 'X509_CERTIFICATE',
        status: 'SUCCESS',
      };
    default:
      return {
        credentialsValue: creds.credentialsId,
        credentialsType: 'ACCESS_TOKEN',
        status: 'SUCCESS',
      };
  }
}
