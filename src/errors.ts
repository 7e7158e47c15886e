/**
 * Domain errors. Domains throw these; each transport maps them to its own status in one place
 * (HTTP status, MQTT refusal, CoAP response code).
 */

export type ErrorCode =
  | 'GW_ERR_INVALID_ARGUMENT'
  | 'GW_ERR_UNAUTHENTICATED'
  | 'GW_ERR_FORBIDDEN'
  | 'GW_ERR_NOT_FOUND'
  | 'GW_ERR_CONFLICT'
  | 'GW_ERR_TOO_MANY_REQUESTS'
  | 'GW_ERR_PAYLOAD_TOO_LARGE'
  | 'GW_ERR_TIMEOUT'
  | 'GW_ERR_UNAVAILABLE'
  | 'GW_ERR_INSUFFICIENT_STORAGE'
  | 'GW_ERR_INTERNAL';

export class GatewayError extends Error {
  override name = 'GatewayError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Bad input from a client: a payload, a parameter or a body that does not fit. */
export class ValidationError extends GatewayError {
  override name = 'ValidationError';
  constructor(message: string, options?: ErrorOptions) {
    super('GW_ERR_INVALID_ARGUMENT', message, options);
  }
}

export class AuthenticationError extends GatewayError {
  override name = 'AuthenticationError';
  constructor(message = 'Authentication failed', options?: ErrorOptions) {
    super('GW_ERR_UNAUTHENTICATED', message, options);
  }
}

/** An access token past its expiry: clients refresh on this (ThingsBoard's JWT_TOKEN_EXPIRED). */
export class TokenExpiredError extends AuthenticationError {
  override name = 'TokenExpiredError';
  constructor(message = 'Token has expired', options?: ErrorOptions) {
    super(message, options);
  }
}

export class ForbiddenError extends GatewayError {
  override name = 'ForbiddenError';
  constructor(message = 'You do not have permission to perform this operation') {
    super('GW_ERR_FORBIDDEN', message);
  }
}

export class NotFoundError extends GatewayError {
  override name = 'NotFoundError';
  constructor(message = "Requested item wasn't found!") {
    super('GW_ERR_NOT_FOUND', message);
  }
}

export class ConflictError extends GatewayError {
  override name = 'ConflictError';
  constructor(message: string) {
    super('GW_ERR_CONFLICT', message);
  }
}

export class TooManyRequestsError extends GatewayError {
  override name = 'TooManyRequestsError';
  constructor(
    message: string,
    readonly retryAfterSec?: number,
  ) {
    super('GW_ERR_TOO_MANY_REQUESTS', message);
  }
}

export class PayloadTooLargeError extends GatewayError {
  override name = 'PayloadTooLargeError';
  constructor(message = 'Payload too large') {
    super('GW_ERR_PAYLOAD_TOO_LARGE', message);
  }
}

export class TimeoutError extends GatewayError {
  override name = 'TimeoutError';
  constructor(message = 'Timeout') {
    super('GW_ERR_TIMEOUT', message);
  }
}

/** The gateway is starting or stopping and cannot take the request. */
export class UnavailableError extends GatewayError {
  override name = 'UnavailableError';
  constructor(message = 'Service unavailable', options?: ErrorOptions) {
    super('GW_ERR_UNAVAILABLE', message, options);
  }
}

/** The disk is full: a write was refused and nothing of it stored (HTTP 507). */
export class StorageFullError extends GatewayError {
  override name = 'StorageFullError';
  constructor(message = 'Storage is full: the data was not stored', options?: ErrorOptions) {
    super('GW_ERR_INSUFFICIENT_STORAGE', message, options);
  }
}

/**
 * Turns a storage driver's failure (SQLite result codes, read from `err.code`) into a domain
 * error, for the transports' single error translation: a full disk is StorageFullError, a busy
 * database or an I/O error is UnavailableError. Anything else is returned as it was.
 */
export function fromStorageError(err: unknown): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return err;
  if (code === 'SQLITE_FULL') return new StorageFullError(undefined, { cause: err });
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
    return new UnavailableError('Storage is busy: the data was not stored, retry', { cause: err });
  }
  if (code.startsWith('SQLITE_IOERR')) {
    return new UnavailableError('Storage I/O error: the data was not stored', { cause: err });
  }
  return err;
}

/** A schema in the database is newer than this build, or a migration failed. */
export class MigrationError extends GatewayError {
  override name = 'MigrationError';
  constructor(message: string, options?: ErrorOptions) {
    super('GW_ERR_INTERNAL', message, options);
  }
}
