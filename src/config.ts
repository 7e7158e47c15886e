import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * Configuration: defaults < config file (JSON) < environment (EDGE_*) < command-line flags.
 * This is the only module that reads `process.env`-style input; callers pass it in so that tests
 * can build configs without touching the real environment.
 */

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
export type Durability = 'normal' | 'full';

export interface Config {
  readonly dataDir: string;
  /** Where the single executable writes the files it carries (addons, web page) at start. */
  readonly cacheDir: string;
  readonly bind: string;
  readonly logLevel: LogLevel;
  /** How long a stop (SIGTERM/SIGINT) may take before the process exits anyway with status 1. */
  readonly shutdownTimeoutMs: number;
  readonly http: {
    readonly port: number;
    readonly maxBodyBytes: number;
    readonly maxUrlBytes: number;
    readonly maxHeaderBytes: number;
    /** Plain HTTP answers with a redirect to HTTPS, except the device API (`/api/v1/...`). */
    readonly redirect: boolean;
    /** Base of the links the gateway hands out and mails (activation, password reset); empty: the request's. */
    readonly publicUrl: string;
  };
  /** The REST API, device HTTP API, WebSocket and page over TLS. */
  readonly https: { readonly enabled: boolean; readonly port: number };
  /** Certificate and key of HTTPS (and MQTT over TLS unless it has its own); empty: generated. */
  readonly tls: { readonly cert: string; readonly key: string };
  readonly mqtt: {
    readonly port: number;
    /** MQTT over TLS: with its own pair, or with HTTPS's pair while HTTPS is on. */
    readonly tlsPort: number;
    readonly tlsCert: string;
    readonly tlsKey: string;
    /** X.509 device certificates are accepted outside their validity period. */
    readonly tlsSkipCertValidity: boolean;
  };
  readonly coap: {
    readonly port: number;
    readonly maxObservers: number;
    readonly maxObserversPerEndpoint: number;
    readonly observeLifetimeSec: number;
    readonly notificationAckTimeoutMs: number;
  };
  readonly storage: { readonly durability: Durability };
  readonly telemetry: {
    readonly maxPoints: number;
    readonly maxPointsPerDevice: number;
    readonly ttlDays: number;
    readonly batchMaxWaitMs: number;
    readonly batchLingerMs: number;
    readonly batchMaxPoints: number;
    /** The open range is sealed into compressed blocks at least this often (seconds). */
    readonly flushIntervalSec?: number;
    /** ... or once one series holds this many open points (the largest block). */
    readonly blockPoints?: number;
    /** ... or once this many points are open in all (memory held by the open range). */
    readonly openMaxPoints?: number;
    /** Ring-buffer bound on stored bytes; 0 = sized to the disk at start. */
    readonly maxBytes?: number;
  };
  readonly auth: {
    readonly accessTokenTtlSec: number;
    readonly refreshTokenTtlSec: number;
    readonly loginMaxFailures: number;
    readonly loginFailureWindowSec: number;
    readonly loginLockoutSec: number;
    readonly loginMaxFailuresPerAddress: number;
    readonly deviceAuthMaxFailures: number;
    readonly deviceAuthWindowSec: number;
    readonly deviceAuthThrottleSec: number;
    readonly deviceAuthDelayMs: number;
  };
  readonly claim: { readonly durationMs: number };
  readonly limits: { readonly requestStoredBytes: number };
  readonly ota: { readonly maxBytes: number };
  readonly activity: { readonly inactivityTimeoutSec: number; readonly checkIntervalSec: number };
  /** `GET /metrics` on a listener of its own at this port; 0 serves it on the HTTP port. */
  readonly metrics: { readonly port: number };
  /** Heap growth (MiB) after which a quiet gateway gives a burst's memory back; 0 never (src/metrics/memory-trim.ts). */
  readonly memory: { readonly trimAfterMb: number; readonly trimQuietSec: number };
  readonly messages: { readonly queueSize: number };
  readonly rules: {
    readonly queueSize: number;
    readonly maxInFlight: number;
    readonly scriptTimeoutMs: number;
    readonly scriptMemoryMb: number;
  };
  readonly alarms: {
    readonly retentionDays: number;
    readonly maxCount: number;
    readonly maxComments: number;
  };
  /** The live WebSocket API (`/api/ws`, docs/websocket.md). */
  readonly ws: {
    readonly maxPendingBytes: number;
    readonly pingIntervalSec: number;
    readonly maxSubscriptionsPerSession: number;
  };
  readonly notifications: {
    readonly outboxMax: number;
    readonly inboxMax: number;
    readonly requestsMax: number;
    readonly maxAttempts: number;
    readonly retryBaseMs: number;
    readonly retryMaxMs: number;
  };
  /** Upstream sync to a cloud ThingsBoard as a gateway device (docs/upstream.md); url '' = off. */
  readonly upstream: {
    readonly url: string;
    readonly token: string;
    readonly clientId: string;
    readonly username: string;
    readonly password: string;
    readonly mqttVersion: '3.1.1' | '5';
    readonly caFile: string;
    readonly certFile: string;
    readonly keyFile: string;
    readonly maxBacklog: number;
    readonly maxPayloadBytes: number;
    readonly maxMessagesPerSec: number;
    readonly maxInFlight: number;
  };
}

/** Secrets never live in the config file or the frozen Config that is logged. */
export interface Secrets {
  readonly adminEmail?: string;
  readonly adminPassword?: string;
  /** Bearer token that Prometheus sends to `/metrics` (besides a tenant admin's JWT). */
  readonly metricsToken?: string;
}

type OptionType = 'port' | 'int' | 'string' | 'text' | 'path' | 'enum' | 'bool';

export interface OptionSpec {
  /** Dotted path into Config. */
  readonly path: string;
  readonly flag?: string;
  readonly env?: string;
  readonly type: OptionType;
  readonly values?: readonly string[];
  readonly min?: number;
  readonly max?: number;
  readonly default: string | number | boolean;
  readonly help: string;
}

/** Every setting in one table: drives parsing, validation, `--help` and the README table. */
export const OPTIONS: readonly OptionSpec[] = [
  {
    path: 'activity.inactivityTimeoutSec',
    flag: '--inactivity-timeout-sec',
    env: 'EDGE_INACTIVITY_TIMEOUT_SEC',
    type: 'int',
    min: 1,
    max: 31_536_000,
    default: 600,
    help: 'A device with no message for this long becomes inactive (its inactivityTimeout server attribute, in ms, overrides it)',
  },
  {
    path: 'activity.checkIntervalSec',
    env: 'EDGE_ACTIVITY_CHECK_INTERVAL_SEC',
    type: 'int',
    min: 1,
    max: 3600,
    default: 60,
    help: 'How often device inactivity is checked and activity times are saved',
  },
  {
    path: 'alarms.retentionDays',
    flag: '--alarm-retention-days',
    env: 'EDGE_ALARM_RETENTION_DAYS',
    type: 'int',
    min: 1,
    max: 36_500,
    default: 90,
    help: 'Cleared alarms older than this many days are removed',
  },
  {
    path: 'alarms.maxCount',
    flag: '--alarm-max-count',
    env: 'EDGE_ALARM_MAX_COUNT',
    type: 'int',
    min: 100,
    max: 10_000_000,
    default: 100_000,
    help: 'Most alarms kept; beyond it the oldest cleared alarms are removed first',
  },
  {
    path: 'alarms.maxComments',
    flag: '--alarm-max-comments',
    env: 'EDGE_ALARM_MAX_COMMENTS',
    type: 'int',
    min: 10,
    max: 100_000,
    default: 1000,
    help: 'Most comments kept per alarm; beyond it the oldest are removed (counted in /metrics)',
  },
  {
    path: 'notifications.outboxMax',
    env: 'EDGE_NOTIFY_OUTBOX_MAX',
    type: 'int',
    min: 10,
    max: 1_000_000,
    default: 10_000,
    help: 'Undelivered notifications (email, SMS, webhook) kept; past it the oldest are dropped and counted',
  },
  {
    path: 'notifications.inboxMax',
    env: 'EDGE_NOTIFY_INBOX_MAX',
    type: 'int',
    min: 10,
    max: 10_000_000,
    default: 50_000,
    help: "Notifications kept in the users' inboxes together; past it the oldest are removed and counted",
  },
  {
    path: 'notifications.requestsMax',
    env: 'EDGE_NOTIFY_REQUESTS_MAX',
    type: 'int',
    min: 10,
    max: 100_000,
    default: 1000,
    help: 'Ad-hoc notification requests kept for GET /api/notification/requests; past it the oldest are removed and counted',
  },
  {
    path: 'notifications.maxAttempts',
    env: 'EDGE_NOTIFY_MAX_ATTEMPTS',
    type: 'int',
    min: 1,
    max: 1000,
    default: 20,
    help: 'Delivery attempts of one notification that its receiver refused before it is marked FAILED (an unreachable receiver is waited for)',
  },
  {
    path: 'notifications.retryBaseMs',
    env: 'EDGE_NOTIFY_RETRY_BASE_MS',
    type: 'int',
    min: 10,
    max: 3_600_000,
    default: 2000,
    help: 'First retry delay of a failed notification; doubled (with jitter) per attempt',
  },
  {
    path: 'notifications.retryMaxMs',
    env: 'EDGE_NOTIFY_RETRY_MAX_MS',
    type: 'int',
    min: 10,
    max: 86_400_000,
    default: 30_000,
    help: 'Longest retry delay of a failed notification (a receiver back after an outage gets the queue within it)',
  },
  {
    path: 'dataDir',
    flag: '--data-dir',
    env: 'EDGE_DATA_DIR',
    type: 'string',
    default: './data',
    help: 'Directory holding the SQLite file and generated secrets',
  },
  {
    path: 'bind',
    flag: '--bind',
    env: 'EDGE_BIND',
    type: 'string',
    default: '0.0.0.0',
    help: 'Address the HTTP, MQTT and CoAP listeners bind to',
  },
  {
    path: 'shutdownTimeoutMs',
    env: 'EDGE_SHUTDOWN_TIMEOUT_MS',
    type: 'int',
    min: 100,
    max: 600_000,
    default: 5000,
    help: "Longest a stop (SIGTERM) may take before the process exits with status 1 anyway; keep it below the unit's TimeoutStopSec (10 s)",
  },
  {
    path: 'http.port',
    flag: '--http-port',
    env: 'EDGE_HTTP_PORT',
    type: 'port',
    default: 8080,
    help: 'HTTP port (REST API, device HTTP API, web UI); 0 picks a free port',
  },
  {
    path: 'https.enabled',
    flag: '--https',
    env: 'EDGE_HTTPS',
    type: 'bool',
    default: true,
    help: 'Serve the REST API, device HTTP API, WebSocket and page over TLS as well (false turns HTTPS and the default MQTT over TLS off)',
  },
  {
    path: 'https.port',
    flag: '--https-port',
    env: 'EDGE_HTTPS_PORT',
    type: 'port',
    default: 8443,
    help: 'HTTPS port; 0 picks a free port',
  },
  {
    path: 'tls.cert',
    flag: '--tls-cert',
    env: 'EDGE_TLS_CERT',
    type: 'path',
    default: '',
    help: 'PEM certificate (chain) for HTTPS and MQTT over TLS; when unset, a self-signed one for the host names and addresses of the box is generated on first start and kept in <data-dir>/tls/',
  },
  {
    path: 'tls.key',
    flag: '--tls-key',
    env: 'EDGE_TLS_KEY',
    type: 'path',
    default: '',
    help: 'PEM private key of --tls-cert',
  },
  {
    path: 'http.redirect',
    flag: '--http-redirect',
    env: 'EDGE_HTTP_REDIRECT',
    type: 'bool',
    default: false,
    help: 'Plain HTTP answers 308 to the HTTPS address, except the device API (/api/v1/...), which many devices only speak in plain HTTP',
  },
  {
    path: 'http.publicUrl',
    flag: '--public-url',
    env: 'EDGE_PUBLIC_URL',
    type: 'text',
    default: '',
    help: 'Address users reach the page at (https://gateway.plant.example): the base of activation and password-reset links, mailed ones included (empty = the address of the request that asks for the link)',
  },
  {
    path: 'mqtt.port',
    flag: '--mqtt-port',
    env: 'EDGE_MQTT_PORT',
    type: 'port',
    default: 1883,
    help: 'MQTT port; 0 picks a free port',
  },
  {
    path: 'mqtt.tlsPort',
    flag: '--mqtt-tls-port',
    env: 'EDGE_MQTT_TLS_PORT',
    type: 'port',
    default: 8883,
    help: 'MQTT over TLS port, served with --mqtt-tls-cert/--mqtt-tls-key, else with the HTTPS certificate while HTTPS is on',
  },
  {
    path: 'mqtt.tlsCert',
    flag: '--mqtt-tls-cert',
    env: 'EDGE_MQTT_TLS_CERT',
    type: 'path',
    default: '',
    help: 'PEM certificate (chain) file for MQTT over TLS, when it differs from --tls-cert',
  },
  {
    path: 'mqtt.tlsKey',
    flag: '--mqtt-tls-key',
    env: 'EDGE_MQTT_TLS_KEY',
    type: 'path',
    default: '',
    help: 'PEM private key file for MQTT over TLS',
  },
  {
    path: 'mqtt.tlsSkipCertValidity',
    flag: '--mqtt-tls-skip-cert-validity',
    env: 'EDGE_MQTT_TLS_SKIP_CERT_VALIDITY',
    type: 'bool',
    default: false,
    help: "Accept a device's X.509 certificate on MQTT over TLS outside its validity period (ThingsBoard's skip_validity_check_for_client_cert); false: an expired or not yet valid certificate gets CONNACK 5 (not authorized)",
  },
  {
    path: 'coap.port',
    flag: '--coap-port',
    env: 'EDGE_COAP_PORT',
    type: 'port',
    default: 5683,
    help: 'CoAP UDP port; 0 picks a free port',
  },
  {
    path: 'coap.maxObservers',
    flag: '--coap-max-observers',
    env: 'EDGE_COAP_MAX_OBSERVERS',
    type: 'int',
    min: 1,
    max: 1_000_000,
    default: 10_000,
    help: 'Live CoAP observations in total; a registration beyond it is answered 5.03',
  },
  {
    path: 'coap.maxObserversPerEndpoint',
    flag: '--coap-max-observers-per-endpoint',
    env: 'EDGE_COAP_MAX_OBSERVERS_PER_ENDPOINT',
    type: 'int',
    min: 1,
    max: 100_000,
    default: 16,
    help: 'Live CoAP observations of one address and port; a new one ends its oldest',
  },
  {
    path: 'coap.observeLifetimeSec',
    flag: '--coap-observe-lifetime-sec',
    env: 'EDGE_COAP_OBSERVE_LIFETIME_SEC',
    type: 'int',
    min: 1,
    max: 31_536_000,
    default: 86_400,
    help: 'A CoAP observation not re-registered within this time ends',
  },
  {
    path: 'coap.notificationAckTimeoutMs',
    flag: '--coap-notification-ack-timeout-ms',
    env: 'EDGE_COAP_NOTIFICATION_ACK_TIMEOUT_MS',
    type: 'int',
    min: 100,
    max: 600_000,
    default: 45_000,
    help: 'A confirmable CoAP notification not acknowledged within this time ends its observation (RFC 7641 §4.5)',
  },
  {
    path: 'logLevel',
    flag: '--log-level',
    env: 'EDGE_LOG_LEVEL',
    type: 'enum',
    values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    default: 'info',
    help: 'Log level',
  },
  {
    path: 'http.maxBodyBytes',
    flag: '--http-max-body',
    env: 'EDGE_HTTP_MAX_BODY',
    type: 'int',
    min: 1024,
    max: 64 * 1024 * 1024,
    default: 65536,
    help: 'Largest accepted HTTP request body in bytes (413 above it)',
  },
  {
    path: 'http.maxUrlBytes',
    flag: '--http-max-url-bytes',
    env: 'EDGE_HTTP_MAX_URL_BYTES',
    type: 'int',
    min: 256,
    max: 1024 * 1024,
    default: 8192,
    help: 'Longest accepted HTTP request URL in bytes (414 above it)',
  },
  {
    path: 'http.maxHeaderBytes',
    flag: '--http-max-header-bytes',
    env: 'EDGE_HTTP_MAX_HEADER_BYTES',
    type: 'int',
    min: 1024,
    max: 1024 * 1024,
    default: 16_384,
    help: 'Largest accepted HTTP header section in bytes (431 above it)',
  },
  {
    path: 'storage.durability',
    flag: '--durability',
    env: 'EDGE_DURABILITY',
    type: 'enum',
    values: ['normal', 'full'],
    default: 'normal',
    help: 'normal: survives a process crash; full: survives power loss (slower)',
  },
  {
    path: 'telemetry.maxPoints',
    flag: '--telemetry-max-points',
    env: 'EDGE_TELEMETRY_MAX_POINTS',
    type: 'int',
    min: 1000,
    max: 1e12,
    default: 10_000_000,
    help: 'Ring-buffer bound: stored telemetry points beyond it evict the oldest',
  },
  {
    path: 'telemetry.maxBytes',
    flag: '--telemetry-max-bytes',
    env: 'EDGE_TELEMETRY_MAX_BYTES',
    type: 'int',
    min: 0,
    max: 1e15,
    default: 0,
    help: "Ring-buffer bound on the bytes telemetry takes on disk (compressed blocks and log); beyond it the oldest are evicted. 0 = sized to the disk at start: a quarter of the data directory's filesystem, at most 80 % of what is free plus what telemetry holds",
  },
  {
    path: 'telemetry.maxPointsPerDevice',
    flag: '--telemetry-max-points-per-device',
    env: 'EDGE_TELEMETRY_MAX_POINTS_PER_DEVICE',
    type: 'int',
    min: 0,
    max: 1e12,
    default: 0,
    help: 'Optional per-device bound on stored points (0 = none)',
  },
  {
    path: 'telemetry.ttlDays',
    flag: '--telemetry-ttl-days',
    env: 'EDGE_TELEMETRY_TTL_DAYS',
    type: 'int',
    min: 0,
    max: 36500,
    default: 0,
    help: 'Optional age limit of stored points in days (0 = none)',
  },
  {
    path: 'telemetry.batchMaxWaitMs',
    flag: '--telemetry-batch-wait-ms',
    env: 'EDGE_TELEMETRY_BATCH_WAIT_MS',
    type: 'int',
    min: 0,
    max: 10_000,
    default: 100,
    help: 'Group commit: the longest a point may wait for its commit (the linger below is capped by it)',
  },
  {
    path: 'telemetry.batchLingerMs',
    flag: '--telemetry-batch-linger-ms',
    env: 'EDGE_TELEMETRY_BATCH_LINGER_MS',
    type: 'int',
    min: 0,
    max: 10_000,
    default: 100,
    help: 'Group commit: how long a batch of devices that report on their own clock waits for more (0 = commit at the next event-loop turn; capped by the wait above). Callers that wait for their acknowledgement are committed as soon as they are back. Longer: fewer bytes written per point, later acknowledgements',
  },
  {
    path: 'telemetry.batchMaxPoints',
    flag: '--telemetry-batch-max-points',
    env: 'EDGE_TELEMETRY_BATCH_MAX_POINTS',
    type: 'int',
    min: 1,
    max: 1_000_000,
    default: 100_000,
    help: 'Group commit: most points in one transaction (at most 2 % of the max points)',
  },
  {
    path: 'telemetry.flushIntervalSec',
    flag: '--telemetry-flush-interval-s',
    env: 'EDGE_TELEMETRY_FLUSH_INTERVAL_S',
    type: 'int',
    min: 1,
    max: 86_400,
    default: 600,
    help: 'Open telemetry ranges are sealed into compressed blocks at least this often. Longer: fewer bytes written per point and larger blocks, more memory and a longer log to read at start',
  },
  {
    path: 'telemetry.blockPoints',
    flag: '--telemetry-block-points',
    env: 'EDGE_TELEMETRY_BLOCK_POINTS',
    type: 'int',
    min: 16,
    max: 1_000_000,
    default: 3600,
    help: 'Open ranges are also sealed once one series holds this many points (the largest compressed block)',
  },
  {
    path: 'telemetry.openMaxPoints',
    flag: '--telemetry-open-max-points',
    env: 'EDGE_TELEMETRY_OPEN_MAX_POINTS',
    type: 'int',
    min: 1000,
    max: 10_000_000,
    default: 200_000,
    help: 'Open ranges are also sealed once this many points are open in all (they are held in memory, about 100 bytes each)',
  },
  {
    path: 'auth.accessTokenTtlSec',
    env: 'EDGE_ACCESS_TOKEN_TTL_SEC',
    type: 'int',
    min: 60,
    max: 31_536_000,
    default: 9000,
    help: 'Lifetime of a user access token (JWT)',
  },
  {
    path: 'auth.refreshTokenTtlSec',
    env: 'EDGE_REFRESH_TOKEN_TTL_SEC',
    type: 'int',
    min: 60,
    max: 31_536_000,
    default: 604_800,
    help: 'Lifetime of a refresh token',
  },
  {
    path: 'auth.loginMaxFailures',
    env: 'EDGE_LOGIN_MAX_FAILURES',
    type: 'int',
    min: 1,
    max: 1000,
    default: 5,
    help: 'Failed logins of one account from one address within the window before that account is throttled there',
  },
  {
    path: 'auth.loginFailureWindowSec',
    env: 'EDGE_LOGIN_FAILURE_WINDOW_SEC',
    type: 'int',
    min: 1,
    max: 86_400,
    default: 60,
    help: 'Window for counting failed logins',
  },
  {
    path: 'auth.loginLockoutSec',
    env: 'EDGE_LOGIN_LOCKOUT_SEC',
    type: 'int',
    min: 1,
    max: 86_400,
    default: 300,
    help: 'How long a throttled account (or address) gets 429 on login',
  },
  {
    path: 'auth.loginMaxFailuresPerAddress',
    env: 'EDGE_LOGIN_MAX_FAILURES_PER_ADDRESS',
    type: 'int',
    min: 1,
    max: 100_000,
    default: 50,
    help: 'Failed logins from one address over all accounts within the window before every login from it is throttled',
  },
  {
    path: 'auth.deviceAuthMaxFailures',
    env: 'EDGE_DEVICE_AUTH_MAX_FAILURES',
    type: 'int',
    min: 1,
    max: 100_000,
    default: 10,
    help: 'Failed MQTT/CoAP device authentications from one address within the window before its failures are throttled',
  },
  {
    path: 'auth.deviceAuthWindowSec',
    env: 'EDGE_DEVICE_AUTH_WINDOW_SEC',
    type: 'int',
    min: 1,
    max: 86_400,
    default: 60,
    help: 'Window for counting failed device authentications',
  },
  {
    path: 'auth.deviceAuthThrottleSec',
    env: 'EDGE_DEVICE_AUTH_THROTTLE_SEC',
    type: 'int',
    min: 1,
    max: 86_400,
    default: 60,
    help: 'How long an address stays throttled after too many failed device authentications',
  },
  {
    path: 'auth.deviceAuthDelayMs',
    env: 'EDGE_DEVICE_AUTH_DELAY_MS',
    type: 'int',
    min: 0,
    max: 60_000,
    default: 2000,
    help: 'Delay of each MQTT CONNACK refusal to a throttled address (CoAP answers 4.29 at once)',
  },
  {
    path: 'claim.durationMs',
    flag: '--claim-duration-ms',
    env: 'EDGE_CLAIM_DURATION_MS',
    type: 'int',
    min: 1000,
    max: 31_536_000_000,
    default: 86_400_000,
    help: 'Claim window when a device sends no durationMs (ThingsBoard device.claim.duration)',
  },
  {
    path: 'limits.requestStoredBytes',
    flag: '--max-request-stored-bytes',
    env: 'EDGE_MAX_REQUEST_STORED_BYTES',
    type: 'int',
    min: 1024,
    max: 1024 * 1024 * 1024,
    default: 1024 * 1024,
    help: 'Most bytes of keys and values one telemetry or attribute request may store (400 above it)',
  },
  {
    path: 'ota.maxBytes',
    flag: '--ota-max-bytes',
    env: 'EDGE_OTA_MAX_BYTES',
    type: 'int',
    min: 1024,
    max: 512 * 1024 * 1024,
    default: 64 * 1024 * 1024,
    help: 'Largest OTA package file in bytes (upload body limit)',
  },
  {
    path: 'metrics.port',
    flag: '--metrics-port',
    env: 'EDGE_METRICS_PORT',
    type: 'int',
    min: 0,
    max: 65535,
    default: 0,
    help: 'Serve GET /metrics on a listener of its own at this port, off the device-facing one (0 = on the HTTP port)',
  },
  {
    path: 'memory.trimAfterMb',
    flag: '--memory-trim-after-mb',
    env: 'EDGE_MEMORY_TRIM_AFTER_MB',
    type: 'int',
    min: 0,
    max: 65536,
    default: 32,
    help: 'Once the V8 heap or the resident memory has grown this many MiB since the last trim and the event loop has been quiet for --memory-trim-quiet-sec (the first time after start: one quiet look), collect it fully and hand the freed pages back to the system, then what malloc holds with malloc_trim when the native addon is there (a pause of a few hundred ms while idle; V8 then regrows its young generation as load comes; 0 = never)',
  },
  {
    path: 'memory.trimQuietSec',
    flag: '--memory-trim-quiet-sec',
    env: 'EDGE_MEMORY_TRIM_QUIET_SEC',
    type: 'int',
    min: 1,
    max: 86400,
    default: 30,
    help: 'How long the event loop must have been quiet (under 5 % busy) before a heap trim after the first one: load that pauses for less keeps its heap',
  },
  {
    path: 'messages.queueSize',
    env: 'EDGE_MESSAGE_QUEUE_SIZE',
    type: 'int',
    min: 16,
    max: 1_000_000,
    default: 10_000,
    help: 'Committed messages waiting for processing (alarms, rules); past it the oldest are dropped and counted',
  },
  {
    path: 'rules.queueSize',
    env: 'EDGE_RULES_QUEUE_SIZE',
    type: 'int',
    min: 1,
    max: 1_000_000,
    default: 10_000,
    help: 'Messages waiting per rule chain; past it the oldest are dropped and counted (GET /api/ruleChains/stats)',
  },
  {
    path: 'rules.maxInFlight',
    env: 'EDGE_RULES_MAX_IN_FLIGHT',
    type: 'int',
    min: 1,
    max: 10_000,
    default: 64,
    help: 'Messages one rule chain processes at once (e.g. waiting on REST calls or SMTP)',
  },
  {
    path: 'rules.scriptTimeoutMs',
    env: 'EDGE_RULES_SCRIPT_TIMEOUT_MS',
    type: 'int',
    min: 10,
    max: 60_000,
    default: 500,
    help: 'CPU time limit of one rule-node script call (time the machine spends elsewhere does not count); a script still running is stopped (Failure)',
  },
  {
    path: 'rules.scriptMemoryMb',
    env: 'EDGE_RULES_SCRIPT_MEMORY_MB',
    type: 'int',
    min: 1,
    max: 1024,
    default: 8,
    help: 'Memory limit of each rule-node script sandbox, in MiB',
  },
  {
    path: 'ws.maxPendingBytes',
    env: 'EDGE_WS_MAX_PENDING_BYTES',
    type: 'int',
    min: 4096,
    max: 256 * 1024 * 1024,
    default: 1024 * 1024,
    help: 'Updates one WebSocket may have waiting to be sent; a client that falls further behind is closed (1008)',
  },
  {
    path: 'ws.pingIntervalSec',
    env: 'EDGE_WS_PING_INTERVAL_SEC',
    type: 'int',
    min: 1,
    max: 3600,
    default: 10,
    help: 'WebSocket pings this often; a client that misses a pong by the next ping is dropped',
  },
  {
    path: 'ws.maxSubscriptionsPerSession',
    env: 'EDGE_WS_MAX_SUBSCRIPTIONS',
    type: 'int',
    min: 1,
    max: 100_000,
    default: 1000,
    help: 'Most live subscriptions of one WebSocket; one more closes it (1008)',
  },
  {
    path: 'cacheDir',
    flag: '--cache-dir',
    env: 'EDGE_CACHE_DIR',
    type: 'path',
    default: '',
    help: "Where the single executable writes its native addons and web page at start; empty: systemd's CacheDirectory= ($CACHE_DIRECTORY), else <data-dir>/cache",
  },
  {
    path: 'upstream.url',
    flag: '--upstream-url',
    env: 'EDGE_UPSTREAM_URL',
    type: 'text',
    default: '',
    help: 'Cloud ThingsBoard to sync to as a gateway device: mqtt://host:1883 or mqtts://host:8883 (empty = upstream off)',
  },
  {
    path: 'upstream.token',
    flag: '--upstream-token',
    env: 'EDGE_UPSTREAM_TOKEN',
    type: 'text',
    default: '',
    help: "Access token of this gateway's device in the cloud (its MQTT user name)",
  },
  {
    path: 'upstream.clientId',
    env: 'EDGE_UPSTREAM_CLIENT_ID',
    type: 'text',
    default: '',
    help: 'MQTT client id towards the cloud (MQTT basic credentials; empty = generated)',
  },
  {
    path: 'upstream.username',
    env: 'EDGE_UPSTREAM_USERNAME',
    type: 'text',
    default: '',
    help: 'MQTT user name towards the cloud (MQTT basic credentials, instead of a token)',
  },
  {
    path: 'upstream.password',
    env: 'EDGE_UPSTREAM_PASSWORD',
    type: 'text',
    default: '',
    help: 'MQTT password towards the cloud (MQTT basic credentials)',
  },
  {
    path: 'upstream.mqttVersion',
    env: 'EDGE_UPSTREAM_MQTT_VERSION',
    type: 'enum',
    values: ['3.1.1', '5'],
    default: '3.1.1',
    help: 'MQTT protocol version towards the cloud (5 reports refused messages by PUBACK reason code)',
  },
  {
    path: 'upstream.caFile',
    env: 'EDGE_UPSTREAM_CA_FILE',
    type: 'path',
    default: '',
    help: "PEM file of the CA that signed the cloud's certificate (mqtts://; empty = the system's CAs)",
  },
  {
    path: 'upstream.certFile',
    env: 'EDGE_UPSTREAM_CERT_FILE',
    type: 'path',
    default: '',
    help: 'PEM client certificate for X.509 authentication towards the cloud',
  },
  {
    path: 'upstream.keyFile',
    env: 'EDGE_UPSTREAM_KEY_FILE',
    type: 'path',
    default: '',
    help: 'PEM private key of that client certificate',
  },
  {
    path: 'upstream.maxBacklog',
    env: 'EDGE_UPSTREAM_MAX_BACKLOG',
    type: 'int',
    min: 100,
    max: 1e9,
    default: 1_000_000,
    help: 'Most messages waiting in the upstream outbox; beyond it the oldest are dropped and counted',
  },
  {
    path: 'upstream.maxPayloadBytes',
    env: 'EDGE_UPSTREAM_MAX_PAYLOAD_BYTES',
    type: 'int',
    min: 1024,
    max: 256 * 1024 * 1024,
    default: 65_536,
    help: "Largest upstream publish (many messages per publish up to it; the cloud's maxPayloadSize lowers it)",
  },
  {
    path: 'upstream.maxMessagesPerSec',
    env: 'EDGE_UPSTREAM_MAX_MESSAGES_PER_SEC',
    type: 'int',
    min: 0,
    max: 1_000_000,
    default: 0,
    help: "Most upstream publishes per second (0 = as the cloud's getSessionLimits rate limits allow, else unpaced)",
  },
  {
    path: 'upstream.maxInFlight',
    env: 'EDGE_UPSTREAM_MAX_IN_FLIGHT',
    type: 'int',
    min: 1,
    max: 1000,
    default: 32,
    help: "Upstream publishes awaiting their PUBACK at once (the cloud's maxInflightMessages lowers it)",
  },
];

export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration: ${problems.join('; ')}`);
  }
}

export interface ConfigInput {
  /** Flags after the command, e.g. ['--http-port', '0']. */
  readonly argv?: readonly string[];
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Working directory used to resolve relative paths. */
  readonly cwd?: string;
}

type Raw = Record<string, unknown>;

function getPath(obj: Raw, path: string): unknown {
  let cur: unknown = obj;
  for (const part of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Raw)[part];
  }
  return cur;
}

function setPath(obj: Raw, path: string, value: unknown): void {
  const parts = path.split('.');
  let cur = obj;
  for (const part of parts.slice(0, -1)) {
    if (typeof cur[part] !== 'object' || cur[part] === null) cur[part] = {};
    cur = cur[part] as Raw;
  }
  cur[parts[parts.length - 1]] = value;
}

const BOOL_WORDS = new Map([
  ['true', true],
  ['1', true],
  ['on', true],
  ['yes', true],
  ['false', false],
  ['0', false],
  ['off', false],
  ['no', false],
]);

function coerce(spec: OptionSpec, value: unknown, source: string, problems: string[]): unknown {
  const label = `${spec.flag ?? spec.path} (${source})`;
  if (spec.type === 'path' || spec.type === 'text') {
    // An optional file path or text; empty means "not set".
    if (typeof value !== 'string') {
      problems.push(`${label} must be ${spec.type === 'path' ? 'a file path' : 'a string'}`);
      return undefined;
    }
    return value;
  }
  if (spec.type === 'string') {
    if (typeof value !== 'string' || value.length === 0) {
      problems.push(`${label} must be a non-empty string`);
      return undefined;
    }
    return value;
  }
  if (spec.type === 'bool') {
    if (typeof value === 'boolean') return value;
    const word = typeof value === 'string' ? value.toLowerCase() : '';
    if (BOOL_WORDS.has(word)) return BOOL_WORDS.get(word);
    problems.push(`${label} must be true or false (got ${JSON.stringify(value)})`);
    return undefined;
  }
  if (spec.type === 'enum') {
    if (typeof value !== 'string' || !spec.values?.includes(value)) {
      problems.push(
        `${label} must be one of ${spec.values?.join('|')} (got ${JSON.stringify(value)})`,
      );
      return undefined;
    }
    return value;
  }
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'string' && /^\d+$/.test(value)
        ? Number(value)
        : Number.NaN;
  const min = spec.type === 'port' ? 0 : (spec.min ?? 0);
  const max = spec.type === 'port' ? 65535 : (spec.max ?? Number.MAX_SAFE_INTEGER);
  if (!Number.isInteger(n) || n < min || n > max) {
    problems.push(
      `${label} must be an integer from ${min} to ${max} (got ${JSON.stringify(value)})`,
    );
    return undefined;
  }
  return n;
}

/**
 * Parses flags into `{path: value}` pairs plus the `--config` file path. Collects every problem
 * instead of stopping at the first.
 */
function parseFlags(argv: readonly string[], problems: string[]) {
  const values = new Map<OptionSpec, string>();
  let configFile: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg;
    const inline = arg.startsWith('--') && eq > 0 ? arg.slice(eq + 1) : undefined;
    const takeValue = (): string | undefined => {
      if (inline !== undefined) return inline;
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) {
        problems.push(`flag ${name} needs a value`);
        return undefined;
      }
      i++;
      return next;
    };
    if (name === '--config') {
      configFile = takeValue();
      continue;
    }
    const spec = OPTIONS.find((o) => o.flag === name);
    if (!spec) {
      problems.push(`unknown ${arg.startsWith('-') ? 'flag' : 'argument'} ${name}`);
      // Skip the unknown flag's value too, so one typo is reported once.
      if (
        arg.startsWith('--') &&
        inline === undefined &&
        argv[i + 1] &&
        !argv[i + 1].startsWith('--')
      )
        i++;
      continue;
    }
    // A bool flag alone means true: `--http-redirect`, `--https false`.
    if (spec.type === 'bool' && inline === undefined && !BOOL_WORDS.has(argv[i + 1] ?? '')) {
      values.set(spec, 'true');
      continue;
    }
    const v = takeValue();
    if (v !== undefined) values.set(spec, v);
  }
  return { values, configFile };
}

function readConfigFile(file: string, problems: string[]): Raw {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    problems.push(`cannot read config file ${file}: ${(err as NodeJS.ErrnoException).code ?? err}`);
    return {};
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      problems.push(`config file ${file} must hold a JSON object`);
      return {};
    }
    return parsed as Raw;
  } catch (err) {
    problems.push(`config file ${file} is not valid JSON: ${(err as Error).message}`);
    return {};
  }
}

/** Lists keys of a config file object that no option knows, so typos do not go unnoticed. */
function unknownFileKeys(obj: Raw, prefix = ''): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(obj)) {
    const path = prefix ? `${prefix}.${k}` : k;
    if (OPTIONS.some((o) => o.path === path)) continue;
    if (
      v !== null &&
      typeof v === 'object' &&
      !Array.isArray(v) &&
      OPTIONS.some((o) => o.path.startsWith(`${path}.`))
    ) {
      out.push(...unknownFileKeys(v as Raw, path));
    } else {
      out.push(path);
    }
  }
  return out;
}

export function loadConfig(input: ConfigInput = {}): { config: Config; secrets: Secrets } {
  const env = input.env ?? {};
  const cwd = input.cwd ?? process.cwd();
  const problems: string[] = [];
  const { values: flagValues, configFile } = parseFlags(input.argv ?? [], problems);
  const file = configFile ? readConfigFile(resolve(cwd, configFile), problems) : {};
  for (const key of unknownFileKeys(file)) problems.push(`config file: unknown setting ${key}`);

  const out: Raw = {};
  for (const spec of OPTIONS) {
    let value: unknown = spec.default;
    let source = 'default';
    const fromFile = getPath(file, spec.path);
    if (fromFile !== undefined) {
      value = fromFile;
      source = 'config file';
    }
    const fromEnv = spec.env ? env[spec.env] : undefined;
    if (fromEnv !== undefined && fromEnv !== '') {
      value = fromEnv;
      source = `env ${spec.env}`;
    }
    const fromFlag = flagValues.get(spec);
    if (fromFlag !== undefined) {
      value = fromFlag;
      source = 'flag';
    }
    setPath(out, spec.path, coerce(spec, value, source, problems));
  }
  const mqtt = out.mqtt as { tlsCert?: string; tlsKey?: string } | undefined;
  if (mqtt && Boolean(mqtt.tlsCert) !== Boolean(mqtt.tlsKey)) {
    problems.push('--mqtt-tls-cert and --mqtt-tls-key must be set together');
  }
  const tls = out.tls as { cert?: string; key?: string } | undefined;
  if (tls && Boolean(tls.cert) !== Boolean(tls.key)) {
    problems.push('--tls-cert and --tls-key must be set together');
  }
  const publicUrl = (out.http as { publicUrl?: string } | undefined)?.publicUrl;
  if (publicUrl && !/^https?:\/\/[^/?#]+\/?$/.test(publicUrl)) {
    problems.push(`--public-url must be http(s)://host[:port] without a path (got ${publicUrl})`);
  }
  const upstreamUrl = (out.upstream as { url?: string } | undefined)?.url;
  if (upstreamUrl && !/^mqtts?:\/\/[^/]+/.test(upstreamUrl)) {
    problems.push(
      `--upstream-url must be mqtt://host:port or mqtts://host:port (got ${upstreamUrl})`,
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const dataDir = resolve(cwd, out.dataDir as string);
  // systemd sets CACHE_DIRECTORY (a list separated by colons) for the unit's CacheDirectory=.
  const cacheDir = out.cacheDir
    ? resolve(cwd, out.cacheDir as string)
    : env.CACHE_DIRECTORY
      ? resolve(env.CACHE_DIRECTORY.split(':')[0])
      : join(dataDir, 'cache');
  const config = deepFreeze({ ...out, dataDir, cacheDir }) as unknown as Config;
  const secrets: Secrets = Object.freeze({
    adminEmail: env.EDGE_ADMIN_EMAIL || undefined,
    adminPassword: env.EDGE_ADMIN_PASSWORD || undefined,
    metricsToken: env.EDGE_METRICS_TOKEN || undefined,
  });
  return { config, secrets };
}

/** Builds a config from defaults plus a partial object: for tests and embedding. */
export function configWith(overrides: DeepPartial<Config>): Config {
  const { config } = loadConfig({ env: {} });
  return deepFreeze(
    merge(structuredClone(config) as unknown as Raw, overrides as Raw),
  ) as unknown as Config;
}

export type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? DeepPartial<T[K]> : T[K] };

function merge(target: Raw, src: Raw): Raw {
  for (const [k, v] of Object.entries(src)) {
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      target[k] = merge((target[k] as Raw) ?? {}, v as Raw);
    } else if (v !== undefined) {
      target[k] = v;
    }
  }
  return target;
}

function deepFreeze<T>(obj: T): T {
  if (obj !== null && typeof obj === 'object') {
    for (const v of Object.values(obj)) deepFreeze(v);
    Object.freeze(obj);
  }
  return obj;
}

export function helpText(version: string): string {
  const lines = [
    `edge-gateway ${version}: on-premises IoT gateway with the ThingsBoard device API`,
    '',
    'Usage: edge-gateway serve [options]',
    '       edge-gateway backup FILE [--data-dir DIR]   consistent copy, also while it runs',
    '       edge-gateway restore FILE [--data-dir DIR]  checks FILE, replaces the database (stopped)',
    '       edge-gateway --help | --version',
    '',
    'Options (flag / environment variable, default):',
    '  --config FILE                        JSON file with settings (flags beat env beat file)',
  ];
  for (const o of OPTIONS) {
    if (!o.flag) continue;
    const left = `  ${o.flag} ${o.type === 'enum' ? (o.values ?? []).join('|') : o.type === 'string' || o.type === 'text' ? 'VALUE' : o.type === 'path' ? 'FILE' : o.type === 'bool' ? '[true|false]' : 'N'}`;
    lines.push(`${left.padEnd(38)} ${o.help} (${o.env}, default ${o.default})`);
  }
  lines.push(
    '',
    'Other environment variables:',
    '  EDGE_ADMIN_EMAIL, EDGE_ADMIN_PASSWORD  tenant administrator created on first start',
    '  EDGE_METRICS_TOKEN  bearer token for GET /metrics (a tenant admin JWT works too)',
  );
  for (const o of OPTIONS) if (!o.flag) lines.push(`  ${o.env}  ${o.help} (default ${o.default})`);
  return lines.join('\n');
}
