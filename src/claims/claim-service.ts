import { z } from 'zod';
import type { CommitHook } from '../common/commit-hook.js';
import { NULL_UUID } from '../common/entity.js';
import { validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import type { DeviceService } from '../devices/device-service.js';
import { NotFoundError } from '../errors.js';
import type { Logger } from '../logger.js';
import { ClaimStore } from './claim-store.js';

/** What a device sends to start a claim (HTTP/CoAP body, MQTT payload, gateway entry). */
export interface ClaimRequest {
  /** Absent → `""` (ThingsBoard `DEFAULT_SECRET_KEY`). */
  readonly secretKey?: string;
  /** Absent or ≤ 0 → the configured claim duration. */
  readonly durationMs?: number;
}

export interface PendingClaim {
  readonly deviceId: string;
  readonly secretKey: string;
  readonly expirationTime: number;
  readonly createdTime: number;
}

/**
 * What became of a device-side claim. The device is never told (ThingsBoard acks the request
 * and only logs problems); the value is for logs and tests.
 */
export type DeviceClaimOutcome = 'REGISTERED' | 'KEPT_EARLIER_CLAIM' | 'ALREADY_OWNED';

/** Outcome of the customer side, with ThingsBoard's `response` values. */
export type CustomerClaimResult =
  | { readonly response: 'SUCCESS'; readonly deviceId: string }
  | { readonly response: 'FAILURE' }
  | { readonly response: 'CLAIMED' };

// Gson's getAsString/getAsLong accept numbers and numeric strings alike; so do we.
const claimBody = z
  .object({
    secretKey: z
      .union([z.string(), z.number()])
      .transform((v) => String(v))
      .optional()
      .nullable(),
    durationMs: z
      .union([z.number().int(), z.string().regex(/^-?\d+$/, 'must be an integer')])
      .transform((v) => Number(v))
      .optional()
      .nullable(),
  })
  .passthrough();

export interface ClaimServiceDeps {
  readonly db: Db;
  readonly devices: DeviceService;
  /** Default claim window (ThingsBoard `security.claim.duration`, 24 h). */
  readonly durationMs: number;
  readonly log: Logger;
  /**
   * Server time (the gateway's ServerClock: never behind itself when the wall clock jumps back),
   * for claim times and expiry; default Date.now.
   */
  readonly now?: () => number;
  /**
   * Runs in the transaction of every device claim request, whatever its local outcome (the
   * upstream outbox: the cloud applies its own claiming rules).
   */
  readonly inCommit?: CommitHook<DeviceClaimItem>;
}

/** A device's claim request as the commit hook sees it. */
export interface DeviceClaimItem {
  readonly rid: number;
  readonly deviceId: string;
  readonly request: ClaimRequest;
}

/**
 * Device claiming (device-api.md §5, platform.md §3.7). The device side stores a pending claim
 * (secret + expiry); a customer user completes it with the same secret before it expires.
 */
export class ClaimService {
  readonly #store: ClaimStore;
  readonly #now: () => number;

  constructor(private readonly deps: ClaimServiceDeps) {
    this.#store = new ClaimStore(deps.db);
    this.#now = deps.now ?? (() => Date.now());
  }

  /** Validates a claim body; `undefined`/`null` (no body) means all defaults. */
  parseRequest(body: unknown): ClaimRequest {
    if (body === undefined || body === null) return {};
    const input = validate(claimBody, body, 'claim request');
    return {
      secretKey: input.secretKey ?? undefined,
      durationMs: input.durationMs ?? undefined,
    };
  }

  /**
   * The device side of a claim (`POST /api/v1/{token}/claim`, MQTT `v1/devices/me/claim`).
   * Put-if-absent as in ThingsBoard: an unexpired pending claim keeps its secret and expiry.
   * A device that already has a customer is not claimable; the request is only logged.
   */
  claimByDevice(deviceId: string, request: ClaimRequest = {}): DeviceClaimOutcome {
    const identity = this.deps.devices.identity(deviceId);
    if (!identity) throw new NotFoundError(`Device with id [${deviceId}] is not found`);
    const device = this.deps.devices.get(deviceId);
    const log = this.deps.log;
    const hook = this.deps.inCommit;
    const now = this.#now();
    let outcome: DeviceClaimOutcome;
    try {
      outcome = this.deps.db.transaction((): DeviceClaimOutcome => {
        hook?.write([{ rid: identity.rid, deviceId, request }]);
        if (device.customerId.id !== NULL_UUID) return 'ALREADY_OWNED';
        return this.#register(identity.rid, request, now);
      })();
    } catch (err) {
      hook?.settled(false);
      throw err;
    }
    hook?.settled(true);
    if (outcome === 'ALREADY_OWNED') {
      log.info({ deviceId }, 'claim request ignored: device already has a customer');
    } else log.info({ deviceId, outcome }, 'device claim request');
    return outcome;
  }

  /** Stores a pending claim unless an unexpired one exists (inside the caller's transaction). */
  #register(rid: number, request: ClaimRequest, now: number): DeviceClaimOutcome {
    const existing = this.#store.get(rid);
    // @NOTE: ThingsBoard's cache keeps an expired entry until its 24 h TTL; we let a new claim
    // replace an expired one at once, which is what a device retrying after expiry expects.
    if (existing && existing.expiration_time > now) return 'KEPT_EARLIER_CLAIM';
    const duration =
      request.durationMs !== undefined && request.durationMs > 0
        ? request.durationMs
        : this.deps.durationMs;
    this.#store.put({
      device_rid: rid,
      secret_key: request.secretKey ?? '',
      expiration_time: now + duration,
      created_time: now,
    });
    return 'REGISTERED';
  }

  /** The pending claim of a device, expired or not; undefined when there is none. */
  pending(deviceId: string): PendingClaim | undefined {
    const identity = this.deps.devices.identity(deviceId);
    const row = identity && this.#store.get(identity.rid);
    return (
      row && {
        deviceId,
        secretKey: row.secret_key,
        expirationTime: row.expiration_time,
        createdTime: row.created_time,
      }
    );
  }

  /**
   * The customer side (`POST /api/customer/device/{deviceName}/claim`, users issue). Checks the
   * pending claim and, on success, calls `assign` (which sets the device's customer) in the same
   * transaction as deleting the claim. Rules (CLAIM `claimDevice`): a device with a customer →
   * `CLAIMED`; no claim, expired, or wrong secret → `FAILURE` and the pending claim is discarded;
   * both secrets empty match. Unknown device name → NotFoundError.
   */
  claimByCustomer(
    deviceName: string,
    secretKey: string | undefined,
    assign: (deviceId: string) => void,
  ): CustomerClaimResult {
    const identity = this.deps.devices.byName(deviceName);
    if (!identity) throw new NotFoundError();
    const device = this.deps.devices.get(identity.id);
    if (device.customerId.id !== NULL_UUID) return { response: 'CLAIMED' };
    const now = this.#now();
    return this.deps.db.transaction((): CustomerClaimResult => {
      const row = this.#store.get(identity.rid);
      const ok =
        row !== undefined && row.expiration_time > now && row.secret_key === (secretKey ?? '');
      this.#store.delete(identity.rid);
      if (!ok) return { response: 'FAILURE' };
      assign(identity.id);
      return { response: 'SUCCESS', deviceId: identity.id };
    })();
  }

  /** Drops a pending claim (re-claim, or a failed customer attempt). */
  cancel(deviceId: string): boolean {
    const identity = this.deps.devices.identity(deviceId);
    return identity ? this.#store.delete(identity.rid) : false;
  }

  /** Deletes expired claims; returns how many. */
  purgeExpired(): number {
    return this.#store.deleteExpired(this.#now());
  }
}
