import { z } from 'zod';
import { lowLatencySchema, type PortModes, rs485Schema } from './port-modes.js';
import { type ReportStrategy, reportStrategySchema } from './report-strategy.js';

/**
 * The ThingsBoard IoT Gateway's Modbus connector configuration (connectors reference §1-§5), as a
 * plant exports it: `{"master": {"slaves": [...]}}`. Parsed into a normalized form with every
 * default of the reference filled in, so that the wire adapter (transports/modbus) never guesses.
 *
 * Differences from the IoT Gateway, on purpose (reference §9, its known bugs):
 * - bits are decoded in address order, and `bit` on a register is the register's bit index 0-15;
 * - a multi-register type configured with function code 6 is written whole with function code 16;
 * - `ascii` and `tls` framers, the legacy `server` form and the gateway-as-slave section are
 *   refused with a 400 naming the field, rather than ignored.
 */

export const MODBUS_VALUE_TYPES = [
  'bits',
  '8int',
  '8uint',
  '16int',
  '16uint',
  '16float',
  '32int',
  '32uint',
  '32float',
  '64int',
  '64uint',
  '64float',
  'string',
  'bytes',
] as const;
export type ModbusValueType = (typeof MODBUS_VALUE_TYPES)[number];

/** Names the IoT Gateway also accepts (reference §2, §3). `int`/`uint`/`float` are sized by count. */
const TYPE_ALIASES: Readonly<Record<string, string>> = {
  bit: 'bits',
  coil: 'bits',
  bool: 'bits',
  boolean: 'bits',
  long: 'int',
  integer: 'int',
  double: 'float',
};

export type ByteOrder = 'BIG' | 'LITTLE';

/** One read or write of a slave, normalized. */
export interface ModbusTag {
  readonly tag: string;
  readonly type: ModbusValueType;
  readonly functionCode: number;
  readonly objectsCount: number;
  readonly address: number;
  /**
   * A wide-range read (`"address": "100-103"`, reference §3): the address of the last value. The
   * entry reads `end - address + objectsCount` objects and yields one value per `objectsCount`,
   * each under its own key (`rangeKeys`).
   */
  readonly end?: number;
  /** Objects per request of a wide-range read (reference §3, default 16). */
  readonly maxRegistersPerRequest: number;
  readonly bit?: number;
  readonly bitTargetType: 'bool' | 'int';
  readonly multiplier?: number;
  readonly divider?: number;
  readonly round: number;
  /** Which readings of this key are sent (reference §6): the key's, else the slave's, else the file's. */
  readonly report?: ReportStrategy;
}

/** `rs485` and `lowLatency` (port-modes.ts): serial slaves only; the port's first slave's apply. */
export interface ModbusSlave extends PortModes {
  readonly deviceName: string;
  readonly deviceType: string;
  readonly type: 'tcp' | 'udp' | 'serial';
  readonly method: 'socket' | 'rtu';
  readonly host: string;
  /** TCP/UDP port number, or '' for serial. */
  readonly tcpPort: number;
  /** Serial device path, or '' for TCP/UDP. */
  readonly serialPort: string;
  readonly baudrate: number;
  readonly bytesize: 5 | 6 | 7 | 8;
  readonly parity: 'none' | 'even' | 'odd' | 'mark' | 'space';
  readonly stopbits: 1 | 2;
  readonly unitId: number;
  /** Request timeout, ms. */
  readonly timeoutMs: number;
  readonly retries: number;
  readonly pollPeriod: number;
  readonly byteOrder: ByteOrder;
  readonly wordOrder: ByteOrder;
  readonly connectAttemptTimeMs: number;
  readonly connectAttemptCount: number;
  readonly waitAfterFailedAttemptsMs: number;
  readonly delayBetweenRequestsMs: number;
  readonly timeseries: readonly ModbusTag[];
  readonly attributes: readonly ModbusTag[];
  readonly attributeUpdates: readonly ModbusTag[];
  readonly rpc: readonly ModbusTag[];
}

export interface ModbusConnectorConfig {
  readonly slaves: readonly ModbusSlave[];
}

const READ_CODES = [1, 2, 3, 4];
const WRITE_CODES = [5, 6, 15, 16];

/** Numbers the IoT Gateway's JSON carries as numbers or numeric strings. */
const num = z
  .union([z.number(), z.string().regex(/^-?\d+(\.\d+)?$/, 'must be a number')])
  .transform(Number);
const int = num.pipe(z.number().int('must be an integer'));

/** A register address, or a wide range `"start-end"` of reads (reference §3). */
const addressOrRange = z.union([z.number(), z.string()]).transform((v, ctx) => {
  const m = /^(\d+)(?:\s*-\s*(\d+))?$/.exec(String(v).trim());
  if (!m) {
    ctx.addIssue({
      code: 'custom',
      message: 'must be an address 0 to 65535 or a range "start-end"',
    });
    return z.NEVER;
  }
  const start = Number(m[1]);
  const end = m[2] === undefined ? undefined : Number(m[2]);
  if (start > 65535 || (end ?? 0) > 65535) {
    ctx.addIssue({ code: 'custom', message: 'must be 0 to 65535' });
    return z.NEVER;
  }
  if (end !== undefined && end < start) {
    ctx.addIssue({ code: 'custom', message: `range ends before it starts: ${v}` });
    return z.NEVER;
  }
  return end === undefined ? start : { start, end };
});

/** Values one wide-range entry may yield (keys of one device are bounded). */
export const MAX_RANGE_VALUES = 1000;

const valueType = z
  .string()
  .transform((t) => TYPE_ALIASES[t.toLowerCase()] ?? t.toLowerCase())
  .pipe(
    z.enum([...MODBUS_VALUE_TYPES, 'int', 'uint', 'float'], {
      error: `must be one of bits, 8int..64float, int, uint, float, string, bytes`,
    }),
  );

const tagSchema = z
  .looseObject({
    tag: z.string().min(1, 'must not be empty'),
    type: valueType,
    functionCode: int.pipe(z.number().min(1).max(16)),
    objectsCount: int.pipe(z.number().min(1).max(125)).optional(),
    registersCount: int.pipe(z.number().min(1).max(125)).optional(),
    registerCount: int.pipe(z.number().min(1).max(125)).optional(),
    address: addressOrRange,
    maxRegistersPerRequest: int.pipe(z.number().min(1).max(125)).optional(),
    bit: int.pipe(z.number().min(0).max(63)).optional(),
    bitTargetType: z.enum(['bool', 'int']).optional(),
    multiplier: num.optional(),
    divider: num.pipe(z.number().refine((n) => n !== 0, 'must not be 0')).optional(),
    round: int.pipe(z.number().min(0).max(15)).optional(),
    reportStrategy: reportStrategySchema.optional(),
  })
  .transform((t, ctx): ModbusTag => {
    const objectsCount = t.objectsCount ?? t.registersCount ?? t.registerCount ?? 1;
    let type: ModbusValueType;
    if (t.type === 'int' || t.type === 'uint' || t.type === 'float') {
      const bits = objectsCount * 16;
      if (bits !== 16 && bits !== 32 && bits !== 64) {
        ctx.addIssue({
          code: 'custom',
          path: ['objectsCount'],
          message: `must be 1, 2 or 4 for type ${t.type}`,
        });
        return z.NEVER;
      }
      type = `${bits}${t.type}` as ModbusValueType;
    } else {
      type = t.type;
    }
    const needed = registersOf(type);
    const fc = t.functionCode;
    if (needed > 0 && (fc === 3 || fc === 4 || fc === 6 || fc === 16) && objectsCount < needed) {
      ctx.addIssue({
        code: 'custom',
        path: ['objectsCount'],
        message: `must be at least ${needed} for type ${type}`,
      });
    }
    if (type === 'bits' && fc >= 1 && fc <= 2 && objectsCount > 2000) {
      ctx.addIssue({ code: 'custom', path: ['objectsCount'], message: 'must be at most 2000' });
    }
    const range = typeof t.address === 'number' ? undefined : t.address;
    if (range) {
      const values = Math.floor((range.end - range.start) / objectsCount) + 1;
      if (READ_CODES.includes(fc) === false) {
        ctx.addIssue({ code: 'custom', path: ['address'], message: 'a range is only for reads' });
      } else if (values > MAX_RANGE_VALUES) {
        ctx.addIssue({
          code: 'custom',
          path: ['address'],
          message: `a range may yield at most ${MAX_RANGE_VALUES} values, not ${values}`,
        });
      } else if (range.end + objectsCount > 65536) {
        ctx.addIssue({ code: 'custom', path: ['address'], message: 'range runs past 65535' });
      }
    }
    return {
      tag: t.tag,
      type,
      functionCode: fc,
      objectsCount,
      address: typeof t.address === 'number' ? t.address : t.address.start,
      end: range?.end,
      maxRegistersPerRequest: t.maxRegistersPerRequest ?? 16,
      bit: t.bit,
      bitTargetType: t.bitTargetType ?? 'bool',
      multiplier: t.multiplier,
      divider: t.divider,
      round: t.round ?? 6,
      report: t.reportStrategy,
    };
  });

/**
 * The keys and addresses of a read entry's values: one for a plain entry (its `tag`), and for a
 * wide range one per `objectsCount` objects, keyed by the tag with `${address}`, `${unitId}`,
 * `${functionCode}`, `${type}` and `${objectsCount}` substituted, `_${address}` appended when the
 * tag names no `${address}` (reference §3: `reg_${address}` gives `reg_100` ... `reg_103`).
 */
export function rangeKeys(
  tag: ModbusTag,
  unitId: number,
): Array<{ readonly key: string; readonly address: number }> {
  if (tag.end === undefined) return [{ key: tag.tag, address: tag.address }];
  const template = tag.tag.includes('${address}') ? tag.tag : `${tag.tag}_\${address}`;
  const vars: Record<string, string> = {
    unitId: String(unitId),
    functionCode: String(tag.functionCode),
    type: tag.type,
    objectsCount: String(tag.objectsCount),
  };
  const keys: Array<{ key: string; address: number }> = [];
  for (let a = tag.address; a <= tag.end; a += tag.objectsCount) {
    const key = template.replace(/\$\{(\w+)\}/g, (m, name: string) =>
      name === 'address' ? String(a) : (vars[name] ?? m),
    );
    keys.push({ key, address: a });
  }
  return keys;
}

/** Registers a numeric type occupies (0 for bits, string and bytes, sized by `objectsCount`). */
export function registersOf(type: ModbusValueType): number {
  switch (type) {
    case '8int':
    case '8uint':
    case '16int':
    case '16uint':
    case '16float':
      return 1;
    case '32int':
    case '32uint':
    case '32float':
      return 2;
    case '64int':
    case '64uint':
    case '64float':
      return 4;
    default:
      return 0;
  }
}

const codes = (allowed: readonly number[]) =>
  tagSchema.superRefine((t, ctx) => {
    if (!allowed.includes(t.functionCode)) {
      ctx.addIssue({
        code: 'custom',
        path: ['functionCode'],
        message: `must be one of ${allowed.join(', ')}`,
      });
    }
  });

const order = z
  .string()
  .transform((s) => s.toUpperCase())
  .pipe(z.enum(['BIG', 'LITTLE'], { error: 'must be BIG or LITTLE' }));

const PARITY: Readonly<Record<string, ModbusSlave['parity']>> = {
  N: 'none',
  E: 'even',
  O: 'odd',
  M: 'mark',
  S: 'space',
};

/** Serial parity as the IoT Gateway writes it (`N`, `E`, `O`, `M`, `S`, any case, or a word). */
export const paritySchema = z
  .string()
  .transform((s) => s.toUpperCase().slice(0, 1))
  .pipe(z.enum(['N', 'E', 'O', 'M', 'S'], { error: 'must be N, E, O, M or S' }))
  .default('N')
  .transform((p) => PARITY[p]);

const slaveSchema = z
  .looseObject({
    type: z
      .string()
      .transform((s) => s.toLowerCase())
      .pipe(z.enum(['tcp', 'udp', 'serial'], { error: 'must be tcp, udp or serial' }))
      .default('tcp'),
    method: z
      .string()
      .transform((s) => s.toLowerCase())
      .pipe(
        z.enum(['socket', 'rtu'], {
          error: 'must be socket or rtu (the ascii and tls framers are not supported)',
        }),
      ),
    host: z.string().min(1, 'must not be empty').optional(),
    port: z.union([z.number().int().min(1).max(65535), z.string().min(1)]),
    unitId: int.pipe(z.number().min(0, 'must be 0 to 247').max(247, 'must be 0 to 247')),
    deviceName: z
      .string()
      .min(1, 'must not be empty')
      .max(255, 'must be at most 255 characters')
      .refine((s) => s.trim() === s, 'must not start or end with a blank'),
    deviceType: z.string().min(1).max(255).default('default'),
    pollPeriod: int.pipe(z.number().min(10, 'must be at least 10 (ms)')),
    timeout: num.pipe(z.number().positive('must be positive (seconds)')).default(30),
    retries: z
      .union([z.boolean().transform((b) => (b ? 3 : 0)), int.pipe(z.number().min(0).max(10))])
      .default(3),
    byteOrder: order.default('LITTLE'),
    wordOrder: order.default('LITTLE'),
    baudrate: int.pipe(z.number().min(50).max(4_000_000)).default(19200),
    bytesize: int
      .pipe(z.union([z.literal(5), z.literal(6), z.literal(7), z.literal(8)]))
      .default(8),
    parity: paritySchema,
    stopbits: int.pipe(z.union([z.literal(1), z.literal(2)])).default(1),
    rs485: rs485Schema.optional(),
    lowLatency: lowLatencySchema,
    connectAttemptTimeMs: int.pipe(z.number().min(0)).default(500),
    connectAttemptCount: int.pipe(z.number().min(1)).default(2),
    waitAfterFailedAttemptsMs: int.pipe(z.number().min(0)).default(30000),
    delayBetweenRequestsMs: int.pipe(z.number().min(0).max(60000)).default(0),
    tls: z.record(z.string(), z.unknown()).optional(),
    reportStrategy: reportStrategySchema.optional(),
    timeseries: z.array(codes(READ_CODES)).max(1000).default([]),
    attributes: z.array(codes(READ_CODES)).max(1000).default([]),
    attributeUpdates: z.array(codes(WRITE_CODES)).max(1000).default([]),
    rpc: z
      .union([
        z.array(tagSchema),
        // `{method: entry}` (reference §2): the key is the method.
        z
          .record(z.string(), z.looseObject({}))
          .transform((m) => Object.entries(m).map(([tag, entry]) => ({ ...entry, tag }))),
      ])
      .pipe(z.array(tagSchema))
      .default([]),
  })
  .superRefine((s, ctx) => {
    if (s.type === 'serial') {
      if (typeof s.port !== 'string') {
        ctx.addIssue({ code: 'custom', path: ['port'], message: 'must be a serial device path' });
      }
      if (s.method !== 'rtu') {
        ctx.addIssue({ code: 'custom', path: ['method'], message: 'must be rtu on a serial port' });
      }
    } else {
      if (!s.host) ctx.addIssue({ code: 'custom', path: ['host'], message: 'is required' });
      if (!/^\d+$/.test(String(s.port)) || Number(s.port) < 1 || Number(s.port) > 65535) {
        ctx.addIssue({ code: 'custom', path: ['port'], message: 'must be a TCP/UDP port number' });
      }
      for (const key of ['rs485', 'lowLatency'] as const) {
        if (s[key] !== undefined && (key === 'rs485' || s[key])) {
          ctx.addIssue({ code: 'custom', path: [key], message: 'is for a serial port only' });
        }
      }
      if (s.type === 'udp' && s.method !== 'socket') {
        ctx.addIssue({
          code: 'custom',
          path: ['method'],
          message: 'must be socket over UDP (RTU framing over UDP is not supported)',
        });
      }
    }
    if (s.tls && Object.keys(s.tls).length > 0) {
      ctx.addIssue({ code: 'custom', path: ['tls'], message: 'Modbus over TLS is not supported' });
    }
  })
  .transform(
    (s): ModbusSlave => ({
      deviceName: s.deviceName,
      deviceType: s.deviceType,
      type: s.type,
      method: s.method,
      host: s.host ?? '',
      tcpPort: s.type === 'serial' ? 0 : Number(s.port),
      serialPort: s.type === 'serial' ? String(s.port) : '',
      baudrate: s.baudrate,
      bytesize: s.bytesize,
      parity: s.parity,
      stopbits: s.stopbits,
      rs485: s.rs485,
      lowLatency: s.lowLatency,
      unitId: s.unitId,
      timeoutMs: Math.round(s.timeout * 1000),
      retries: s.retries,
      pollPeriod: s.pollPeriod,
      byteOrder: s.byteOrder,
      wordOrder: s.wordOrder,
      connectAttemptTimeMs: s.connectAttemptTimeMs,
      connectAttemptCount: s.connectAttemptCount,
      waitAfterFailedAttemptsMs: s.waitAfterFailedAttemptsMs,
      delayBetweenRequestsMs: s.delayBetweenRequestsMs,
      timeseries: withReport(s.timeseries, s.reportStrategy),
      attributes: withReport(s.attributes, s.reportStrategy),
      attributeUpdates: s.attributeUpdates,
      rpc: s.rpc,
    }),
  );

export const modbusConfigSchema = z
  .looseObject({
    master: z.looseObject({
      slaves: z.array(slaveSchema).min(1, 'must name at least one slave').max(1000),
    }),
    server: z.unknown().optional(),
    slave: z.unknown().optional(),
    reportStrategy: reportStrategySchema.optional(),
  })
  .superRefine((c, ctx) => {
    const names = new Set<string>();
    // One port, one set of modes: a slave may repeat its port's, not contradict them.
    const modes = new Map<string, { rs485: string; lowLatency: boolean }>();
    c.master.slaves.forEach((s, i) => {
      if (s.type === 'serial') {
        const mine = { rs485: JSON.stringify(s.rs485 ?? null), lowLatency: s.lowLatency };
        const first = modes.get(s.serialPort);
        if (!first) modes.set(s.serialPort, mine);
        for (const key of ['rs485', 'lowLatency'] as const) {
          if (first && first[key] !== mine[key]) {
            ctx.addIssue({
              code: 'custom',
              path: ['master', 'slaves', i, key],
              message: `differs from the first slave on ${s.serialPort} (one port, one setting)`,
            });
          }
        }
      }
      if (names.has(s.deviceName)) {
        ctx.addIssue({
          code: 'custom',
          path: ['master', 'slaves', i, 'deviceName'],
          message: `"${s.deviceName}" is used by another slave`,
        });
      }
      names.add(s.deviceName);
    });
  })
  .transform(
    (c): ModbusConnectorConfig => ({
      slaves: c.master.slaves.map((s) => ({
        ...s,
        timeseries: withReport(s.timeseries, c.reportStrategy),
        attributes: withReport(s.attributes, c.reportStrategy),
      })),
    }),
  );

/** Read entries with the wider `reportStrategy` where they name none of their own. */
function withReport(tags: readonly ModbusTag[], wider: ReportStrategy | undefined): ModbusTag[] {
  return tags.map((t) => (t.report || !wider ? t : { ...t, report: wider }));
}

/** A read or write asked for over RPC with no entry in the config (reference §5, ad-hoc). */
export interface AdHocRequest {
  readonly tag: ModbusTag;
  /** The value to write, as text (function codes 5, 6, 15, 16). */
  readonly value?: string;
}

const AD_HOC_RE =
  /^type=([a-z0-9]+);functionCode=(\d+);objectsCount=(\d+);address=(\d+);(?:value=([^;]*);)?$/;

/**
 * Parses `type=16int;functionCode=3;objectsCount=1;address=5;` (a read) or
 * `...;value=42;` (a write). Returns undefined when the text does not match the schema.
 */
export function parseAdHocRpc(params: unknown): AdHocRequest | undefined {
  if (typeof params !== 'string') return undefined;
  const m = AD_HOC_RE.exec(params.trim());
  if (!m) return undefined;
  const [, type, fc, count, address, value] = m;
  const write = WRITE_CODES.includes(Number(fc));
  if (write !== (value !== undefined)) return undefined;
  const parsed = tagSchema.safeParse({
    tag: 'adhoc',
    type,
    functionCode: Number(fc),
    objectsCount: Number(count),
    address: Number(address),
  });
  if (!parsed.success) return undefined;
  if (![...READ_CODES, ...WRITE_CODES].includes(parsed.data.functionCode)) return undefined;
  return { tag: parsed.data, value };
}

export function isWriteCode(functionCode: number): boolean {
  return WRITE_CODES.includes(functionCode);
}
