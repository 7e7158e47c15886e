/**
 * The live WebSocket API on the HTTP port (platform reference §4.1): `/api/ws` and the legacy
 * `/api/ws/plugins/telemetry`. A thin adapter: it authenticates (`?token=` before the upgrade,
 * or `authCmd` in the first message), parses frames, and hands commands to a session of the
 * subscription service. It owns what is the socket's: a bounded send buffer (a client that falls
 * behind is closed with 1008, never waited for) and pings.
 */

import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { type RawData, WebSocket, WebSocketServer } from 'ws';
import type { AuthService, Principal } from '../../auth/auth-service.js';
import { readWrapper } from '../../subscriptions/commands.js';
import type {
  ApiSession,
  SessionSink,
  SubscriptionService,
} from '../../subscriptions/subscription-service.js';
import { CLOSE, ERROR_CODE, type WsUpdate } from '../../subscriptions/types.js';
import { errorBody, statusOf } from '../http/errors.js';

export const WS_PATHS: readonly string[] = ['/api/ws', '/api/ws/plugins/telemetry'];

/** Largest command message accepted (ws closes the socket with 1009 above it). */
const MAX_MESSAGE_BYTES = 64 * 1024;
/** ThingsBoard's docs: the auth command within 10 s. */
const AUTH_TIMEOUT_MS = 10_000;
/** Messages held while `authCmd` is being verified. */
const MAX_EARLY_MESSAGES = 16;

export interface WsApiDeps {
  readonly auth: Pick<AuthService, 'authenticateSession'>;
  readonly subscriptions: SubscriptionService;
  readonly log: Logger;
  /** Bytes one socket may have waiting to be sent before it is closed as too slow. */
  readonly maxPendingBytes: number;
  readonly pingIntervalMs: number;
  readonly authTimeoutMs?: number;
}

type Auth = { principal: Principal; expiresAt: number };

export class WsApi {
  readonly #wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_MESSAGE_BYTES,
    perMessageDeflate: false,
  });
  readonly #alive = new Map<WebSocket, boolean>();
  #timer: NodeJS.Timeout | undefined;
  #slowClosed = 0;

  constructor(private readonly deps: WsApiDeps) {}

  start(): void {
    this.#timer = setInterval(() => this.#ping(), this.deps.pingIntervalMs);
    this.#timer.unref();
  }

  /** Closes every socket with 1001 (the gateway is stopping). */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    for (const ws of [...this.#alive.keys()]) {
      ws.close(CLOSE.goingAway, 'Server is stopping');
      // @NOTE: a client that does not answer the close frame must not hold the HTTP server.
      setTimeout(() => ws.terminate(), 1000).unref();
    }
    this.#wss.close();
  }

  get stats(): { sockets: number; slowClosed: number } {
    return { sockets: this.#alive.size, slowClosed: this.#slowClosed };
  }

  /** Takes an HTTP upgrade to one of the API's paths and returns true; false leaves it alone. */
  readonly handleUpgrade = (req: IncomingMessage, socket: Socket, head: Buffer): boolean => {
    const url = new URL(req.url ?? '/', 'http://gateway');
    const path = url.pathname.replace(/\/+$/, '');
    if (!WS_PATHS.includes(path)) return false;
    const token = url.searchParams.get('token');
    if (!token) {
      this.#wss.handleUpgrade(req, socket, head, (ws) => this.#attach(ws, undefined));
      return true;
    }
    this.deps.auth.authenticateSession(token).then(
      (auth) => this.#wss.handleUpgrade(req, socket, head, (ws) => this.#attach(ws, auth)),
      (err: Error) => {
        // The JWT filter refuses the upgrade itself, as ThingsBoard's does (401, errorCode 11
        // for an expired token so that clients refresh it).
        const status = statusOf(err);
        const body = JSON.stringify(errorBody(status, err.message));
        this.deps.log.info({ reason: err.message }, 'websocket refused');
        socket.end(
          `HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : 'Error'}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
            `Connection: close\r\n\r\n${body}`,
        );
      },
    );
    return true;
  };

  #attach(ws: WebSocket, auth: Auth | undefined): void {
    this.#alive.set(ws, true);
    let session: ApiSession | undefined;
    let early: RawData[] | undefined;
    const sink: SessionSink = {
      send: (update) => this.#send(ws, update),
      close: (code, reason) => ws.close(code, reason),
    };
    const open = (a: Auth) => {
      session = this.deps.subscriptions.open(a.principal, a.expiresAt, sink);
      this.deps.log.debug({ userId: a.principal.userId }, 'websocket session opened');
    };
    if (auth) open(auth);
    const authTimer = auth
      ? undefined
      : setTimeout(
          () => ws.close(CLOSE.policy, 'Auth timeout'),
          this.deps.authTimeoutMs ?? AUTH_TIMEOUT_MS,
        );

    const handle = (data: RawData) => {
      let msg: unknown;
      try {
        msg = JSON.parse(data.toString());
      } catch {
        if (session) {
          // §4.1: an unparsable payload on an authenticated session is an error update.
          sink.send({
            subscriptionId: 1,
            errorCode: ERROR_CODE.badRequest,
            errorMsg: 'Failed to parse the payload',
            data: null,
          });
        } else ws.close(CLOSE.badData, 'Failed to parse the payload');
        return;
      }
      if (session) {
        session.handle(msg);
        return;
      }
      let token: string | undefined;
      try {
        token = readWrapper(msg).authToken;
      } catch {
        token = undefined;
      }
      if (!token) {
        ws.close(CLOSE.policy, 'Auth cmd is missing');
        return;
      }
      early = [];
      this.deps.auth.authenticateSession(token).then(
        (a) => {
          clearTimeout(authTimer);
          if (ws.readyState !== WebSocket.OPEN) return;
          open(a);
          session?.handle(msg);
          const held = early ?? [];
          early = undefined;
          for (const d of held) handle(d);
        },
        (err: Error) => {
          this.deps.log.info({ reason: err.message }, 'websocket auth failed');
          ws.close(CLOSE.policy, err.message);
        },
      );
    };

    ws.on('message', (data) => {
      if (early) {
        if (early.length >= MAX_EARLY_MESSAGES)
          ws.close(CLOSE.policy, 'Too many messages before auth');
        else early.push(data);
        return;
      }
      handle(data);
    });
    ws.on('pong', () => this.#alive.set(ws, true));
    ws.on('error', (err) => this.deps.log.debug({ err }, 'websocket error'));
    ws.on('close', () => {
      clearTimeout(authTimer);
      this.#alive.delete(ws);
      session?.close();
    });
  }

  /**
   * Sends one update, or closes a socket whose unsent bytes are over the bound: the update is
   * dropped, nothing waits, and the client learns why from the close frame (ThingsBoard:
   * "Max pending updates limit reached!").
   */
  #send(ws: WebSocket, update: WsUpdate): void {
    if (ws.readyState !== WebSocket.OPEN) return;
    if (ws.bufferedAmount > this.deps.maxPendingBytes) {
      this.#slowClosed++;
      this.deps.log.warn(
        { pendingBytes: ws.bufferedAmount, slowClosed: this.#slowClosed },
        'websocket client too slow: closed',
      );
      ws.close(CLOSE.policy, 'Max pending updates limit reached!');
      return;
    }
    ws.send(JSON.stringify(update));
  }

  /** Pings every socket; one that did not answer the previous ping is dropped. */
  #ping(): void {
    for (const [ws, alive] of this.#alive) {
      if (!alive) {
        this.deps.log.debug('websocket missed a pong: dropped');
        ws.terminate();
        continue;
      }
      this.#alive.set(ws, false);
      ws.ping();
    }
  }
}
