/**
 * protobufjs, imported when a Protobuf payload first needs it instead of at start.
 *
 * @NOTE: evaluating protobufjs and sparkplug-payload cost 3.0 MB of memory in every gateway
 * (docs/benchmarks.md, "5,000 idle MQTT connections: lighter connections, lazy Protobuf, a trim
 * that sees malloc"), while only devices of a PROTOBUF profile, the `/p` v2 topics and Protobuf
 * provisioning requests use it. Its users (schema compilation, the payload codec) are synchronous,
 * so the library is loaded before them: at start when a stored profile has Protobuf payloads,
 * before a profile with them is saved, and by the MQTT and CoAP transports before a message that
 * needs it is handled (`loadProtobuf`). This module holds what the import cache holds, the library,
 * and sets it once.
 */
import type * as ProtobufLib from 'protobufjs';

export type Protobuf = typeof ProtobufLib;

let loaded: Protobuf | undefined;

/** Loads protobufjs; resolves at once when it is loaded. */
export async function loadProtobuf(): Promise<Protobuf> {
  if (!loaded) {
    const m = (await import('protobufjs')) as Protobuf & { default?: Protobuf };
    loaded = m.default ?? m;
  }
  return loaded;
}

/** Whether protobufjs is loaded (`protobuf()` answers). */
export function protobufLoaded(): boolean {
  return loaded !== undefined;
}

/** protobufjs; throws when it was not loaded first (a missing `loadProtobuf`, a bug). */
export function protobuf(): Protobuf {
  if (!loaded) throw new Error('protobufjs is not loaded (loadProtobuf)');
  return loaded;
}

/**
 * Whether a profile's `transportConfiguration` (as stored or as sent, not yet validated) has
 * Protobuf payloads: anything but JSON for MQTT or for a CoAP default device type.
 */
export function transportNeedsProtobuf(config: unknown): boolean {
  if (typeof config !== 'object' || config === null) return false;
  const c = config as {
    transportPayloadTypeConfiguration?: { transportPayloadType?: unknown } | null;
    coapDeviceTypeConfiguration?: {
      transportPayloadTypeConfiguration?: { transportPayloadType?: unknown } | null;
    } | null;
  };
  const payloadType = (p: { transportPayloadType?: unknown } | null | undefined) =>
    p != null && p.transportPayloadType !== undefined && p.transportPayloadType !== 'JSON';
  return (
    payloadType(c.transportPayloadTypeConfiguration) ||
    payloadType(c.coapDeviceTypeConfiguration?.transportPayloadTypeConfiguration)
  );
}
