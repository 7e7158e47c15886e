import { createSocket, type Socket } from 'node:dgram';

/** RFC 7252 §3 message types. */
export const CON = 0;
export const NON = 1;
export const ACK = 2;
export const RST = 3;

export interface RawMessage {
  readonly type: number;
  /** `class.detail`, e.g. '0.02' for POST, '0.00' for Empty. */
  readonly code: string;
  readonly messageId: number;
  readonly token?: Buffer;
  /** [number, value] in any order; sorted and delta-encoded here. */
  readonly options?: ReadonlyArray<readonly [number, Buffer]>;
  readonly payload?: Buffer | string;
  /** Token length written in the header (defaults to the token's length). */
  readonly tkl?: number;
}

/** Encodes a CoAP message by hand, so that tests can also write what the library refuses. */
export function encode(m: RawMessage): Buffer {
  const token = m.token ?? Buffer.alloc(0);
  const [cls, detail] = m.code.split('.').map(Number);
  const parts: Buffer[] = [
    Buffer.from([
      0x40 | (m.type << 4) | (m.tkl ?? token.length),
      (cls << 5) | detail,
      m.messageId >> 8,
      m.messageId & 0xff,
    ]),
    token,
  ];
  let last = 0;
  for (const [num, value] of [...(m.options ?? [])].sort((a, b) => a[0] - b[0])) {
    const nib = (v: number): [number, number[]] =>
      v < 13 ? [v, []] : v < 269 ? [13, [v - 13]] : [14, [(v - 269) >> 8, (v - 269) & 0xff]];
    const [d, dx] = nib(num - last);
    const [l, lx] = nib(value.length);
    parts.push(Buffer.from([(d << 4) | l, ...dx, ...lx]), value);
    last = num;
  }
  const payload = typeof m.payload === 'string' ? Buffer.from(m.payload) : m.payload;
  if (payload && payload.length > 0) parts.push(Buffer.from([0xff]), payload);
  return Buffer.concat(parts);
}

export interface Decoded {
  readonly type: number;
  readonly code: string;
  readonly messageId: number;
  readonly token: Buffer;
  readonly payload: string;
}

/** Decodes the header, token and payload of a reply (options are skipped). */
export function decode(msg: Buffer): Decoded {
  const tkl = msg[0] & 0x0f;
  const code = `${msg[1] >> 5}.${String(msg[1] & 0x1f).padStart(2, '0')}`;
  const marker = msg.indexOf(0xff, 4 + tkl);
  return {
    type: (msg[0] >> 4) & 3,
    code,
    messageId: msg.readUInt16BE(2),
    token: msg.subarray(4, 4 + tkl),
    payload: marker >= 0 ? msg.subarray(marker + 1).toString('utf8') : '',
  };
}

/** Uri-Path options (11) for a path like `/api/v1/TOKEN/telemetry`. */
export function uriPath(path: string): Array<readonly [number, Buffer]> {
  return path
    .split('/')
    .filter((p) => p !== '')
    .map((p) => [11, Buffer.from(p)] as const);
}

/** A UDP socket that queues what it receives. */
export class RawCoap {
  readonly #socket: Socket = createSocket('udp4');
  readonly #queue: Buffer[] = [];
  #waiter: (() => void) | undefined;

  constructor(private readonly port: number) {
    this.#socket.on('message', (msg) => {
      this.#queue.push(msg);
      this.#waiter?.();
    });
  }

  send(msg: Buffer): void {
    this.#socket.send(msg, this.port, '127.0.0.1');
  }

  /** The next datagram received, or a rejection after `timeoutMs`. */
  async next(timeoutMs = 5000): Promise<Decoded> {
    const deadline = Date.now() + timeoutMs;
    while (this.#queue.length === 0) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no CoAP datagram within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#waiter = undefined;
    }
    return decode(this.#queue.shift() as Buffer);
  }

  close(): void {
    this.#socket.close();
  }
}
