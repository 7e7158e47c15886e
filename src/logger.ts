import { type DestinationStream, destination, type Logger, pino, stdTimeFunctions } from 'pino';
import type { LogLevel } from './config.js';

export type { Logger } from 'pino';

/** Every subsystem that logs. One child logger each, created here and nowhere else. */
export const SUBSYSTEMS = [
  'gateway',
  'config',
  'db',
  'auth',
  'devices',
  'telemetry',
  'attributes',
  'rpc',
  'claims',
  'provisioning',
  'ota',
  'messages',
  'dashboards',
  'rules',
  'http',
  'mqtt',
  'coap',
  'systemd',
  'connectors',
  'alarms',
  'notifications',
  'upstream',
] as const;
export type Subsystem = (typeof SUBSYSTEMS)[number];
export type Loggers = Readonly<Record<Subsystem, Logger>> & { readonly root: Logger };

/** Paths pino blanks out wherever they appear. Secrets never reach stdout. */
const REDACT = [
  'password',
  'token',
  'refreshToken',
  'accessToken',
  'secret',
  'secretKey',
  'accountToken',
  'provisionDeviceSecret',
  'credentialsId',
  'credentialsValue',
  '*.password',
  '*.token',
  '*.refreshToken',
  '*.accessToken',
  '*.secret',
  '*.secretKey',
  '*.provisionDeviceSecret',
  '*.credentialsId',
  '*.credentialsValue',
  'req.headers.authorization',
  'req.headers["x-authorization"]',
];

export function createLoggers(level: LogLevel, dest?: DestinationStream): Loggers {
  const root = pino(
    {
      level,
      base: { name: 'edge-gateway' },
      redact: { paths: REDACT, censor: '[redacted]' },
      timestamp: stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    dest ?? destination({ dest: 1, sync: true }),
  );
  const loggers: Record<string, Logger> = { root };
  for (const s of SUBSYSTEMS) loggers[s] = root.child({ sys: `gw:${s}` });
  return loggers as Loggers;
}
