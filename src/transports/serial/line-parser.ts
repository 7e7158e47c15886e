import { JsonNumber, type JsonText, parseJsonText } from '../../common/json-text.js';
import type { SerialPortConfig } from '../../connectors/serial-config.js';

/** One text line turned into values. */
export interface ParsedLine {
  readonly deviceName: string;
  readonly telemetry: Record<string, unknown>;
  readonly attributes: Record<string, unknown>;
}

const NUMBER_RE = /^-?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/** A field of a text format: a number keeps its literal (`21.0` stays a DOUBLE), else text. */
function textValue(raw: string): unknown {
  const s = raw.trim();
  if (NUMBER_RE.test(s)) return new JsonNumber(s);
  if (s === 'true' || s === 'false') return s === 'true';
  return s;
}

/**
 * Parses one line of a serial device (issue 17 §3): a JSON object, `key=value` pairs separated by
 * `separator` (default `;`), or CSV fields named by `columns`. Throws an Error saying what is
 * wrong; the reader counts it against the device and goes on with the next line.
 */
export function parseLine(line: string, cfg: SerialPortConfig): ParsedLine {
  const fields = new Map<string, unknown>();
  const text = line.replace(/\r$/, '');
  if (cfg.format === 'json') {
    let parsed: JsonText;
    try {
      parsed = parseJsonText(text, 8);
    } catch (err) {
      throw new Error(`not JSON: ${(err as Error).message}`);
    }
    if (
      typeof parsed !== 'object' ||
      parsed === null ||
      Array.isArray(parsed) ||
      parsed instanceof JsonNumber
    ) {
      throw new Error('not a JSON object');
    }
    for (const [k, v] of Object.entries(parsed)) fields.set(k, v);
  } else if (cfg.format === 'keyValue') {
    for (const pair of text.split(cfg.separator)) {
      if (pair.trim() === '') continue;
      const eq = pair.indexOf('=');
      if (eq <= 0) throw new Error(`"${pair.slice(0, 40)}" is not key=value`);
      fields.set(pair.slice(0, eq).trim(), textValue(pair.slice(eq + 1)));
    }
  } else {
    const cells = text.split(cfg.separator);
    if (cells.length < cfg.columns.length) {
      throw new Error(`${cells.length} columns, expected ${cfg.columns.length}`);
    }
    cfg.columns.forEach((name, i) => {
      if (name !== '') fields.set(name, textValue(cells[i]));
    });
  }
  let deviceName = cfg.deviceName;
  if (cfg.deviceNameField) {
    const named = fields.get(cfg.deviceNameField);
    fields.delete(cfg.deviceNameField);
    if (named !== undefined && named !== null) {
      deviceName = named instanceof JsonNumber ? named.raw : String(named).trim();
    }
  }
  if (!deviceName) throw new Error(`no device name (field "${cfg.deviceNameField}")`);
  if (deviceName.length > 255) throw new Error('device name longer than 255 characters');
  const telemetry: Record<string, unknown> = {};
  const attributes: Record<string, unknown> = {};
  for (const [key, value] of fields) {
    if (key === '' || value === null) continue;
    (cfg.attributes.includes(key) ? attributes : telemetry)[key] = value;
  }
  return { deviceName, telemetry, attributes };
}
