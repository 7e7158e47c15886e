/**
 * Client-side RPC through the rule engine (device-api.md §4, rule-engine reference §5): each
 * request becomes a `TO_SERVER_RPC_REQUEST` message with `requestId`, `serviceId` and
 * `sessionId` metadata, and the rpc call reply node answers it through `reply`, on the transport
 * session that is waiting for it (MQTT, HTTP or CoAP alike: the waiting call of ClientRpcService).
 */
import { randomUUID } from 'node:crypto';
import type { MessageProcessor } from '../messages/types.js';
import type { ClientRpcRouter } from '../rpc/client-rpc.js';

/** Requests waiting for a reply at once; past it the oldest is forgotten (it times out). */
const MAX_WAITING = 10_000;
export const SERVICE_ID = 'edge-gateway';

export class ClientRpcBridge {
  /** sessionId -> reply of the waiting request. */
  readonly #waiting = new Map<
    string,
    { requestId: string; reply: (json: string) => void; timer: NodeJS.Timeout }
  >();
  #nextId = 1;
  dropped = 0;

  constructor(
    private readonly deps: {
      readonly processor: MessageProcessor;
      /** How long a request may wait (the client-side RPC timeout). */
      readonly timeoutMs: number;
    },
  ) {}

  readonly router: ClientRpcRouter = (request, reply) => {
    if (this.#waiting.size >= MAX_WAITING) {
      const [oldest] = this.#waiting.keys();
      if (oldest !== undefined) this.#forget(oldest);
      this.dropped++;
    }
    const sessionId = randomUUID();
    const requestId = String(this.#nextId++);
    const timer = setTimeout(() => this.#forget(sessionId), this.deps.timeoutMs + 1000);
    timer.unref();
    this.#waiting.set(sessionId, { requestId, reply, timer });
    this.deps.processor.process({
      id: randomUUID(),
      type: 'TO_SERVER_RPC_REQUEST',
      originator: { entityType: 'DEVICE', id: request.device.id },
      metadata: {
        deviceName: request.device.name,
        requestId,
        serviceId: SERVICE_ID,
        sessionId,
      },
      data: { method: request.method, params: request.params },
      ts: Date.now(),
    });
  };

  /** Answers a waiting request; false when it is unknown, answered or timed out. */
  reply(sessionId: string, requestId: string, json: string): boolean {
    const waiting = this.#waiting.get(sessionId);
    if (!waiting || waiting.requestId !== requestId) return false;
    this.#forget(sessionId);
    waiting.reply(json);
    return true;
  }

  get size(): number {
    return this.#waiting.size;
  }

  #forget(sessionId: string): void {
    const w = this.#waiting.get(sessionId);
    if (!w) return;
    clearTimeout(w.timer);
    this.#waiting.delete(sessionId);
  }

  stop(): void {
    for (const id of [...this.#waiting.keys()]) this.#forget(id);
  }
}
