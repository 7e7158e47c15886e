import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hashToken, randomAlphanumeric } from './user-tokens.js';

describe('user tokens', () => {
  it('are 30 alphanumerics by default and differ each time', () => {
    const a = randomAlphanumeric();
    const b = randomAlphanumeric();
    assert.match(a, /^[A-Za-z0-9]{30}$/);
    assert.notEqual(a, b);
    assert.match(randomAlphanumeric(100), /^[A-Za-z0-9]{100}$/);
  });

  it('hash to sha256 hex, never the token itself', () => {
    const t = randomAlphanumeric();
    assert.match(hashToken(t), /^[0-9a-f]{64}$/);
    assert.equal(hashToken(t), hashToken(t));
    assert.ok(!hashToken(t).includes(t));
  });
});
