import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { DEVICE_LIMITS, nonNegativeInt } from '../../common/limits.js';
import type { Subscription } from '../../common/subscriptions.js';
import type { DeviceIdentity, DeviceService } from '../../devices/device-service.js';
import type { TransportSettings } from '../../devices/transport-config.js';
import { NotFoundError, ValidationError } from '../../errors.js';
import type { DeviceMessageService } from '../../messages/device-message-service.js';
import type { OtaType } from '../../ota/ota-service.js';
import type { DeviceCore } from '../device-core.js';
import { PayloadCodec, provisionRequest, provisionResponse, type Wire } from '../payload-codec.js';
import { GatewaySession } from './gateway-session.js';
import { SparkplugSession } from './sparkplug-session.js';
import {
  GATEWAY_TOPIC,
  type MessageLabel,
  maySubscribe,
  OTA_TOPIC,
  otaRequest,
  TOPIC,
  V2_TOPIC,
  type V2Format,
  type V2Kind,
  v2Publish,
  v2Subscription,
} from './topics.js';

/** Sends one PUBLISH to this session's client (QoS 0 or 1, never retained). */
export type Send = (topic: string, payload: string | Buffer, qos: 0 | 1) => Promise<void>;

/**
 * What a publish did, for the adapter: `unknown-topic` is acknowledged and dropped (reference
 * §11); `handled` is labelled for metrics by its fixed topic, a label names what a custom, v2 or
 * Sparkplug topic carried.
 */
export type PublishResult = 'handled' | 'unknown-topic' | MessageLabel;

/** Which of the profile's filters a topic matches (attributes first, transport-profiles §2.1). */
type ProfileRoute = 'attributes' | 'telemetry' | undefined;

/** A CONNECT's will message (Sparkplug nodes must leave their NDEATH there). */
export interface Will {
  readonly topic: string;
  readonly payload: Buffer;
}

const { maxPayloadBytes, maxInflightMessages } = DEVICE_LIMITS;

/** The request id at the end of a topic (`.../request/{id}`), by the core's rule. */
function integerSuffix(topic: string, prefix: string): number {
  return nonNegativeInt(topic.slice(prefix.length), 'request id');
}

/**
 * One authenticated device connection over MQTT: routes its publishes to the core and holds its
 * subscriptions (shared attributes, server-side RPC). Knows topics and payloads, no rules.
 */
export class DeviceSession {
  // @NOTE: a session holds its collections and id only once it needs them: made up front, two
  // empty Maps, a Set and a random UUID (a string V8 builds from 14 pieces) were about 1 KB of the
  // 7 KB of heap an idle connection takes (heap snapshot with 1,000 connections,
  // docs/benchmarks.md "Per connection: a heap snapshot diff").
  #subs: Map<string, Subscription> | undefined;
  #pendingClientRpc: Set<AbortController> | undefined;
  /** Reference §7.2: the package and chunk size are remembered per download request id. */
  #downloads: Map<string, { packageId: string; size: number }> | undefined;
  /** This connection, as `TO_SERVER_RPC_REQUEST` metadata names it (`sessionId`); made on first use. */
  #sessionId: string | undefined;
  #closed = false;
  /** The gateway API of a device flagged as a gateway (reference §9); absent otherwise. */
  readonly #gateway: GatewaySession | undefined;
  /**
   * The device profile's transport settings when the session opened (issue 21): a change of
   * them closes the session (MqttServer), so the device reconnects under the new rules.
   */
  readonly settings: TransportSettings;
  /** JSON or the profile's Protobuf schemas (issue 21). */
  readonly codec: PayloadCodec;
  /** A Sparkplug B edge node's side (profile `sparkplug: true`); absent otherwise. */
  readonly #sparkplug: SparkplugSession | undefined;
  /** Rule-engine messages carry `mqttTopic` metadata (MQTT profiles). */
  readonly #withTopic: boolean;
  /**
   * The profile's decision for the last topic published on (a device mostly repeats one): its
   * filters are matched once per new topic, not per message.
   */
  #lastTopic: string | undefined;
  #lastRoute: ProfileRoute = undefined;

  constructor(
    readonly device: DeviceIdentity,
    private readonly core: DeviceCore,
    devices: DeviceService,
    private readonly send: Send,
    private readonly log: Logger,
    will?: Will,
  ) {
    if (device.isGateway) this.#gateway = new GatewaySession(device, core, devices, send, log);
    this.settings = core.profileTransports.settings(device.profileId);
    this.codec = new PayloadCodec(this.settings.payload);
    // transport-profiles.md §2.1: devices of an MQTT profile tell the rules their topic.
    this.#withTopic = this.settings.type === 'MQTT';
    if (this.settings.sparkplug)
      this.#sparkplug = new SparkplugSession(device, core, devices, this.settings, send, log, will);
  }

  /** The CONNECT was accepted. */
  ready(): void {
    this.#sparkplug?.connected();
  }

  /**
   * Whether a SUBSCRIBE filter is granted (reference §11): the fixed filters, and any filter
   * that the profile's `deviceAttributesSubscribeTopic` matches (transport-profiles.md §2.1).
   */
  maySubscribe(filter: string): boolean {
    return (
      maySubscribe('device', filter, this.device.isGateway) ||
      this.#sparkplug?.maySubscribe(filter) === true ||
      this.settings.attributesSubscribeTopic.matches(filter)
    );
  }

  /** Handles a device PUBLISH; resolves after the data is committed. Throws ValidationError on bad input. */
  async publish(topic: string, payload: Buffer): Promise<PublishResult> {
    const { core, device, codec } = this;
    if (this.#gateway && topic.startsWith(GATEWAY_TOPIC.prefix))
      return await this.#gateway.publish(topic, payload);
    // §4.1: every other publish of an edge node is Sparkplug.
    if (this.#sparkplug) return await this.#sparkplug.publish(topic, payload);
    // transport-profiles.md §2.1: the profile's attribute filter, then its telemetry filter
    // (the v1 topics by default), then the fixed topics.
    const route = this.#profileRoute(topic);
    if (route === 'attributes') {
      core.messages.postAttributes(device, codec.attributes(payload, 'profile'), this.#meta(topic));
      return 'attributes';
    }
    if (route === 'telemetry') {
      const data = codec.telemetry(payload, 'profile');
      await core.messages.postTelemetry(device, data, undefined, this.#meta(topic));
      return 'telemetry';
    }
    if (topic.startsWith(TOPIC.attributesRequestPrefix)) {
      const id = integerSuffix(topic, TOPIC.attributesRequestPrefix);
      this.#attributeRequest(payload, 'v1', id, `${TOPIC.attributesResponsePrefix}${id}`);
      return 'handled';
    }
    if (topic.startsWith(TOPIC.rpcResponsePrefix)) {
      // §3.3: the reply to a server-side RPC, forwarded as text; stale ids are dropped.
      const id = integerSuffix(topic, TOPIC.rpcResponsePrefix);
      core.rpc.reply(device.id, id, codec.rpcReply(payload, 'profile'));
      return 'handled';
    }
    if (topic.startsWith(TOPIC.rpcRequestPrefix)) {
      const id = integerSuffix(topic, TOPIC.rpcRequestPrefix);
      this.#clientRpc(id, payload, 'v1', `${TOPIC.rpcResponsePrefix}${id}`);
      return 'handled';
    }
    const v2 = v2Publish(topic);
    if (v2) return await this.#v2(topic, v2.kind, v2.format, v2.id, payload);
    const ota = otaRequest(topic);
    if (ota) {
      await this.#otaChunk(ota.type, ota.requestId, ota.chunk, payload);
      return 'handled';
    }
    if (topic === TOPIC.claim) {
      core.messages.claim(device, codec.claim(payload, 'profile'));
      return 'handled';
    }
    return 'unknown-topic';
  }

  /** Whether the profile's attribute or telemetry filter takes a topic (the last one cached). */
  #profileRoute(topic: string): ProfileRoute {
    if (topic === this.#lastTopic) return this.#lastRoute;
    const { settings } = this;
    const route = settings.attributesTopic.matches(topic)
      ? 'attributes'
      : settings.telemetryTopic.matches(topic)
        ? 'telemetry'
        : undefined;
    this.#lastTopic = topic;
    this.#lastRoute = route;
    return route;
  }

  /** ThingsBoard's short topics (reference §11): `/j` forces JSON, `/p` Protobuf. */
  async #v2(
    topic: string,
    kind: V2Kind,
    format: V2Format,
    rawId: string | undefined,
    payload: Buffer,
  ): Promise<MessageLabel> {
    const { core, device, codec } = this;
    const wire: Wire = format ?? 'profile';
    const id = rawId === undefined ? 0 : nonNegativeInt(rawId, 'request id');
    switch (kind) {
      case 'telemetry':
        await core.messages.postTelemetry(
          device,
          codec.telemetry(payload, wire),
          undefined,
          this.#meta(topic),
        );
        return 'telemetry';
      case 'attributes':
        core.messages.postAttributes(device, codec.attributes(payload, wire), this.#meta(topic));
        return 'attributes';
      case 'attributeRequest':
        this.#attributeRequest(payload, wire, id, V2_TOPIC.attributeResponse(format, id));
        return 'attributes_request';
      case 'rpcReply':
        core.rpc.reply(device.id, id, codec.rpcReply(payload, wire));
        return 'rpc_response';
      case 'clientRpc':
        this.#clientRpc(id, payload, wire, V2_TOPIC.rpcResponse(format, id));
        return 'rpc_request';
    }
  }

  /** `mqttTopic` metadata of telemetry and attribute messages (MQTT profiles, §2.1). */
  #meta(topic: string): Record<string, string> | undefined {
    return this.#withTopic ? { mqttTopic: topic } : undefined;
  }

  #attributeRequest(payload: Buffer, wire: Wire, id: number, responseTopic: string): void {
    const keys = this.codec.attributeRequest(payload, wire);
    const res = this.core.attributes.forDevice(this.device, keys);
    void this.#reply(responseTopic, this.codec.attributeResponse(res, id, wire));
  }

  /** Starts what a granted SUBSCRIBE asks for. */
  subscribed(filter: string): void {
    if (this.#closed || this.#subs?.has(filter)) return;
    if (this.#gateway && filter.startsWith(GATEWAY_TOPIC.prefix)) {
      this.#gateway.subscribed(filter);
      return;
    }
    const v2 = v2Subscription(filter);
    if (filter === TOPIC.attributes || this.settings.attributesSubscribeTopic.matches(filter)) {
      // §2.1: updates go out on the v1 topic, whatever filter asked for them.
      this.#sharedUpdates(filter, TOPIC.attributes, 'v1');
    } else if (v2?.kind === 'attributes') {
      this.#sharedUpdates(filter, V2_TOPIC.attributes(v2.format), v2.format ?? 'profile');
    } else if (filter === `${TOPIC.rpcRequestPrefix}+`) {
      this.#serverRpc(filter, (id) => `${TOPIC.rpcRequestPrefix}${id}`, 'v1');
    } else if (v2?.kind === 'rpc') {
      const format = v2.format;
      this.#serverRpc(filter, (id) => V2_TOPIC.rpcRequest(format, id), format ?? 'profile');
    }
  }

  #sharedUpdates(filter: string, topic: string, wire: Wire): void {
    this.#subs ??= new Map();
    this.#subs.set(
      filter,
      this.core.attributes.subscribe(this.device.id, (update) => {
        void this.#reply(topic, this.codec.sharedUpdate(update, wire));
      }),
    );
  }

  /** §3.2: every pending request is pushed at once (BURST), then each new one. */
  #serverRpc(filter: string, topicOf: (id: number) => string, wire: Wire): void {
    const { core, device } = this;
    this.#subs ??= new Map();
    this.#subs.set(
      filter,
      core.rpc.subscribe(device.id, (req) => {
        let body: string | Buffer;
        try {
          body = this.codec.rpcRequest(req, wire, () =>
            JSON.stringify({ method: req.method, params: req.params }),
          );
        } catch (err) {
          core.rpc.failed(device.id, req.id, (err as Error).message);
          return;
        }
        this.send(topicOf(req.id), body, 1).then(
          () => core.rpc.delivered(device.id, req.id),
          (err: Error) => core.rpc.failed(device.id, req.id, err.message),
        );
      }),
    );
  }

  unsubscribed(filter: string): void {
    if (this.#gateway && filter.startsWith(GATEWAY_TOPIC.prefix))
      this.#gateway.unsubscribed(filter);
    this.#subs?.get(filter)?.unsubscribe();
    this.#subs?.delete(filter);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Ends every subscription and pending client-side RPC of the session. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#gateway?.close();
    this.#sparkplug?.close();
    for (const sub of this.#subs?.values() ?? []) sub.unsubscribe();
    this.#subs?.clear();
    for (const ac of this.#pendingClientRpc ?? []) ac.abort();
    this.#pendingClientRpc?.clear();
  }

  /** Client-side RPC (§4): answered on the response topic, or `{"error":"timeout"}`. */
  #clientRpc(id: number, payload: Buffer, wire: Wire, responseTopic: string): void {
    const body = this.codec.clientRpcRequest(payload, wire);
    const method = (body as { method?: unknown } | null)?.method;
    if (method === 'getSessionLimits') {
      // Answered by the transport itself, as ThingsBoard does: the SDKs ask on every connect.
      const limits = {
        maxPayloadSize: maxPayloadBytes,
        maxInflightMessages,
        rateLimits: { messages: null, telemetryMessages: null, telemetryDataPoints: null },
      };
      void this.#reply(
        responseTopic,
        this.codec.clientRpcResponse(JSON.stringify(limits), id, wire),
      );
      return;
    }
    const ac = new AbortController();
    this.#sessionId ??= randomUUID();
    // Validates now, so a bad request fails the publish; the reply comes later.
    const pending = this.core.messages.toServerRpc(this.device, body, {
      sessionId: this.#sessionId,
      requestId: id,
      signal: ac.signal,
    });
    this.#pendingClientRpc ??= new Set();
    const inFlight = this.#pendingClientRpc;
    inFlight.add(ac);
    void pending.then((outcome) => {
      inFlight.delete(ac);
      if (outcome.kind === 'value')
        void this.#reply(responseTopic, this.codec.clientRpcResponse(outcome.value, id, wire));
      else if (outcome.kind === 'timeout')
        void this.#reply(responseTopic, this.codec.clientRpcResponse('', id, wire, 'timeout'));
    });
  }

  /**
   * A firmware chunk (reference §7.2). The payload is the chunk size as decimal text; empty or 0
   * reuses the size remembered for the request id (0 = the whole file). Errors go to
   * `v2/fw/error` and close the connection, as ThingsBoard does.
   */
  async #otaChunk(
    type: OtaType,
    requestId: string,
    rawChunk: string,
    payload: Buffer,
  ): Promise<void> {
    nonNegativeInt(requestId, 'firmware request id');
    const chunk = nonNegativeInt(rawChunk, 'chunk');
    const text = payload.toString('utf8').trim();
    const requested = text === '' ? 0 : nonNegativeInt(text, 'firmware chunk size');
    const key = `${type}:${requestId}`;
    let download = this.#downloads?.get(key);
    try {
      if (!download) {
        download = { packageId: this.core.ota.packageFor(this.device.id, type).id.id, size: 0 };
        this.#downloads ??= new Map();
        this.#downloads.set(key, download);
      }
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      await this.#reply(OTA_TOPIC.error, 'NOT_FOUND');
      throw err;
    }
    const size = requested || download.size;
    if (size > maxPayloadBytes) {
      await this.#reply(OTA_TOPIC.error, 'PAYLOAD_TOO_LARGE');
      throw new ValidationError(`firmware chunk size ${size} is over ${maxPayloadBytes}`);
    }
    download.size = size;
    this.core.messages.firmwareRequested(this.device, type, { size, chunk, requestId });
    const data = this.core.ota.chunk(download.packageId, size, chunk);
    await this.send(OTA_TOPIC.response(type, requestId, chunk), data, 1);
  }

  async #reply(topic: string, payload: string | Buffer): Promise<void> {
    if (this.#closed) return;
    try {
      await this.send(topic, payload, 1);
    } catch (err) {
      this.log.debug({ err, deviceId: this.device.id, topic }, 'mqtt reply not delivered');
    }
  }
}

/**
 * A provisioning-only connection (user name or client id `provision`, reference §6.4): one topic
 * in, one out; JSON, or Protobuf answered in Protobuf (transport-profiles.md §3).
 */
export class ProvisionSession {
  constructor(
    private readonly messages: DeviceMessageService,
    private readonly send: Send,
  ) {}

  publish(topic: string, payload: Buffer): PublishResult {
    if (topic !== TOPIC.provisionRequest) return 'unknown-topic';
    const { body, proto } = provisionRequest(payload);
    const res = this.messages.provision(body);
    void this.send(TOPIC.provisionResponse, provisionResponse(res, proto), 1).catch(() => {
      // The device went away before its answer: nothing to do, it provisions again.
    });
    return 'handled';
  }
}
