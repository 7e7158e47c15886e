import { existsSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Hono } from 'hono';
import type { DestinationStream } from 'pino';
import { AlarmEngine } from './alarms/alarm-engine.js';
import { registerAlarmMetrics } from './alarms/alarm-metrics.js';
import { AlarmRetention } from './alarms/alarm-retention.js';
import { AlarmService } from './alarms/alarm-service.js';
import { AttributeService } from './attributes/attribute-service.js';
import { OwnerAttributeService, type OwnerType } from './attributes/owner-attributes.js';
import { AuditService } from './audit/audit-service.js';
import { AuthService } from './auth/auth-service.js';
import type { OwnerRef, SharedDeviceAccess } from './auth/authorization.js';
import { DeviceAuthThrottle } from './auth/device-auth-throttle.js';
import { ClaimService } from './claims/claim-service.js';
import { ServerClock } from './common/clock.js';
import { joinHooks, laterHook } from './common/commit-hook.js';
import type { Config, Secrets } from './config.js';
import { registerConnectorMetrics } from './connectors/connector-metrics.js';
import { ConnectorService } from './connectors/connector-service.js';
import type { ModbusConnectorConfig } from './connectors/modbus-config.js';
import type { SerialConnectorConfig } from './connectors/serial-config.js';
import { CustomerService } from './customers/customer-service.js';
import { DashboardService } from './dashboards/dashboard-service.js';
import { BACKUP_DIR, backupOpenDb, copyBeforeMigration } from './db/backup.js';
import { Checkpointer } from './db/checkpointer.js';
import { DbHealth } from './db/db-health.js';
import { MIGRATIONS } from './db/migrations/index.js';
import { migrate } from './db/migrator.js';
import { DB_FILE, type Db, openDb } from './db/open.js';
import type { SqliteAddon } from './db/sqlite-addon.js';
import { ActivityService, type ActivitySnapshot } from './devices/activity-service.js';
import { DeviceProfileService } from './devices/device-profile-service.js';
import { DeviceService, type DeviceServiceDeps } from './devices/device-service.js';
import { ProfileTransports } from './devices/profile-transports.js';
import { loadProtobuf } from './devices/protobuf-lib.js';
import { EventBus } from './events.js';
import { GroupService } from './groups/group-service.js';
import { createLoggers, type Loggers } from './logger.js';
import { DeviceMessageService } from './messages/device-message-service.js';
import type { MessageProcessor } from './messages/types.js';
import { MemoryTrim } from './metrics/memory-trim.js';
import { Metrics } from './metrics/metrics.js';
import { type EdgeNative, loadEdgeNative } from './native/edge-native.js';
import { createNotifications, type Notifications } from './notifications/notifications.js';
import { OtaService } from './ota/ota-service.js';
import { ProvisionService } from './provisioning/provision-service.js';
import { type ClientRpcRouter, ClientRpcService } from './rpc/client-rpc.js';
import { RpcService } from './rpc/rpc-service.js';
import type { ChainStats } from './rules/rule-engine.js';
import { createRules, type Rules } from './rules/rules.js';
import { Scheduler } from './scheduler/scheduler.js';
import { SchedulerEventService } from './scheduler/scheduler-event-service.js';
import { AdminSettingsStore } from './settings/admin-settings-store.js';
import { RetentionSettings } from './settings/retention-settings.js';
import { SubscriptionService } from './subscriptions/subscription-service.js';
import { SystemdNotifier } from './systemd.js';
import { TELEMETRY_LIMITS } from './telemetry/telemetry-parser.js';
import { TelemetryService } from './telemetry/telemetry-service.js';
import { TenantService } from './tenant/tenant-service.js';
import { loadOrCreateTls, type TlsPair } from './tls/certificate.js';
import { CoapServer } from './transports/coap/coap-server.js';
import { alarmRoutes } from './transports/http/alarm-routes.js';
import { createHttpApp, type HealthInfo } from './transports/http/app.js';
import { attributeRoutes } from './transports/http/attribute-routes.js';
import { auditRoutes } from './transports/http/audit-routes.js';
import { CONNECTOR_SAVE_ROUTE, connectorRoutes } from './transports/http/connector-routes.js';
import type { HttpEnv } from './transports/http/context.js';
import { customerRoutes } from './transports/http/customer-routes.js';
import { DASHBOARD_SAVE_ROUTE, dashboardRoutes } from './transports/http/dashboard-routes.js';
import { deviceAttributeRoutes } from './transports/http/device-api/attributes.js';
import { claimApi } from './transports/http/device-api/claim.js';
import { deviceAuth, deviceByToken } from './transports/http/device-api/device-auth.js';
import { firmwareApi } from './transports/http/device-api/firmware.js';
import { provisionApi } from './transports/http/device-api/provision.js';
import { deviceRpcRoutes } from './transports/http/device-api/rpc.js';
import {
  deviceTelemetryRoutes,
  telemetryFastLane,
} from './transports/http/device-api/telemetry.js';
import { deviceProfileRoutes } from './transports/http/device-profile-routes.js';
import { groupRoutes } from './transports/http/group-routes.js';
import { HttpServer, httpsRedirect } from './transports/http/http-server.js';
import { requireUser } from './transports/http/middleware.js';
import { noauthRoutes } from './transports/http/noauth-routes.js';
import { adminSettingsRoutes, notificationRoutes } from './transports/http/notification-routes.js';
import {
  backupRoutes,
  metricsApp,
  metricsRoutes,
  requireOperator,
  type SystemInfo,
  systemRoutes,
} from './transports/http/ops-routes.js';
import { OTA_UPLOAD_ROUTE, otaRoutes } from './transports/http/ota-routes.js';
import { ownerAttributeRoutes } from './transports/http/owner-attribute-routes.js';
import { ownershipRoutes } from './transports/http/ownership-routes.js';
import { rpcRoutes } from './transports/http/rpc-routes.js';
import { ruleChainRoutes } from './transports/http/rule-chain-routes.js';
import { schedulerRoutes } from './transports/http/scheduler-routes.js';
import { telemetryRoutes } from './transports/http/telemetry-routes.js';
import { upstreamRoutes } from './transports/http/upstream-routes.js';
import { userRoutes } from './transports/http/user-routes.js';
import { ModbusMaster } from './transports/modbus/modbus-master.js';
import { MqttServer } from './transports/mqtt/mqtt-server.js';
import { GsmModem } from './transports/serial/gsm-modem.js';
import { SerialLineConnector } from './transports/serial/serial-reader.js';
import { WsApi } from './transports/ws/ws-api.js';
import { UpstreamService } from './upstream/upstream-service.js';
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
  /** better-sqlite3's native addon when it is not in node_modules (the single executable). */
  readonly sqliteAddon?: SqliteAddon;
  /** The gateway's own addon file (the single executable's); default beside the bundle. */
  readonly nativeAddonFile?: string;
  /**
   * The one processing entry point instead of the gateway's own (`messageProcessor` below); a
   * function gets the services and the standard processor (to wrap it).
   */
  readonly messageProcessor?:
    | MessageProcessor
    | ((services: Services, standard: MessageProcessor) => MessageProcessor);
  /** The wall clock (default Date.now); fault drills make it jump. */
  readonly wallClock?: () => number;
  /** The alarm engine's and alarm service's clock (tests control DURATION rules with it). */
  readonly now?: () => number;
  /** How often DURATION alarm rules are re-checked without new data (default 1 s). */
  readonly alarmCheckIntervalMs?: number;
}

export interface Ports {
  readonly http: number;
  /** 0 when HTTPS is off. */
  readonly https: number;
  readonly mqtt: number;
  /** 0 when MQTT over TLS is not configured. */
  readonly mqttTls: number;
  readonly coap: number;
  /** 0 when `/metrics` is served on the HTTP port. */
  readonly metrics: number;
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
  /** Prometheus metrics of this gateway (its own registry). */
  readonly metrics = new Metrics();
  #state: GatewayState = 'created';
  #startedAt = 0;
  #db: Db | undefined;
  #checkpointer: Checkpointer | undefined;
  #dbHealth: DbHealth | undefined;
  #metricsHttp: HttpServer | undefined;
  #memoryTrim: MemoryTrim | undefined;
  #https: HttpServer | undefined;
  #tls: TlsPair | undefined;
  #services: Services | undefined;
  #http: HttpServer | undefined;
  #mqtt: MqttServer | undefined;
  #coap: CoapServer | undefined;
  #ws: WsApi | undefined;
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
      https: this.#https?.port ?? 0,
      mqtt: this.#mqtt?.port ?? 0,
      mqttTls: this.#mqtt?.tlsPort ?? 0,
      coap: this.#coap?.port ?? 0,
      metrics: this.#metricsHttp?.port ?? 0,
    };
  }

  /** Live CoAP observations and what the CoAP bounds refused (docs/security.md). */
  get coapObservations(): { live: number } & CoapServer['refusals'] {
    const coap = this.#coap;
    return coap
      ? { live: coap.observations, ...coap.refusals }
      : { live: 0, malformedDatagrams: 0, observationsRefused: 0, observationsEnded: 0 };
  }

  async start(): Promise<void> {
    if (this.#state !== 'created') throw new Error(`cannot start a gateway that is ${this.#state}`);
    this.#state = 'starting';
    this.#startedAt = Date.now();
    const log = this.loggers.gateway;
    const { config } = this;
    log.info({ version: VERSION, dataDir: config.dataDir }, 'starting');
    try {
      const addon = this.overrides.sqliteAddon;
      const db = openDb({ dataDir: config.dataDir, durability: config.storage.durability, addon });
      this.#db = db;
      const schema = db.pragma('user_version', { simple: true }) as number;
      if (schema > 0 && schema < MIGRATIONS.length) {
        const copy = await copyBeforeMigration(db, config.dataDir, schema, MIGRATIONS.length);
        this.loggers.db.info(
          { file: copy.file, bytes: copy.bytes, from: schema, to: MIGRATIONS.length },
          'database copied before migration',
        );
      }
      migrate(db, MIGRATIONS, this.loggers.db);
      this.#checkpointer = new Checkpointer({
        db,
        dataDir: config.dataDir,
        log: this.loggers.db,
        addon,
      });
      this.#checkpointer.start();
      const dbHealth = new DbHealth({ db, log: this.loggers.db });
      this.#dbHealth = dbHealth;
      this.metrics.start();
      const secrets = this.overrides.secrets ?? {};
      if (config.https.enabled) {
        const tls = await loadOrCreateTls({
          dataDir: config.dataDir,
          certFile: config.tls.cert,
          keyFile: config.tls.key,
        });
        this.#tls = tls;
        log.info(
          {
            file: tls.certFile,
            generated: tls.generated,
            fingerprint256: tls.fingerprint256,
            subjectAltName: tls.subjectAltName,
            validTo: tls.validTo,
          },
          tls.generated
            ? 'tls certificate (self-signed): compare this SHA-256 fingerprint with the one your browser shows'
            : 'tls certificate',
        );
      }
      this.#services = await buildServices(
        db,
        this.config,
        secrets,
        this.bus,
        this.loggers,
        {
          clock: new ServerClock(this.overrides.wallClock),
          onCommitTiming: (ms, ok) => {
            this.metrics.commit(ms, ok);
            dbHealth.commit(ms, ok);
          },
        },
        this.overrides,
      );

      const s = this.#services;
      // Devices of a Protobuf profile are served from the first message on (protobuf-lib.ts).
      if (s.profiles.usesProtobuf()) await loadProtobuf();
      const standard = messageProcessor(s, this.loggers);
      const custom = this.overrides.messageProcessor;
      s.messages.setProcessor(
        typeof custom === 'function' ? custom(s, standard) : (custom ?? standard),
      );
      // Client-side RPC is answered by the rule chains (rpc call reply node), not the built-in
      // router, unless a test replaced the whole entry point.
      if (typeof custom !== 'object') s.clientRpc.setRouter(RULE_CHAINS_ANSWER);
      registerRuleMetrics(this.metrics, s.rules);
      registerAlarmMetrics(this.metrics, {
        alarms: s.alarms,
        engine: s.alarmEngine,
        retention: s.alarmRetention,
      });
      registerConnectorMetrics(this.metrics, s.connectors);
      const host = config.bind;
      const ops = {
        metrics: this.metrics,
        requireOperator: requireOperator(s.auth, secrets.metricsToken),
      };
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
        sharedDevices: sharedDevices(s.groups),
        uiDir,
        apiRoutes: [
          ...apiRoutes(s, config, this.metrics),
          ...(config.metrics.port === 0 ? [{ path: '/', app: metricsRoutes(ops) }] : []),
          { path: '/api', app: systemRoutes({ info: () => this.info() }) },
          {
            path: '/api',
            app: backupRoutes({
              requireUser: requireUser(s.auth),
              backup: (file) => backupOpenDb(db, file),
              tmpDir: join(config.dataDir, BACKUP_DIR),
              log: this.loggers.db,
            }),
          },
        ],
        bodyLimitExempt: [OTA_UPLOAD_ROUTE, DASHBOARD_SAVE_ROUTE, CONNECTOR_SAVE_ROUTE],
      });
      const lanes = [
        telemetryFastLane({
          device: deviceByToken({ devices: s.devices, activity: s.activity }),
          telemetry: { ingest: (device, body) => s.messages.postTelemetry(device, body) },
          maxBodyBytes: config.http.maxBodyBytes,
          log: this.loggers.http,
          meter: this.metrics.ingest,
        }),
      ];
      const tls = this.#tls;
      if (tls) {
        this.#https = new HttpServer({
          app,
          host,
          port: config.https.port,
          log: this.loggers.http,
          lanes,
          tls,
          maxUrlBytes: config.http.maxUrlBytes,
          maxHeaderBytes: config.http.maxHeaderBytes,
        });
        await this.#https.start();
        log.info({ transport: 'https', host, port: this.#https.port }, 'listening');
      }
      const https = this.#https;
      this.#http = new HttpServer({
        app,
        host,
        port: config.http.port,
        log: this.loggers.http,
        lanes: https && config.http.redirect ? [httpsRedirect(() => https.port), ...lanes] : lanes,
        maxUrlBytes: config.http.maxUrlBytes,
        maxHeaderBytes: config.http.maxHeaderBytes,
      });
      await this.#http.start();
      log.info({ transport: 'http', host, port: this.#http.port }, 'listening');
      if (config.metrics.port > 0) {
        this.#metricsHttp = new HttpServer({
          app: metricsApp({ ...ops, log: this.loggers.http }),
          host,
          port: config.metrics.port,
          log: this.loggers.http,
        });
        await this.#metricsHttp.start();
        log.info({ transport: 'metrics', host, port: this.#metricsHttp.port }, 'listening');
      }

      this.#mqtt = new MqttServer({
        devices: s.devices,
        core: s,
        host,
        port: config.mqtt.port,
        log: this.loggers.mqtt,
        meter: this.metrics.ingest,
        // Its own pair, else the HTTPS one (given or generated) while HTTPS is on.
        tls: config.mqtt.tlsCert
          ? {
              port: config.mqtt.tlsPort,
              certFile: config.mqtt.tlsCert,
              keyFile: config.mqtt.tlsKey,
            }
          : tls
            ? { port: config.mqtt.tlsPort, certFile: tls.certFile, keyFile: tls.keyFile }
            : undefined,
      });
      await this.#mqtt.start();
      // The live WebSocket API and MQTT over WebSocket share the HTTP port.
      const ws = new WsApi({
        auth: s.auth,
        subscriptions: s.subscriptions,
        log: this.loggers.http,
        maxPendingBytes: config.ws.maxPendingBytes,
        pingIntervalMs: config.ws.pingIntervalSec * 1000,
      });
      ws.start();
      this.#ws = ws;
      const mqttUpgrade = this.#mqtt.handleUpgrade;
      const upgrade: Parameters<HttpServer['onUpgrade']>[0] = (req, socket, head) => {
        if (!ws.handleUpgrade(req, socket, head)) mqttUpgrade(req, socket, head);
      };
      this.#http.onUpgrade(upgrade);
      this.#https?.onUpgrade(upgrade);
      log.info({ transport: 'mqtt', host, port: this.#mqtt.port }, 'listening');
      if (this.#mqtt.tlsPort) {
        log.info({ transport: 'mqtts', host, port: this.#mqtt.tlsPort }, 'listening');
      }

      this.#coap = new CoapServer({
        host,
        port: config.coap.port,
        log: this.loggers.coap,
        devices: s.devices,
        core: s,
        meter: this.metrics.ingest,
        observations: {
          maxTotal: config.coap.maxObservers,
          maxPerEndpoint: config.coap.maxObserversPerEndpoint,
          lifetimeMs: config.coap.observeLifetimeSec * 1000,
          ackTimeoutMs: config.coap.notificationAckTimeoutMs,
        },
      });
      await this.#coap.start();
      log.info({ transport: 'coap', host, port: this.#coap.port }, 'listening');
    } catch (err) {
      log.error({ err }, 'start failed');
      await this.stop();
      throw err;
    }
    const native = this.services.native;
    this.#memoryTrim = new MemoryTrim({
      log: this.loggers.gateway,
      // malloc keeps 18-34 MB of a burst that malloc_trim hands back (docs/benchmarks.md).
      mallocTrim: native.available ? () => native.addon.mallocTrim() : undefined,
      options: {
        growthBytes: config.memory.trimAfterMb * 1024 * 1024,
        quietMs: config.memory.trimQuietSec * 1000,
      },
    });
    this.#memoryTrim.start();
    this.#registerGauges();
    this.#state = 'ready';
    this.#systemd.ready(() => this.health().ready);
    log.info({ ports: this.ports }, 'ready');
  }

  /** Ready and UP while every listener runs and the database answers and takes writes. */
  health(): HealthInfo {
    const ready = this.#state === 'ready';
    const db = ready ? this.#dbHealth?.check() : undefined;
    const dbDown = db !== undefined && !db.ok;
    return {
      ready: ready && !dbDown,
      status: dbDown ? 'DOWN' : ready ? 'UP' : this.#state.toUpperCase(),
      version: VERSION,
      uptimeMs: this.#startedAt ? Date.now() - this.#startedAt : 0,
      db: db && (db.ok ? { status: 'UP' } : { status: 'DOWN', error: db.error }),
      messages: this.#services?.messages.stats(),
      // The outbox is read from the database: only while it is open.
      upstream: ready ? this.#services?.upstream.status() : undefined,
    };
  }

  /** What the page shows about the box: version and the HTTPS certificate to check. */
  info(): SystemInfo {
    const tls = this.#tls;
    return {
      version: VERSION,
      https: tls
        ? {
            port: this.#https?.port ?? 0,
            fingerprint256: tls.fingerprint256,
            selfSigned: tls.generated,
            subjectAltName: tls.subjectAltName,
            validTo: tls.validTo,
          }
        : null,
    };
  }

  /** Gauges read at scrape time from the parts built in start(). */
  #registerGauges(): void {
    const m = this.metrics;
    const s = this.services;
    const dbFile = join(this.config.dataDir, DB_FILE);
    const size = (file: string) => {
      try {
        return statSync(file).size;
      } catch {
        return 0; // no WAL file right after a truncating checkpoint
      }
    };
    m.gauge({
      name: 'edge_database_bytes',
      help: 'Size of the SQLite database file and of its write-ahead log',
      labelNames: ['file'],
      collect: () => [
        [{ file: 'db' }, size(dbFile)],
        [{ file: 'wal' }, size(`${dbFile}-wal`)],
      ],
    });
    const trim = this.#memoryTrim;
    m.gauge({
      name: 'edge_memory_trims_total',
      help: 'Full collections run to give the heap of a burst back once the gateway was quiet',
      type: 'counter',
      collect: () => trim?.stats.trims ?? 0,
    });
    m.gauge({
      name: 'edge_memory_trimmed_bytes_total',
      help: 'Heap bytes those collections handed back',
      type: 'counter',
      collect: () => trim?.stats.freedBytes ?? 0,
    });
    m.gauge({
      name: 'edge_writer_queue_points',
      help: 'Telemetry points waiting for their group commit',
      collect: () => s.telemetry.gauges.pending,
    });
    m.gauge({
      name: 'edge_telemetry_points',
      help: 'Telemetry points stored (the ring buffer), open ones (in the log, not yet sealed) included',
      collect: () => s.telemetry.gauges.points,
    });
    m.gauge({
      name: 'edge_message_queue',
      help: 'Messages on their way to the processing entry point (alarms, rules): queued now; processed, dropped at the bound, failed since start',
      labelNames: ['state'],
      collect: () => {
        const q = s.messages.stats();
        return [
          [{ state: 'queued' }, q.queued],
          [{ state: 'processed' }, q.processed],
          [{ state: 'dropped' }, q.dropped],
          [{ state: 'failed' }, q.failed],
        ];
      },
    });
    m.gauge({
      name: 'edge_active_alarms',
      help: 'Alarms not cleared (acknowledged or not), by severity',
      labelNames: ['severity'],
      collect: () =>
        Object.entries(s.alarms.activeBySeverity()).map(([severity, n]) => [{ severity }, n]),
    });
    m.gauge({
      name: 'edge_telemetry_staged_points',
      help: 'Committed points in the log, not yet sealed into compressed blocks (the open range)',
      collect: () => s.telemetry.gauges.staged,
    });
    m.gauge({
      name: 'edge_telemetry_bytes',
      help: 'Bytes telemetry takes (compressed blocks and log), and the byte bound of the ring buffer',
      labelNames: ['kind'],
      collect: () => [
        [{ kind: 'stored' }, s.telemetry.gauges.bytes],
        [{ kind: 'bound' }, s.telemetry.gauges.maxBytes],
      ],
    });
    m.gauge({
      name: 'edge_storage_written_bytes_per_point',
      help: 'Bytes this process wrote to storage since start (/proc/self/io) per telemetry point committed',
      collect: () => s.telemetry.writeBudget().bytesPerPoint ?? 0,
    });
    m.gauge({
      name: 'edge_ring_evicted_points_total',
      help: 'Telemetry points evicted by the ring-buffer bounds since start',
      type: 'counter',
      collect: () => s.telemetry.gauges.evicted,
    });
    m.gauge({
      name: 'edge_open_connections',
      help: 'Open connections by transport (coap: live observations)',
      labelNames: ['transport'],
      collect: () => [
        [{ transport: 'http' }, this.#http?.connections ?? 0],
        [{ transport: 'https' }, this.#https?.connections ?? 0],
        [{ transport: 'mqtt' }, this.#mqtt?.connections ?? 0],
        [{ transport: 'coap' }, this.#coap?.observations ?? 0],
        [{ transport: 'websocket' }, this.#ws?.stats.sockets ?? 0],
      ],
    });
    m.gauge({
      name: 'edge_ws_slow_clients_closed_total',
      help: 'WebSocket clients closed because their unsent updates passed EDGE_WS_MAX_PENDING_BYTES',
      type: 'counter',
      collect: () => this.#ws?.stats.slowClosed ?? 0,
    });
    m.gauge({
      name: 'edge_auth_failures_total',
      help: 'Failed authentications since start: device tokens over MQTT/CoAP and user logins, and how many of them were throttled',
      type: 'counter',
      labelNames: ['kind', 'outcome'],
      collect: () => {
        const d = s.deviceAuth.counts;
        const l = s.auth.loginCounts;
        return [
          [{ kind: 'device', outcome: 'failed' }, d.failures],
          [{ kind: 'device', outcome: 'throttled' }, d.throttled],
          [{ kind: 'login', outcome: 'failed' }, l.failures],
          [{ kind: 'login', outcome: 'throttled' }, l.throttled],
        ];
      },
    });
    m.gauge({
      name: 'edge_throttle_entries',
      help: 'Entries of the bounded throttle tables (device authentications per address, logins per account and address), now and dropped at the bound since start',
      labelNames: ['table', 'state'],
      collect: () => {
        const d = s.deviceAuth.counts;
        const { accounts, addresses } = s.auth.loginCounts;
        return [
          [{ table: 'device_address', state: 'tracked' }, d.entries],
          [{ table: 'device_address', state: 'dropped' }, d.dropped],
          [{ table: 'login_account', state: 'tracked' }, accounts.entries],
          [{ table: 'login_account', state: 'dropped' }, accounts.dropped],
          [{ table: 'login_address', state: 'tracked' }, addresses.entries],
          [{ table: 'login_address', state: 'dropped' }, addresses.dropped],
        ];
      },
    });
    m.gauge({
      name: 'edge_coap_refusals_total',
      help: 'CoAP datagrams refused by the RFC 7252 checks, observations refused at their bounds and ended (unacknowledged, reset or expired) since start',
      type: 'counter',
      labelNames: ['reason'],
      collect: () => {
        const r = this.#coap?.refusals;
        return [
          [{ reason: 'malformed' }, r?.malformedDatagrams ?? 0],
          [{ reason: 'observation_refused' }, r?.observationsRefused ?? 0],
          [{ reason: 'observation_ended' }, r?.observationsEnded ?? 0],
        ];
      },
    });
    m.gauge({
      name: 'edge_notifications',
      help: "Notifications: deliveries waiting in the outbox, entries in the users' inboxes (now)",
      labelNames: ['state'],
      collect: () => {
        const n = s.notifications.service.stats();
        return [
          [{ state: 'pending' }, n.pending],
          [{ state: 'inbox' }, n.inbox],
        ];
      },
    });
    m.gauge({
      name: 'edge_notifications_dropped_total',
      help: 'Notifications dropped at their bounds (oldest undelivered outbox rows, oldest inbox entries, oldest ad-hoc requests) and targets, templates or rules refused at theirs, since start',
      type: 'counter',
      labelNames: ['what'],
      collect: () => {
        const n = s.notifications.service.stats();
        return [
          [{ what: 'outbox' }, n.outboxDropped],
          [{ what: 'inbox' }, n.inboxDropped],
          [{ what: 'request' }, n.requestsDropped],
          [{ what: 'config_refused' }, n.configsRefused],
        ];
      },
    });
    m.gauge({
      name: 'edge_scheduler_jobs',
      help: "Jobs armed on the scheduler host (user scheduler events and the gateway's own)",
      collect: () => s.scheduler.size,
    });
    m.gauge({
      name: 'edge_refused_total',
      help: 'Saves refused at a bound since start: rule chains (409), scheduler events (409), scheduler jobs (400)',
      type: 'counter',
      labelNames: ['what'],
      collect: () => [
        [{ what: 'rule_chain' }, s.rules.chains.refused],
        [{ what: 'scheduler_event' }, s.schedulerEvents.refused],
        [{ what: 'scheduler_job' }, s.scheduler.refused],
      ],
    });
    m.gauge({
      name: 'edge_upstream_backlog',
      help: 'Messages in the upstream outbox waiting for the cloud (0 when upstream is off)',
      collect: () => s.upstream.status().backlog,
    });
    m.gauge({
      name: 'edge_upstream_connected',
      help: '1 while the link to the cloud is up, else 0',
      collect: () => (s.upstream.status().connected ? 1 : 0),
    });
    m.gauge({
      name: 'edge_upstream_messages_total',
      help: 'Upstream messages acknowledged by the cloud, dropped at the backlog bound, set aside as refused, since the outbox was created',
      type: 'counter',
      labelNames: ['outcome'],
      collect: () => {
        const u = s.upstream.status();
        return [
          [{ outcome: 'sent' }, u.sentTotal],
          [{ outcome: 'dropped' }, u.droppedTotal],
          [{ outcome: 'rejected' }, u.rejectedTotal],
        ];
      },
    });
    m.gauge({
      name: 'edge_mqtt_device_sessions',
      help: 'Devices connected over MQTT (one session per device)',
      collect: () => this.#mqtt?.connectedDevices ?? 0,
    });
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
    // Long polls and waiting RPC calls end first (503), so the HTTP server can close at once.
    if (this.#services)
      await step('long-polls', () => releaseLongPolls(this.#services as Services));
    await step('coap', () => this.#coap?.stop());
    await step('mqtt', () => this.#mqtt?.stop());
    await step('websocket', () => this.#ws?.stop());
    await step('http', () => this.#http?.stop());
    await step('https', () => this.#https?.stop());
    await step('metrics', () => {
      this.#memoryTrim?.stop();
      this.metrics.stop();
      return this.#metricsHttp?.stop();
    });
    if (this.#services) await step('services', () => stopServices(this.#services as Services));
    this.bus.removeOwner('gateway');
    await step('checkpointer', () => this.#checkpointer?.stop());
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
  readonly audit: AuditService;
  readonly customers: CustomerService;
  readonly users: UserService;
  readonly auth: AuthService;
  readonly profiles: DeviceProfileService;
  /** Each profile's compiled transport settings (issue 21). */
  readonly profileTransports: ProfileTransports;
  readonly devices: DeviceService;
  readonly attributes: AttributeService;
  readonly rpc: RpcService;
  readonly clientRpc: ClientRpcService;
  readonly claims: ClaimService;
  readonly provisioning: ProvisionService;
  readonly ota: OtaService;
  readonly telemetry: TelemetryService;
  readonly activity: ActivityService;
  readonly dashboards: DashboardService;
  readonly groups: GroupService;
  readonly ownerAttributes: OwnerAttributeService;
  readonly alarms: AlarmService;
  readonly alarmEngine: AlarmEngine;
  readonly alarmRetention: AlarmRetention;
  /** Retention settings over REST, applied to telemetry, alarms and audit without a restart. */
  readonly retention: RetentionSettings;
  /** The one way in for device messages and the queue to the processing entry point. */
  readonly messages: DeviceMessageService;
  readonly rules: Rules;
  readonly scheduler: Scheduler;
  readonly schedulerEvents: SchedulerEventService;
  readonly deviceAuth: DeviceAuthThrottle;
  readonly connectors: ConnectorService;
  /** The gateway's own native addon (RS-485 mode, malloc_trim), or why it is not there. */
  readonly native: EdgeNative;
  /** Live subscriptions of the WebSocket API. */
  readonly subscriptions: SubscriptionService;
  readonly notifications: Notifications;
  /** Upstream sync to a cloud ThingsBoard (off unless `upstream.url` is set). */
  readonly upstream: UpstreamService;
}

/** The tenant, a customer or a user by id, as the attribute decision sees it (or undefined). */
function ownerRefs(s: Pick<Services, 'tenants' | 'customers' | 'users'>) {
  return (type: OwnerType, id: string): OwnerRef | undefined => {
    if (type === 'TENANT') return id === s.tenants.id ? { type, id } : undefined;
    if (type === 'CUSTOMER') return s.customers.exists(id) ? { type, id } : undefined;
    const row = s.users.row(id);
    return row && { type, id, user: { id, customerId: row.customer_id } };
  };
}

/**
 * The one processing entry point (issue 13): every committed message goes here, off the
 * acknowledgement path: the rule engine (the root chain, or a profile's default chain), whose
 * device-profile node runs the alarm engine.
 */
function messageProcessor(s: Services, _loggers: Loggers): MessageProcessor {
  return s.rules.engine;
}

const PUSH_TO_CLOUD_NODE = 'org.thingsboard.rule.engine.edge.TbMsgPushToCloudNode';
const DEVICE_PROFILE_NODE = 'org.thingsboard.rule.engine.profile.TbDeviceProfileNode';

/** A client-side RPC reaches the root chain as `TO_SERVER_RPC_REQUEST`; nothing else answers. */
const RULE_CHAINS_ANSWER: ClientRpcRouter = () => {};

/** Audit rows kept unless the retention settings say otherwise. */
const AUDIT_MAX_ROWS = 100_000;

async function buildServices(
  db: Db,
  config: Config,
  secrets: Secrets,
  bus: EventBus,
  loggers: Loggers,
  hooks: { onCommitTiming?: (ms: number, ok: boolean) => void; clock?: ServerClock } = {},
  overrides: GatewayOverrides = {},
): Promise<Services> {
  const clock = hooks.clock ?? new ServerClock();
  const tenants = new TenantService({ db });
  tenants.init();
  const audit = new AuditService({ db, tenants, log: loggers.auth, maxRows: AUDIT_MAX_ROWS });
  const customers = new CustomerService({ db, tenants, audit });
  const users = new UserService({
    db,
    tenants,
    secrets,
    dataDir: config.dataDir,
    log: loggers.auth,
    audit,
    customers,
    // The notification center is built below; a reset mail is sent at request time.
    mailer: () =>
      notifications.settings.smtp() ? (mail) => notifications.channels.email(mail) : undefined,
    publicUrl: config.http.publicUrl,
  });
  await users.bootstrapAdmin();
  const auth = new AuthService({ config, users, log: loggers.auth, audit });
  auth.init();
  // OTA checks `firmwareId`/`softwareId` for profiles and devices, which it depends on itself.
  const otaCheck = (...args: Parameters<OtaService['check']>) => ota.check(...args);
  // A deleted profile takes its OTA packages with it (ThingsBoard's cascading foreign key).
  const otaRemove = (profileId: string) => ota.deleteOfProfile(profileId);
  const profiles = new DeviceProfileService({
    db,
    tenants,
    bus,
    otaCheck,
    otaRemove,
    // Rule chains are made later; a profile is saved only after start.
    ruleChainExists: (id) => rules.chains.definition(id) !== undefined,
  });
  profiles.init();
  const profileTransports = new ProfileTransports({ profiles, bus, log: loggers.gateway });
  profileTransports.start();
  // ENTITY_ACTION notifications are written in the device change's transaction; the
  // notification service is built below.
  let deviceInCommit: DeviceServiceDeps['inCommit'];
  const devices = new DeviceService({
    db,
    tenants,
    profiles,
    bus,
    otaCheck,
    audit,
    customerExists: (id) => customers.exists(id),
    skipCertificateValidity: config.mqtt.tlsSkipCertValidity,
    inCommit: (action, device) => deviceInCommit?.(action, device),
  });
  // The outbox rows are written in the telemetry and attribute commits; the service itself needs
  // attributes and RPC, built below.
  // The hooks are always there: upstream can be turned on over REST without a restart.
  let upstream: UpstreamService | undefined;
  // Device uplinks are evaluated for alarms in their own commit (docs/alarms.md); the engine is
  // built below.
  let inCommitAlarms: AlarmEngine | undefined;
  // The one cron host: user schedules and the gateway's own periodic jobs (`gateway.*`).
  const scheduler = new Scheduler({ log: loggers.rules });
  const telemetry = new TelemetryService({
    // Device uplinks only: a server-side write reaches the cloud through the push node and the
    // alarm engine through the Device Profile node.
    inCommit: (items) => {
      const uplinks = items.filter((i) => i.uplink);
      upstream?.telemetryHook.write(uplinks);
      inCommitAlarms?.telemetryHook.write(uplinks);
    },
    db,
    bus,
    devices,
    jobs: scheduler,
    log: loggers.telemetry,
    config: config.telemetry,
    onCommitTiming: (ms, ok) => {
      hooks.onCommitTiming?.(ms, ok);
      // A rolled-back commit took its outbox rows with it: the outbox recounts.
      upstream?.telemetryHook.settled(ok);
      inCommitAlarms?.telemetryHook.settled(ok);
    },
    limits: { ...TELEMETRY_LIMITS, maxStoredBytes: config.limits.requestStoredBytes },
    // Server timestamps never run backwards when the wall clock jumps (common/clock.ts).
    now: clock.now,
  });
  telemetry.start();
  const attributes = new AttributeService({
    db,
    devices,
    bus,
    log: loggers.attributes,
    maxRequestStoredBytes: config.limits.requestStoredBytes,
    inCommit: joinHooks(
      laterHook(() => upstream?.attributesHook),
      laterHook(() => inCommitAlarms?.attributesHook),
    ),
  });
  attributes.start();
  const rpc = new RpcService({ db, devices, tenants, bus, log: loggers.rpc, now: clock.now });
  rpc.start();
  const adminSettings = new AdminSettingsStore(db);
  upstream = new UpstreamService({
    db,
    settings: adminSettings,
    bus,
    log: loggers.upstream,
    config: config.upstream,
    devices,
    attributes,
    rpc,
    now: clock.now,
    profileKeys: (profileId) => inCommitAlarms?.attributeKeys(profileId) ?? [],
  });
  const cloud = upstream;
  const clientRpc = new ClientRpcService({ log: loggers.rpc });
  const claims = new ClaimService({
    db,
    devices,
    durationMs: config.claim.durationMs,
    log: loggers.claims,
    now: clock.now,
    inCommit: cloud.claimsHook,
  });
  const provisioning = new ProvisionService({ db, devices, profiles, log: loggers.provisioning });
  const ota = new OtaService({
    db,
    tenants,
    devices,
    profiles,
    bus,
    attributes,
    log: loggers.ota,
    maxBytes: config.ota.maxBytes,
  });
  ota.start();
  // DEVICE_ACTIVITY notifications commit with the activity change; the notification center is
  // made below (it needs services made after this one).
  let activityInCommit: ((snapshot: ActivitySnapshot) => void) | undefined;
  const activity = new ActivityService({
    attributes,
    db,
    inCommit: (snapshot) => activityInCommit?.(snapshot),
    jobs: scheduler,
    bus,
    log: loggers.devices,
    inactivityTimeoutMs: config.activity.inactivityTimeoutSec * 1000,
    checkIntervalMs: config.activity.checkIntervalSec * 1000,
  });
  activity.start();
  const dashboards = new DashboardService({ db, tenants, log: loggers.dashboards });
  const groups = new GroupService({
    db,
    tenants,
    audit,
    customerExists: (id) => customers.exists(id),
  });
  const messages = new DeviceMessageService({
    log: loggers.messages,
    bus,
    devices,
    telemetry,
    attributes,
    clientRpc,
    claims,
    provisioning,
    ota,
    activity,
    queueSize: config.messages.queueSize,
    serviceId: hostname(),
    customerName: (id) => (customers.exists(id) ? customers.get(id).title : undefined),
  });
  messages.start();
  const ownerAttributes = new OwnerAttributeService({
    db,
    bus,
    submit: (msg) => messages.submit(messages.newMsg(msg)),
  });
  const notifications = createNotifications({
    db,
    settings: adminSettings,
    tenants,
    bus,
    log: loggers.notifications,
    users,
    devices,
    alarmStatus: (id) => {
      try {
        return alarms.get(id).status;
      } catch {
        return undefined;
      }
    },
    config: config.notifications,
    modem: (c) => new GsmModem(c, loggers.notifications),
  });
  notifications.start();
  activityInCommit = (snapshot) => notifications.service.onActivity(snapshot);
  deviceInCommit = (action, device) => notifications.service.onEntityAction(action, device);
  bus.on('notifications', 'upstream.connected', (e) =>
    notifications.service.onUpstreamLink({ connected: true, url: e.url, error: null }),
  );
  bus.on('notifications', 'upstream.disconnected', (e) =>
    notifications.service.onUpstreamLink({ connected: false, url: e.url, error: e.error }),
  );
  const alarms = new AlarmService({
    db,
    tenants,
    bus,
    log: loggers.alarms,
    inTransaction: (event) => notifications.service.onAlarm(event),
    onComment: (c) => notifications.service.onAlarmComment(c),
    now: overrides.now ?? clock.now,
    device: (id) => devices.owner(id),
    user: (id) => {
      const row = users.row(id);
      return row && { email: row.email, firstName: row.first_name, lastName: row.last_name };
    },
    submit: (msg) => messages.submit(msg),
    audit,
    maxCommentsPerAlarm: config.alarms.maxComments,
  });
  const alarmEngine = new AlarmEngine({
    db,
    bus,
    log: loggers.alarms,
    alarms,
    profiles,
    devices,
    attributes,
    telemetry,
    owners: ownerAttributes,
    tenantId: () => tenants.id,
    now: overrides.now ?? clock.now,
    checkIntervalMs: overrides.alarmCheckIntervalMs,
  });
  alarmEngine.start();
  inCommitAlarms = alarmEngine;
  const alarmRetention = new AlarmRetention({
    alarms,
    log: loggers.alarms,
    maxAgeMs: config.alarms.retentionDays * 86_400_000,
    maxCount: config.alarms.maxCount,
    now: overrides.now ?? clock.now,
  });
  // Hourly, on the scheduler host (its own timer is for tests that build it alone).
  scheduler.every('gateway.alarm-retention', 3_600_000, () => alarmRetention.runOnce());
  const retention = new RetentionSettings({
    store: adminSettings,
    defaults: {
      telemetryMaxPoints: config.telemetry.maxPoints,
      telemetryMaxPointsPerDevice: config.telemetry.maxPointsPerDevice,
      telemetryTtlDays: config.telemetry.ttlDays,
      alarmRetentionDays: config.alarms.retentionDays,
      alarmMaxCount: config.alarms.maxCount,
      auditMaxRows: AUDIT_MAX_ROWS,
    },
    apply: (v) => {
      telemetry.setBounds({
        maxPoints: v.telemetryMaxPoints,
        maxPointsPerDevice: v.telemetryMaxPointsPerDevice,
        ttlDays: v.telemetryTtlDays,
      });
      alarmRetention.setBounds({
        maxAgeMs: v.alarmRetentionDays * 86_400_000,
        maxCount: v.alarmMaxCount,
      });
      alarmRetention.runOnce();
      audit.setMaxRows(v.auditMaxRows);
    },
  });
  retention.init();
  const rules = createRules({
    db,
    tenants,
    telemetry,
    attributes,
    rpc,
    clientRpc,
    profileAlarms: alarmEngine,
    // The message's `deviceType` names the profile; other messages look the device up.
    profileChainOf: (deviceId, msg) => {
      const type = msg?.metadata.deviceType;
      if (type !== undefined) return profiles.defaultChainOf(type);
      const device = devices.identity(deviceId);
      return device ? profiles.defaultChainOfProfile(device.profileId) : null;
    },
    alarms,
    systemSmtp: () => notifications.settings.smtp(),
    sendSms: (number, text, provider) => notifications.channels.sms(number, text, provider),
    pushToCloud: (msg) => cloud.push(msg),
    log: loggers.rules,
    queueSize: config.rules.queueSize,
    maxInFlight: config.rules.maxInFlight,
    scriptLimits: {
      timeoutMs: config.rules.scriptTimeoutMs,
      memoryBytes: config.rules.scriptMemoryMb * 1024 * 1024,
    },
  });
  rules.start();
  cloud.setPushDecision(
    (deviceId, msgType) => rules.engine.reaches(deviceId, msgType, PUSH_TO_CLOUD_NODE, 'unchanged'),
    () => rules.engine.generation,
  );
  alarmEngine.setInCommitDecision((deviceId, msgType) =>
    rules.engine.reaches(deviceId, msgType, DEVICE_PROFILE_NODE, 'direct'),
  );
  cloud.start();
  const schedulerEvents = new SchedulerEventService({
    db,
    tenants,
    scheduler,
    now: clock.now,
    log: loggers.rules,
    saveAttributes: (deviceId, scope, values) =>
      attributes.save(deviceId, scope, values, { kind: 'system' }),
    sendRpc: (deviceId, body) => rpc.call(deviceId, body, true),
    groupDevices: (groupId) =>
      groups
        .entities(groupId, { customerId: null })
        .flatMap((e) => (e.entityType === 'DEVICE' ? [e.id] : [])),
    processor: rules.engine,
  });
  schedulerEvents.start();
  const deviceAuthThrottle = new DeviceAuthThrottle({
    maxFailures: config.auth.deviceAuthMaxFailures,
    windowMs: config.auth.deviceAuthWindowSec * 1000,
    throttleMs: config.auth.deviceAuthThrottleSec * 1000,
    delayMs: config.auth.deviceAuthDelayMs,
    log: loggers.auth,
  });
  const log = loggers.connectors;
  const native = loadEdgeNative(overrides.nativeAddonFile);
  if (native.available) loggers.gateway.info({ file: native.file }, 'native addon loaded');
  else
    loggers.gateway.warn(
      { reason: native.reason },
      'native addon not available: RS-485 mode, low-latency mode and malloc_trim are off',
    );
  const connectors = new ConnectorService({
    db,
    tenants,
    devices,
    messages,
    attributes,
    rpc,
    activity,
    bus,
    log,
    drivers: {
      MODBUS: (parsed, sink) =>
        new ModbusMaster({ config: parsed.config as ModbusConnectorConfig, sink, log, native }),
      SERIAL: (parsed, sink) =>
        new SerialLineConnector({
          config: parsed.config as SerialConnectorConfig,
          sink,
          log,
          native,
        }),
    },
  });
  connectors.start();
  const subscriptions = new SubscriptionService({
    bus,
    log: loggers.http,
    devices,
    telemetry,
    attributes,
    alarms,
    owners: ownerAttributes,
    ownerRef: ownerRefs({ tenants, customers, users }),
    shared: sharedDevices(groups),
    notifications: notifications.service,
    userActive: (id) => users.row(id)?.enabled === 1,
    maxSubscriptionsPerSession: config.ws.maxSubscriptionsPerSession,
  });
  subscriptions.start();
  return {
    subscriptions,
    ownerAttributes,
    alarms,
    alarmEngine,
    alarmRetention,
    retention,
    tenants,
    audit,
    customers,
    users,
    auth,
    deviceAuth: deviceAuthThrottle,
    profiles,
    profileTransports,
    devices,
    attributes,
    rpc,
    clientRpc,
    claims,
    provisioning,
    ota,
    telemetry,
    activity,
    dashboards,
    groups,
    messages,
    rules,
    scheduler,
    schedulerEvents,
    connectors,
    native,
    notifications,
    upstream: cloud,
  };
}

/** The rule engine's per-chain counters, read when Prometheus scrapes. */
function registerRuleMetrics(metrics: Metrics, rules: Rules): void {
  const perChain = (pick: (c: ChainStats) => number) => () =>
    rules.engine.stats().chains.map((c) => [{ chain: c.name }, pick(c)] as const);
  const labelNames = ['chain'];
  metrics.gauge({
    name: 'edge_rule_chain_queued',
    help: 'Messages waiting in a rule chain queue',
    labelNames,
    collect: perChain((c) => c.queued),
  });
  for (const [key, help] of [
    ['processed', 'Messages a rule chain has processed'],
    ['failed', 'Messages that ended on an unconnected Failure relation'],
    ['dropped', 'Messages dropped because the rule chain queue was full'],
    ['looped', 'Messages sent to Failure because rule chain calls were nested too deep'],
  ] as const) {
    metrics.gauge({
      name: `edge_rule_chain_${key}_total`,
      help,
      type: 'counter',
      labelNames,
      collect: perChain((c) => c[key]),
    });
  }
}

/** Stops services that own timers or pending writes, newest first. */
async function stopServices(s: Services): Promise<void> {
  s.subscriptions.stop();
  await s.connectors.stop();
  await s.notifications.stop();
  // The link closes; the outbox stays in the db and still takes the last commits' rows.
  await s.upstream.stop();
  s.scheduler.stop();
  s.rules.stop();
  s.alarmRetention.stop();
  s.activity.stop();
  // Commits pending points while the db is open and other listeners still run.
  await s.telemetry.stop();
  await s.ota.stop();
  s.rpc.stop();
  s.attributes.stop();
  // The messages of the last commits reach the processor while the db is still open.
  s.messages.stop();
  // Last: telemetry and attributes committed on stop are still evaluated, then states written.
  s.alarmEngine.stop();
  s.profileTransports.stop();
}

/** Ends device long polls and REST calls waiting on a device, before the listeners close. */
function releaseLongPolls(s: Services): void {
  s.attributes.releasePolls();
  s.rpc.releasePolls();
  s.clientRpc.releasePolls();
}

/** Sub-apps of the HTTP transport beyond auth and device management, mounted in this order. */
/** Device access of a customer user through DEVICE groups shared with its customer. */
function sharedDevices(groups: GroupService): SharedDeviceAccess {
  return (principal, device) =>
    principal.customerId === null ? 'none' : groups.deviceShare(principal.customerId, device);
}

function apiRoutes(
  s: Services,
  config: Config,
  metrics: Metrics,
): Array<{ path: string; app: Hono<HttpEnv> }> {
  const user = requireUser(s.auth);
  const shared = sharedDevices(s.groups);
  const device = deviceAuth({ devices: s.devices, activity: s.activity, meter: metrics.ingest });
  return [
    // Provisioning has no token: mount it before any `/api/v1/:token/*` middleware.
    { path: '/api/v1', app: provisionApi({ messages: s.messages }) },
    { path: '/api/v1', app: claimApi({ deviceAuth: device, messages: s.messages }) },
    { path: '/api/v1', app: firmwareApi({ deviceAuth: device, messages: s.messages }) },
    { path: '/api', app: deviceProfileRoutes({ profiles: s.profiles, requireUser: user }) },
    {
      path: '/api',
      app: dashboardRoutes({ dashboards: s.dashboards, requireUser: user, groups: s.groups }),
    },
    {
      path: '/api',
      app: otaRoutes({ ota: s.ota, requireUser: user, maxBytes: config.ota.maxBytes }),
    },
    {
      path: '/api/v1',
      app: deviceAttributeRoutes({
        deviceAuth: device,
        attributes: s.attributes,
        messages: s.messages,
      }),
    },
    {
      path: '/api/v1',
      app: deviceRpcRoutes({
        deviceAuth: device,
        rpc: s.rpc,
        clientRpc: s.clientRpc,
        messages: s.messages,
      }),
    },
    {
      path: '/api/plugins/telemetry',
      app: attributeRoutes({
        attributes: s.attributes,
        devices: s.devices,
        requireUser: user,
        shared,
      }),
    },
    { path: '/api/v1', app: deviceTelemetryRoutes({ deviceAuth: device, messages: s.messages }) },
    {
      path: '/api/plugins/telemetry',
      app: telemetryRoutes({
        telemetry: s.telemetry,
        devices: s.devices,
        requireUser: user,
        shared,
      }),
    },
    {
      path: '/api/rpc',
      app: rpcRoutes({ rpc: s.rpc, devices: s.devices, requireUser: user, shared }),
    },
    { path: '/api', app: customerRoutes({ customers: s.customers, requireUser: user }) },
    {
      path: '/api',
      app: ownershipRoutes({
        devices: s.devices,
        customers: s.customers,
        claims: s.claims,
        dashboards: s.dashboards,
        requireUser: user,
        shared,
      }),
    },
    { path: '/api', app: userRoutes({ users: s.users, requireUser: user }) },
    { path: '/api', app: groupRoutes({ groups: s.groups, requireUser: user }) },
    {
      path: '/api',
      app: auditRoutes({ audit: s.audit, devices: s.devices, requireUser: user, shared }),
    },
    {
      path: '/api',
      app: ruleChainRoutes({ chains: s.rules.chains, engine: s.rules.engine, requireUser: user }),
    },
    {
      path: '/api',
      app: schedulerRoutes({
        events: s.schedulerEvents,
        scheduler: s.scheduler,
        requireUser: user,
      }),
    },
    { path: '/api', app: connectorRoutes({ connectors: s.connectors, requireUser: user }) },
    {
      path: '/api',
      app: notificationRoutes({ notifications: s.notifications, requireUser: user }),
    },
    {
      path: '/api',
      app: adminSettingsRoutes({
        notifications: s.notifications,
        retention: s.retention,
        requireUser: user,
      }),
    },
    {
      path: '/api',
      app: upstreamRoutes({ upstream: s.upstream, requireUser: user }),
    },
    {
      path: '/api',
      app: alarmRoutes({
        alarms: s.alarms,
        devices: s.devices,
        groups: s.groups,
        users: s.users,
        requireUser: user,
        shared,
      }),
    },
    {
      path: '/api/plugins/telemetry',
      app: ownerAttributeRoutes({
        attributes: s.ownerAttributes,
        ownerRef: ownerRefs(s),
        requireUser: user,
      }),
    },
    // `/api/noauth/*` and the password pages under `/login/`.
    { path: '/', app: noauthRoutes({ users: s.users, auth: s.auth }) },
  ];
}

export function createGateway(config: Config, overrides?: GatewayOverrides): Gateway {
  return new Gateway(config, overrides);
}
