import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, TLSSocket } from 'node:tls';
import { Aedes, type AuthenticateError, type Client, type PublishPacket } from 'aedes';
import { writeToStream } from 'mqtt-packet';
import type { Logger } from 'pino';
import { createWebSocketStream, WebSocketServer } from 'ws';
import type { DeviceService, MqttAuthResult } from '../../devices/device-service.js';
import type { TransportChange } from '../../devices/profile-transports.js';
import { loadProtobuf, protobufLoaded } from '../../devices/protobuf-lib.js';
import { fromStorageError, GatewayError, ValidationError } from '../../errors.js';
import type { IngestMeter } from '../../metrics/metrics.js';
import type { DeviceCore } from '../device-core.js';
import { provisionIsProtobuf } from '../payload-codec.js';
import { DeviceSession, ProvisionSession, type Send, type Will } from './device-session.js';
import { loadSparkplugCodec, sparkplugCodecLoaded } from './sparkplug-session.js';
import {
  markIllFormedStrings,
  packetScreen,
  publishViolation,
  subscribeViolation,
} from './strict.js';
import { maySubscribe, messageType, TOPIC, v2Publish, v2Subscription } from './topics.js';

export interface MqttServerDeps {
  readonly devices: DeviceService;
  readonly core: DeviceCore;
  readonly host: string;
  readonly port: number;
  readonly log: Logger;
  /** Largest accepted MQTT packet in bytes; a larger one closes the connection. */
  readonly maxPacketBytes?: number;
  /** MQTT over TLS (reference §0: port 8883), when a certificate and key are configured. */
  readonly tls?: { readonly port: number; readonly certFile: string; readonly keyFile: string };
  /** Counts each device message the core accepted. */
  readonly meter?: IngestMeter;
}

/** Path of MQTT over WebSocket on the HTTP port, for browser tools. */
export const MQTT_WS_PATH = '/mqtt';

type Session = DeviceSession | ProvisionSession;

// MQTT 3.1.1 §3.2.2.3 CONNACK return codes. Aedes maps them to MQTT 5 reason codes:
// 2 → 0x85 client identifier not valid, 4 → 0x86 bad user name or password, 5 → 0x87 not authorized.
const IDENTIFIER_REJECTED = 2;
const SERVER_UNAVAILABLE = 3;
const BAD_USERNAME_OR_PASSWORD = 4;
const NOT_AUTHORIZED = 5;
// MQTT 5 §3.14.2.1 DISCONNECT reason code 0x8E: session taken over.
const SESSION_TAKEN_OVER = 0x8e;
// MQTT 5 §3.14.2.1 DISCONNECT reason code 0x98: administrative action.
const ADMINISTRATIVE_ACTION = 0x98;
// MQTT 5 §2.4 reason code 0x99: payload format invalid.
const PAYLOAD_FORMAT_INVALID = 0x99;
// MQTT 3.1.1 §3.4.1 / MQTT 5 §3.4.1: PUBACK fixed header (type 4, no flags).
const PUBACK_HEADER = 0x40;

/**
 * CONNACK code of a refused CONNECT, as ThingsBoard answers (reference §8.3): a bad token is 5 on
 * MQTT 3.1.1 and 0x86 on MQTT 5; an unknown client id without user name is 2 / 0x85.
 */
function refusalCode(
  result: Extract<MqttAuthResult, { kind: 'refused' }>,
  version: number,
): number {
  switch (result.reason) {
    case 'unknown-client-id':
      return IDENTIFIER_REJECTED;
    case 'bad-credentials':
      return version === 5 ? BAD_USERNAME_OR_PASSWORD : NOT_AUTHORIZED;
    default:
      return NOT_AUTHORIZED;
  }
}

/** Bound of the refusals held back at once (each holds a paused connection). */
const MAX_DELAYED_REFUSALS = 1000;

/** The peer address of a TCP, TLS or WebSocket connection. */
function remoteAddress(client: Client): string {
  const conn = client.conn as { remoteAddress?: string };
  const req = (client as { req?: { socket?: { remoteAddress?: string } } }).req;
  return conn.remoteAddress ?? req?.socket?.remoteAddress ?? 'unknown';
}

function refusal(message: string, returnCode: number): AuthenticateError {
  const err = new Error(message) as AuthenticateError;
  err.returnCode = returnCode;
  return err;
}

/**
 * The MQTT listener: an Aedes broker behind a TCP server. The core is reached only through Aedes
 * hooks; each connection gets a DeviceSession (or a ProvisionSession) that maps topics to the
 * core services. The gateway is not a general broker: nothing a device publishes is forwarded.
 */
export class MqttServer {
  #broker: Aedes | undefined;
  #server: Server | undefined;
  #tlsServer: Server | undefined;
  #wss: WebSocketServer | undefined;
  /** Aedes' connection handler with the strict string check (strict.ts) added. */
  #handle: ((conn: Parameters<Aedes['handle']>[0], req?: IncomingMessage) => void) | undefined;
  readonly #sessions = new WeakMap<Client, Session>();
  /** CONNACK refusals held back for throttled addresses, now. */
  #delayed = 0;
  /** One connection per device: a newer one takes over (reference §8.5). */
  readonly #byDevice = new Map<string, Client>();
  #unwatch: (() => void) | undefined;

  constructor(private readonly deps: MqttServerDeps) {}

  async start(): Promise<number> {
    const { log, devices } = this.deps;
    // @NOTE: mqtt-packet (Aedes' writer) otherwise builds a cache of 65,536 two-byte Buffers, one
    // per message id, on its first write: 65,537 objects and about 8 MB of heap held for the
    // process's life (a heap snapshot with 1,000 connections). Without it a packet with a message
    // id allocates its 2 bytes when written; the gateway writes its PUBACKs itself.
    writeToStream.cacheNumbers = false;
    const broker = await Aedes.createBroker({
      maximumPacketSize: this.deps.maxPacketBytes ?? 65536,
      authenticate: (client, username, password, done) => {
        let result: MqttAuthResult;
        try {
          result = devices.resolveMqtt(
            client.id,
            username || undefined,
            password?.toString('utf8'),
            clientCertificate(client),
          );
        } catch (err) {
          log.error({ err, clientId: client.id }, 'mqtt credential check failed');
          done(refusal('Server unavailable', SERVER_UNAVAILABLE), false);
          return;
        }
        if (result.kind === 'refused') {
          log.info({ clientId: client.id, reason: result.reason }, 'mqtt connect refused');
          const refuse = () =>
            done(
              refusal(`connection refused: ${result.reason}`, refusalCode(result, client.version)),
              false,
            );
          // A throttled address gets its refusals slowly (issue 20); a bounded number wait.
          const delay = this.deps.core.deviceAuth.failed(remoteAddress(client), 'mqtt');
          if (delay && this.#delayed < MAX_DELAYED_REFUSALS) {
            this.#delayed++;
            setTimeout(() => {
              this.#delayed--;
              refuse();
            }, delay).unref();
          } else refuse();
          return;
        }
        // Aedes takes a session over by client id alone [MQTT-3.1.4-2]; a client id is scoped to
        // the device that authenticated, so that one device can never take over another's session
        // by choosing its client id (issue 20). A provisioning connection gets an id of its own.
        client.id =
          result.kind === 'device'
            ? `${result.device.id}/${client.id}`
            : `provision/${randomUUID()}`;
        const open = () => {
          const send = sender(client);
          let session: Session;
          try {
            session =
              result.kind === 'device'
                ? new DeviceSession(
                    result.device,
                    this.deps.core,
                    devices,
                    send,
                    log,
                    willOf(client),
                  )
                : new ProvisionSession(this.deps.core.messages, send);
          } catch (err) {
            // A Sparkplug node without its NDEATH will (transport-profiles.md §4.1).
            if (!(err instanceof ValidationError)) throw err;
            log.info({ clientId: client.id, reason: err.message }, 'mqtt connect refused');
            done(refusal(err.message, SERVER_UNAVAILABLE), false);
            return;
          }
          this.#sessions.set(client, session);
          done(null, true);
        };
        // The first Sparkplug node loads the Sparkplug codec (sparkplug-session.ts).
        if (
          result.kind === 'device' &&
          !sparkplugCodecLoaded() &&
          this.deps.core.profileTransports.settings(result.device.profileId).sparkplug
        ) {
          loadSparkplugCodec().then(open, (err: unknown) => {
            log.error({ err, clientId: client.id }, 'mqtt sparkplug codec not loaded');
            done(refusal('Server unavailable', SERVER_UNAVAILABLE), false);
          });
          return;
        }
        open();
      },
      authorizePublish: (client, packet, callback) => {
        // Retained flags are ignored and QoS is capped at 1 (reference §11). Device publishes are
        // answered here and never routed (see acknowledge); a will, which Aedes routes after this
        // hook, carries the client id, so authorizeForward keeps it from every other client.
        packet.retain = false;
        Object.assign(packet, { clientId: client?.id ?? '' });
        if (packet.qos > 1) packet.qos = 1;
        const session = client ? this.#sessions.get(client) : undefined;
        if (!client || !session) {
          callback(new Error('not authenticated'));
          return;
        }
        const violation = publishViolation(packet);
        if (violation) {
          this.#violation(client, violation.reason, violation.reasonCode);
          answeredAlready(packet, callback);
          return;
        }
        this.#touch(client);
        // The PUBACK is written only after the core has committed.
        this.#publish(client, session, packet).then(
          (answered) =>
            answered ? answeredAlready(packet, callback) : acknowledge(client, packet, callback),
          (err: Error) => callback(err),
        );
      },
      authorizeSubscribe: (client, sub, callback) => {
        const session = this.#sessions.get(client);
        const granted =
          session instanceof DeviceSession
            ? session.maySubscribe(sub.topic)
            : session !== undefined && maySubscribe('provision', sub.topic);
        if (!granted) {
          log.info({ clientId: client.id, topic: sub.topic }, 'mqtt subscribe refused');
          callback(null, null);
          return;
        }
        const grant = () => callback(null, { ...sub, qos: Math.min(sub.qos, 1) as 0 | 1 });
        // Updates on a `/p` v2 filter are written in Protobuf (protobuf-lib.ts).
        if (!protobufLoaded() && v2Subscription(sub.topic)?.format === 'proto') {
          loadProtobuf().then(grant, (err: unknown) => {
            log.error({ err, clientId: client.id }, 'mqtt protobufjs not loaded');
            callback(null, null);
          });
          return;
        }
        grant();
      },
      // Only server messages are delivered; see authorizePublish.
      authorizeForward: (_client, packet) =>
        (packet as { clientId?: string }).clientId ? null : packet,
    });
    broker.on('clientReady', (client) => this.#onReady(client));
    broker.on('ping', (_packet, client) => this.#touch(client));
    broker.on('clientDisconnect', (client) => this.#onGone(client));
    // Subscriptions start after the SUBACK, so pending RPCs follow it on the wire.
    broker.on('subscribe', (subs, client) => {
      const session = this.#sessions.get(client);
      if (session instanceof DeviceSession) for (const s of subs) session.subscribed(s.topic);
    });
    broker.on('unsubscribe', (topics, client) => {
      const session = this.#sessions.get(client);
      if (session instanceof DeviceSession) for (const t of topics) session.unsubscribed(t);
    });
    // A client error does not always close the connection (MQTT 5 keeps it after a refused
    // publish); sessions end on 'clientDisconnect', which every close emits.
    broker.on('clientError', (client, err) =>
      log.debug({ clientId: client.id, err }, 'mqtt client error'),
    );
    broker.on('connectionError', (client, err) =>
      log.debug({ clientId: client?.id, err }, 'mqtt connection error'),
    );
    this.#broker = broker;
    this.#unwatch = this.deps.core.profileTransports.onChange((change) => this.#reconnect(change));
    // A malformed topic filter closes the connection; the broker never sees the packet.
    const screen = packetScreen((parser, packet) => {
      if (packet.cmd === 'connect') {
        shareParserSettings(parser, packet);
        return true;
      }
      if (packet.cmd !== 'subscribe' && packet.cmd !== 'unsubscribe') return true;
      const violation = subscribeViolation(packet);
      if (!violation) return true;
      // Aedes gives each parser its client (lib/client.js).
      this.#violation(
        (parser as { client: Client }).client,
        violation.reason,
        violation.reasonCode,
      );
      return false;
    });
    const handle = (conn: Parameters<Aedes['handle']>[0], req?: IncomingMessage) => {
      const client = broker.handle(conn, req as Parameters<Aedes['handle']>[1]);
      const parser = (client as unknown as { _parser: unknown })._parser;
      plainByteList(parser);
      lazyTopicAliases(client);
      closeOnClose(client);
      markIllFormedStrings(parser);
      screen(parser);
    };
    this.#handle = handle;
    const server = createServer(handle);
    this.#server = server;
    await listen(server, this.deps.port, this.deps.host);
    const { tls } = this.deps;
    if (tls) {
      // A device may present a certificate (X.509 credentials, reference §8.2). It is asked for
      // but not checked against a CA here: devices' certificates are mostly self-signed, and the
      // core decides whether one belongs to a device. The handshake still proves that the client
      // holds the certificate's private key (TLS CertificateVerify).
      const tlsServer = createTlsServer(
        {
          cert: readFileSync(tls.certFile),
          key: readFileSync(tls.keyFile),
          requestCert: true,
          rejectUnauthorized: false,
        },
        handle,
      );
      tlsServer.on('tlsClientError', (err) => log.debug({ err }, 'mqtt tls handshake failed'));
      this.#tlsServer = tlsServer;
      await listen(tlsServer, tls.port, this.deps.host);
    }
    this.#wss = new WebSocketServer({ noServer: true });
    return this.port;
  }

  /**
   * HTTP upgrade handler for MQTT over WebSocket at `/mqtt` on the HTTP port; other paths are
   * refused. The stream goes to the same broker as TCP connections.
   */
  readonly handleUpgrade = (req: IncomingMessage, socket: Socket, head: Buffer): void => {
    const wss = this.#wss;
    const handle = this.#handle;
    const path = new URL(req.url ?? '/', 'http://gateway').pathname;
    if (!wss || !handle || path !== MQTT_WS_PATH) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const stream = createWebSocketStream(ws);
      stream.on('error', (err) => this.deps.log.debug({ err }, 'mqtt websocket error'));
      handle(stream, req);
    });
  };

  /**
   * Routes a device PUBLISH to the core (reference §11 for failures): bad input closes an MQTT
   * 3.x connection; on MQTT 5 a QoS 1 publish gets PUBACK 0x99 and the connection stays (resolves
   * `true`: answered here).
   */
  async #publish(client: Client, session: Session, packet: PublishPacket): Promise<boolean> {
    const payload = Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload);
    try {
      if (!protobufLoaded() && publishNeedsProtobuf(packet.topic, payload)) await loadProtobuf();
      const result = await session.publish(packet.topic, payload);
      if (result !== 'unknown-topic')
        this.deps.meter?.('mqtt', result === 'handled' ? messageType(packet.topic) : result);
      if (result === 'unknown-topic') {
        this.deps.log.debug({ clientId: client.id, topic: packet.topic }, 'mqtt unknown topic');
        // A provisioning session may use its one topic only (reference §6.4).
        if (session instanceof ProvisionSession) setImmediate(() => client.close());
      }
      return false;
    } catch (raw) {
      const err = fromStorageError(raw);
      const invalid = err instanceof ValidationError;
      const reason = (err as Error).message;
      if (err instanceof GatewayError) {
        this.deps.log.info(
          { clientId: client.id, topic: packet.topic, reason },
          'mqtt publish rejected',
        );
      } else {
        this.deps.log.error(
          { err, clientId: client.id, topic: packet.topic },
          'mqtt publish failed',
        );
      }
      // The profile's `sendAckOnValidationException` keeps MQTT 3.1.1 sessions too (issue 21).
      const ackInvalid =
        client.version === 5 ||
        (session instanceof DeviceSession && session.settings.sendAckOnValidationException);
      if (invalid && ackInvalid && packet.qos === 1 && packet.messageId !== undefined) {
        // Aedes would answer 0x87; write the PUBACK here (3.1.1 has no reason code).
        const v5 = client.version === 5;
        client.conn.write(puback(packet.messageId, v5 ? PAYLOAD_FORMAT_INVALID : undefined));
        return true;
      }
      throw err;
    }
  }

  /**
   * A protocol violation closes the connection (MQTT 3.1.1 §4.8, MQTT 5 §4.13: DISCONNECT with
   * the reason code first); nothing of the packet is processed or acknowledged.
   */
  #violation(client: Client, reason: string, reasonCode: number): void {
    this.deps.log.info({ clientId: client.id, reason }, 'mqtt protocol violation: closing');
    const c = client as Client & {
      disconnect?: (opts: { reasonCode: number }, done?: () => void) => void;
    };
    if (client.version === 5 && c.disconnect) c.disconnect({ reasonCode });
    else client.close();
  }

  /** Any packet from a device counts as activity (PINGREQ too, reference §8.5). */
  #touch(client: Client): void {
    const session = this.#sessions.get(client);
    if (session instanceof DeviceSession) this.deps.core.activity.record(session.device);
  }

  #onReady(client: Client): void {
    const session = this.#sessions.get(client);
    if (!(session instanceof DeviceSession)) return;
    this.deps.core.messages.connected(session.device);
    session.ready();
    const deviceId = session.device.id;
    const previous = this.#byDevice.get(deviceId);
    this.#byDevice.set(deviceId, client);
    if (previous && previous !== client && !previous.closed) {
      this.deps.log.info({ deviceId, clientId: previous.id }, 'mqtt session taken over');
      // v5 clients get DISCONNECT 0x8E first; v3 connections are just closed.
      const old = previous as Client & {
        disconnect?: (opts: { reasonCode: number }, done?: () => void) => void;
      };
      if (old.disconnect) old.disconnect({ reasonCode: SESSION_TAKEN_OVER });
      else previous.close();
    }
  }

  #onGone(client: Client): void {
    const session = this.#sessions.get(client);
    if (!(session instanceof DeviceSession)) return;
    if (session.closed) return;
    session.close();
    this.deps.core.messages.disconnected(session.device);
    if (this.#byDevice.get(session.device.id) === client) this.#byDevice.delete(session.device.id);
  }

  /**
   * A profile's transport settings changed, or a device moved to another profile (issue 21):
   * its sessions are closed (MQTT 5: DISCONNECT 0x98 administrative action) and the devices
   * reconnect under the new rules. ThingsBoard swaps the settings of live sessions instead
   * (transport-profiles.md §2.5); closing is simpler to reason about and lets a device with a
   * new topic filter or Sparkplug setting start clean.
   */
  #reconnect(change: TransportChange): void {
    for (const [deviceId, client] of this.#byDevice) {
      const session = this.#sessions.get(client);
      if (!(session instanceof DeviceSession)) continue;
      const stale =
        change.kind === 'profile'
          ? session.device.profileId === change.profileId
          : deviceId === change.deviceId && session.device.profileId !== change.profileId;
      if (!stale) continue;
      this.deps.log.info({ deviceId, change: change.kind }, 'mqtt session closed: profile changed');
      const c = client as Client & {
        disconnect?: (opts: { reasonCode: number }, done?: () => void) => void;
      };
      if (client.version === 5 && c.disconnect) c.disconnect({ reasonCode: ADMINISTRATIVE_ACTION });
      else client.close();
    }
  }

  /** Open MQTT connections (TCP, TLS and WebSocket), authenticated or not yet. */
  get connections(): number {
    return this.#broker?.connectedClients ?? 0;
  }

  /** Connected MQTT sessions of devices (one per device). */
  get connectedDevices(): number {
    return this.#byDevice.size;
  }

  get port(): number {
    return (this.#server?.address() as AddressInfo | null)?.port ?? 0;
  }

  get tlsPort(): number {
    return (this.#tlsServer?.address() as AddressInfo | null)?.port ?? 0;
  }

  async stop(): Promise<void> {
    const servers = [this.#server, this.#tlsServer].filter((s) => s !== undefined);
    const broker = this.#broker;
    this.#unwatch?.();
    this.#unwatch = undefined;
    this.#server = undefined;
    this.#tlsServer = undefined;
    this.#broker = undefined;
    this.#wss?.close();
    this.#wss = undefined;
    this.#handle = undefined;
    const closed = servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve())));
    if (broker) await new Promise<void>((resolve) => broker.close(() => resolve()));
    await Promise.all(closed);
  }
}

/** The DER bytes of the certificate a TLS client presented; undefined without one (or TLS). */
function clientCertificate(client: Client): Buffer | undefined {
  const conn = client.conn;
  return conn instanceof TLSSocket ? conn.getPeerX509Certificate()?.raw : undefined;
}

/**
 * Gives a client's mqtt-packet parser a plain byte list for its unparsed bytes instead of the
 * `bl` BufferListStream it makes: a whole Duplex stream (about 900 B of heap per connection) used
 * only for its byte methods, which bl's BufferList has too (the stream copies them from it) in
 * 88 B. The parser makes a stream again only after a parse error, which closes the connection.
 *
 * @NOTE: reaches into mqtt-packet's parser (`_list` of the pinned version) before any byte
 * arrived, and takes BufferList from the stream's constructor, where bl exports it, rather than
 * importing bl, which is mqtt-packet's dependency and not ours.
 */
function plainByteList(parser: unknown): void {
  type ByteList = { length: number };
  const p = parser as { _list?: ByteList };
  const Plain = (p._list?.constructor as { BufferList?: new () => ByteList } | undefined)
    ?.BufferList;
  if (p._list && p._list.length === 0 && typeof Plain === 'function') p._list = new Plain();
}

/**
 * What mqtt-packet's parser reads of its `settings`: one frozen object per protocol version
 * (3.1, 3.1.1, 5) and bridge flag, shared by every connection.
 */
const PARSER_SETTINGS: ReadonlyArray<Readonly<{ protocolVersion: number; bridgeMode: boolean }>> = [
  3, 4, 5,
].flatMap((protocolVersion) =>
  [false, true].map((bridgeMode) => Object.freeze({ protocolVersion, bridgeMode })),
);

/**
 * Lets a client's parser keep a shared settings object instead of the whole CONNECT packet.
 *
 * @NOTE: mqtt-packet's parser keeps the CONNECT it parsed as its `settings` for the connection's
 * life (client id, user name, password, will and properties: about 250 B of heap per idle
 * connection) and reads only `protocolVersion` and `bridgeMode` of it afterwards (parser.js of
 * the pinned version). Aedes has the packet itself for the CONNECT's handling.
 */
function shareParserSettings(parser: unknown, connect: { cmd: string }): void {
  const p = parser as { settings?: unknown };
  if (p.settings !== connect) return;
  const c = connect as { protocolVersion?: number; bridgeMode?: boolean };
  const bridgeMode = c.bridgeMode === true;
  const shared = PARSER_SETTINGS.find(
    (s) => s.protocolVersion === c.protocolVersion && s.bridgeMode === bridgeMode,
  );
  if (shared) p.settings = shared;
}

/**
 * MQTT 5 inbound topic aliases of one connection, made on the first alias: Aedes makes a `Map`
 * per client up front (`_topicAliases`, 184 B of heap), which MQTT 3.1.1 clients and MQTT 5
 * clients that send no alias never use. Aedes only calls `get` and `set` on it
 * (lib/handlers/publish.js of the pinned version).
 */
class TopicAliases {
  #map: Map<number, string> | undefined;

  get(alias: number): string | undefined {
    return this.#map?.get(alias);
  }

  set(alias: number, topic: string): this {
    this.#map ??= new Map();
    this.#map.set(alias, topic);
    return this;
  }
}

function lazyTopicAliases(client: Client): void {
  const c = client as unknown as { _topicAliases?: unknown };
  if (c._topicAliases instanceof Map && c._topicAliases.size === 0)
    c._topicAliases = new TopicAliases();
}

/**
 * Closes an Aedes client on its stream's `close` event instead of through `stream.finished`.
 *
 * @NOTE: Aedes watches each connection with `finished(conn, close)` (lib/client.js of the pinned
 * version), which registers up to seven listeners on the socket and keeps their closures and their
 * context for the connection's life (about 0.8 KB of heap per idle connection, heap snapshot in
 * docs/benchmarks.md, "5,000 idle MQTT connections: lighter connections, lazy Protobuf, a trim that
 * sees malloc"). Every way a connection ends reaches `close` without it: Aedes closes on `end` and
 * on `error` itself, and a socket emits `close` after any other end (destroyed by the gateway, a
 * takeover, a half-closed socket finishing). Aedes calls `_eos` once when it closes, to remove the
 * watch. The listener and the removal are shared functions (the connection knows its client), not
 * closures.
 */
function closeOnClose(client: Client): void {
  const c = client as unknown as {
    _eos?: () => void;
    conn: { on?: unknown; removeListener?: unknown; client?: unknown };
  };
  const { conn } = c;
  if (typeof c._eos !== 'function' || typeof conn.on !== 'function' || conn.client !== client)
    return;
  c._eos();
  (conn as Watched).on('close', closeItsClient);
  c._eos = unwatchClose;
}

/** A connection as Aedes leaves it: its client in `client` (lib/client.js). */
type Watched = {
  client: { close: () => void };
  on: (e: 'close', f: () => void) => void;
  removeListener: (e: 'close', f: () => void) => void;
};

/** The connection's `close` listener, one function for all (`this` is the connection). */
function closeItsClient(this: Watched): void {
  // `close` runs once; the event's hadError is not passed on (close takes a callback).
  this.client.close();
}

/** Aedes' `_eos()` when it closes the client (`this` is the client). */
function unwatchClose(this: { conn: Watched }): void {
  this.conn.removeListener('close', closeItsClient);
}

/**
 * Whether a device PUBLISH is read with protobufjs whatever its profile: a `/p` v2 topic, or a
 * provisioning request that is not JSON (transport-profiles.md §2.3, §3).
 */
function publishNeedsProtobuf(topic: string, payload: Buffer): boolean {
  if (topic === TOPIC.provisionRequest) return provisionIsProtobuf(payload);
  return v2Publish(topic)?.format === 'proto';
}

/** The will of the CONNECT being authenticated (Aedes keeps it until the CONNACK). */
function willOf(client: Client): Will | undefined {
  const will = (client as { _will?: { topic?: string; payload?: Buffer | string } })._will;
  if (!will?.topic) return undefined;
  const payload = will.payload ?? Buffer.alloc(0);
  return { topic: will.topic, payload: Buffer.isBuffer(payload) ? payload : Buffer.from(payload) };
}

/** PUBLISH to one client, never retained; resolves once written. */
function sender(client: Client): Send {
  return (topic, payload, qos) =>
    new Promise((resolve, reject) => {
      client.publish(
        {
          cmd: 'publish',
          topic,
          payload: typeof payload === 'string' ? Buffer.from(payload) : payload,
          qos,
          retain: false,
          dup: false,
        },
        (err) => (err ? reject(err) : resolve()),
      );
    });
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/**
 * Aedes' own mark of a publish it must neither acknowledge nor route (lib/handlers/publish.js,
 * set there for refused MQTT 5 publishes). The gateway sets it on every device publish it has
 * answered: nothing a device publishes goes to other clients, so Aedes' routing after the
 * PUBACK (subscription match, retained store, 'publish' event, one setImmediate per message)
 * would be work for nothing.
 */
const ANSWERED = '_notAuthorized';

/**
 * A PUBACK on the wire: success in 4 bytes (MQTT 3.1.1, and MQTT 5 without a reason code), or
 * an MQTT 5 reason code without properties (§3.4.2).
 */
function puback(id: number, reasonCode?: number): Buffer {
  const head = [PUBACK_HEADER, reasonCode === undefined ? 2 : 3, id >> 8, id & 0xff];
  return Buffer.from(reasonCode === undefined ? head : [...head, reasonCode]);
}

/** The acknowledgement was written by the gateway: Aedes only ends the publish. */
function answeredAlready(packet: PublishPacket, callback: Done): void {
  Object.assign(packet, { [ANSWERED]: true });
  callback(null);
}

type Done = (err: Error | null) => void;

/** Aedes' drain wait (one timer per client, `drainTimeout`), missing from its typings. */
type DrainWaiter = { waitForDrain?: (done: (err?: Error) => void) => void };

/**
 * Acknowledges a committed device publish: a QoS 1 PUBACK (4 bytes, success, on MQTT 3.1.1 and
 * 5 alike), written with the socket corked until the end of the tick, so that one commit's
 * PUBACKs to a client leave in one write. Aedes then reads the client's next packets, after
 * the socket drains if its buffer is full.
 */
function acknowledge(client: Client, packet: PublishPacket, callback: Done): void {
  const conn = client.conn as Client['conn'] & { cork?: () => void; uncork?: () => void };
  if (packet.qos !== 1 || packet.messageId === undefined || conn.destroyed) {
    answeredAlready(packet, callback);
    return;
  }
  Object.assign(packet, { [ANSWERED]: true });
  if (typeof conn.cork === 'function') {
    conn.cork();
    process.nextTick(() => conn.uncork?.());
  }
  if (conn.write(puback(packet.messageId))) {
    callback(null);
    return;
  }
  const waiter = client as Client & DrainWaiter;
  if (typeof waiter.waitForDrain === 'function')
    waiter.waitForDrain((err) => callback(err ?? null));
  else conn.once('drain', () => callback(null));
}
