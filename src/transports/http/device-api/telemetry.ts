import type { IncomingMessage, ServerResponse } from 'node:http';
import { Hono } from 'hono';
import type { Logger } from 'pino';
import type { DeviceIdentity } from '../../../devices/device-service.js';
import type { DeviceMessageService } from '../../../messages/device-message-service.js';
import type { IngestMeter } from '../../../metrics/metrics.js';
import { declaredLength, type HttpEnv, readBody, readRequest } from '../context.js';
import { errorReply } from '../errors.js';
import type { FastLane } from '../http-server.js';
import type { DeviceAuth, DeviceByToken } from './device-auth.js';

/** Device telemetry upload (reference device-api.md §1), mounted at `/api/v1`. */
export function deviceTelemetryRoutes(deps: {
  deviceAuth: DeviceAuth;
  messages: Pick<DeviceMessageService, 'postTelemetry'>;
}) {
  const { messages } = deps;
  const app = new Hono<HttpEnv>();

  // §1.3: 200 with an empty body, here only once the points are committed. A bad payload is 400
  // with a JSON error naming the problem (ThingsBoard answers 500; see §12).
  app.post('/:token/telemetry', deps.deviceAuth, async (c) => {
    await messages.postTelemetry(c.var.device, await readBody(c));
    return c.body(null, 200);
  });

  return app;
}

/** The headers of Hono's `c.body(null, 200)` through the Node adapter. */
const EMPTY_OK = { 'content-type': 'text/plain; charset=UTF-8', 'content-length': '0' };

/** `/api/v1/{token}/telemetry`, with a token that needs no decoding, and any query string. */
const TELEMETRY_PATH = /^\/api\/v1\/([^/?%]+)\/telemetry(?:\?|$)/;

/**
 * The device API's busiest call without Hono: a telemetry POST with a declared Content-Length
 * within the limit and a known token. Building Hono's Fetch `Request` and `Response`, routing
 * through some 200 routes and the middleware cost about a quarter of such a call (bench:http,
 * in alternating runs: 5,943 and 8,600 requests/s through Hono, 8,870 and 11,906 here). Any other
 * request (chunked or oversized body, unknown or percent-encoded token) is left to the Hono
 * route above, which answers it the same way; errors become replies in the same place.
 */
export function telemetryFastLane(deps: {
  /** The device API's token check (`deviceByToken`), as the Hono route's middleware does it. */
  device: DeviceByToken;
  /** The ingest: `DeviceMessageService.postTelemetry` in the gateway. */
  telemetry: { ingest(device: DeviceIdentity, payload: Buffer): Promise<unknown> };
  maxBodyBytes: number;
  log: Logger;
  /** Counts each request the core accepted. */
  meter?: IngestMeter;
}): FastLane {
  return (req, res) => {
    if (req.method !== 'POST') return false;
    const m = TELEMETRY_PATH.exec(req.url ?? '');
    const length = declaredLength(req);
    if (!m || length === undefined || length > deps.maxBodyBytes) return false;
    const device = deps.device(m[1]);
    if (!device) return false;
    readRequest(req)
      .then((body) => deps.telemetry.ingest(device, body))
      .then(
        () => {
          res.writeHead(200, EMPTY_OK);
          res.end();
          deps.meter?.('http', 'telemetry');
        },
        (err: Error) => replyError(req, res, err, deps.log),
      );
    return true;
  };
}

function replyError(req: IncomingMessage, res: ServerResponse, err: Error, log: Logger): void {
  const path = (req.url ?? '').split('?')[0];
  const r = errorReply(err, req.method ?? 'POST', path, log);
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(r.body);
  res.writeHead(r.status, {
    ...r.headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}
