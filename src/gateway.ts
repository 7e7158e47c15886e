import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Hono } from 'hono';
import type { DestinationStream } from 'pino';
import { AuthService } from './auth/auth-service.js';
import type { Config, Secrets } from './config.js';
import { MIGRATIONS } from './db/migrations/index.js';
import { migrate } from './db/migrator.js';
import { type Db, openDb } from './db/open.js';
import { DeviceProfileService } from './devices/device-profile-service.js';
import { DeviceService } from './devices/device-service.js';
import { EventBus } from './events.js';
import { createLoggers, type Loggers } from './logger.js';
import { SystemdNotifier } from './systemd.js';
import { TenantService } from './tenant/tenant-service.js';
import { CoapServer } from './transports/coap/coap-server.js';
import { createHttpApp } from './transports/http/app.js';
import type { HttpEnv } from './transports/http/context.js';
import { HttpServer } from './transports/http/http-server.js';
import { MqttServer } from './transports/mqtt/mqtt-server.js';
import { UserService } from './users/user-service.js';
import { VERSION } from './version.js';

export type GatewayState = 'created' | 'starting' | 'ready' | 'stopping' | 'stopped';

export interface GatewayOverrides {
  readonly secrets?: Secrets;
  /** Where logs go (default stdout). Tests pass a sink. */
  readonly logDestination?: DestinationStream;
  readonly loggers?: Loggers;
  /** Environment read for systemd notification (default process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Directory with the built UI (default: `ui/` beside the bundle, or `dist/ui`). */
  readonly uiDir?: string | null;
}

export interface Ports {
  readonly http: number;
  readonly mqtt: number;
  readonly coap: number;
}

/** Finds the built UI: `ui/` beside the bundle, or `dist/ui` when running from source. */
function defaultUiDir(): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const dir of [join(here, 'ui'), join(here, '..', 'dist', 'ui')]) {
    if (existsSync(join(dir, 'index.html'))) return dir;
  }
  return undefined;
}

/**
 * The composition root: builds every service and transport, wires their dependencies, starts
 * them in order (db, services, listeners) and stops them in reverse.
 */
export class Gateway implements AsyncDisposable {
  readonly loggers: Loggers;
  readonly bus: EventBus;
  #state: GatewayState = 'created';
  #startedAt = 0;
  #db: Db | undefined;
  #services: Services | undefined;
  #http: HttpServer | undefined;
  #mqtt: MqttServer | undefined;
  #coap: CoapServer | undefined;
  #stopping: Promise<void> | undefined;
  readonly #systemd: SystemdNotifier;

  constructor(
    readonly config: Config,
    private readonly overrides: GatewayOverrides = {},
  ) {
    this.loggers = overrides.loggers ?? createLoggers(config.logLevel, overrides.logDestination);
    this.bus = new EventBus(this.loggers.gateway);
    this.#systemd = new SystemdNotifier({
      env: overrides.env ?? process.env,
      log: this.loggers.systemd,
    });
  }

  get state(): GatewayState {
    return this.#state;
  }

  get services(): Services {
    if (!this.#services) throw new Error('gateway is not started');
    return this.#services;
  }

  get db(): Db {
    if (!this.#db) throw new Error('gateway is not started');
    return this.#db;
  }

  get ports(): Ports {
    return {
      http: this.#http?.port ?? 0,
      mqtt: this.#mqtt?.port ?? 0,
      coap: this.#coap?.port ?? 0,
    };
  }

  async start(): Promise<void> {
    if (this.#state !== 'created') throw new Error(`cannot start a gateway that is ${this.#state}`);
    this.#state = 'starting';
    this.#startedAt = Date.now();
    const log = this.loggers.gateway;
    const { config } = this;
    log.info({ version: VERSION, dataDir: config.dataDir }, 'starting');
    try {
      const db = openDb({ dataDir: config.dataDir, durability: config.storage.durability });
      this.#db = db;
      migrate(db, MIGRATIONS, this.loggers.db);
      this.#services = await buildServices(
        db,
        this.config,
        this.overrides.secrets ?? {},
        this.bus,
        this.loggers,
      );

      const s = this.#services;
      const host = config.bind;
      const uiDir =
        this.overrides.uiDir === null ? undefined : (this.overrides.uiDir ?? defaultUiDir());
      const app = createHttpApp({
        log: this.loggers.http,
        maxBodyBytes: config.http.maxBodyBytes,
        health: () => this.health(),
        auth: s.auth,
        users: s.users,
        devices: s.devices,
        profiles: s.profiles,
        uiDir,
        apiRoutes: apiRoutes(s),
      });
      this.#http = new HttpServer({ app, host, port: config.http.port, log: this.loggers.http });
      await this.#http.start();
      log.info({ transport: 'http', host, port: this.#http.port }, 'listening');

      this.#mqtt = new MqttServer({
        devices: s.devices,
        host,
        port: config.mqtt.port,
        log: this.loggers.mqtt,
      });
      await this.#mqtt.start();
      log.info({ transport: 'mqtt', host, port: this.#mqtt.port }, 'listening');

      this.#coap = new CoapServer({ host, port: config.coap.port, log: this.loggers.coap });
      await this.#coap.start();
      log.info({ transport: 'coap', host, port: this.#coap.port }, 'listening');
    } catch (err) {
      log.error({ err }, 'start failed');
      await this.stop();
      throw err;
    }
    this.#state = 'ready';
    this.#systemd.ready();
    log.info({ ports: this.ports }, 'ready');
  }

  health() {
    return {
      ready: this.#state === 'ready',
      status: this.#state === 'ready' ? 'UP' : this.#state.toUpperCase(),
      version: VERSION,
      uptimeMs: this.#startedAt ? Date.now() - this.#startedAt : 0,
    };
  }

  /** Stops listeners, flushes pending writes, closes the db. Safe to call twice. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const log = this.loggers.gateway;
    this.#state = 'stopping';
    this.#systemd.stopping();
    log.info('stopping');
    const step = async (name: string, fn: () => Promise<void> | void) => {
      try {
        await fn();
        log.debug({ step: name }, 'stopped');
      } catch (err) {
        log.error({ err, step: name }, 'stop step failed');
      }
    };
    await step('coap', () => this.#coap?.stop());
    await step('mqtt', () => this.#mqtt?.stop());
    await step('http', () => this.#http?.stop());
    if (this.#services) await step('services', () => stopServices(this.#services as Services));
    this.bus.removeOwner('gateway');
    await step('db', () => {
      if (this.#db?.open) this.#db.close();
    });
    this.#state = 'stopped';
    log.info('stopped');
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

export interface Services {
  readonly tenants: TenantService;
  readonly users: UserService;
  readonly auth: AuthService;
  readonly profiles: DeviceProfileService;
  readonly devices: DeviceService;
}

async function buildServices(
  db: Db,
  config: Config,
  secrets: Secrets,
  bus: EventBus,
  loggers: Loggers,
): Promise<Services> {
  const tenants = new TenantService({ db });
  tenants.init();
  const users = new UserService({
    db,
    tenants,
    secrets,
    dataDir: config.dataDir,
    log: loggers.auth,
  });
  await users.bootstrapAdmin();
  const auth = new AuthService({ config, users, log: loggers.auth });
  auth.init();
  const profiles = new DeviceProfileService({ db, tenants });
  profiles.init();
  const devices = new DeviceService({ db, tenants, profiles, bus });
  return { tenants, users, auth, profiles, devices };
}

/** Stops services that own timers or pending writes, newest first. */
async function stopServices(_s: Services): Promise<void> {}

/** Sub-apps of the HTTP transport beyond auth and device management, mounted in this order. */
function apiRoutes(_s: Services): Array<{ path: string; app: Hono<HttpEnv> }> {
  return [];
}

export function createGateway(config: Config, overrides?: GatewayOverrides): Gateway {
  return new Gateway(config, overrides);
}
