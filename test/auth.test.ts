import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ADMIN_EMAIL, ADMIN_PASSWORD, startGateway, type TestGateway } from './helpers/gateway.js';

describe('login, tokens and the current user', () => {
  let t: TestGateway;
  before(async () => {
    t = await startGateway({
      config: { auth: { loginMaxFailures: 5, loginFailureWindowSec: 60, loginLockoutSec: 60 } },
    });
  });
  after(() => t.close());

  it('logs in with the bootstrap administrator and returns a JWT pair', async () => {
    const res = await t.api('/api/auth/login', {
      body: { username: ADMIN_EMAIL, password: ADMIN_PASSWORD },
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { token: string; refreshToken: string };
    assert.match(body.token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.match(body.refreshToken, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    const claims = JSON.parse(Buffer.from(body.token.split('.')[1], 'base64url').toString());
    assert.equal(claims.sub, ADMIN_EMAIL);
    assert.deepEqual(claims.scopes, ['TENANT_ADMIN']);
    assert.ok(claims.exp > claims.iat);
  });

  it('GET /api/auth/user returns the caller with either header', async () => {
    const token = await t.adminToken();
    const both: Record<string, string>[] = [
      { 'X-Authorization': `Bearer ${token}` },
      { Authorization: `Bearer ${token}` },
    ];
    for (const headers of both) {
      const res = await t.api('/api/auth/user', { headers });
      assert.equal(res.status, 200);
      const user = (await res.json()) as {
        email: string;
        authority: string;
        id: { entityType: string };
      };
      assert.equal(user.email, ADMIN_EMAIL);
      assert.equal(user.authority, 'TENANT_ADMIN');
      assert.equal(user.id.entityType, 'USER');
    }
  });

  it('rejects requests without a token, with a malformed one and with a forged one', async () => {
    const token = await t.adminToken();
    const [h, p] = token.split('.');
    const forged = `${h}.${p}.${'A'.repeat(86)}`;
    for (const headers of <Record<string, string>[]>[
      {},
      { 'X-Authorization': 'Bearer not-a-jwt' },
      { 'X-Authorization': token },
      { 'X-Authorization': `Bearer ${forged}` },
    ]) {
      const res = await t.api('/api/auth/user', { headers });
      assert.equal(res.status, 401, JSON.stringify(headers));
      const body = (await res.json()) as { status: number; errorCode: number; message: string };
      assert.equal(body.status, 401);
      assert.equal(body.errorCode, 10);
    }
    const devices = await t.api('/api/tenant/devices?pageSize=10&page=0');
    assert.equal(devices.status, 401);
  });

  it('refreshes a token pair, and refuses an access token used as a refresh token', async () => {
    const login = await t.api('/api/auth/login', {
      body: { username: ADMIN_EMAIL, password: ADMIN_PASSWORD },
    });
    const pair = (await login.json()) as { token: string; refreshToken: string };
    const res = await t.api('/api/auth/token', { body: { refreshToken: pair.refreshToken } });
    assert.equal(res.status, 200);
    const fresh = (await res.json()) as { token: string };
    const me = await t.api('/api/auth/user', { token: fresh.token });
    assert.equal(me.status, 200);
    const wrong = await t.api('/api/auth/token', { body: { refreshToken: pair.token } });
    assert.equal(wrong.status, 401);
    const asAccess = await t.api('/api/auth/user', { token: pair.refreshToken });
    assert.equal(asAccess.status, 401);
    const missing = await t.api('/api/auth/token', { body: {} });
    assert.equal(missing.status, 400);
  });

  it('answers a bad password with 401 and a malformed body with 400', async () => {
    const bad = await t.api('/api/auth/login', {
      body: { username: ADMIN_EMAIL, password: 'nope' },
    });
    assert.equal(bad.status, 401);
    assert.equal(
      ((await bad.json()) as { message: string }).message,
      'Invalid username or password',
    );
    const malformed = await t.api('/api/auth/login', { body: '{"username":' });
    assert.equal(malformed.status, 400);
    assert.match(((await malformed.json()) as { message: string }).message, /Invalid JSON/);
  });

  it('never logs the password or the tokens', () => {
    const text = JSON.stringify(t.logs);
    assert.ok(!text.includes(ADMIN_PASSWORD), 'password appears in logs');
  });
});

describe('login throttling', () => {
  it('after 5 failures in a minute from one address further attempts get 429, even with the right password', async () => {
    const t = await startGateway();
    try {
      for (let i = 0; i < 5; i++) {
        const res = await t.api('/api/auth/login', {
          body: { username: ADMIN_EMAIL, password: `wrong${i}` },
        });
        assert.equal(res.status, 401);
      }
      const locked = await t.api('/api/auth/login', {
        body: { username: ADMIN_EMAIL, password: ADMIN_PASSWORD },
      });
      assert.equal(locked.status, 429);
      assert.ok(Number(locked.headers.get('retry-after')) > 0);
      assert.equal(((await locked.json()) as { errorCode: number }).errorCode, 33);
    } finally {
      await t.close();
    }
  });
});
