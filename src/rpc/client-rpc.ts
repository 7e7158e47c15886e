import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import { LongPolls, type PollOutcome } from '../common/subscriptions.js';
import { validate } from '../common/validate.js';
import type { DeviceIdentity } from '../devices/device-service.js';

/** A device-to-server request (reference device-api.md §4), as a rule engine would receive it. */
export interface ClientRpcRequest {
  readonly device: { readonly id: string; readonly name: string };
  readonly method: string;
  readonly params: unknown;
  /**
   * Where the reply goes, as ThingsBoard's `TO_SERVER_RPC_REQUEST` metadata names it: the
   * transport session (one MQTT connection; one HTTP or CoAP request) and the device's request
   * id in it. `reply(sessionId, requestId, json)` answers it (an "rpc call reply" node).
   */
  readonly sessionId: string;
  readonly requestId: number;
}

/** Where a client-side RPC is answered (see `ClientRpcRequest`). */
export interface ClientRpcCallOptions {
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  /** Default: a new session of its own (HTTP, CoAP). */
  readonly sessionId?: string;
  /** Default 0 (HTTP and CoAP carry no request id). */
  readonly requestId?: number;
}

/**
 * Where client-side RPC requests go: the single plug-in point of the rule engine
 * (TB: `TO_SERVER_RPC_REQUEST` -> rule chain -> "RPC Call Reply" node). It calls `reply` with the
 * reply as JSON text, at most once, or never (the device then times out, as with TB's default
 * rule chain).
 */
export type ClientRpcRouter = (request: ClientRpcRequest, reply: (json: string) => void) => void;

/**
 * Until the rule engine lands: answers `getCurrentTime` as ThingsBoard's documented rule-chain
 * example does (a bare JSON number of epoch ms); every other method gets no reply (§4).
 */
export const builtInClientRpcRouter: ClientRpcRouter = (request, reply) => {
  if (request.method === 'getCurrentTime') reply(String(Date.now()));
};

export interface ClientRpcServiceDeps {
  readonly log: Logger;
  readonly router?: ClientRpcRouter;
  /** `transport.client_side_rpc.timeout`, default 60000 ms. */
  readonly timeoutMs?: number;
}

const clientRpcBody = z.object({
  method: z.string().min(1, 'must not be empty'),
  params: z.unknown(),
});

export class ClientRpcService {
  readonly #waits = new LongPolls();
  /** Calls waiting for a reply by `sessionId|requestId`. */
  readonly #pending = new Map<string, (json: string) => void>();
  #router: ClientRpcRouter;

  constructor(private readonly deps: ClientRpcServiceDeps) {
    this.#router = deps.router ?? builtInClientRpcRouter;
  }

  get defaultTimeoutMs(): number {
    return this.deps.timeoutMs ?? 60_000;
  }

  /** Replaces the router (the rule engine plugs in here). */
  setRouter(router: ClientRpcRouter): void {
    this.#router = router;
  }

  /** Validates `{"method","params"}` (ValidationError naming the problem). */
  parse(body: unknown): { method: string; params: unknown } {
    const input = validate(clientRpcBody, body, 'rpc request');
    return { method: input.method, params: input.params ?? null };
  }

  /**
   * Validates `{"method","params"}` and waits for the reply (the router's, or one given to
   * `reply`), at most `timeoutMs` (default `transport.client_side_rpc.timeout`). The outcome
   * `value` is the reply JSON text.
   */
  call(
    device: DeviceIdentity,
    body: unknown,
    opts: ClientRpcCallOptions = {},
  ): Promise<PollOutcome<string>> {
    const input = this.parse(body);
    const request: ClientRpcRequest = {
      device: { id: device.id, name: device.name },
      method: input.method,
      params: input.params,
      sessionId: opts.sessionId ?? randomUUID(),
      requestId: opts.requestId ?? 0,
    };
    const key = `${request.sessionId}|${request.requestId}`;
    this.deps.log.debug({ deviceId: device.id, method: request.method }, 'client rpc');
    return this.#waits.wait<string>(
      (deliver) => {
        let active = true;
        const answer = (json: string) => {
          if (active) deliver(json);
        };
        this.#pending.set(key, answer);
        try {
          this.#router(request, answer);
        } catch (err) {
          this.deps.log.error({ err, method: request.method }, 'client rpc router failed');
        }
        return {
          get active() {
            return active;
          },
          unsubscribe: () => {
            active = false;
            if (this.#pending.get(key) === answer) this.#pending.delete(key);
          },
        };
      },
      {
        deviceId: device.id,
        timeoutMs: opts.timeoutMs ?? this.defaultTimeoutMs,
        signal: opts.signal,
      },
    );
  }

  /**
   * Answers a waiting call by its session and request id (ThingsBoard's "rpc call reply" node);
   * false when no such call waits (answered, timed out, or never made).
   */
  reply(sessionId: string, requestId: number, json: string): boolean {
    const answer = this.#pending.get(`${sessionId}|${requestId}`);
    if (!answer) return false;
    answer(json);
    return true;
  }

  /** Ends waiting calls (gateway stopping) and refuses new ones. */
  releasePolls(): void {
    this.#waits.closeAll();
  }

  /** Calls waiting for a reply, each holding one timer. */
  get pending(): number {
    return this.#waits.size;
  }
}
