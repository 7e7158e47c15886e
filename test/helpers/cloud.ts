import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { Aedes, type Client } from 'aedes';

/** A publish the gateway made to the cloud. */
export interface CloudMessage {
  readonly topic: string;
  readonly body: unknown;
  /** Its payload's size in bytes. */
  readonly bytes: number;
  /** When the cloud got it (`performance.now()`). */
  readonly at: number;
}

export interface CloudOptions {
  /** The access token the gateway must present (its MQTT user name). */
  readonly token: string;
  /** Answer `getSessionLimits` with this body (default: no answer, as an older cloud). */
  readonly sessionLimits?: Record<string, unknown>;
  /** Answers `v1/gateway/attributes/request` (default: no answer). */
  readonly attributes?: (req: { id: number; device: string; keys: string[] }) => unknown;
  /**
   * Publishes of the gateway the cloud refuses: MQTT 5 gets PUBACK 0x87, MQTT 3.1.1 a closed
   * connection (Aedes' answers to a refused publish).
   */
  readonly refuse?: (topic: string, payload: string) => boolean;
  /** Port to listen on (a restarted cloud takes the port of the one it replaces). */
  readonly port?: number;
  /**
   * MQTT over TLS (`mqtts://`) with this certificate and key. With `ca`, a client certificate
   * that CA signed is required, and a gateway presenting one with the common name `clientCn` is
   * let in without a token (ThingsBoard's X.509 device credentials).
   */
  readonly tls?: { cert: string; key: string; ca?: string; clientCn?: string };
  /**
   * ThingsBoard's MQTT basic credentials instead of the token: the client id, user name and
   * password must all match.
   */
  readonly basic?: { clientId: string; username: string; password: string };
}

/**
 * A real MQTT broker standing in for the cloud ThingsBoard (Aedes on a loopback port): records
 * every publish of the gateway in order, answers the gateway API's requests as told, and sends
 * downlink messages to the gateway's subscriptions.
 */
export class FakeCloud {
  readonly messages: CloudMessage[] = [];
  #broker: Aedes | undefined;
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  /** Payloads the cloud sent: only these reach subscribers (no echo of the gateway's own). */
  readonly #downlink = new WeakSet<Buffer>();
  #port = 0;
  /** Connections the gateway made (CONNECTs accepted). */
  connects = 0;
  /** While set (`hold`), publishes of the gateway wait here: not recorded, no PUBACK. */
  #held: Array<() => void> | undefined;
  gatewayClient: Client | undefined;

  constructor(private readonly opts: CloudOptions) {}

  get port(): number {
    return this.#port;
  }

  get url(): string {
    return `${this.opts.tls ? 'mqtts' : 'mqtt'}://127.0.0.1:${this.#port}`;
  }

  async start(): Promise<void> {
    const broker = await Aedes.createBroker({
      authenticate: (client, username, password, done) => {
        const basic = this.opts.basic;
        const ok = basic
          ? client.id === basic.clientId &&
            username === basic.username &&
            password?.toString() === basic.password
          : username === this.opts.token || this.#byCertificate(client);
        if (ok) {
          this.connects++;
          this.gatewayClient = client;
        }
        done(ok ? null : Object.assign(new Error('bad token'), { returnCode: 4 }), ok);
      },
      authorizePublish: (_client, packet, done) => {
        const refused = this.opts.refuse?.(packet.topic, packet.payload.toString()) === true;
        if (this.#held && !refused) this.#held.push(() => done(null));
        else done(refused ? new Error('refused by the cloud') : null);
      },
      authorizeForward: (_client, packet) =>
        this.#downlink.has(packet.payload as Buffer) ? packet : undefined,
    });
    broker.on('publish', (packet, client) => {
      if (!client) return;
      const text = packet.payload.toString();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // kept as text
      }
      this.messages.push({
        topic: packet.topic,
        body,
        bytes: packet.payload.length,
        at: performance.now(),
      });
      this.#answer(packet.topic, body);
    });
    this.#broker = broker;
    const onSocket = (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
      broker.handle(socket);
    };
    const tls = this.opts.tls;
    const server = tls
      ? createTlsServer(
          {
            cert: tls.cert,
            key: tls.key,
            ca: tls.ca,
            requestCert: tls.ca !== undefined,
            rejectUnauthorized: tls.ca !== undefined,
          },
          onSocket,
        )
      : createServer(onSocket);
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port ?? this.#port, '127.0.0.1', () => resolve());
    });
    this.#port = (server.address() as { port: number }).port;
  }

  /** Stops the broker: connections are cut, the port refuses until `start` again. */
  async stop(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    const server = this.#server;
    const broker = this.#broker;
    this.#server = undefined;
    this.#broker = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
    if (broker) await new Promise<void>((resolve) => broker.close(() => resolve()));
  }

  /** From now on the gateway's publishes wait unanswered (in flight), until `release`. */
  hold(): void {
    this.#held ??= [];
  }

  /** Publishes waiting since `hold`. */
  get heldCount(): number {
    return this.#held?.length ?? 0;
  }

  /** Lets the held publishes in (recorded, acknowledged) and stops holding. */
  release(): void {
    const held = this.#held ?? [];
    this.#held = undefined;
    for (const done of held) done();
  }

  /** Publishes to the gateway (downlink), QoS 1. */
  send(topic: string, body: unknown): Promise<void> {
    const broker = this.#broker;
    if (!broker) throw new Error('cloud is stopped');
    const payload = Buffer.from(JSON.stringify(body));
    this.#downlink.add(payload);
    return new Promise((resolve, reject) =>
      broker.publish(
        {
          cmd: 'publish',
          topic,
          payload,
          qos: 1,
          retain: false,
          dup: false,
        },
        (err) => (err ? reject(err) : resolve()),
      ),
    );
  }

  /** The messages on a topic, in order. */
  on(topic: string): unknown[] {
    return this.messages.filter((m) => m.topic === topic).map((m) => m.body);
  }

  /** Every telemetry point a device sent, in arrival order: `[ts, values]`. */
  telemetry(device: string): Array<{ ts: number; values: Record<string, unknown> }> {
    const out: Array<{ ts: number; values: Record<string, unknown> }> = [];
    for (const body of this.on('v1/gateway/telemetry')) {
      const list = (body as Record<string, unknown>)[device];
      if (Array.isArray(list)) out.push(...(list as typeof out));
    }
    return out;
  }

  /** A TLS client whose certificate the CA signed, for the common name the cloud expects. */
  #byCertificate(client: Client): boolean {
    const cn = this.opts.tls?.clientCn;
    const conn = client.conn as unknown as Partial<TLSSocket>;
    if (!cn || !conn.authorized || !conn.getPeerCertificate) return false;
    return conn.getPeerCertificate().subject?.CN === cn;
  }

  #answer(topic: string, body: unknown): void {
    if (topic === 'v1/devices/me/rpc/request/1' && this.opts.sessionLimits) {
      void this.send('v1/devices/me/rpc/response/1', this.opts.sessionLimits);
    }
    if (topic === 'v1/gateway/attributes/request' && this.opts.attributes) {
      const req = body as { id: number; device: string; keys: string[] };
      const answer = this.opts.attributes(req);
      if (answer !== undefined) void this.send('v1/gateway/attributes/response', answer);
    }
  }
}
