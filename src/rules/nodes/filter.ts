/** Filter nodes (rule-engine reference §3.1). */
import { FALSE, type NodeSpec, TRUE } from '../types.js';
import { bool, PREFIX, scriptNodeSpec, strings, wrongResult } from './support.js';

/** The label a message type switch gives each type (platform.md §7.1); others go to `Other`. */
export const TYPE_LABELS: Readonly<Record<string, string>> = {
  POST_TELEMETRY_REQUEST: 'Post telemetry',
  POST_ATTRIBUTES_REQUEST: 'Post attributes',
  TO_SERVER_RPC_REQUEST: 'RPC Request from Device',
  RPC_CALL_FROM_SERVER_TO_DEVICE: 'RPC Request to Device',
  ACTIVITY_EVENT: 'Activity Event',
  INACTIVITY_EVENT: 'Inactivity Event',
  CONNECT_EVENT: 'Connect Event',
  DISCONNECT_EVENT: 'Disconnect Event',
  ENTITY_CREATED: 'Entity Created',
  ENTITY_UPDATED: 'Entity Updated',
  ENTITY_DELETED: 'Entity Deleted',
  ENTITY_ASSIGNED: 'Entity Assigned',
  ENTITY_UNASSIGNED: 'Entity Unassigned',
  ATTRIBUTES_UPDATED: 'Attributes Updated',
  ATTRIBUTES_DELETED: 'Attributes Deleted',
  TIMESERIES_UPDATED: 'Timeseries Updated',
  TIMESERIES_DELETED: 'Timeseries Deleted',
  ALARM_ACK: 'Alarm Acknowledged',
  ALARM_CLEAR: 'Alarm Cleared',
  ALARM_ASSIGNED: 'Alarm Assigned',
  ALARM_UNASSIGNED: 'Alarm Unassigned',
  COMMENT_CREATED: 'Comment Created',
  COMMENT_UPDATED: 'Comment Updated',
  RPC_QUEUED: 'RPC Queued',
  RPC_SENT: 'RPC Sent',
  RPC_DELIVERED: 'RPC Delivered',
  RPC_SUCCESSFUL: 'RPC Successful',
  RPC_TIMEOUT: 'RPC Timeout',
  RPC_EXPIRED: 'RPC Expired',
  RPC_FAILED: 'RPC Failed',
  RPC_DELETED: 'RPC Deleted',
};

export const msgTypeSwitch: NodeSpec = {
  type: `${PREFIX}filter.TbMsgTypeSwitchNode`,
  defaults: { version: 0 },
  create: () => ({
    onMsg: (msg) => ({ labels: TYPE_LABELS[msg.type] ?? 'Other', msg }),
  }),
};

export const msgTypeFilter: NodeSpec = {
  type: `${PREFIX}filter.TbMsgTypeFilterNode`,
  defaults: {
    messageTypes: ['POST_ATTRIBUTES_REQUEST', 'POST_TELEMETRY_REQUEST', 'TO_SERVER_RPC_REQUEST'],
  },
  check: (c) => (Array.isArray(c.messageTypes) ? [] : ['messageTypes must be a list of types']),
  create: ({ config }) => {
    const types = new Set(strings(config, 'messageTypes'));
    return { onMsg: (msg) => ({ labels: types.has(msg.type) ? TRUE : FALSE, msg }) };
  },
};

export const checkMessage: NodeSpec = {
  type: `${PREFIX}filter.TbCheckMessageNode`,
  defaults: { messageNames: [], metadataNames: [], checkAllKeys: true },
  create: ({ config }) => {
    const dataKeys = strings(config, 'messageNames');
    const metaKeys = strings(config, 'metadataNames');
    const all = bool(config, 'checkAllKeys', true);
    return {
      onMsg: (msg) => {
        const data =
          msg.data !== null && typeof msg.data === 'object' && !Array.isArray(msg.data)
            ? (msg.data as Record<string, unknown>)
            : {};
        const checks = [
          ...dataKeys.map((k) => Object.hasOwn(data, k)),
          ...metaKeys.map((k) => msg.metadata[k] !== undefined),
        ];
        const ok = all ? checks.every(Boolean) : checks.some(Boolean);
        return { labels: ok ? TRUE : FALSE, msg };
      },
    };
  },
};

const FILTER_SCRIPT = 'return msg.temperature > 20;';

export const scriptFilter = scriptNodeSpec(
  'filter.TbJsFilterNode',
  FILTER_SCRIPT,
  (result, msg) => {
    if (typeof result !== 'boolean') throw wrongResult('boolean', result);
    return { labels: result ? TRUE : FALSE, msg };
  },
);

const SWITCH_SCRIPT = `function nextRelation(metadata, msg) {
    return ['one','nine'];
}
if(msgType === 'POST_TELEMETRY_REQUEST') {
    return ['two'];
}
return nextRelation(metadata, msg);`;

export const scriptSwitch = scriptNodeSpec(
  'filter.TbJsSwitchNode',
  SWITCH_SCRIPT,
  (result, msg) => {
    if (typeof result === 'string') return { labels: result, msg };
    if (Array.isArray(result) && result.every((r) => typeof r === 'string')) {
      return result.length === 0 ? undefined : { labels: result as string[], msg };
    }
    throw wrongResult('string or array of strings', result);
  },
);
