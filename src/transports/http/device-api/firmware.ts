import { type Context, Hono } from 'hono';
import { nonNegativeInt } from '../../../common/limits.js';
import { NotFoundError, ValidationError } from '../../../errors.js';
import type { DeviceMessageService } from '../../../messages/device-message-service.js';
import type { OtaService, OtaType } from '../../../ota/ota-service.js';
import type { HttpEnv } from '../context.js';
import type { DeviceAuth } from './device-auth.js';

function intParam(c: Context, name: string, problems: string[]): number | undefined {
  const raw = c.req.query(name);
  if (raw === undefined || raw === '') return undefined;
  try {
    return nonNegativeInt(raw, name);
  } catch (err) {
    problems.push((err as Error).message);
    return undefined;
  }
}

/**
 * `GET /api/v1/{token}/firmware` and `/software` (device-api.md §7.2), mounted at `/api/v1`.
 * `title` and `version` are required and must name the assigned package; `size` + `chunk` select
 * bytes `[chunk*size, chunk*size+size)`, a chunk past the end is 200 with no bytes. Nothing
 * assigned (or a URL-only package) → 404 with an empty body, as in ThingsBoard.
 */
export function firmwareApi(deps: { deviceAuth: DeviceAuth; messages: DeviceMessageService }) {
  const app = new Hono<HttpEnv>();
  const handler = (type: OtaType) => (c: Context<HttpEnv>) => {
    const problems: string[] = [];
    const title = c.req.query('title');
    const version = c.req.query('version');
    if (!title) problems.push('title is required');
    if (!version) problems.push('version is required');
    const size = intParam(c, 'size', problems);
    const chunk = intParam(c, 'chunk', problems);
    if (problems.length > 0) throw new ValidationError(problems.join('; '));
    let result: ReturnType<OtaService['download']>;
    try {
      result = deps.messages.firmware(c.var.device, type, { title, version, size, chunk });
    } catch (err) {
      if (err instanceof NotFoundError) return c.body(null, 404);
      throw err;
    }
    const fileName = result.info.fileName ?? `${result.info.title}.bin`;
    // RFC 6266 §4.1: quote-free token form as ThingsBoard sends it, for names without specials.
    const safe = /^[\w.+-]+$/.test(fileName) ? fileName : encodeURIComponent(fileName);
    c.header('Content-Disposition', `attachment;filename=${safe}`);
    c.header('x-filename', safe);
    c.header('Content-Type', result.info.contentType ?? 'application/octet-stream');
    c.header('Content-Length', String(result.data.length));
    return c.body(new Uint8Array(result.data), 200);
  };
  app.get('/:token/firmware', deps.deviceAuth, handler('FIRMWARE'));
  app.get('/:token/software', deps.deviceAuth, handler('SOFTWARE'));
  return app;
}
