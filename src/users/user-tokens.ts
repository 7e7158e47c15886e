import { createHash, randomBytes } from 'node:crypto';

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** Largest multiple of 62 below 256: bytes at or above it are skipped so no character is favoured. */
const UNBIASED_LIMIT = 248;

/** A random token of `length` alphanumerics (ThingsBoard's activateToken is 30 of them). */
export function randomAlphanumeric(length = 30): string {
  let out = '';
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < UNBIASED_LIMIT) out += ALPHANUMERIC[b % ALPHANUMERIC.length];
      if (out.length === length) break;
    }
  }
  return out;
}

/** What the database keeps of a token: a copy of the table must not give working links. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}
