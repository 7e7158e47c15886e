import { createSocket } from 'node:dgram';
import { Agent, type IncomingMessage, type ObserveReadStream, request } from 'coap';

/**
 * A client socket per exchange, owned here rather than by the agent: an agent that owns its socket
 * closes it as soon as an observation closes, before its own deregistration can be sent.
 */
function newAgent(): { agent: Agent; done: () => void } {
  const socket = createSocket('udp4');
  const agent = new Agent({ type: 'udp4', socket });
  return { agent, done: () => setTimeout(() => socket.close(), 200).unref() };
}

export interface CoapReply {
  readonly code: string;
  readonly payload: Buffer;
  readonly text: string;
  /** The Content-Format option, by name (`application/json`, `application/octet-stream`). */
  readonly format?: unknown;
}

export interface CoapCall {
  readonly port: number;
  readonly method?: 'GET' | 'POST' | 'PUT' | 'DELETE';
  readonly pathname: string;
  readonly query?: string;
  readonly payload?: string | Buffer;
  readonly confirmable?: boolean;
}

/** One CoAP request with the `coap` client; rejects after `timeoutMs` without an answer. */
export function coapRequest(call: CoapCall, timeoutMs = 5000): Promise<CoapReply> {
  return new Promise((resolve, reject) => {
    const { agent, done } = newAgent();
    const req = request({
      agent,
      hostname: '127.0.0.1',
      port: call.port,
      method: call.method ?? 'GET',
      pathname: call.pathname,
      query: call.query,
      confirmable: call.confirmable ?? true,
    });
    const timer = setTimeout(() => {
      done();
      reject(
        new Error(`no CoAP answer to ${call.method ?? 'GET'} ${call.pathname} in ${timeoutMs} ms`),
      );
    }, timeoutMs);
    req.on('response', (res: IncomingMessage) => {
      clearTimeout(timer);
      done();
      resolve({
        code: res.code,
        payload: res.payload,
        text: res.payload.toString('utf8'),
        format: res.headers['Content-Format'],
      });
    });
    req.on('error', (err: Error) => {
      clearTimeout(timer);
      done();
      reject(err);
    });
    req.end(call.payload);
  });
}

export interface Observation {
  /** Every notification so far (the first is the registration's answer). */
  readonly replies: CoapReply[];
  next(timeoutMs?: number): Promise<CoapReply>;
  close(): void;
}

/** Registers an observation (GET with Observe: 0) and collects its notifications. */
export function coapObserve(call: CoapCall): Promise<Observation> {
  return new Promise((resolve, reject) => {
    const { agent, done } = newAgent();
    const req = request({
      agent,
      hostname: '127.0.0.1',
      port: call.port,
      method: 'GET',
      pathname: call.pathname,
      observe: true,
      confirmable: call.confirmable ?? true,
    });
    const timer = setTimeout(() => reject(new Error('observe registration got no answer')), 5000);
    req.on('response', (res: ObserveReadStream) => {
      clearTimeout(timer);
      const replies: CoapReply[] = [];
      const waiters: Array<(r: CoapReply) => void> = [];
      let seen = 0;
      const take = (r: CoapReply) => {
        replies.push(r);
        const w = waiters.shift();
        if (w) {
          seen++;
          w(r);
        }
      };
      // The first answer arrives as 'data' too, unless it is empty (the 2.03 of an RPC observation).
      if (res.payload.length === 0) take({ code: res.code, payload: res.payload, text: '' });
      res.on('data', (chunk: Buffer) =>
        take({ code: res.code, payload: chunk, text: chunk.toString('utf8') }),
      );
      resolve({
        replies,
        next(timeoutMs = 5000) {
          if (seen < replies.length) return Promise.resolve(replies[seen++]);
          return new Promise((ok, fail) => {
            const t = setTimeout(() => fail(new Error('no CoAP notification')), timeoutMs);
            waiters.push((r) => {
              clearTimeout(t);
              ok(r);
            });
          });
        },
        close() {
          // Deregisters with a GET carrying Observe: 1 (RFC 7641 §3.6).
          res.close(true);
          done();
        },
      });
    });
    req.on('error', reject);
    req.end();
  });
}
