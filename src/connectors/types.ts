import type { ModbusConnectorConfig, ModbusTag } from './modbus-config.js';
import type { SerialConnectorConfig } from './serial-config.js';

/**
 * What the connector domain and the wire adapters (transports/modbus, transports/serial) share.
 * The domain owns connectors, devices, counters and the way into the core; an adapter owns a bus
 * and reports readings and failures through a `ConnectorSink`.
 */

export const CONNECTOR_TYPES = ['MODBUS', 'SERIAL'] as const;
export type ConnectorType = (typeof CONNECTOR_TYPES)[number];

export type ParsedConnectorConfig =
  | { readonly type: 'MODBUS'; readonly config: ModbusConnectorConfig }
  | { readonly type: 'SERIAL'; readonly config: SerialConnectorConfig };

/** The device a reading or a failure belongs to, as the configuration names it. */
export interface ConnectorDeviceRef {
  readonly name: string;
  readonly type: string;
}

/** One poll or one line: values with the time they were read. */
export interface ConnectorReading {
  readonly ts: number;
  readonly telemetry: Readonly<Record<string, unknown>>;
  readonly attributes: Readonly<Record<string, unknown>>;
}

/**
 * - `timeout`: the device did not answer in time; `crc`: a garbled answer;
 * - `exception`: a Modbus exception response (e.g. illegal address);
 * - `connection`: the port or TCP connection is closed or cannot be opened;
 * - `decode`: an answer or a line that could not be turned into values.
 */
export type ConnectorErrorKind = 'timeout' | 'crc' | 'exception' | 'connection' | 'decode';

export interface ConnectorSink {
  reading(device: ConnectorDeviceRef, reading: ConnectorReading): void;
  /**
   * A failed poll or line. `lost` is true when the device did not answer at all (a timeout, a
   * closed port), false when it answered with something unusable.
   */
  failure(
    device: ConnectorDeviceRef,
    kind: ConnectorErrorKind,
    message: string,
    lost: boolean,
  ): void;
}

/** A port or TCP connection of a running connector. */
export interface LineStatus {
  /** `/dev/ttyUSB0`, `tcp://10.0.0.5:502`. */
  readonly line: string;
  readonly open: boolean;
  /** Times the line was opened after the first time (reconnects, a USB adapter plugged back). */
  readonly reopens: number;
  readonly lastError: string | null;
  /** Requests waiting (writes), lines dropped for being too long, etc. */
  readonly queued: number;
  readonly dropped: number;
  /** Polls that started after their next deadline had passed (the line is overloaded). */
  readonly overruns: number;
}

/** A read or write asked for by a shared-attribute change or an RPC. */
export type DeviceRequest =
  | { readonly kind: 'read'; readonly tag: ModbusTag }
  | { readonly kind: 'write'; readonly tag: ModbusTag; readonly value: unknown };

export interface ConnectorRuntime {
  start(): void;
  /** Closes every port and connection; pending requests are rejected. */
  stop(): Promise<void>;
  lines(): LineStatus[];
  /** Modbus: runs a request on the device's bus; resolves with the decoded value read. */
  request?(deviceName: string, req: DeviceRequest): Promise<unknown>;
}

/** Builds the wire adapter of a connector; given to the domain by the composition root. */
export type ConnectorDriver = (
  config: ParsedConnectorConfig,
  sink: ConnectorSink,
) => ConnectorRuntime;
