/** Action nodes (rule-engine reference §3.4): saves, log, delay, generator, RPC, device profile. */
import { randomUUID } from 'node:crypto';
import type { AttributeScope } from '../../attributes/types.js';
import type { EntityRef, GatewayMsg, OriginatorType } from '../../messages/types.js';
import { derive, toMetadata } from '../msg.js';
import { FAILURE, type NodeSpec, SUCCESS } from '../types.js';
import {
  bool,
  checkScript,
  deviceOf,
  NodeScript,
  num,
  oneOf,
  PREFIX,
  scriptNodeSpec,
  str,
  wrongResult,
} from './support.js';

/** ThingsBoard's save-node processing settings; only `ON_EVERY_MESSAGE` writes here. */
const PROCESSING = { type: 'ON_EVERY_MESSAGE' };

export const saveTimeseries: NodeSpec = {
  type: `${PREFIX}telemetry.TbMsgTimeseriesNode`,
  defaults: { defaultTTL: 0, useServerTs: false, processingSettings: PROCESSING },
  create: ({ config, services }) => {
    const useServerTs = bool(config, 'useServerTs');
    return {
      onMsg: async (msg) => {
        if (msg.type !== 'POST_TELEMETRY_REQUEST')
          throw new Error(`Unsupported msg type: ${msg.type}`);
        // Committed device uplinks are stored before the device is acknowledged (docs/rules.md).
        if (msg.committed) return { labels: SUCCESS, msg };
        const deviceId = deviceOf(msg, 'save timeseries');
        const data = msg.data;
        const plain =
          data !== null && typeof data === 'object' && !Array.isArray(data) && !('ts' in data);
        const metaTs = Number(msg.metadata.ts);
        const ts = useServerTs
          ? Date.now()
          : Number.isFinite(metaTs) && metaTs > 0
            ? metaTs
            : msg.ts;
        await services.saveTelemetry(deviceId, plain ? { ts, values: data } : data);
        return { labels: SUCCESS, msg };
      },
    };
  },
};

const SCOPES = ['CLIENT_SCOPE', 'SHARED_SCOPE', 'SERVER_SCOPE'] as const;

export const saveAttributes: NodeSpec = {
  type: `${PREFIX}telemetry.TbMsgAttributesNode`,
  defaults: {
    processingSettings: PROCESSING,
    scope: 'SERVER_SCOPE',
    notifyDevice: false,
    sendAttributesUpdatedNotification: false,
    updateAttributesOnlyOnValueChange: true,
  },
  check: (c) => oneOf(c, 'scope', SCOPES),
  create: ({ config, services }) => {
    const configured = str(config, 'scope', 'SERVER_SCOPE') as AttributeScope;
    return {
      onMsg: async (msg) => {
        if (msg.type !== 'POST_ATTRIBUTES_REQUEST')
          throw new Error(`Unsupported msg type: ${msg.type}`);
        if (msg.committed) return { labels: SUCCESS, msg };
        const deviceId = deviceOf(msg, 'save attributes');
        const scope = (msg.metadata.scope ?? configured) as AttributeScope;
        if (!SCOPES.includes(scope)) throw new Error(`Unsupported attribute scope: ${scope}`);
        const data = msg.data;
        if (data === null || typeof data !== 'object' || Array.isArray(data))
          throw new Error('Attributes must be a JSON object');
        await services.saveAttributes(deviceId, scope, data as Record<string, unknown>);
        return { labels: SUCCESS, msg };
      },
    };
  },
};

const LOG_SCRIPT =
  "return '\\nIncoming message:\\n' + JSON.stringify(msg) + '\\nIncoming metadata:\\n' + JSON.stringify(metadata);";

export const log = scriptNodeSpec('action.TbLogNode', LOG_SCRIPT, (text, msg, init) => {
  if (typeof text !== 'string') throw wrongResult('string', text);
  init.services.log.info(
    { chainId: init.chainId, node: init.name, msgId: msg.id, msgType: msg.type },
    text,
  );
  return { labels: SUCCESS, msg };
});

/** A delay node never holds more than this many messages, whatever its configuration says. */
export const MAX_DELAYED = 10_000;
/** Longest delay, as ThingsBoard's UI allows (one day). */
const MAX_DELAY_SEC = 86_400;

export const delay: NodeSpec = {
  type: `${PREFIX}delay.TbMsgDelayNode`,
  defaults: {
    periodInSeconds: 60,
    maxPendingMsgs: 1000,
    useMetadataPeriodInSecondsPatterns: false,
    periodInSecondsPattern: null,
  },
  check: (c) => {
    const problems: string[] = [];
    const period = num(c, 'periodInSeconds', -1);
    if (!bool(c, 'useMetadataPeriodInSecondsPatterns') && !(period >= 0 && period <= MAX_DELAY_SEC))
      problems.push(`periodInSeconds must be 0 to ${MAX_DELAY_SEC}`);
    const max = num(c, 'maxPendingMsgs', -1);
    if (!(max >= 1 && max <= MAX_DELAYED))
      problems.push(`maxPendingMsgs must be 1 to ${MAX_DELAYED}`);
    return problems;
  },
  create: ({ config, emit }) => {
    const max = Math.min(num(config, 'maxPendingMsgs', 1000), MAX_DELAYED);
    const usePattern = bool(config, 'useMetadataPeriodInSecondsPatterns');
    const pattern = str(config, 'periodInSecondsPattern');
    const timers = new Set<NodeJS.Timeout>();
    return {
      onMsg: (msg) => {
        if (timers.size >= max) throw new Error(`Max limit of pending messages reached (${max})`);
        let period = num(config, 'periodInSeconds', 60);
        if (usePattern) {
          const key = /^\$\{(.+)\}$/.exec(pattern)?.[1] ?? pattern;
          period = Number(msg.metadata[key] ?? Number.NaN);
          if (!Number.isFinite(period))
            throw new Error(`Can't parse period in seconds from metadata`);
        }
        period = Math.min(Math.max(period, 0), MAX_DELAY_SEC);
        const timer = setTimeout(() => {
          timers.delete(timer);
          emit({ labels: SUCCESS, msg: derive(msg, { fresh: true }) });
        }, period * 1000);
        timer.unref();
        timers.add(timer);
        return undefined;
      },
      destroy: () => {
        for (const t of timers) clearTimeout(t);
        timers.clear();
      },
    };
  },
};

const GENERATOR_SCRIPT =
  'var msg = { temp: 42, humidity: 77 };\nvar metadata = { data: 40 };\nvar msgType = "POST_TELEMETRY_REQUEST";\n\nreturn { msg: msg, metadata: metadata, msgType: msgType };';
const GENERATOR_ARGS = ['prevMsg', 'prevMetadata', 'prevMsgType'];
const ORIGINATORS: readonly OriginatorType[] = [
  'DEVICE',
  'ASSET',
  'TENANT',
  'CUSTOMER',
  'USER',
  'DASHBOARD',
  'RULE_NODE',
];
/** Shortest generator period: faster would be a load test, not a heartbeat. */
const MIN_PERIOD_SEC = 0.1;

export const generator: NodeSpec = {
  type: `${PREFIX}debug.TbMsgGeneratorNode`,
  defaults: {
    msgCount: 0,
    periodInSeconds: 1,
    originatorType: 'RULE_NODE',
    originatorId: null,
    scriptLang: 'TBEL',
    jsScript: GENERATOR_SCRIPT,
    tbelScript: GENERATOR_SCRIPT,
  },
  check: (c, scripts) => [
    ...checkScript(c, scripts, 'jsScript', 'tbelScript', GENERATOR_ARGS),
    ...oneOf(c, 'originatorType', ORIGINATORS),
    ...(num(c, 'periodInSeconds', 0) >= MIN_PERIOD_SEC
      ? []
      : [`periodInSeconds must be at least ${MIN_PERIOD_SEC}`]),
    ...(c.originatorType !== 'RULE_NODE' && typeof c.originatorId !== 'string'
      ? ['originatorId is required unless originatorType is RULE_NODE']
      : []),
  ],
  create: ({ config, services, id, emit }) => {
    const script = new NodeScript(
      services.scripts,
      config,
      'jsScript',
      'tbelScript',
      GENERATOR_ARGS,
    );
    const count = num(config, 'msgCount', 0);
    const periodMs = Math.max(num(config, 'periodInSeconds', 1), MIN_PERIOD_SEC) * 1000;
    const type = str(config, 'originatorType', 'RULE_NODE') as OriginatorType;
    const originator: EntityRef =
      type === 'RULE_NODE'
        ? { entityType: 'RULE_NODE', id }
        : { entityType: type, id: str(config, 'originatorId') };
    let prev = { data: '{}', metadata: '{}', type: '""' };
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    const tick = () => {
      timer = undefined;
      if (stopped) return;
      const loading = script.prepare();
      if (loading !== undefined) {
        loading.then(tick, (err: unknown) => {
          services.log.warn({ err, node: id }, 'generator script failed');
          if (!stopped) arm();
        });
        return;
      }
      try {
        const r = script.invoke([prev.data, prev.metadata, prev.type]);
        if (r === null || typeof r !== 'object' || Array.isArray(r))
          throw wrongResult('{msg, metadata, msgType}', r);
        const out = r as { msg?: unknown; metadata?: unknown; msgType?: unknown };
        const msg: GatewayMsg = {
          id: randomUUID(),
          type: typeof out.msgType === 'string' && out.msgType !== '' ? out.msgType : 'GENERATOR',
          originator,
          metadata: toMetadata(out.metadata),
          data: out.msg ?? {},
          ts: Date.now(),
        };
        prev = {
          data: JSON.stringify(msg.data),
          metadata: JSON.stringify(msg.metadata),
          type: JSON.stringify(msg.type),
        };
        sent++;
        emit({ labels: SUCCESS, msg });
      } catch (err) {
        services.log.warn({ err, node: id }, 'generator script failed');
      }
      if (count <= 0 || sent < count) arm();
    };
    const arm = () => {
      timer = setTimeout(tick, periodMs);
      timer.unref();
    };
    arm();
    return {
      onMsg: (msg) => ({ labels: SUCCESS, msg }),
      destroy: () => {
        stopped = true;
        if (timer) clearTimeout(timer);
        script.dispose();
      },
    };
  },
};

export const rpcReply: NodeSpec = {
  type: `${PREFIX}rpc.TbSendRPCReplyNode`,
  defaults: {
    serviceIdMetaDataAttribute: 'serviceId',
    sessionIdMetaDataAttribute: 'sessionId',
    requestIdMetaDataAttribute: 'requestId',
  },
  create: ({ config, services }) => {
    const sessionKey = str(config, 'sessionIdMetaDataAttribute', 'sessionId');
    const requestKey = str(config, 'requestIdMetaDataAttribute', 'requestId');
    return {
      onMsg: (msg) => {
        deviceOf(msg, 'rpc call reply');
        const sessionId = msg.metadata[sessionKey];
        const requestId = msg.metadata[requestKey];
        if (!sessionId) throw new Error('Session id is not present in metadata!');
        if (!requestId) throw new Error('Request id is not present in metadata!');
        if (msg.data === undefined || msg.data === null || msg.data === '')
          throw new Error('Request body is empty!');
        if (!services.replyToDevice(sessionId, requestId, JSON.stringify(msg.data)))
          throw new Error('The device session that made the request is gone');
        return { labels: SUCCESS, msg };
      },
    };
  },
};

export const rpcRequest: NodeSpec = {
  type: `${PREFIX}rpc.TbSendRPCRequestNode`,
  defaults: { timeoutInSeconds: 60 },
  create: ({ config, services, emit }) => {
    const timeoutMs = num(config, 'timeoutInSeconds', 60) * 1000;
    const fail = (msg: GatewayMsg, error: string) =>
      emit({ labels: FAILURE, msg: derive(msg, { data: { error }, fresh: true }) });
    return {
      onMsg: (msg) => {
        // A REST RPC the gateway's RPC service has already queued for the device (docs/rules.md).
        if (msg.committed) return { labels: SUCCESS, msg };
        const deviceId = deviceOf(msg, 'rpc call request');
        const data = msg.data as { method?: unknown; params?: unknown } | null;
        if (data === null || typeof data !== 'object' || typeof data.method !== 'string')
          throw new Error("Method can't be empty!");
        if (!('params' in data)) throw new Error("Params can't be empty!");
        const oneway = msg.metadata.oneway === 'true';
        const expirationTime = Number(msg.metadata.expirationTime);
        const body = {
          method: data.method,
          params: data.params,
          persistent: msg.metadata.persistent === 'true',
          ...(Number.isFinite(expirationTime) && expirationTime > 0
            ? { expirationTime }
            : { timeout: timeoutMs }),
        };
        // The input ends here; the reply (or the error) comes later as a new message (§3.4).
        services.callDevice(deviceId, body, oneway).then(
          (result) => {
            switch (result.kind) {
              case 'reply': {
                let reply: unknown;
                try {
                  reply = JSON.parse(result.body);
                } catch {
                  reply = result.body;
                }
                emit({ labels: SUCCESS, msg: derive(msg, { data: reply, fresh: true }) });
                return;
              }
              case 'delivered':
              case 'persisted':
                emit({ labels: SUCCESS, msg: derive(msg, { data: {}, fresh: true }) });
                return;
              case 'timeout':
                fail(msg, 'TIMEOUT');
                return;
              case 'expired':
                fail(msg, 'NO_ACTIVE_CONNECTION');
                return;
              default:
                fail(msg, 'INTERNAL');
            }
          },
          (err: unknown) => {
            services.log.info({ err, deviceId }, 'rpc call request failed');
            fail(msg, 'INTERNAL');
          },
        );
        return undefined;
      },
    };
  },
};

/**
 * The device-profile node: hands each message to the alarm engine (issue 13) when it is wired
 * (`services.profileAlarms`), then sends it on `Success`, as ThingsBoard's node does. The alarm
 * engine's own messages (`ALARM`, created/updated/cleared) come through the entry point. A
 * device uplink the engine already evaluated inside its commit is not evaluated again (the engine
 * decides, `AlarmEngine.process`; docs/alarms.md).
 */
export const deviceProfile: NodeSpec = {
  type: `${PREFIX}profile.TbDeviceProfileNode`,
  defaults: { persistAlarmRulesState: false, fetchAlarmRulesStateOnStart: false },
  create: ({ services }) => ({
    onMsg: (msg) => {
      services.profileAlarms?.process(msg);
      return { labels: SUCCESS, msg };
    },
  }),
};
