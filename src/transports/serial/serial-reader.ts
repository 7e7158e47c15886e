import type { Logger } from 'pino';
import { SerialPort } from 'serialport';
import type { SerialConnectorConfig, SerialPortConfig } from '../../connectors/serial-config.js';
import type { ConnectorRuntime, ConnectorSink, LineStatus } from '../../connectors/types.js';
import type { EdgeNative } from '../../native/edge-native.js';
import { parseLine } from './line-parser.js';
import { withPortModes } from './port-modes.js';

/**
 * One serial port delivering text lines: opened with its settings, split at the delimiter
 * (a line longer than `maxLineBytes` is dropped and counted, never buffered without bound),
 * each line parsed and reported with the time it arrived. A port that closes or cannot be
 * opened (a USB adapter unplugged) is reopened every `reopenDelayMs`.
 */
class PortReader {
  #port: SerialPort | undefined;
  #buffer: Buffer = Buffer.alloc(0);
  #discarding = false;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #open = false;
  #opened = 0;
  #failures = 0;
  #dropped = 0;
  #lastError: string | null = null;
  readonly #delimiter: Buffer;

  constructor(
    private readonly cfg: SerialPortConfig,
    private readonly sink: ConnectorSink,
    private readonly log: Logger,
    private readonly native: EdgeNative,
  ) {
    this.#delimiter = Buffer.from(cfg.delimiter);
  }

  start(): void {
    this.#openPort();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    const port = this.#port;
    this.#port = undefined;
    if (port?.isOpen) {
      await new Promise<void>((resolve) => {
        port.close(() => resolve());
        setTimeout(resolve, 1000).unref();
      });
    }
  }

  status(): LineStatus {
    return {
      line: this.cfg.port,
      open: this.#open,
      reopens: Math.max(0, this.#opened - 1),
      lastError: this.#lastError,
      queued: this.#buffer.length,
      dropped: this.#dropped,
      overruns: 0,
    };
  }

  #openPort(): void {
    if (this.#stopped) return;
    const { cfg } = this;
    // @NOTE: serialport's option types leave out `binding`, which its SerialPort takes (it
    // spreads the options over its detected binding).
    const port = new SerialPort({
      path: cfg.port,
      baudRate: cfg.baudrate,
      dataBits: cfg.bytesize,
      parity: cfg.parity,
      stopBits: cfg.stopbits,
      rtscts: cfg.rtscts,
      // `rs485` / `lowLatency` set right after each open (port-modes.ts).
      binding: withPortModes(SerialPort.binding, cfg.port, cfg, this.native, this.log),
      autoOpen: false,
    } as ConstructorParameters<typeof SerialPort>[0]);
    this.#port = port;
    port.open((err) => {
      if (this.#stopped) {
        if (!err) port.close();
        return;
      }
      if (err) {
        // Said once at warn level; each retry at debug.
        this.log[this.#failures === 0 ? 'warn' : 'debug'](
          { port: cfg.port, error: err.message, attempts: this.#failures + 1 },
          'serial port cannot open; retrying',
        );
        this.#failed(err.message);
        return;
      }
      this.#open = true;
      this.#opened++;
      this.#failures = 0;
      this.#lastError = null;
      this.#buffer = Buffer.alloc(0);
      this.log.info({ port: cfg.port, reopens: this.#opened - 1 }, 'serial port open');
    });
    port.on('data', (chunk: Buffer) => this.#data(chunk));
    port.on('error', (err: Error) => {
      if (port === this.#port && this.#open) this.#closed(port, err.message);
    });
    port.on('close', () => {
      if (port === this.#port && this.#open) this.#closed(port, 'port closed');
    });
  }

  #closed(port: SerialPort, message: string): void {
    this.#open = false;
    this.log.warn({ port: this.cfg.port, error: message }, 'serial port lost; reopening');
    if (port.isOpen) port.close();
    this.#failed(message);
  }

  #failed(message: string): void {
    this.#lastError = message;
    this.#failures++;
    if (this.#failures === 1 && this.cfg.deviceName) {
      this.sink.failure(
        { name: this.cfg.deviceName, type: this.cfg.deviceType },
        'connection',
        `${this.cfg.port}: ${message}`,
        true,
      );
    }
    this.#port = undefined;
    if (this.#stopped) return;
    this.#timer = setTimeout(() => this.#openPort(), this.cfg.reopenDelayMs);
  }

  #data(chunk: Buffer): void {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    for (;;) {
      const at = this.#buffer.indexOf(this.#delimiter);
      if (at < 0) break;
      const line = this.#buffer.subarray(0, at);
      this.#buffer = this.#buffer.subarray(at + this.#delimiter.length);
      if (this.#discarding) {
        // The tail of a line that was too long.
        this.#discarding = false;
        continue;
      }
      this.#line(line.toString('utf8'));
    }
    if (this.#buffer.length > this.cfg.maxLineBytes) {
      this.#buffer = Buffer.alloc(0);
      this.#discarding = true;
      this.#dropped++;
    }
  }

  #line(text: string): void {
    if (text.trim() === '') return;
    const ts = Date.now();
    const { cfg } = this;
    try {
      const parsed = parseLine(text, cfg);
      this.sink.reading(
        { name: parsed.deviceName, type: cfg.deviceType },
        { ts, telemetry: parsed.telemetry, attributes: parsed.attributes },
      );
    } catch (err) {
      this.#dropped++;
      const name = cfg.deviceName;
      if (name) {
        this.sink.failure({ name, type: cfg.deviceType }, 'decode', (err as Error).message, false);
      } else {
        this.log.debug({ port: cfg.port, err }, 'serial line not understood');
      }
    }
  }
}

/** The serial line connector: one reader per configured port. */
export class SerialLineConnector implements ConnectorRuntime {
  readonly #readers: PortReader[];

  constructor(deps: {
    config: SerialConnectorConfig;
    sink: ConnectorSink;
    log: Logger;
    /** The native addon, for ports' `rs485` / `lowLatency`. */
    native: EdgeNative;
  }) {
    this.#readers = deps.config.devices.map(
      (cfg) => new PortReader(cfg, deps.sink, deps.log, deps.native),
    );
  }

  start(): void {
    for (const r of this.#readers) r.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.#readers.map((r) => r.stop()));
  }

  lines(): LineStatus[] {
    return this.#readers.map((r) => r.status());
  }
}
