import type { Context } from 'hono';
import type { PollOutcome } from '../../../common/subscriptions.js';
import { UnavailableError, ValidationError } from '../../../errors.js';

/** `transport.http.request_timeout` / `max_request_timeout` (reference device-api.md §8.5). */
export const DEFAULT_POLL_MS = 60_000;
export const MAX_POLL_MS = 300_000;

/**
 * The `timeout` query parameter of a long poll, in ms: absent or `0` means 60 s (§2.3, §3.3);
 * above 300 s it is cut to 300 s. Anything but a non-negative integer is a 400.
 */
export function pollTimeout(raw: string | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_POLL_MS;
  if (!/^\d{1,15}$/.test(raw)) {
    throw new ValidationError(
      `timeout must be a non-negative integer of milliseconds, got: ${raw}`,
    );
  }
  const ms = Number(raw);
  return ms === 0 ? DEFAULT_POLL_MS : Math.min(ms, MAX_POLL_MS);
}

/**
 * Answers a long poll that ended without a value: 408 with an empty body on timeout (§2.3);
 * 403 `Device was deleted!` when the device went away; 503 (TB error JSON) when the gateway
 * stops; a client that aborted gets nothing it could read.
 */
export function pollEnded(c: Context, outcome: Exclude<PollOutcome<unknown>, { kind: 'value' }>) {
  switch (outcome.kind) {
    case 'timeout':
    case 'aborted':
      return c.body(null, 408);
    case 'closed':
      if (outcome.reason === 'deleted') return c.text('Device was deleted!', 403);
      throw new UnavailableError('Gateway is stopping');
  }
}

export function jsonText(c: Context, text: string, status: 200 | 406 = 200) {
  return c.body(text, status, { 'content-type': 'application/json' });
}
