import type { Socket } from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { createServer, type IncomingMessage, type OutgoingMessage, type Server } from 'coap';
import type { Logger } from 'pino';
import type { DeviceService } from '../../devices/device-service.js';
import { type ErrorCode, GatewayError } from '../../errors.js';
import type { IngestMeter } from '../../metrics/metrics.js';
import type { DeviceCore } from '../device-core.js';
import { deviceApiMessageType } from '../message-type.js';
import { handleDeviceRequest, Observations } from './device-resources.js';

export interface CoapServerDeps {
  readonly host: string;
  readonly port: number;
  readonly log: Logger;
  readonly devices: DeviceService;
  /** The core services a device reaches; the same set MQTT uses. */
  readonly core: DeviceCore;
  /** Counts each device message the core accepted. */
  readonly meter?: IngestMeter;
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
  GW_ERR_INTERNAL: '5.00',
};

/**
 * The CoAP listener (UDP). Every request goes to one dispatcher of device resources
 * (device-resources.ts); domain errors map to CoAP codes here, in one place.
 */
export class CoapServer {
  #server: Server | undefined;
  readonly #observations = new Observations();

  constructor(private readonly deps: CoapServerDeps) {}

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
        (err: unknown) => {
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
    return this.port;
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
