import type { RemoteInfo, Socket } from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { createServer, type IncomingMessage, type OutgoingMessage, type Server } from 'coap';
import type { Logger } from 'pino';
import type { DeviceService } from '../../devices/device-service.js';
import { type ErrorCode, fromStorageError, GatewayError } from '../../errors.js';
import type { IngestMeter } from '../../metrics/metrics.js';
import type { DeviceCore } from '../device-core.js';
import { deviceApiMessageType } from '../message-type.js';
import {
  endpointOf,
  handleDeviceRequest,
  type ObservationLimits,
  Observations,
} from './device-resources.js';
import { inspectDatagram, MESSAGE_TYPE, outgoingHeader, parseHeader } from './strict.js';

export interface CoapServerDeps {
  readonly host: string;
  readonly port: number;
  readonly log: Logger;
  readonly devices: DeviceService;
  /** The core services a device reaches; the same set MQTT uses. */
  readonly core: DeviceCore;
  /** Counts each device message the core accepted. */
  readonly meter?: IngestMeter;
  readonly observations?: Partial<ObservationLimits>;
}

// RFC 7252 §5.9 response codes for domain errors.
const CODE: Record<ErrorCode, string> = {
  GW_ERR_INVALID_ARGUMENT: '4.00',
  GW_ERR_UNAUTHENTICATED: '4.01',
  GW_ERR_FORBIDDEN: '4.03',
  GW_ERR_NOT_FOUND: '4.04',
  GW_ERR_CONFLICT: '4.09',
  GW_ERR_PAYLOAD_TOO_LARGE: '4.13',
  GW_ERR_TOO_MANY_REQUESTS: '4.29',
  GW_ERR_TIMEOUT: '5.04',
  GW_ERR_UNAVAILABLE: '5.03',
  GW_ERR_INSUFFICIENT_STORAGE: '5.03',
  GW_ERR_INTERNAL: '5.00',
};

/**
 * The CoAP listener (UDP). Every request goes to one dispatcher of device resources
 * (device-resources.ts); domain errors map to CoAP codes here, in one place.
 */
export class CoapServer {
  #server: Server | undefined;
  readonly #observations: Observations;
  /** Datagrams refused by the RFC 7252 checks (strict.ts), since start. */
  #malformed = 0;

  constructor(private readonly deps: CoapServerDeps) {
    this.#observations = new Observations(deps.observations, (key, reason) =>
      deps.log.info({ observation: key, reason }, 'coap observation ended'),
    );
  }

  async start(): Promise<number> {
    const { log } = this.deps;
    // @NOTE: an empty ACK goes out after 500 ms when the answer is not ready (reference §10).
    const server = createServer({
      type: this.deps.host.includes(':') ? 'udp6' : 'udp4',
      piggybackReplyMs: 500,
    });
    server.on('request', (req: IncomingMessage, res: OutgoingMessage) => {
      handleDeviceRequest(req, res, { ...this.deps, observations: this.#observations }).then(
        () => {
          if (this.deps.meter && String(res.code).startsWith('2')) {
            this.deps.meter('coap', deviceApiMessageType(req.method, req.url));
          }
        },
        (raw: unknown) => {
          const err = fromStorageError(raw);
          const code = err instanceof GatewayError ? CODE[err.code] : '5.00';
          if (code === '5.00') log.error({ err, url: req.url }, 'coap request failed');
          else
            log.info(
              { url: req.url, code, reason: (err as Error).message },
              'coap request rejected',
            );
          try {
            res.code = code;
            res.end(err instanceof GatewayError && code !== '4.01' ? err.message : undefined);
          } catch (e) {
            log.debug({ err: e }, 'coap error response not sent');
          }
        },
      );
    });
    server.on('error', (err: Error) => log.warn({ err }, 'coap server error'));
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.listen(this.deps.port, this.deps.host, (err?: Error) =>
        err ? reject(err) : resolve(),
      );
    });
    this.#strict(server);
    return this.port;
  }

  /**
   * Puts the RFC 7252 checks (strict.ts) in front of the library: each datagram is inspected
   * before the library parses it, and each one sent is seen, so that observations end when a
   * confirmable notification goes unacknowledged or is reset (RFC 7641 §4.5).
   */
  #strict(server: Server): void {
    const sock = server._sock as Socket | null | undefined;
    if (!sock) return;
    const { log } = this.deps;
    const observations = this.#observations;
    const [libraryListener] = sock.listeners('message') as Array<
      (msg: Buffer, rsinfo: RemoteInfo) => void
    >;
    if (!libraryListener) return;
    sock.removeListener('message', libraryListener);
    sock.on('message', (msg: Buffer, rsinfo: RemoteInfo) => {
      const verdict = inspectDatagram(msg);
      if (verdict.kind === 'pass') {
        const h = parseHeader(msg);
        if (h && h.code === 0 && (h.type === MESSAGE_TYPE.ACK || h.type === MESSAGE_TYPE.RST)) {
          observations.answered(endpointOf(rsinfo), h.messageId, h.type === MESSAGE_TYPE.RST);
        }
        libraryListener(msg, rsinfo);
        return;
      }
      this.#malformed++;
      log.debug({ peer: endpointOf(rsinfo), reason: verdict.reason }, 'coap datagram refused');
      if (verdict.kind === 'answer') sock.send(verdict.reply, rsinfo.port, rsinfo.address);
    });
    const send = sock.send;
    sock.send = function strictSend(this: Socket, ...args: unknown[]) {
      const msg = args[0];
      if (Buffer.isBuffer(msg)) {
        const h = outgoingHeader(msg);
        // send(msg, offset, length, port, address, cb) or send(msg, port, address, cb)
        const [port, address] =
          typeof args[3] === 'number' ? [args[3], args[4]] : [args[1], args[2]];
        if (h && typeof port === 'number' && typeof address === 'string') {
          observations.sent(endpointOf({ address, port }), h.type, h.messageId, h.token);
        }
      }
      return (send as (...a: unknown[]) => void).apply(this, args);
    } as Socket['send'];
  }

  /** Datagrams refused by the RFC 7252 checks and observation bounds, since start. */
  get refusals(): {
    malformedDatagrams: number;
    observationsRefused: number;
    observationsEnded: number;
  } {
    const { refused, ended } = this.#observations.counts;
    return {
      malformedDatagrams: this.#malformed,
      observationsRefused: refused,
      observationsEnded: ended,
    };
  }

  /** Live CoAP observations (attributes and RPC). */
  get observations(): number {
    return this.#observations.size;
  }

  get port(): number {
    const sock = this.#server?._sock as Socket | null | undefined;
    return sock ? (sock.address() as AddressInfo).port : 0;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    this.#observations.endAll();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
