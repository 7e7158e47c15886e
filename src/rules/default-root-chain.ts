/**
 * The root chain created on first start (issue 14 §6), in ThingsBoard's export format: the graph
 * of ThingsBoard's tenant root chain (rule-engine reference §1.3), plus the client-side RPC
 * `getCurrentTime` answered by a script and an rpc call reply node (a bare JSON number of epoch
 * ms, as ThingsBoard's documented example), which replaces the gateway's built-in handler.
 * Other client-side RPC methods are logged and get no reply (the device times out, as before).
 * Saved telemetry and client attributes go on to a push-to-cloud node, as in ThingsBoard Edge's
 * root chain (upstream sync, docs/upstream.md).
 */
const P = 'org.thingsboard.rule.engine.';
const LOG_SCRIPT =
  "return '\\nIncoming message:\\n' + JSON.stringify(msg) + '\\nIncoming metadata:\\n' + JSON.stringify(metadata);";
const PROCESSING = { type: 'ON_EVERY_MESSAGE' };

const node = (
  type: string,
  name: string,
  configuration: Record<string, unknown>,
  x: number,
  y: number,
) => ({
  type: `${P}${type}`,
  name,
  debugSettings: null,
  singletonMode: false,
  queueName: null,
  configurationVersion: 0,
  configuration,
  additionalInfo: { description: '', layoutX: x, layoutY: y },
});

export const defaultRootChain = {
  ruleChain: {
    name: 'Root Rule Chain',
    type: 'CORE' as const,
    firstRuleNodeId: null,
    root: false,
    debugMode: false,
    configuration: null,
    additionalInfo: { description: '' },
  },
  metadata: {
    firstNodeIndex: 0,
    nodes: [
      node(
        'profile.TbDeviceProfileNode',
        'Device Profile Node',
        { persistAlarmRulesState: false, fetchAlarmRulesStateOnStart: false },
        200,
        150,
      ),
      node('filter.TbMsgTypeSwitchNode', 'Message Type Switch', { version: 0 }, 350, 150),
      node(
        'telemetry.TbMsgTimeseriesNode',
        'Save Timeseries',
        { defaultTTL: 0, useServerTs: false, processingSettings: PROCESSING },
        650,
        50,
      ),
      node(
        'telemetry.TbMsgAttributesNode',
        'Save Client Attributes',
        {
          processingSettings: PROCESSING,
          scope: 'CLIENT_SCOPE',
          notifyDevice: false,
          sendAttributesUpdatedNotification: false,
          updateAttributesOnlyOnValueChange: true,
        },
        650,
        120,
      ),
      node(
        'filter.TbJsFilterNode',
        'Is getCurrentTime',
        {
          scriptLang: 'JS',
          jsScript: "return msg.method === 'getCurrentTime';",
          tbelScript: "return msg.method == 'getCurrentTime';",
        },
        650,
        190,
      ),
      node(
        'transform.TbTransformMsgNode',
        'Current Time',
        {
          scriptLang: 'JS',
          jsScript: 'return {msg: new Date().getTime(), metadata: metadata, msgType: msgType};',
          tbelScript: 'return {msg: new Date().getTime(), metadata: metadata, msgType: msgType};',
        },
        950,
        190,
      ),
      node(
        'rpc.TbSendRPCReplyNode',
        'RPC Call Reply',
        {
          serviceIdMetaDataAttribute: 'serviceId',
          sessionIdMetaDataAttribute: 'sessionId',
          requestIdMetaDataAttribute: 'requestId',
        },
        1250,
        190,
      ),
      node(
        'action.TbLogNode',
        'Log RPC from Device',
        { scriptLang: 'TBEL', jsScript: LOG_SCRIPT, tbelScript: LOG_SCRIPT },
        950,
        260,
      ),
      node('rpc.TbSendRPCRequestNode', 'RPC Call Request', { timeoutInSeconds: 60 }, 650, 330),
      node(
        'action.TbLogNode',
        'Log Other',
        { scriptLang: 'TBEL', jsScript: LOG_SCRIPT, tbelScript: LOG_SCRIPT },
        650,
        400,
      ),
      // Edge root chain (rule-engine reference §1.4): pushed up only after the local save; a
      // pass-through while upstream sync is off.
      node('edge.TbMsgPushToCloudNode', 'Push to cloud', { scope: 'CLIENT_SCOPE' }, 950, 85),
    ],
    connections: [
      { fromIndex: 0, toIndex: 1, type: 'Success' },
      { fromIndex: 1, toIndex: 2, type: 'Post telemetry' },
      { fromIndex: 1, toIndex: 3, type: 'Post attributes' },
      { fromIndex: 1, toIndex: 4, type: 'RPC Request from Device' },
      { fromIndex: 4, toIndex: 5, type: 'True' },
      { fromIndex: 5, toIndex: 6, type: 'Success' },
      { fromIndex: 4, toIndex: 7, type: 'False' },
      { fromIndex: 1, toIndex: 8, type: 'RPC Request to Device' },
      { fromIndex: 1, toIndex: 9, type: 'Other' },
      { fromIndex: 2, toIndex: 10, type: 'Success' },
      { fromIndex: 3, toIndex: 10, type: 'Success' },
    ],
    ruleChainConnections: null,
  },
};
