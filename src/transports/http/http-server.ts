import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import type { Hono } from 'hono';
import type { Logger } from 'pino';
import type { HttpEnv } from './context.js';
import { errorBody } from './errors.js';

/**
 * Serves a request without Hono and returns true, or returns false (having touched nothing) to
 * leave it to the app.
 */
export type FastLane = (req: IncomingMessage, res: ServerResponse) => boolean;

type NodeServer = ReturnType<typeof createServer> | ReturnType<typeof createHttpsServer>;

/** Defaults of the URL and header limits (`--http-max-url-bytes`, `--http-max-header-bytes`). */
export const DEFAULT_MAX_URL_BYTES = 8192;
export const DEFAULT_MAX_HEADER_BYTES = 16_384;

/** An error of Node's HTTP parser, as the `clientError` event passes it. */
type ParserError = Error & { code?: string; rawPacket?: Buffer };

const REASON: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  414: 'URI Too Long',
  431: 'Request Header Fields Too Large',
};

/**
 * What to answer a request Node's parser refused, or undefined to just close: the socket failed
 * (reset, timeout after a partial request) and nothing would be read.
 */
export function clientErrorReply(
  err: ParserError,
): { status: number; message: string } | undefined {
  switch (err.code) {
    case 'ECONNRESET':
    case 'EPIPE':
      return undefined;
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, message: 'Request timed out' };
    case 'HPE_HEADER_OVERFLOW': {
      // @NOTE: the packet is the chunk being parsed: a request line without its end means the URL
      // filled the limit (414); anything else is the headers (431).
      const head = err.rawPacket?.subarray(0, 64).toString('latin1') ?? '';
      const lineOpen = /^[A-Z]+ /.test(head) && !err.rawPacket?.includes('\r\n');
      return lineOpen
        ? { status: 414, message: 'Request URL is too long' }
        : { status: 431, message: 'Request headers are too large' };
    }
    default:
      return { status: 400, message: `Malformed HTTP request (${err.code ?? 'parse error'})` };
  }
}

/** A complete HTTP/1.1 reply written straight to a socket whose request Node could not parse. */
function rawReply(status: number, message: string): string {
  const body = JSON.stringify(errorBody(status, message));
  return (
    `HTTP/1.1 ${status} ${REASON[status] ?? 'Error'}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

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
      /** Longest request target (URL) in bytes: 414 above it. */
      maxUrlBytes?: number;
      /** Largest header section (names, values, separators) in bytes: 431 above it. */
      maxHeaderBytes?: number;
      /** Serve HTTPS with this PEM pair. */
      tls?: { readonly cert: Buffer; readonly key: Buffer };
    },
  ) {}

  get #maxUrlBytes(): number {
    return this.deps.maxUrlBytes ?? DEFAULT_MAX_URL_BYTES;
  }

  get #maxHeaderBytes(): number {
    return this.deps.maxHeaderBytes ?? DEFAULT_MAX_HEADER_BYTES;
  }

  /**
   * Answers a request whose URL or headers are over the limits (RFC 9110 §15.5.15 414, RFC 6585
   * §5 431) and returns true; Node's parser refuses only what exceeds both limits together.
   */
  #overLimits(req: IncomingMessage, res: ServerResponse): boolean {
    const url = req.url ?? '';
    let status = 0;
    let message = '';
    if (url.length > this.#maxUrlBytes) {
      status = 414;
      message = `Request URL is longer than ${this.#maxUrlBytes} bytes`;
    } else {
      let size = 0;
      // Each header as sent: name, ': ', value, CRLF.
      for (const part of req.rawHeaders) size += part.length + 2;
      if (size > this.#maxHeaderBytes) {
        status = 431;
        message = `Request headers are larger than ${this.#maxHeaderBytes} bytes`;
      }
    }
    if (status === 0) return false;
    this.deps.log.info({ status, method: req.method, reason: message }, 'request rejected');
    const body = JSON.stringify(errorBody(status, message));
    res.writeHead(status, {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(body),
      Connection: 'close',
    });
    res.end(body);
    return true;
  }

  async start(): Promise<number> {
    const app = getRequestListener(this.deps.app.fetch);
    const lanes = this.deps.lanes ?? [];
    const handler = (req: IncomingMessage, res: ServerResponse) => {
      if (this.#overLimits(req, res)) return;
      try {
        for (const lane of lanes) if (lane(req, res)) return;
      } catch (err) {
        // A lane throws before it takes the request: the app answers it (with the error).
        this.deps.log.error({ err }, 'http fast lane failed');
      }
      void app(req, res);
    };
    // Node's parser bounds the request line and headers together; each is checked on its own
    // (#overLimits) below that hard cap.
    const maxHeaderSize = this.#maxUrlBytes + this.#maxHeaderBytes + 1024;
    const { tls } = this.deps;
    const server = tls
      ? createHttpsServer({ cert: tls.cert, key: tls.key, maxHeaderSize }, handler)
      : createServer({ maxHeaderSize }, handler);
    if (tls) {
      server.on('tlsClientError', (err) => this.deps.log.debug({ err }, 'https handshake failed'));
    }
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
    server.on('clientError', (err: ParserError, socket) => {
      const reply = clientErrorReply(err);
      if (!reply || !socket.writable) {
        this.deps.log.debug({ err }, 'http client error');
        socket.destroy();
        return;
      }
      this.deps.log.info(
        { status: reply.status, code: err.code, reason: reply.message },
        'request rejected',
      );
      socket.end(rawReply(reply.status, reply.message));
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

/** A Host header that is a plain name or address (no injection into the Location header). */
const HOST = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])$/;

/**
 * `--http-redirect`: plain HTTP requests get 308 (method and body kept) to the same path on the
 * HTTPS port, except the device API (`/api/v1/...`), which many devices only speak in plain HTTP.
 */
export function httpsRedirect(httpsPort: () => number): FastLane {
  return (req, res) => {
    const url = req.url ?? '/';
    if (url.startsWith('/api/v1/')) return false;
    const header = req.headers.host ?? '';
    // `name:port`, `[v6]:port`: the host part only.
    const named = header.startsWith('[')
      ? header.slice(0, header.indexOf(']') + 1)
      : header.split(':')[0];
    const local = req.socket.localAddress ?? 'localhost';
    const host = HOST.test(named) ? named : local.includes(':') ? `[${local}]` : local;
    const port = httpsPort();
    const location = `https://${host}${port === 443 ? '' : `:${port}`}${url}`;
    res.writeHead(308, { location, 'content-length': '0' });
    res.end();
    return true;
  };
}
