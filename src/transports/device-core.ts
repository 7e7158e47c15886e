import type { AttributeService } from '../attributes/attribute-service.js';
import type { DeviceAuthThrottle } from '../auth/device-auth-throttle.js';
import type { ClaimService } from '../claims/claim-service.js';
import type { ActivityService } from '../devices/activity-service.js';
import type { ProfileTransports } from '../devices/profile-transports.js';
import type { DeviceMessageService } from '../messages/device-message-service.js';
import type { OtaService } from '../ota/ota-service.js';
import type { ProvisionService } from '../provisioning/provision-service.js';
import type { ClientRpcService } from '../rpc/client-rpc.js';
import type { RpcService } from '../rpc/rpc-service.js';
import type { TelemetryService } from '../telemetry/telemetry-service.js';

/**
 * The core services a device reaches, whatever its transport: HTTP, MQTT and CoAP adapters all
 * call these and nothing else.
 */
export interface DeviceCore {
  readonly telemetry: TelemetryService;
  readonly attributes: AttributeService;
  readonly rpc: RpcService;
  readonly clientRpc: ClientRpcService;
  readonly claims: ClaimService;
  readonly provisioning: ProvisionService;
  readonly ota: OtaService;
  /** Connects, disconnects and uplinks of every transport feed device activity. */
  readonly activity: ActivityService;
  /**
   * The one way in for device messages: uplinks that store or ask for something (telemetry,
   * attributes, client-side RPC, claims, provisioning, firmware, connects) go through it, so that
   * each becomes a message for the processing entry point once committed.
   */
  readonly messages: DeviceMessageService;
  /** Each device profile's transport settings: topics, payload format, Sparkplug (issue 21). */
  readonly profileTransports: ProfileTransports;
  /** Failed MQTT/CoAP authentications per source address (issue 20). */
  readonly deviceAuth: DeviceAuthThrottle;
}
