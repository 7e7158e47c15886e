import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { limitRate, reconnectDelay } from './upstream-service.js';

describe('upstream link pacing', () => {
  it('reconnects with exponential backoff and jitter, from 1 s to 60 s', () => {
    assert.equal(reconnectDelay(0, 1_000, 0), 1_000);
    assert.equal(reconnectDelay(0, 1_000, 0.99), 1_000);
    assert.equal(reconnectDelay(1, 1_000, 0), 1_000);
    assert.equal(reconnectDelay(1, 1_000, 0.5), 1_500);
    assert.equal(reconnectDelay(3, 1_000, 0.5), 6_000);
    // The cap: 30 to 60 s, whatever the attempt.
    assert.equal(reconnectDelay(6, 1_000, 0), 30_000);
    assert.equal(reconnectDelay(16, 1_000, 0.5), 45_000);
    for (let attempt = 0; attempt <= 16; attempt++) {
      for (const random of [0, 0.25, 0.5, 0.999]) {
        const d = reconnectDelay(attempt, 1_000, random);
        assert.ok(d >= 1_000 && d <= 60_000, `attempt ${attempt}: ${d} ms`);
      }
    }
  });

  it("reads ThingsBoard's rate limits as the steady rate within every window, with 10 % margin", () => {
    assert.equal(limitRate('20:1,600:60'), 9); // 600 a minute is the tighter: 10/s, less 10 %
    assert.equal(limitRate('100:1'), 90);
    assert.equal(limitRate(''), 0);
    assert.equal(limitRate(undefined), 0);
    assert.equal(limitRate('x:1,5:0'), 0);
  });
});
