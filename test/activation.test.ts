import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it, mock } from 'node:test';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { adminPost, startSmtp } from './helpers/notify.js';
import { activateUser, activationToken, createCustomer, createUser } from './helpers/users.js';

const PASSWORD = 'first-password-1';

describe('user activation over HTTP', () => {
  let t: TestGateway;
  let customerId: string;
  before(async () => {
    t = await startGateway();
    customerId = await createCustomer(t, 'Activation Inc');
  });
  after(() => t.close());

  it('create user -> link -> create password page -> set password -> tokens work -> old link is dead', async () => {
    const admin = await t.adminToken();
    const userId = await createUser(t, 'new.user@example.com', customerId);
    const user = (await (await t.api(`/api/user/${userId}`, { token: admin })).json()) as {
      additionalInfo: { userCredentialsEnabled: boolean };
    };
    assert.equal(user.additionalInfo.userCredentialsEnabled, false);
    const before = await t.api('/api/auth/login', {
      body: { username: 'new.user@example.com', password: PASSWORD },
    });
    assert.equal(before.status, 401, 'a user without a password cannot log in');

    const linkRes = await t.api(`/api/user/${userId}/activationLink`, { token: admin });
    assert.equal(linkRes.status, 200);
    assert.match(linkRes.headers.get('content-type') ?? '', /^text\/plain/);
    const link = await linkRes.text();
    assert.match(
      link,
      new RegExp(`^${t.baseUrl}/api/noauth/activate\\?activateToken=[A-Za-z0-9]{30}$`),
    );
    const activateToken = new URL(link).searchParams.get('activateToken') ?? '';

    const open = await fetch(link, { redirect: 'manual' });
    assert.equal(open.status, 303);
    assert.equal(
      open.headers.get('location'),
      `/login/createPassword?activateToken=${activateToken}`,
    );
    assert.equal(open.headers.get('referrer-policy'), 'no-referrer');
    const page = await fetch(new URL(open.headers.get('location') ?? '', t.baseUrl));
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    const html = await page.text();
    assert.match(html, /<form/);
    assert.match(html, /\/api\/noauth\/activate/);

    const short = await t.api('/api/noauth/activate', {
      body: { activateToken, password: 'short' },
    });
    assert.equal(short.status, 400, 'password policy: at least 8 characters');
    assert.match(((await short.json()) as { message: string }).message, /at least 8/);

    const res = await t.api('/api/noauth/activate', {
      body: { activateToken, password: PASSWORD },
    });
    assert.equal(res.status, 200);
    const pair = (await res.json()) as { token: string; refreshToken: string };
    const me = await t.api('/api/auth/user', { token: pair.token });
    assert.equal(me.status, 200);
    const meBody = (await me.json()) as { email: string; authority: string };
    assert.equal(meBody.email, 'new.user@example.com');
    assert.equal(meBody.authority, 'CUSTOMER_USER');
    const refreshed = await t.api('/api/auth/token', {
      body: { refreshToken: pair.refreshToken },
    });
    assert.equal(refreshed.status, 200);
    const login = await t.api('/api/auth/login', {
      body: { username: 'new.user@example.com', password: PASSWORD },
    });
    assert.equal(login.status, 200);

    const again = await t.api('/api/noauth/activate', {
      body: { activateToken, password: 'another-password' },
    });
    assert.equal(again.status, 400, 'a used activation token is refused');
    const reopen = await fetch(link, { redirect: 'manual' });
    assert.equal(reopen.status, 409);
    const relink = await t.api(`/api/user/${userId}/activationLink`, { token: admin });
    assert.equal(relink.status, 400);
    assert.equal(
      ((await relink.json()) as { message: string }).message,
      'User is already activated!',
    );
  });

  it('refuses an unknown token and replaces an earlier link with a new one', async () => {
    const unknown = await t.api('/api/noauth/activate', {
      body: { activateToken: 'A'.repeat(30), password: PASSWORD },
    });
    assert.equal(unknown.status, 400);
    const userId = await createUser(t, 'twice@example.com', customerId);
    const first = await activationToken(t, userId);
    const second = await activationToken(t, userId);
    assert.notEqual(first, second);
    const stale = await t.api('/api/noauth/activate', {
      body: { activateToken: first, password: PASSWORD },
    });
    assert.equal(stale.status, 400);
    const fresh = await t.api('/api/noauth/activate', {
      body: { activateToken: second, password: PASSWORD },
    });
    assert.equal(fresh.status, 200);
  });

  it('refuses a link older than 24 hours', async () => {
    const userId = await createUser(t, 'late@example.com', customerId);
    const activateToken = await activationToken(t, userId);
    mock.timers.enable({ apis: ['Date'], now: Date.now() });
    try {
      mock.timers.tick(24 * 60 * 60 * 1000 - 1000);
      const open = await t.api(`/api/noauth/activate?activateToken=${activateToken}`, {
        headers: {},
      });
      assert.equal(open.status, 200, 'still valid just before 24 h (redirect followed)');
      mock.timers.tick(2000);
      const expiredOpen = await fetch(
        `${t.baseUrl}/api/noauth/activate?activateToken=${activateToken}`,
        { redirect: 'manual' },
      );
      assert.equal(expiredOpen.status, 409);
      assert.match(((await expiredOpen.json()) as { message: string }).message, /expired/);
      const res = await t.api('/api/noauth/activate', {
        body: { activateToken, password: PASSWORD },
      });
      assert.equal(res.status, 400);
      assert.match(((await res.json()) as { message: string }).message, /expired/);
    } finally {
      mock.timers.reset();
    }
  });

  it('stores activation tokens only as sha256 hashes', async () => {
    const userId = await createUser(t, 'hashed@example.com', customerId);
    const token = await activationToken(t, userId);
    const rows = t.gw.db.prepare('SELECT token_hash FROM user_token').all() as Array<{
      token_hash: string;
    }>;
    assert.ok(rows.length > 0);
    assert.ok(rows.every((r) => /^[0-9a-f]{64}$/.test(r.token_hash) && r.token_hash !== token));
  });
});

describe('password reset over HTTP', () => {
  let t: TestGateway;
  let userId: string;
  before(async () => {
    t = await startGateway();
    const customerId = await createCustomer(t, 'Reset Ltd');
    userId = await createUser(t, 'forgetful@example.com', customerId);
    await activateUser(t, userId, PASSWORD);
  });
  after(() => t.close());

  it('resetPasswordByEmail answers 200 for known and unknown emails and logs no token', async () => {
    for (const email of ['forgetful@example.com', 'nobody@example.com']) {
      const res = await t.api('/api/noauth/resetPasswordByEmail', { body: { email } });
      assert.equal(res.status, 200);
      assert.equal(await res.text(), '');
    }
    const line = t.logs.find(
      (l) => l.msg === 'password reset requested; no mail sent (email is not configured)',
    );
    assert.ok(line, 'the request is logged');
    assert.equal(line.userId, userId);
    assert.equal(line.email, undefined);
    const tokens = t.gw.db
      .prepare("SELECT count(*) AS n FROM user_token WHERE kind = 'RESET'")
      .get() as {
      n: number;
    };
    assert.equal(tokens.n, 0, 'no token is issued while no mail can carry it');
  });

  it('the administrator reads a reset link; the new password works once, the old one no more', async () => {
    const admin = await t.adminToken();
    const linkRes = await t.api(`/api/user/${userId}/passwordResetLink`, { token: admin });
    assert.equal(linkRes.status, 200);
    const link = await linkRes.text();
    assert.match(link, /\/api\/noauth\/resetPassword\?resetToken=[A-Za-z0-9]{30}$/);
    const resetToken = new URL(link).searchParams.get('resetToken') ?? '';
    const open = await fetch(link, { redirect: 'manual' });
    assert.equal(open.status, 303);
    assert.equal(open.headers.get('location'), `/login/resetPassword?resetToken=${resetToken}`);

    const res = await t.api('/api/noauth/resetPassword', {
      body: { resetToken, password: 'second-password-2' },
    });
    assert.equal(res.status, 200);
    const { token } = (await res.json()) as { token: string };
    assert.equal((await t.api('/api/auth/user', { token })).status, 200);
    const oldLogin = await t.api('/api/auth/login', {
      body: { username: 'forgetful@example.com', password: PASSWORD },
    });
    assert.equal(oldLogin.status, 401);
    const newLogin = await t.api('/api/auth/login', {
      body: { username: 'forgetful@example.com', password: 'second-password-2' },
    });
    assert.equal(newLogin.status, 200);
    const reuse = await t.api('/api/noauth/resetPassword', {
      body: { resetToken, password: 'third-password-3' },
    });
    assert.equal(reuse.status, 400);
  });

  it('an activation token cannot reset a password and vice versa', async () => {
    const admin = await t.adminToken();
    const link = await (
      await t.api(`/api/user/${userId}/passwordResetLink`, { token: admin })
    ).text();
    const resetToken = new URL(link).searchParams.get('resetToken');
    const res = await t.api('/api/noauth/activate', {
      body: { activateToken: resetToken, password: PASSWORD },
    });
    assert.equal(res.status, 400);
  });
});

describe('links on the configured public address (--public-url)', () => {
  let t: TestGateway;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let userId: string;
  before(async () => {
    smtp = await startSmtp();
    t = await startGateway({ config: { http: { publicUrl: 'https://gw.plant.example/' } } });
    await adminPost(t, '/api/admin/settings', {
      key: 'mail',
      jsonValue: { mailFrom: 'gateway@plant.local', smtpHost: '127.0.0.1', smtpPort: smtp.port },
    });
    const customerId = await createCustomer(t, 'Public Url Ltd');
    userId = await createUser(t, 'night-shift@example.com', customerId);
  });
  after(async () => {
    await t.close();
    await smtp.close();
  });

  it('the activation and reset links use it, and a forged Host header does not reach a mail', async () => {
    const admin = await t.adminToken();
    const activation = await (
      await t.api(`/api/user/${userId}/activationLink`, { token: admin })
    ).text();
    assert.match(
      activation,
      /^https:\/\/gw\.plant\.example\/api\/noauth\/activate\?activateToken=/,
    );
    await activateUser(t, userId, PASSWORD);
    const reset = await (
      await t.api(`/api/user/${userId}/passwordResetLink`, { token: admin })
    ).text();
    assert.match(reset, /^https:\/\/gw\.plant\.example\/api\/noauth\/resetPassword\?resetToken=/);

    // A reset asked for with somebody else's host name in the request.
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: t.gw.ports.http,
          path: '/api/noauth/resetPasswordByEmail',
          method: 'POST',
          headers: { host: 'attacker.example', 'content-type': 'application/json' },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ email: 'night-shift@example.com' }));
    });
    assert.equal(status, 200);
    const mail = await waitFor(() => smtp.mails[0], 20_000, 'the reset mail');
    assert.match(
      mail.data,
      /https:\/\/gw\.plant\.example\/api\/noauth\/resetPassword\?resetToken=/,
    );
    assert.doesNotMatch(mail.data, /attacker\.example/);
  });

  it('a user created with sendActivationMail (the default) gets the activation link by mail', async () => {
    const admin = await t.adminToken();
    const res = await t.api('/api/user', {
      body: { email: 'new-hire@example.com', authority: 'TENANT_ADMIN' },
      token: admin,
    });
    assert.equal(res.status, 200);
    const mail = await waitFor(
      () => smtp.mails.find((m) => m.to.includes('new-hire@example.com')),
      20_000,
      'the activation mail',
    );
    assert.match(mail.data, /Subject: Your account on the edge gateway/);
    // The body is quoted-printable: soft line breaks and `=3D` for `=`.
    const text = mail.data.replace(/=\r?\n/g, '').replace(/=3D/g, '=');
    const token = /activateToken=([A-Za-z0-9]{30})/.exec(text)?.[1] ?? '';
    assert.match(text, /https:\/\/gw\.plant\.example\/api\/noauth\/activate\?activateToken=/);
    const done = await t.api('/api/noauth/activate', {
      body: { activateToken: token, password: 'new-hire-pass-1' },
    });
    assert.equal(done.status, 200);
    const login = await t.api('/api/auth/login', {
      body: { username: 'new-hire@example.com', password: 'new-hire-pass-1' },
    });
    assert.equal(login.status, 200);
  });
});

describe('disabled users', () => {
  it('cannot log in, and their tokens stop working at once', async () => {
    const t = await startGateway();
    try {
      const admin = await t.adminToken();
      const customerId = await createCustomer(t, 'Disabled Co');
      const userId = await createUser(t, 'off@example.com', customerId);
      const token = await activateUser(t, userId, PASSWORD);
      assert.equal((await t.api('/api/auth/user', { token })).status, 200);

      const off = await t.api(
        `/api/user/${userId}/userCredentialsEnabled?userCredentialsEnabled=false`,
        {
          method: 'POST',
          token: admin,
        },
      );
      assert.equal(off.status, 200);
      assert.equal((await t.api('/api/auth/user', { token })).status, 401);
      const login = await t.api('/api/auth/login', {
        body: { username: 'off@example.com', password: PASSWORD },
      });
      assert.equal(login.status, 401);
      assert.equal(
        ((await login.json()) as { message: string }).message,
        'User account is not active',
      );
      const reset = await t.api(`/api/user/${userId}/passwordResetLink`, { token: admin });
      assert.equal(reset.status, 400);

      const on = await t.api(
        `/api/user/${userId}/userCredentialsEnabled?userCredentialsEnabled=true`,
        {
          method: 'POST',
          token: admin,
        },
      );
      assert.equal(on.status, 200);
      const again = await t.api('/api/auth/login', {
        body: { username: 'off@example.com', password: PASSWORD },
      });
      assert.equal(again.status, 200);

      const self = await t.api('/api/auth/user', { token: admin });
      const adminId = ((await self.json()) as { id: { id: string } }).id.id;
      const selfOff = await t.api(
        `/api/user/${adminId}/userCredentialsEnabled?userCredentialsEnabled=false`,
        {
          method: 'POST',
          token: admin,
        },
      );
      assert.equal(selfOff.status, 400, 'the administrator cannot lock itself out');
    } finally {
      await t.close();
    }
  });
});

describe('what a customer user may do (403 for forbidden operations, 404 for foreign ids)', () => {
  let t: TestGateway;
  let a: string;
  let b: string;
  let me: string;
  let peer: string;
  let foreign: string;
  let adminId: string;
  let token: string;
  before(async () => {
    t = await startGateway();
    a = await createCustomer(t, 'Customer A');
    b = await createCustomer(t, 'Customer B');
    me = await createUser(t, 'me@a.example', a);
    peer = await createUser(t, 'peer@a.example', a);
    foreign = await createUser(t, 'other@b.example', b);
    token = await activateUser(t, me, PASSWORD);
    const self = await t.api('/api/auth/user', { token: await t.adminToken() });
    adminId = ((await self.json()) as { id: { id: string } }).id.id;
  });
  after(() => t.close());

  const expect = async (
    path: string,
    status: number,
    init: { method?: string; body?: unknown } = {},
  ) => {
    const res = await t.api(path, { ...init, token });
    assert.equal(res.status, status, `${init.method ?? 'GET'} ${path}: ${await res.text()}`);
  };

  it('reads its own customer only', async () => {
    await expect(`/api/customer/${a}`, 200);
    await expect(`/api/customer/${b}`, 404);
    await expect('/api/customers?pageSize=10&page=0', 403);
    await expect('/api/customer', 403, { body: { title: 'Mine' } });
    await expect(`/api/customer/${a}`, 403, { method: 'DELETE' });
  });

  it('reads itself and users of its customer, nobody else', async () => {
    await expect(`/api/user/${me}`, 200);
    await expect(`/api/user/${peer}`, 200);
    await expect(`/api/user/${foreign}`, 404);
    await expect(`/api/user/${adminId}`, 404);
    await expect(`/api/customer/${a}/users?pageSize=10&page=0`, 200);
    await expect(`/api/customer/${b}/users?pageSize=10&page=0`, 404);
    const res = await t.api('/api/users?pageSize=10&page=0', { token });
    assert.equal(res.status, 200);
    const page = (await res.json()) as { data: Array<{ email: string }>; totalElements: number };
    assert.deepEqual(page.data.map((u) => u.email).sort(), ['me@a.example', 'peer@a.example']);
    assert.equal(page.totalElements, 2);
  });

  it('updates only itself, and cannot change its authority or customer', async () => {
    const current = (await (await t.api(`/api/user/${me}`, { token })).json()) as Record<
      string,
      unknown
    >;
    const renamed = await t.api('/api/user', { body: { ...current, firstName: 'Me' }, token });
    assert.equal(renamed.status, 200);
    assert.equal(((await renamed.json()) as { firstName: string }).firstName, 'Me');
    await expect('/api/user', 403, {
      body: { ...current, authority: 'TENANT_ADMIN', customerId: null },
    });
    await expect('/api/user', 403, {
      body: { ...current, customerId: { entityType: 'CUSTOMER', id: b } },
    });
    const peerJson = (await (await t.api(`/api/user/${peer}`, { token })).json()) as Record<
      string,
      unknown
    >;
    await expect('/api/user', 403, { body: { ...peerJson, firstName: 'Hacked' } });
    await expect('/api/user', 404, {
      body: {
        id: { entityType: 'USER', id: foreign },
        email: 'other@b.example',
        authority: 'CUSTOMER_USER',
        customerId: { entityType: 'CUSTOMER', id: b },
      },
    });
    await expect('/api/user?sendActivationMail=false', 403, {
      body: {
        email: 'new@a.example',
        authority: 'CUSTOMER_USER',
        customerId: { entityType: 'CUSTOMER', id: a },
      },
    });
  });

  it('cannot manage users or read the audit log', async () => {
    await expect(`/api/user/${peer}`, 403, { method: 'DELETE' });
    await expect(`/api/user/${peer}/activationLink`, 403);
    await expect(`/api/user/${peer}/passwordResetLink`, 403);
    await expect(`/api/user/${peer}/userCredentialsEnabled?userCredentialsEnabled=false`, 403, {
      method: 'POST',
    });
    await expect('/api/audit/logs?pageSize=10&page=0', 403);
  });
});
