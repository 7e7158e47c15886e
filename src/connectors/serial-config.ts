import { z } from 'zod';
import { paritySchema } from './modbus-config.js';
import { lowLatencySchema, type PortModes, rs485Schema } from './port-modes.js';

/**
 * The serial line connector: a UART delivering text lines, one reading per line. Our own format
 * (the IoT Gateway's serial connector is an example extension with byte slicing, reference §8),
 * with its field names where they mean the same (`devices[]`, `port`, `baudrate`, `bytesize`,
 * `parity`, `stopbits`, `delimiter`).
 *
 * A line is a JSON object, `key=value` pairs, or CSV with a column map. The device is named by
 * `deviceName`, or by the field `deviceNameField` of each line.
 */

export type LineFormat = 'json' | 'keyValue' | 'csv';

export interface SerialPortConfig extends PortModes {
  readonly port: string;
  readonly baudrate: number;
  readonly bytesize: 5 | 6 | 7 | 8;
  readonly parity: 'none' | 'even' | 'odd' | 'mark' | 'space';
  readonly stopbits: 1 | 2;
  readonly rtscts: boolean;
  readonly delimiter: string;
  readonly format: LineFormat;
  /** `keyValue`: between pairs; `csv`: between columns. */
  readonly separator: string;
  /** `csv`: the key of each column; an empty name skips the column. */
  readonly columns: readonly string[];
  readonly deviceName?: string;
  readonly deviceNameField?: string;
  readonly deviceType: string;
  /** Keys stored as client attributes; every other key is telemetry. */
  readonly attributes: readonly string[];
  /** Longest line kept, in bytes; longer ones are dropped and counted. */
  readonly maxLineBytes: number;
  /** Wait before reopening a port that closed or could not be opened, ms. */
  readonly reopenDelayMs: number;
}

export interface SerialConnectorConfig {
  readonly devices: readonly SerialPortConfig[];
}

const int = z.number().int('must be an integer');

const portSchema = z
  .looseObject({
    port: z.string().min(1, 'must be a serial device path'),
    baudrate: int.min(50).max(4_000_000).default(9600),
    bytesize: z.union([z.literal(5), z.literal(6), z.literal(7), z.literal(8)]).default(8),
    parity: paritySchema,
    stopbits: z.union([z.literal(1), z.literal(2)]).default(1),
    rtscts: z.boolean().default(false),
    rs485: rs485Schema.optional(),
    lowLatency: lowLatencySchema,
    delimiter: z.string().min(1).max(8).default('\n'),
    format: z.enum(['json', 'keyValue', 'csv'], { error: 'must be json, keyValue or csv' }),
    separator: z.string().min(1).max(8).optional(),
    columns: z.array(z.string().max(255)).max(256).optional(),
    name: z.string().min(1).max(255).optional(),
    deviceName: z.string().min(1).max(255).optional(),
    deviceNameField: z.string().min(1).max(255).optional(),
    type: z.string().min(1).max(255).optional(),
    deviceType: z.string().min(1).max(255).optional(),
    attributes: z.array(z.string().min(1).max(255)).max(1000).default([]),
    maxLineBytes: int.min(16).max(65536).default(4096),
    reopenDelayMs: int.min(10).max(600_000).default(1000),
  })
  .superRefine((p, ctx) => {
    const name = p.deviceName ?? p.name;
    if (!name && !p.deviceNameField) {
      ctx.addIssue({
        code: 'custom',
        path: ['deviceName'],
        message: 'deviceName or deviceNameField is required',
      });
    }
    if (name && name.trim() !== name) {
      ctx.addIssue({
        code: 'custom',
        path: ['deviceName'],
        message: 'must not start or end with a blank',
      });
    }
    if (p.format === 'csv' && (!p.columns || p.columns.every((c) => c === ''))) {
      ctx.addIssue({ code: 'custom', path: ['columns'], message: 'is required for csv' });
    }
  })
  .transform(
    (p): SerialPortConfig => ({
      port: p.port,
      baudrate: p.baudrate,
      bytesize: p.bytesize,
      parity: p.parity,
      stopbits: p.stopbits,
      rtscts: p.rtscts,
      rs485: p.rs485,
      lowLatency: p.lowLatency,
      delimiter: p.delimiter,
      format: p.format,
      separator: p.separator ?? (p.format === 'csv' ? ',' : ';'),
      columns: p.columns ?? [],
      deviceName: p.deviceName ?? p.name,
      deviceNameField: p.deviceNameField,
      deviceType: p.deviceType ?? p.type ?? 'default',
      attributes: p.attributes,
      maxLineBytes: p.maxLineBytes,
      reopenDelayMs: p.reopenDelayMs,
    }),
  );

export const serialConfigSchema = z
  .looseObject({ devices: z.array(portSchema).min(1, 'must name at least one port').max(64) })
  .superRefine((c, ctx) => {
    const ports = new Set<string>();
    c.devices.forEach((d, i) => {
      if (ports.has(d.port)) {
        ctx.addIssue({
          code: 'custom',
          path: ['devices', i, 'port'],
          message: `"${d.port}" is used by another entry`,
        });
      }
      ports.add(d.port);
    });
  })
  .transform((c): SerialConnectorConfig => ({ devices: c.devices }));
