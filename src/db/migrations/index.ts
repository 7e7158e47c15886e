import type { Migration } from '../migrator.js';
import { m001Initial } from './001-initial.js';
import { m002Telemetry } from './002-telemetry.js';
import { m003AttributesRpc } from './003-attributes-rpc.js';
import { m004ClaimProvisionOta } from './004-claim-provision-ota.js';
import { m005CustomersUsers } from './005-customers-users.js';
import { m006Dashboards } from './006-dashboards.js';
import { m007EntityGroups } from './007-entity-groups.js';
import { m008TelemetryStage } from './008-telemetry-stage.js';
import { m009RuleChains } from './009-rule-chains.js';
import { m010SchedulerEvents } from './010-scheduler-events.js';
import { m011Connectors } from './011-connectors.js';
import { m012Alarms } from './012-alarms.js';
import { m013TelemetryBlocks } from './013-telemetry-blocks.js';
import { m014Notifications } from './014-notifications.js';
import { m015ProfileRuleChain } from './015-profile-rule-chain.js';
import { m016Upstream } from './016-upstream.js';
import { m017TelemetryLogRing } from './017-telemetry-log-ring.js';
import { m018NotificationRequests } from './018-notification-requests.js';
import { m019UpstreamOutboxRows } from './019-upstream-outbox-rows.js';
import { m020UserAttributes } from './020-user-attributes.js';
import { m021AuditLogEntity } from './021-audit-log-entity.js';

/** Every migration, in order. Append only: never edit one that has shipped. */
export const MIGRATIONS: readonly Migration[] = [
  m001Initial,
  m002Telemetry,
  m003AttributesRpc,
  m004ClaimProvisionOta,
  m005CustomersUsers,
  m006Dashboards,
  m007EntityGroups,
  m008TelemetryStage,
  m009RuleChains,
  m010SchedulerEvents,
  m011Connectors,
  m012Alarms,
  m013TelemetryBlocks,
  m014Notifications,
  m015ProfileRuleChain,
  m016Upstream,
  m017TelemetryLogRing,
  m018NotificationRequests,
  m019UpstreamOutboxRows,
  m020UserAttributes,
  m021AuditLogEntity,
];
