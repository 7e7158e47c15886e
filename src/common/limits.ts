import { ValidationError } from '../errors.js';

/**
 * The device API's limits, one table for every transport (issue 13): the same request gets the
 * same answer over HTTP, MQTT and CoAP. Telemetry payload limits are `TELEMETRY_LIMITS`
 * (telemetry-parser.ts), the MQTT packet size is the `mqtt.maxPacketBytes` setting.
 */
export const DEVICE_LIMITS = Object.freeze({
  /**
   * Request ids (client- and server-side RPC, attribute and firmware requests) and the firmware
   * `size` and `chunk`: ThingsBoard parses them as a Java `int` on every transport.
   */
  maxInt: 2_147_483_647,
  /** A long-poll `timeout` in ms: absent or 0 means the default, above the cap it is cut (§8.5). */
  pollDefaultMs: 60_000,
  pollMaxMs: 300_000,
  /** ThingsBoard reads the poll timeout as a Java `long`; we take what a JS number holds exactly. */
  maxTimeoutMs: Number.MAX_SAFE_INTEGER,
  /** The wait for a client-side RPC reply over CoAP (`transport.coap.timeout`, §10). */
  coapClientRpcTimeoutMs: 10_000,
  /** Largest payload sent or accepted over MQTT, reported by `getSessionLimits` (§4). */
  maxPayloadBytes: 65_536,
  maxInflightMessages: 100,
  /** Longest device name (`DeviceService.save`; gateway children are created with it). */
  maxDeviceNameLength: 255,
});

const DIGITS = /^\d{1,16}$/;

/**
 * A non-negative decimal integer (digits only) of at most `max`, a Java `int` by default;
 * anything else is a ValidationError naming `what`.
 */
export function nonNegativeInt(
  raw: string,
  what: string,
  max: number = DEVICE_LIMITS.maxInt,
): number {
  const n = DIGITS.test(raw) ? Number(raw) : Number.NaN;
  if (!(n <= max)) {
    throw new ValidationError(`${what} must be an integer from 0 to ${max}, got: ${raw}`);
  }
  return n;
}
