import type { IncomingMessage } from 'node:http';
import type { HttpBindings } from '@hono/node-server';
import type { Context } from 'hono';
import type { Principal } from '../../auth/auth-service.js';
import type { DeviceIdentity } from '../../devices/device-service.js';
import { ValidationError } from '../../errors.js';
import type { ChangeSource } from '../../events.js';

/**
 * Hono environment shared by every sub-app: the authenticated user (management API) or the
 * authenticated device (device API, `/api/v1/:token/...`).
 */
export interface HttpEnv {
  Bindings: Partial<HttpBindings>;
  Variables: { principal: Principal; device: DeviceIdentity };
}

/**
 * Reads the request body. With a Content-Length (already checked by the body limit in app.ts)
 * it reads the Node request directly: `c.req.text()` would first build a Fetch `Request` with a
 * web stream, a third of the CPU of a device API call. Chunked bodies take the checked path.
 */
export async function readBody(c: Context<HttpEnv>): Promise<Buffer> {
  const incoming = c.env?.incoming;
  if (!incoming || declaredLength(incoming) === undefined) {
    return Buffer.from(await c.req.arrayBuffer());
  }
  return readRequest(incoming);
}

/**
 * The body length a Node request declares in its Content-Length, read from Node's own header
 * object (Hono's `c.req.header()` would build a Fetch `Headers` first); undefined for a chunked
 * body, for none, or outside the Node adapter.
 */
export function declaredLength(req: IncomingMessage | undefined): number | undefined {
  const headers = req?.headers;
  const length = headers?.['content-length'];
  if (length === undefined || headers?.['transfer-encoding'] !== undefined) return undefined;
  return Number(length);
}

/**
 * The whole body of a Node request, from its events (an async iterator costs more than the
 * rest of the read). Rejects if the client goes away before the end.
 */
export function readRequest(req: IncomingMessage): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.once('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    req.once('error', reject);
    req.once('close', () => {
      if (!req.complete) reject(new Error('request aborted'));
    });
  });
}

/** The user behind a REST change, as the bus and the messages name it (TB: `userId`, `userName`). */
export function userSource(principal: Principal): ChangeSource {
  return { kind: 'user', userId: principal.userId, userName: principal.email };
}

/** Reads a JSON body; malformed JSON is a client error (400), not a 500 as in ThingsBoard. */
export async function readJson(c: Context<HttpEnv>): Promise<unknown> {
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
