/**
 * The rule engine's part of the composition root: the script sandbox, the chain store, the
 * engine, wired to the domain services nodes use.
 */
import type { Logger } from 'pino';
import type { AlarmService } from '../alarms/alarm-service.js';
import type { AttributeService } from '../attributes/attribute-service.js';
import type { Db } from '../db/open.js';
import type { GatewayMsg, MessageProcessor } from '../messages/types.js';
import type { SmsProviderConfig } from '../notifications/system-settings.js';
import type { ClientRpcService } from '../rpc/client-rpc.js';
import type { RpcService } from '../rpc/rpc-service.js';
import type { TelemetryService } from '../telemetry/telemetry-service.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { Mailer } from './mailer.js';
import { RuleChainService } from './rule-chain-service.js';
import { RuleEngine, type RuleEngineDeps, type RuleEngineOptions } from './rule-engine.js';
import { ScriptEngine, type ScriptLimits } from './script/sandbox.js';
import type { RuleServices, SmtpSettings } from './types.js';

export interface RulesDeps extends RuleEngineOptions {
  readonly db: Db;
  readonly tenants: TenantService;
  readonly telemetry: TelemetryService;
  readonly attributes: AttributeService;
  readonly rpc: RpcService;
  readonly clientRpc: ClientRpcService;
  readonly log: Logger;
  readonly scriptLimits?: Partial<ScriptLimits>;
  readonly systemSmtp?: () => SmtpSettings | undefined;
  /** Alarms of the create/clear alarm nodes. */
  readonly alarms?: Pick<AlarmService, 'transact' | 'get'>;
  /** SMS of the send SMS node (the notification center's channels). */
  readonly sendSms?: (number: string, text: string, provider?: SmsProviderConfig) => Promise<void>;
  /** A device's profile `defaultRuleChainId` (the engine's hook). */
  readonly profileChainOf?: RuleEngineDeps['profileChainOf'];
  /** The device-profile alarm engine, run by the device-profile node. */
  readonly profileAlarms?: MessageProcessor;
  /** The upstream outbox, fed by the push-to-cloud node. */
  readonly pushToCloud?: (msg: GatewayMsg) => boolean;
}

export interface Rules {
  readonly scripts: ScriptEngine;
  readonly chains: RuleChainService;
  readonly engine: RuleEngine;
  readonly mailer: Mailer;
  start(): void;
  stop(): void;
}

/** What the chains store is the gateway's own change: it makes no new message. */
const SYSTEM = { kind: 'system' } as const;

export function createRules(deps: RulesDeps): Rules {
  // QuickJS loads when a script first runs or a chain is saved (its scripts are checked then).
  const scripts = ScriptEngine.lazy(deps.scriptLimits);
  const mailer = new Mailer({ systemSmtp: deps.systemSmtp });
  // The engine reloads a chain after each change; it is made below, before any change can come.
  let engine: RuleEngine | undefined;
  const chains = new RuleChainService({
    db: deps.db,
    tenants: deps.tenants,
    scripts,
    onChange: (id) => engine?.reload(id),
  });
  chains.init();
  engine = new RuleEngine({
    chains,
    log: deps.log,
    queueSize: deps.queueSize,
    maxInFlight: deps.maxInFlight,
    profileChainOf: deps.profileChainOf,
    services: {
      log: deps.log,
      scripts,
      saveTelemetry: (deviceId, payload) => deps.telemetry.save(deviceId, payload, SYSTEM),
      saveAttributes: (deviceId, scope, values) =>
        deps.attributes.save(deviceId, scope, values, SYSTEM),
      attributes: (deviceId, scope, keys) => deps.attributes.get(deviceId, scope, keys),
      queryTelemetry: (deviceId, q) => deps.telemetry.query(deviceId, q),
      // The client-side RPC waiting on that transport session (ClientRpcService).
      replyToDevice: (sessionId, requestId, json) => {
        const id = Number(requestId);
        return Number.isSafeInteger(id) && deps.clientRpc.reply(sessionId, id, json);
      },
      callDevice: (deviceId, body, oneway) => deps.rpc.call(deviceId, body, oneway),
      sendEmail: (mail, smtp) => mailer.send(mail, smtp),
      sendSms: (number, text, provider) =>
        deps.sendSms
          ? deps.sendSms(number, text, provider)
          : Promise.reject(new Error('SMS is not available')),
      alarms: deps.alarms && alarmsFor(deps.alarms),
      profileAlarms: deps.profileAlarms,
      pushToCloud: deps.pushToCloud,
    },
  });
  const ruleEngine = engine;
  return {
    scripts,
    chains,
    engine: ruleEngine,
    mailer,
    start() {
      ruleEngine.start();
    },
    stop() {
      ruleEngine.stop();
      mailer.close();
    },
  };
}

/** The alarm calls of the create/clear alarm nodes: one quiet transaction each. */
function alarmsFor(a: Pick<AlarmService, 'transact' | 'get'>): NonNullable<RuleServices['alarms']> {
  const quiet = { quiet: true };
  return {
    active: (originatorId, type) => a.transact((tx) => tx.active(originatorId, type), quiet),
    raise: (req) => a.transact((tx) => tx.raise(req), quiet),
    clear: (alarmId, details) => a.transact((tx) => tx.clear(alarmId, details), quiet),
    get: (alarmId) => {
      try {
        return a.get(alarmId);
      } catch {
        return undefined;
      }
    },
  };
}
