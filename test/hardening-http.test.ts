import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { JWT_SECRET_FILE } from '../src/auth/auth-service.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';

/** Sends raw bytes and resolves with everything the server wrote before it closed. */
function rawHttp(port: number, data: string | Buffer, timeoutMs = 10_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('the server neither answered nor closed'));
    }, timeoutMs);
    socket.on('data', (c) => chunks.push(c));
    // The server may close while the rest of a long request is still being written.
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
    socket.write(data);
  });
}

function statusAndBody(reply: string): { status: number; body: Record<string, unknown> } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1] ?? 0);
  const body = reply.slice(reply.indexOf('\r\n\r\n') + 4);
  return { status, body: body ? (JSON.parse(body) as Record<string, unknown>) : {} };
}

describe('hardening: HTTP edge cases (issue 20)', () => {
  let t: TestGateway;
  let port: number;
  let dev: { id: string; token: string };

  before(async () => {
    t = await startGateway();
    port = t.gw.ports.http;
    dev = await createDevice(t, 'hard-http');
  });
  after(() => t.close());

  it('case 3: a garbage request line gets 400 with a JSON body, not a silent close', async () => {
    const { status, body } = statusAndBody(await rawHttp(port, 'GARBAGE\r\n\r\n'));
    assert.equal(status, 400);
    assert.match(String(body.message), /Malformed HTTP request/);
    assert.equal(body.status, 400);
  });

  it('case 3: a 100 KB URL gets 414', async () => {
    const reply = await rawHttp(
      port,
      `GET /api/v1/${'a'.repeat(100 * 1024)} HTTP/1.1\r\nHost: x\r\n\r\n`,
    );
    const { status, body } = statusAndBody(reply);
    assert.equal(status, 414);
    assert.match(String(body.message), /URL is too long/);
  });

  it('case 3: a URL over the configured limit but under the parser cap gets 414', async () => {
    const res = await fetch(`${t.baseUrl}/api/v1/${'a'.repeat(9000)}/attributes`);
    assert.equal(res.status, 414);
    assert.match(((await res.json()) as { message: string }).message, /longer than 8192 bytes/);
  });

  for (const kb of [17, 30, 100]) {
    it(`case 3: a ${kb} KB header gets 431`, async () => {
      const reply = await rawHttp(
        port,
        `GET /api/v1/${dev.token}/attributes HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(kb * 1024)}\r\n\r\n`,
      );
      const { status, body } = statusAndBody(reply);
      assert.equal(status, 431);
      assert.match(String(body.message), /headers are (too large|larger than)/);
    });
  }

  it('case 3: requests within the limits are served as before', async () => {
    const res = await fetch(`${t.baseUrl}/api/v1/${dev.token}/attributes`, {
      headers: { 'X-Pad': 'p'.repeat(8000) },
    });
    assert.equal(res.status, 200);
    assert.equal((await t.api('/healthz')).status, 200);
  });

  it('case 2: an empty attribute key is refused with 400 and nothing is stored', async () => {
    const res = await t.api(`/api/v1/${dev.token}/attributes`, { body: '{"":1,"ok":2}' });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /key must not be empty/);
    const stored = await t.api(
      `/api/plugins/telemetry/DEVICE/${dev.id}/values/attributes/CLIENT_SCOPE`,
      { token: await t.adminToken() },
    );
    assert.deepEqual(await stored.json(), []);
  });

  it('case 7: an expired JWT is answered 401 with errorCode 11 (JWT_TOKEN_EXPIRED)', async () => {
    const secret = Buffer.from(
      readFileSync(join(t.dataDir, JWT_SECRET_FILE), 'utf8').trim(),
      'base64',
    );
    const admin = await t.adminToken();
    const claims = JSON.parse(Buffer.from(admin.split('.')[1], 'base64url').toString()) as Record<
      string,
      unknown
    >;
    const now = Math.floor(Date.now() / 1000);
    const expired = await new SignJWT({ ...claims, exp: now - 60, iat: now - 3600 })
      .setProtectedHeader({ alg: 'HS512' })
      .sign(new Uint8Array(secret));
    const res = await t.api('/api/auth/user', { token: expired });
    assert.equal(res.status, 401);
    const body = (await res.json()) as { errorCode: number; message: string };
    assert.equal(body.errorCode, 11);
    assert.match(body.message, /expired/);
    // Any other bad token stays errorCode 10.
    const bad = await t.api('/api/auth/user', { token: `${expired.slice(0, -4)}AAAA` });
    assert.equal(bad.status, 401);
    assert.equal(((await bad.json()) as { errorCode: number }).errorCode, 10);
  });
});
