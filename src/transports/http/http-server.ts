import type { IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import type { Hono } from 'hono';
import type { Logger } from 'pino';
import type { HttpEnv } from './context.js';

type NodeServer = ReturnType<typeof createAdaptorServer> & {
  closeAllConnections?: () => void;
  closeIdleConnections?: () => void;
  keepAliveTimeout?: number;
  headersTimeout?: number;
};

/** Owns the HTTP listener of a Hono app. */
export class HttpServer {
  #server: NodeServer | undefined;

  constructor(
    private readonly deps: { app: Hono<HttpEnv>; host: string; port: number; log: Logger },
  ) {}

  async start(): Promise<number> {
    const server = createAdaptorServer({ fetch: this.deps.app.fetch }) as NodeServer;
    // @NOTE: keep idle keep-alive connections open longer than clients do (undici: 4 s, most
    // SDKs: less), so the client, not the server, closes them; a server-side close racing a
    // reused connection makes the client's next request fail.
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = 66_000;
    this.#server = server;
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

  get port(): number {
    return (this.#server?.address() as AddressInfo | null)?.port ?? 0;
  }

  /** Stops accepting, lets running requests finish, then cuts keep-alive connections. */
  async stop(graceMs = 2000): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections?.();
    const timer = setTimeout(() => server.closeAllConnections?.(), graceMs);
    await closed;
    clearTimeout(timer);
  }
}
