import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import type { Hono } from 'hono';
import type { Logger } from 'pino';
import type { HttpEnv } from './context.js';

/**
 * Serves a request without Hono and returns true, or returns false (having touched nothing) to
 * leave it to the app.
 */
export type FastLane = (req: IncomingMessage, res: ServerResponse) => boolean;

type NodeServer = ReturnType<typeof createServer>;

/** Owns the HTTP listener of a Hono app, and of the fast lanes tried before it. */
export class HttpServer {
  #server: NodeServer | undefined;
  #connections = 0;

  constructor(
    private readonly deps: {
      app: Hono<HttpEnv>;
      host: string;
      port: number;
      log: Logger;
      lanes?: readonly FastLane[];
    },
  ) {}

  async start(): Promise<number> {
    const app = getRequestListener(this.deps.app.fetch);
    const lanes = this.deps.lanes ?? [];
    const server = createServer((req, res) => {
      try {
        for (const lane of lanes) if (lane(req, res)) return;
      } catch (err) {
        // A lane throws before it takes the request: the app answers it (with the error).
        this.deps.log.error({ err }, 'http fast lane failed');
      }
      void app(req, res);
    });
    // @NOTE: keep idle keep-alive connections open longer than clients do (undici: 4 s, most
    // SDKs: less), so the client, not the server, closes them; a server-side close racing a
    // reused connection makes the client's next request fail.
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = 66_000;
    this.#server = server;
    server.on('connection', (socket: Socket) => {
      this.#connections++;
      socket.once('close', () => this.#connections--);
    });
    server.on('clientError', (err, socket) => {
      this.deps.log.debug({ err }, 'http client error');
      socket.destroy();
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.deps.port, this.deps.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return this.port;
  }

  /** Hands HTTP upgrade requests (WebSocket) to `handler`; call after start(). */
  onUpgrade(handler: (req: IncomingMessage, socket: Socket, head: Buffer) => void): void {
    this.#server?.on('upgrade', handler);
  }

  /** Open client connections (keep-alive and upgraded ones included). */
  get connections(): number {
    return this.#connections;
  }

  get port(): number {
    return (this.#server?.address() as AddressInfo | null)?.port ?? 0;
  }

  /** Stops accepting, lets running requests finish, then cuts keep-alive connections. */
  async stop(graceMs = 2000): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const timer = setTimeout(() => server.closeAllConnections(), graceMs);
    await closed;
    clearTimeout(timer);
  }
}
