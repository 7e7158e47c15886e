import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';

const DAY_MS = 86_400_000;

describe('device claiming over HTTP (POST /api/v1/{token}/claim)', () => {
  let t: TestGateway;
  before(async () => {
    t = await startGateway();
  });
  after(() => t.close());

  const claim = (token: string, body?: unknown, headers?: Record<string, string>) =>
    t.api(`/api/v1/${token}/claim`, { method: 'POST', body, headers });

  it('stores a claim with secret "" and the 24 h default for an empty body', async () => {
    const d = await createDevice(t, 'claim-empty');
    const before = Date.now();
    const res = await claim(d.token);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), '');
    const pending = t.gw.services.claims.pending(d.id);
    assert.ok(pending);
    assert.equal(pending.secretKey, '');
    assert.ok(pending.expirationTime >= before + DAY_MS);
    assert.ok(pending.expirationTime <= Date.now() + DAY_MS);
  });

  it('takes secretKey and durationMs from the body; durationMs <= 0 means the default', async () => {
    const a = await createDevice(t, 'claim-a');
    const start = Date.now();
    assert.equal((await claim(a.token, { secretKey: 'abc', durationMs: 60_000 })).status, 200);
    const pa = t.gw.services.claims.pending(a.id);
    assert.equal(pa?.secretKey, 'abc');
    assert.ok(
      pa && pa.expirationTime >= start + 60_000 && pa.expirationTime <= Date.now() + 60_000,
    );

    const b = await createDevice(t, 'claim-b');
    assert.equal((await claim(b.token, { secretKey: 'x', durationMs: 0 })).status, 200);
    const pb = t.gw.services.claims.pending(b.id);
    assert.ok(pb && pb.expirationTime >= start + DAY_MS);
  });

  it('keeps the first secret and expiry when a second claim arrives', async () => {
    const d = await createDevice(t, 'claim-twice');
    assert.equal((await claim(d.token, { secretKey: 'first', durationMs: 120_000 })).status, 200);
    const first = t.gw.services.claims.pending(d.id);
    const res = await claim(d.token, { secretKey: 'second', durationMs: 999_999 });
    assert.equal(res.status, 200, 'the device side always succeeds');
    assert.deepEqual(t.gw.services.claims.pending(d.id), first);
    assert.equal(first?.secretKey, 'first');
  });

  it('answers 401 with an empty body for an unknown token', async () => {
    const res = await claim('no-such-token', { secretKey: 'a' });
    assert.equal(res.status, 401);
    assert.equal(await res.text(), '');
  });

  it('answers 400 naming the problem for malformed JSON or wrong types; stores nothing', async () => {
    const d = await createDevice(t, 'claim-bad');
    const cases: Array<[string, RegExp]> = [
      ['{"secretKey":', /Invalid JSON/],
      ['{"secretKey":{"a":1}}', /secretKey/],
      ['{"durationMs":"soon"}', /durationMs/],
      ['{"durationMs":1.5}', /durationMs/],
      ['"just a string"', /claim request/],
    ];
    for (const [body, message] of cases) {
      const res = await claim(d.token, body, { 'content-type': 'application/json' });
      assert.equal(res.status, 400, body);
      const json = (await res.json()) as { status: number; message: string; errorCode: number };
      assert.equal(json.status, 400);
      assert.equal(json.errorCode, 31);
      assert.match(json.message, message);
    }
    assert.equal(t.gw.services.claims.pending(d.id), undefined);
  });

  it('answers 413 for a body over the limit and keeps running', async () => {
    const d = await createDevice(t, 'claim-big');
    const res = await claim(d.token, { secretKey: 's'.repeat(70_000) });
    assert.equal(res.status, 413);
    assert.equal(t.gw.services.claims.pending(d.id), undefined);
    assert.equal((await claim(d.token)).status, 200);
  });

  it('answers 404 for an unknown device API path', async () => {
    const d = await createDevice(t, 'claim-404');
    const res = await t.api(`/api/v1/${d.token}/claims`, { method: 'POST' });
    assert.equal(res.status, 404);
  });
});

describe('claim duration setting', () => {
  let t: TestGateway;
  before(async () => {
    t = await startGateway({ config: { claim: { durationMs: 5000 } } });
  });
  after(() => t.close());

  it('uses claim.durationMs when the device sends no durationMs', async () => {
    const d = await createDevice(t, 'claim-configured');
    const start = Date.now();
    assert.equal((await t.api(`/api/v1/${d.token}/claim`, { method: 'POST' })).status, 200);
    const pending = t.gw.services.claims.pending(d.id);
    assert.ok(pending);
    assert.ok(
      pending.expirationTime >= start + 5000 && pending.expirationTime <= Date.now() + 5000,
    );
  });
});
