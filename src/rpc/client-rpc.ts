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

  /**
   * Validates `{"method","params"}` and waits for the router's reply, at most `timeoutMs`
   * (default `transport.client_side_rpc.timeout`). The outcome `value` is the reply JSON text.
   */
  call(
    device: DeviceIdentity,
    body: unknown,
    opts: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<PollOutcome<string>> {
    const input = validate(clientRpcBody, body, 'rpc request');
    const request: ClientRpcRequest = {
      device: { id: device.id, name: device.name },
      method: input.method,
      params: input.params ?? null,
    };
    this.deps.log.debug({ deviceId: device.id, method: request.method }, 'client rpc');
    return this.#waits.wait<string>(
      (deliver) => {
        let active = true;
        try {
          this.#router(request, (json) => {
            if (active) deliver(json);
          });
        } catch (err) {
          this.deps.log.error({ err, method: request.method }, 'client rpc router failed');
        }
        return {
          get active() {
            return active;
          },
          unsubscribe() {
            active = false;
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

  /** Ends waiting calls (gateway stopping) and refuses new ones. */
  releasePolls(): void {
    this.#waits.closeAll();
  }

  /** Calls waiting for a reply, each holding one timer. */
  get pending(): number {
    return this.#waits.size;
  }
}
