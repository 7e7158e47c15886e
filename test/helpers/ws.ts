import { WebSocket } from 'ws';
import type { TestGateway } from './gateway.js';

export type Update = Record<string, unknown> & {
  subscriptionId?: number;
  cmdId?: number;
  errorCode?: number;
  errorMsg?: string | null;
  data?: unknown;
  update?: unknown;
};

/** A plain `ws` client that keeps every update and waits for the one a test needs. */
export class WsClient {
  readonly received: Update[] = [];
  #unread: Update[] = [];
  #waiters = new Set<() => void>();
  closed: { code: number; reason: string } | undefined;
  pings = 0;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse(data.toString()) as Update;
      this.received.push(msg);
      this.#unread.push(msg);
      for (const w of [...this.#waiters]) w();
    });
    ws.on('ping', () => this.pings++);
    ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      for (const w of [...this.#waiters]) w();
    });
  }

  /** Opens `path` (with `?token=` when given) on the gateway's HTTP port. */
  static open(t: TestGateway, path: string, token?: string): Promise<WsClient> {
    const url = `${t.baseUrl.replace('http', 'ws')}${path}${token ? `?token=${token}` : ''}`;
    const ws = new WebSocket(url);
    const client = new WsClient(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(client));
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) =>
        reject(new Error(`upgrade refused: ${res.statusCode}`)),
      );
    });
  }

  send(msg: unknown): void {
    this.ws.send(JSON.stringify(msg));
  }

  /** The first unread update matching `match` (consumed), waiting up to `timeoutMs`. */
  next(match: (u: Update) => boolean, timeoutMs = 10_000, what = 'update'): Promise<Update> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const i = this.#unread.findIndex(match);
        if (i >= 0) {
          const [u] = this.#unread.splice(i, 1);
          done();
          resolve(u);
        } else if (this.closed) {
          done();
          reject(new Error(`socket closed (${this.closed.code}) while waiting for ${what}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out waiting for ${what}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      check();
    });
  }

  /** Resolves with the close code and reason. */
  waitClosed(timeoutMs = 10_000): Promise<{ code: number; reason: string }> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!this.closed) return;
        done();
        resolve(this.closed);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error('timed out waiting for the socket to close'));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      check();
    });
  }

  /** Unread updates for `id` (cmdId or subscriptionId). */
  unreadFor(id: number): Update[] {
    return this.#unread.filter((u) => u.cmdId === id || u.subscriptionId === id);
  }

  close(): void {
    this.ws.terminate();
  }
}

export const forCmd = (id: number) => (u: Update) => u.cmdId === id || u.subscriptionId === id;

/** Posts telemetry through the device HTTP API (acknowledged after commit). */
export async function postTelemetry(t: TestGateway, token: string, body: unknown): Promise<void> {
  const res = await fetch(`${t.baseUrl}/api/v1/${token}/telemetry`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status !== 200) throw new Error(`telemetry refused: ${res.status} ${await res.text()}`);
}

/**
 * A key filter `temperature > value`: `userValue` when given, else `dynamicValue` when it
 * resolves, else `defaultValue`.
 */
export function hotterThan(defaultValue: number, dynamicValue?: unknown, userValue?: number) {
  return {
    key: { type: 'TIME_SERIES', key: 'temperature' },
    valueType: 'NUMERIC',
    predicate: {
      type: 'NUMERIC',
      operation: 'GREATER',
      value: { defaultValue, dynamicValue, userValue },
    },
  };
}
