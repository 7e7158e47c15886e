import type { Context } from 'hono';
import { Hono } from 'hono';
import type { AuthService } from '../../auth/auth-service.js';
import { ConflictError } from '../../errors.js';
import { MIN_PASSWORD_LENGTH, type UserService } from '../../users/user-service.js';
import type { TokenKind } from '../../users/user-store.js';
import { type HttpEnv, readJson } from './context.js';

/** The two password pages: same form, different token parameter and endpoint. */
const PAGES = {
  ACTIVATE: {
    path: '/login/createPassword',
    title: 'Create password',
    param: 'activateToken',
    endpoint: '/api/noauth/activate',
  },
  RESET: {
    path: '/login/resetPassword',
    title: 'Reset password',
    param: 'resetToken',
    endpoint: '/api/noauth/resetPassword',
  },
} as const satisfies Record<TokenKind, object>;

/**
 * A minimal password form. It reads the token from its own URL in the browser (nothing from the
 * request is echoed into the HTML), posts JSON, keeps the returned tokens where ThingsBoard's UI
 * keeps them and goes to the start page.
 */
function passwordPage(kind: TokenKind): string {
  const p = PAGES[kind];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>${p.title}</title>
<style>body{font:16px system-ui,sans-serif;max-width:22rem;margin:4rem auto;padding:0 1rem}
input,button{display:block;width:100%;box-sizing:border-box;margin:.4rem 0 1rem;padding:.5rem}
#msg{color:#b00020}</style></head>
<body><h1>${p.title}</h1>
<form id="f"><label>Password<input id="pw" type="password" minlength="${MIN_PASSWORD_LENGTH}" required autocomplete="new-password"></label>
<label>Repeat password<input id="pw2" type="password" required autocomplete="new-password"></label>
<button>Save</button><p id="msg" role="alert"></p></form>
<script>
const token = new URLSearchParams(location.search).get(${JSON.stringify(p.param)});
const msg = document.getElementById('msg');
document.getElementById('f').addEventListener('submit', async (e) => {
  e.preventDefault();
  const pw = document.getElementById('pw').value;
  if (pw !== document.getElementById('pw2').value) { msg.textContent = 'Passwords do not match'; return; }
  const res = await fetch(${JSON.stringify(p.endpoint)}, { method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ${p.param}: token, password: pw }) });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) { msg.textContent = body.message || 'Failed (' + res.status + ')'; return; }
  localStorage.setItem('jwt_token', body.token);
  localStorage.setItem('refresh_token', body.refreshToken);
  location.replace('/');
});
</script></body></html>
`;
}

/** Keeps the token in the URL out of Referer headers and caches. */
function noLeak(c: Context): void {
  c.header('Referrer-Policy', 'no-referrer');
  c.header('Cache-Control', 'no-store');
}

/**
 * Unauthenticated account pages and calls (platform reference §3.2), mounted at `/`:
 * `/api/noauth/*` and the two password pages under `/login/`.
 */
export function noauthRoutes(deps: { users: UserService; auth: AuthService }) {
  const { users, auth } = deps;
  const app = new Hono<HttpEnv>();

  for (const kind of ['ACTIVATE', 'RESET'] as const) {
    const p = PAGES[kind];
    app.get(p.path, (c) => {
      noLeak(c);
      return c.html(passwordPage(kind));
    });
    // The link a user receives: check the token, then show the password form.
    app.get(p.endpoint, (c) => {
      noLeak(c);
      const token = c.req.query(p.param);
      const state = users.tokenState(token, kind);
      // @NOTE: ThingsBoard redirects an expired link to its UI's `/activationLinkExpired`; there
      // is no such page here, so expired and unknown links both get 409 with a clear message.
      if (state === 'expired') throw new ConflictError('The link has expired');
      if (state === 'unknown') throw new ConflictError('The link is invalid or already used');
      return c.redirect(`${p.path}?${p.param}=${encodeURIComponent(token ?? '')}`, 303);
    });
  }

  app.post('/api/noauth/activate', async (c) => {
    const body = (await readJson(c)) as { activateToken?: unknown; password?: unknown } | null;
    const row = await users.activate(body?.activateToken, body?.password);
    return c.json(await auth.issue(row));
  });

  app.post('/api/noauth/resetPasswordByEmail', async (c) => {
    const body = (await readJson(c)) as { email?: unknown } | null;
    // @NOTE: the link is built from the address the request came to, as ThingsBoard does without
    // a fixed base URL (docs/users.md "Password reset").
    users.requestPasswordReset(body?.email, new URL(c.req.url).origin);
    return c.body(null, 200);
  });

  app.post('/api/noauth/resetPassword', async (c) => {
    const body = (await readJson(c)) as { resetToken?: unknown; password?: unknown } | null;
    const row = await users.resetPassword(body?.resetToken, body?.password);
    return c.json(await auth.issue(row));
  });

  return app;
}
