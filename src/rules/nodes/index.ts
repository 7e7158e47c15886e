/** Every supported node class, by ThingsBoard's class name (docs/rules.md lists them). */
import type { NodeSpec } from '../types.js';
import {
  delay,
  deviceProfile,
  generator,
  log,
  rpcReply,
  rpcRequest,
  saveAttributes,
  saveTimeseries,
} from './action.js';
import { clearAlarm, createAlarm } from './alarm.js';
import { pushToCloud } from './cloud.js';
import { originatorAttributes, originatorTelemetry } from './enrichment.js';
import { restApiCall, sendEmail } from './external.js';
import {
  checkMessage,
  msgTypeFilter,
  msgTypeSwitch,
  scriptFilter,
  scriptSwitch,
} from './filter.js';
import { ruleChainInput, ruleChainOutput } from './flow.js';
import { sendSms } from './sms.js';
import { copyKeys, deleteKeys, renameKeys, scriptTransform, toEmail } from './transform.js';

export const NODE_SPECS: ReadonlyMap<string, NodeSpec> = new Map(
  [
    msgTypeSwitch,
    msgTypeFilter,
    checkMessage,
    scriptFilter,
    scriptSwitch,
    scriptTransform,
    copyKeys,
    renameKeys,
    deleteKeys,
    toEmail,
    originatorAttributes,
    originatorTelemetry,
    saveTimeseries,
    saveAttributes,
    deviceProfile,
    log,
    delay,
    generator,
    rpcReply,
    rpcRequest,
    restApiCall,
    sendEmail,
    sendSms,
    createAlarm,
    clearAlarm,
    pushToCloud,
    ruleChainInput,
    ruleChainOutput,
  ].map((spec) => [spec.type, spec]),
);
