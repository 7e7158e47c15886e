/**
 * Rule engine types: a node, what it sends on, and what the engine gives it (rule-engine
 * reference §2, §3; STYLE §12).
 */
import type { Logger } from 'pino';
import type { AlarmTx } from '../alarms/alarm-service.js';
import type { Alarm } from '../alarms/types.js';
import type { AttributeScope, TypedAttributeKv } from '../attributes/types.js';
import type { GatewayMsg, MessageProcessor } from '../messages/types.js';
import type { SmsProviderConfig } from '../notifications/system-settings.js';
import type { RpcCallResult } from '../rpc/types.js';
import type { TimeseriesQuery } from '../telemetry/telemetry-query.js';
import type { TimeseriesResult } from '../telemetry/telemetry-service.js';
import type { ScriptEngine } from './script/sandbox.js';

/** Relation labels every node may use (ThingsBoard's `TbNodeConnectionType`). */
export const SUCCESS = 'Success';
export const FAILURE = 'Failure';
export const TRUE = 'True';
export const FALSE = 'False';

/** One message sent on one or more relation labels. */
export interface NodeOutput {
  readonly labels: string | readonly string[];
  readonly msg: GatewayMsg;
}

/** What `onMsg` gives back: outputs to route, or nothing (the message ends here). */
export type NodeResult = NodeOutput | readonly NodeOutput[] | undefined;

/**
 * A rule node (TB `TbNode`): built once per chain load from its configuration, then `onMsg` per
 * message. A throw (or a rejected promise) sends the message to `Failure`; the engine does
 * that, not the node.
 */
export interface RuleNode {
  onMsg(msg: GatewayMsg): NodeResult | Promise<NodeResult>;
  /**
   * Optional: several messages at once, synchronously (the script nodes run them in one sandbox
   * call). One entry per message, in order: what `onMsg` would give, or the Error it would
   * throw. Undefined when it cannot now: the engine then calls `onMsg` per message.
   */
  onBatch?(msgs: readonly GatewayMsg[]): ReadonlyArray<NodeResult | Error> | undefined;
  /** Releases timers and sandboxes; called when the chain is reloaded or the gateway stops. */
  destroy?(): void;
}

/** Email as the `to email` node builds it and the `send email` node sends it. */
export interface EmailMessage {
  readonly from?: string;
  readonly to: string;
  readonly cc?: string;
  readonly bcc?: string;
  readonly subject: string;
  readonly body: string;
  readonly html?: boolean;
}

/** SMTP settings of a node that does not use the system's. */
export interface SmtpSettings {
  readonly host: string;
  readonly port: number;
  /** Implicit TLS (smtps, usually port 465). */
  readonly secure: boolean;
  /** STARTTLS required (`enableTls`). */
  readonly requireTls: boolean;
  readonly username?: string;
  readonly password?: string;
  readonly timeoutMs: number;
  /** Sender address when a message names none (the system settings' `mailFrom`). */
  readonly from?: string;
}

/**
 * What nodes may use of the gateway. The rule engine's composition passes these in from the
 * domain services; nodes never import services themselves.
 */
export interface RuleServices {
  readonly log: Logger;
  readonly scripts: ScriptEngine;
  /** Stores telemetry in ThingsBoard's payload shapes (`{k:v}`, `{ts,values}`, arrays). */
  saveTelemetry(deviceId: string, payload: unknown): Promise<number>;
  saveAttributes(
    deviceId: string,
    scope: AttributeScope,
    values: Record<string, unknown>,
  ): Promise<void>;
  attributes(deviceId: string, scope: AttributeScope, keys: readonly string[]): TypedAttributeKv[];
  /** Telemetry as the REST API reads it (latest values or history, strict data types). */
  queryTelemetry(deviceId: string, q: TimeseriesQuery): TimeseriesResult;
  /** Answers a device's client-side RPC on the session that asked; false when it has gone. */
  replyToDevice(sessionId: string, requestId: string, json: string): boolean;
  /** Server-side RPC to a device (REST semantics: two-way waits for the reply). */
  callDevice(deviceId: string, body: unknown, oneway: boolean): Promise<RpcCallResult>;
  /** Sends an email with the system SMTP settings, or with `smtp` when given. */
  sendEmail(mail: EmailMessage, smtp?: SmtpSettings): Promise<void>;
  /** Sends one SMS with the system SMS provider, or with `provider` when given. */
  sendSms(number: string, text: string, provider?: SmsProviderConfig): Promise<void>;
  /**
   * Alarms for the create/clear alarm nodes; each call is its own transaction, and its change is
   * not posted to the root chain again (the node sends its own output on).
   */
  readonly alarms?: {
    active: AlarmTx['active'];
    raise(req: Parameters<AlarmTx['raise']>[0]): ReturnType<AlarmTx['raise']>;
    clear: AlarmTx['clear'];
    get(alarmId: string): Alarm | undefined;
  };
  /**
   * The device-profile alarm engine (issue 13), when it is wired: the device-profile node hands it
   * every message it sees, as ThingsBoard's node evaluates the profile's alarm rules.
   */
  readonly profileAlarms?: MessageProcessor;
  /**
   * The upstream outbox (push-to-cloud node), when upstream sync is built: false for a message
   * it cannot carry.
   */
  readonly pushToCloud?: (msg: GatewayMsg) => boolean;
  /**
   * Rule chain node: sends the message to another chain's first node (or, with `toProfileChain`,
   * to its device profile's default chain when it has one), remembering `from` to come back to.
   * Throws when the chain is not there or the calls are nested too deep (a loop between chains).
   */
  callChain(
    msg: GatewayMsg,
    to: { readonly chainId: string; readonly toProfileChain: boolean },
    from: { readonly chainId: string; readonly nodeIndex: number },
  ): void;
  /** Output node: back to the calling chain, routed from its rule chain node by `label`. */
  returnToCaller(msg: GatewayMsg, label: string): void;
  /** Posts a message into a chain (generator and delay nodes): the root when `chainId` is absent. */
  enqueue(
    msg: GatewayMsg,
    chainId?: string,
    fromNode?: { chainId: string; nodeIndex: number },
  ): void;
}

/** Everything a node factory gets. */
export interface NodeInit {
  readonly id: string;
  readonly name: string;
  readonly chainId: string;
  readonly index: number;
  /** Configuration with the node's defaults filled in. */
  readonly config: Readonly<Record<string, unknown>>;
  readonly services: RuleServices;
  /** Sends messages on from this node later (delay, generator, async replies). */
  readonly emit: (result: NodeResult) => void;
}

/** A supported node class: its defaults, its save-time check and its factory. */
export interface NodeSpec {
  /** ThingsBoard's class name, e.g. `org.thingsboard.rule.engine.filter.TbMsgTypeSwitchNode`. */
  readonly type: string;
  /** ThingsBoard's `defaultConfiguration()` (reference §3). */
  readonly defaults: Readonly<Record<string, unknown>>;
  /** Problems of a configuration (with defaults filled in), checked on save; none = valid. */
  check?(config: Readonly<Record<string, unknown>>, scripts: ScriptEngine): string[];
  create(init: NodeInit): RuleNode;
}
