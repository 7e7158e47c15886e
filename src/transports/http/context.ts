import type { Context } from 'hono';
import type { Principal } from '../../auth/auth-service.js';
import type { DeviceIdentity } from '../../devices/device-service.js';
import { ValidationError } from '../../errors.js';

/**
 * Hono environment shared by every sub-app: the authenticated user (management API) or the
 * authenticated device (device API, `/api/v1/:token/...`).
 */
export interface HttpEnv {
  Variables: { principal: Principal; device: DeviceIdentity };
}

/** Reads a JSON body; malformed JSON is a client error (400), not a 500 as in ThingsBoard. */
export async function readJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === '') throw new ValidationError('Request body is required');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ValidationError(`Invalid JSON body: ${(err as Error).message}`, { cause: err });
  }
}

/** Query parameters as a plain record (first value of each). */
export function queryRecord(c: Context): Record<string, string | undefined> {
  return c.req.query();
}
