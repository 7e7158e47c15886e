import type { Context } from 'hono';
import { DEVICE_LIMITS, nonNegativeInt } from '../../../common/limits.js';
import type { PollOutcome } from '../../../common/subscriptions.js';
import { UnavailableError } from '../../../errors.js';

/**
 * The `timeout` query parameter of a long poll, in ms: absent or `0` means 60 s (§2.3, §3.3);
 * above 300 s it is cut to 300 s. Anything but a non-negative integer is a 400.
 */
export function pollTimeout(raw: string | undefined): number {
  const { pollDefaultMs, pollMaxMs, maxTimeoutMs } = DEVICE_LIMITS;
  if (raw === undefined || raw === '') return pollDefaultMs;
  const ms = nonNegativeInt(raw, 'timeout (ms)', maxTimeoutMs);
  return ms === 0 ? pollDefaultMs : Math.min(ms, pollMaxMs);
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
