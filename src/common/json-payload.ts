import { ValidationError } from '../errors.js';

/**
 * Parses a device payload (MQTT, CoAP) or request body as JSON. Malformed or empty input is a
 * ValidationError naming what was being read, so every transport reports it the same way.
 */
export function parseJsonPayload(payload: Buffer | string, what: string): unknown {
  const text = typeof payload === 'string' ? payload : payload.toString('utf8');
  if (text.trim() === '') throw new ValidationError(`${what}: payload is empty`);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ValidationError(`${what}: Invalid JSON: ${(err as Error).message}`, { cause: err });
  }
}
