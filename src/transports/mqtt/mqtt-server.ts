import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:net';
import { Aedes, type AuthenticateError, type Client } from 'aedes';
import type { Logger } from 'pino';
import type { DeviceIdentity, DeviceService } from '../../devices/device-service.js';

export interface MqttServerDeps {
  readonly devices: DeviceService;
  readonly host: string;
  readonly port: number;
  readonly log: Logger;
}

// MQTT 3.1.1 §3.2.2.3 CONNACK return codes.
const NOT_AUTHORIZED = 5;

type DeviceClient = Client & { device?: DeviceIdentity };

/**
 * The MQTT listener: an Aedes broker behind a TCP server. The core is reached only through
 * Aedes hooks. Device topics arrive with the device API issue; today a device can connect with
 * its access token as user name, and nothing else.
 */
export class MqttServer {
  #broker: Aedes | undefined;
  #server: Server | undefined;

  constructor(private readonly deps: MqttServerDeps) {}

  async start(): Promise<number> {
    const { log, devices } = this.deps;
    const broker = await Aedes.createBroker({
      authenticate: (client, username, _password, done) => {
        const device = username ? devices.byAccessToken(username) : undefined;
        if (!device) {
          const err = new Error('Not authorized') as AuthenticateError;
          err.returnCode = NOT_AUTHORIZED;
          log.info({ clientId: client.id }, 'mqtt connect refused: unknown access token');
          done(err, false);
          return;
        }
        (client as DeviceClient).device = device;
        done(null, true);
      },
      // @TODO(device API over MQTT): route v1/devices/me/* topics to the core.
      authorizePublish: (_client, packet, callback) => {
        callback(new Error(`publishing to ${packet.topic} is not supported yet`));
      },
      authorizeSubscribe: (_client, sub, callback) => {
        callback(new Error(`subscribing to ${sub.topic} is not supported yet`));
      },
    });
    broker.on('clientError', (client, err) =>
      log.debug({ clientId: client.id, err }, 'mqtt client error'),
    );
    broker.on('connectionError', (client, err) =>
      log.debug({ clientId: client?.id, err }, 'mqtt connection error'),
    );
    this.#broker = broker;
    const server = createServer(broker.handle);
    this.#server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.deps.port, this.deps.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return this.port;
  }

  get port(): number {
    return (this.#server?.address() as AddressInfo | null)?.port ?? 0;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    const broker = this.#broker;
    this.#server = undefined;
    this.#broker = undefined;
    const closed = server
      ? new Promise<void>((resolve) => server.close(() => resolve()))
      : undefined;
    if (broker) await new Promise<void>((resolve) => broker.close(() => resolve()));
    await closed;
  }
}
