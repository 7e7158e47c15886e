import type { Socket } from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { createServer, type IncomingMessage, type OutgoingMessage, type Server } from 'coap';
import type { Logger } from 'pino';

export interface CoapServerDeps {
  readonly host: string;
  readonly port: number;
  readonly log: Logger;
}

/**
 * The CoAP listener (UDP). Device paths are added by the device API issue; until then every
 * request gets 4.04 Not Found (RFC 7252 §5.9.2.5).
 */
export class CoapServer {
  #server: Server | undefined;

  constructor(private readonly deps: CoapServerDeps) {}

  async start(): Promise<number> {
    const server = createServer({ type: this.deps.host.includes(':') ? 'udp6' : 'udp4' });
    server.on('request', (req: IncomingMessage, res: OutgoingMessage) => {
      this.deps.log.debug({ url: req.url, method: req.method }, 'coap request');
      res.code = '4.04';
      res.end();
    });
    server.on('error', (err: Error) => this.deps.log.warn({ err }, 'coap server error'));
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.listen(this.deps.port, this.deps.host, (err?: Error) =>
        err ? reject(err) : resolve(),
      );
    });
    return this.port;
  }

  get port(): number {
    const sock = this.#server?._sock as Socket | null | undefined;
    return sock ? (sock.address() as AddressInfo).port : 0;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
