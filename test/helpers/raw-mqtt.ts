import { connect, type Socket } from 'node:net';
import mqttPacket from 'mqtt-packet';

/** A raw MQTT connection: bytes in and out, for packets mqtt.js refuses to write. */
export interface RawMqtt {
  readonly socket: Socket;
  /** Everything received so far. */
  received(): Buffer;
  /** Resolves once the server has closed the connection (rejects after `timeoutMs`). */
  closed(timeoutMs?: number): Promise<void>;
  write(bytes: Buffer): void;
  end(): void;
}

/** Connects, sends CONNECT with `token` as user name, and resolves after the CONNACK. */
export function rawMqttConnect(
  port: number,
  token: string,
  opts: { clientId?: string; version?: 4 | 5 } = {},
): Promise<RawMqtt> {
  const version = opts.version ?? 4;
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let isClosed = false;
    const waiters: Array<() => void> = [];
    socket.on('error', () => undefined);
    socket.on('close', () => {
      isClosed = true;
      for (const w of waiters) w();
    });
    const timer = setTimeout(() => reject(new Error('no CONNACK')), 5000);
    socket.on('data', (c) => {
      const first = buf.length === 0;
      buf = Buffer.concat([buf, c]);
      if (first && buf[0] === 0x20) {
        clearTimeout(timer);
        const rc = version === 5 ? buf[3] : buf[3];
        if (rc !== 0) {
          reject(new Error(`CONNACK refused: ${rc}`));
          return;
        }
        resolve({
          socket,
          received: () => buf.subarray(buf[1] + 2),
          write: (bytes) => socket.write(bytes),
          end: () => socket.destroy(),
          closed: (timeoutMs = 5000) =>
            new Promise((res, rej) => {
              if (isClosed) {
                res();
                return;
              }
              const t = setTimeout(() => rej(new Error('connection stayed open')), timeoutMs);
              waiters.push(() => {
                clearTimeout(t);
                res();
              });
            }),
        });
      }
    });
    socket.write(
      mqttPacket.generate({
        cmd: 'connect',
        protocolId: 'MQTT',
        protocolVersion: version,
        clean: true,
        keepalive: 60,
        clientId: opts.clientId ?? `raw-${Math.random().toString(16).slice(2)}`,
        username: token,
      }),
    );
  });
}

/**
 * A PUBLISH with the topic given as raw bytes (so that it may be ill-formed UTF-8), QoS 1 with
 * `messageId`, or QoS 0 when `messageId` is undefined. MQTT 5 packets get an empty property list.
 */
export function rawPublish(
  topic: Buffer,
  payload: string,
  messageId: number | undefined,
  version: 4 | 5 = 4,
): Buffer {
  const body = Buffer.concat([
    Buffer.from([topic.length >> 8, topic.length & 0xff]),
    topic,
    messageId === undefined ? Buffer.alloc(0) : Buffer.from([messageId >> 8, messageId & 0xff]),
    version === 5 ? Buffer.from([0]) : Buffer.alloc(0),
    Buffer.from(payload),
  ]);
  if (body.length > 127) throw new Error('rawPublish: keep test packets under 128 bytes');
  const header = messageId === undefined ? 0x30 : 0x32;
  return Buffer.concat([Buffer.from([header, body.length]), body]);
}

/** A SUBSCRIBE (packet id 1, QoS 1) with the topic filter given as raw bytes. */
export function rawSubscribe(filter: Buffer, version: 4 | 5 = 4): Buffer {
  const body = Buffer.concat([
    Buffer.from([0, 1]),
    version === 5 ? Buffer.from([0]) : Buffer.alloc(0),
    Buffer.from([filter.length >> 8, filter.length & 0xff]),
    filter,
    Buffer.from([1]),
  ]);
  if (body.length > 127) throw new Error('rawSubscribe: keep test packets under 128 bytes');
  return Buffer.concat([Buffer.from([0x82, body.length]), body]);
}
