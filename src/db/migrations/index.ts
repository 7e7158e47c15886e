import type { Migration } from '../migrator.js';
import { m001Initial } from './001-initial.js';
import { m002Telemetry } from './002-telemetry.js';
import { m003AttributesRpc } from './003-attributes-rpc.js';
import { m004ClaimProvisionOta } from './004-claim-provision-ota.js';

/** Every migration, in order. Append only: never edit one that has shipped. */
export const MIGRATIONS: readonly Migration[] = [
  m001Initial,
  m002Telemetry,
  m003AttributesRpc,
  m004ClaimProvisionOta,
];
