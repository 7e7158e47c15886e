import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { Logger } from 'pino';
import {
  type ErrorCode,
  fromStorageError,
  GatewayError,
  TokenExpiredError,
  TooManyRequestsError,
} from '../../errors.js';

const STATUS: Record<ErrorCode, ContentfulStatusCode> = {
  GW_ERR_INVALID_ARGUMENT: 400,
  GW_ERR_UNAUTHENTICATED: 401,
  GW_ERR_FORBIDDEN: 403,
  GW_ERR_NOT_FOUND: 404,
  GW_ERR_CONFLICT: 409,
  GW_ERR_PAYLOAD_TOO_LARGE: 413,
  GW_ERR_TOO_MANY_REQUESTS: 429,
  GW_ERR_TIMEOUT: 408,
  GW_ERR_UNAVAILABLE: 503,
  GW_ERR_INSUFFICIENT_STORAGE: 507,
  GW_ERR_INTERNAL: 500,
};

/** ThingsBoard's `errorCode` numbers, so TB clients can read our errors. */
const TB_ERROR_CODE: Partial<Record<number, number>> = {
  400: 31,
  401: 10,
  403: 20,
  404: 32,
  409: 35,
  413: 31,
  429: 33,
  500: 2,
};

export function statusOf(err: unknown): ContentfulStatusCode {
  if (err instanceof GatewayError) return STATUS[err.code];
  if (err instanceof HTTPException) return err.status as ContentfulStatusCode;
  return 500;
}

/** ThingsBoard's `JWT_TOKEN_EXPIRED`: its clients refresh the token on this code (platform.md). */
const TB_JWT_TOKEN_EXPIRED = 11;

export function errorBody(status: number, message: string, errorCode?: number) {
  return {
    status,
    message,
    errorCode: errorCode ?? TB_ERROR_CODE[status] ?? 2,
    timestamp: Date.now(),
  };
}

/** An error as an HTTP reply: status, JSON body and extra headers. */
export interface ErrorReply {
  readonly status: ContentfulStatusCode;
  readonly body: ReturnType<typeof errorBody>;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * The single place where errors become HTTP replies (Hono's `onError` and the device API's fast
 * lane). Client errors log at info, server errors at error with the cause; the process never
 * goes down for a bad request.
 */
export function errorReply(raw: Error, method: string, path: string, log: Logger): ErrorReply {
  const err = fromStorageError(raw) as Error;
  const status = statusOf(err);
  const message = status === 500 ? 'Internal server error' : err.message;
  // A busy or full disk is logged where it happens (once), not per refused request.
  if (status >= 500 && status !== 503 && status !== 507) {
    log.error({ err, method, path }, 'request failed');
  } else {
    log.info({ status, method, path, reason: err.message }, 'request rejected');
  }
  const headers: Record<string, string> = {};
  if (err instanceof TooManyRequestsError && err.retryAfterSec) {
    headers['Retry-After'] = String(err.retryAfterSec);
  }
  // A 413 is sent before the body is read: close the connection, so that no client reuses a
  // socket that still carries the rest of that body (clients saw 'fetch failed' on the next
  // request otherwise).
  if (status === 413) headers.Connection = 'close';
  const code = err instanceof TokenExpiredError ? TB_JWT_TOKEN_EXPIRED : undefined;
  return { status, body: errorBody(status, message, code), headers };
}

export function handleError(err: Error, c: Context, log: Logger): Response {
  const r = errorReply(err, c.req.method, c.req.path, log);
  for (const [name, value] of Object.entries(r.headers)) c.header(name, value);
  return c.json(r.body, r.status);
}
