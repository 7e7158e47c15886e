import assert from 'node:assert/strict';
import { get as httpGet, type IncomingHttpHeaders } from 'node:http';
import { after, before, test } from 'node:test';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { startGateway, type TestGateway } from './helpers/gateway.js';

// The built page (npm test builds first): hashed asset names, precompressed copies, long-lived
// cache headers for assets, never-cached index.html, client routes that survive a reload.

let t: TestGateway;
before(async () => {
  t = await startGateway();
});
after(() => t.close());

const get = (path: string) => fetch(`${t.baseUrl}${path}`);

/** A raw GET (fetch would ask for and decode compression by itself). */
function raw(
  path: string,
  encoding?: string,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const headers = encoding ? { 'accept-encoding': encoding } : {};
    httpGet(`${t.baseUrl}${path}`, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
      );
      res.on('error', reject);
    }).on('error', reject);
  });
}

test('index.html names hashed assets and is never cached', async () => {
  const res = await get('/');
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('cache-control'), 'no-cache');
  const html = await res.text();
  const assets = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]);
  assert.ok(
    assets.some((a) => /^\/assets\/app-[A-Z0-9]{8}\.js$/.test(a)),
    html,
  );
  assert.ok(
    assets.some((a) => /^\/assets\/style-[A-Z0-9]{8}\.css$/.test(a)),
    html,
  );

  // A client route (a reload on /devices/…) gets the same page.
  const deep = await get('/devices/6b1c7c50-0000-4000-8000-000000000000');
  assert.equal(deep.status, 200);
  assert.equal(await deep.text(), html);
});

test('assets are served precompressed with a one-year immutable cache', async () => {
  const html = await (await get('/')).text();
  const app = /src="(\/assets\/app-[^"]+\.js)"/.exec(html)?.[1];
  assert.ok(app);
  const plain = await raw(app);
  assert.equal(plain.headers['content-encoding'], undefined);
  assert.equal(plain.headers['cache-control'], 'public, max-age=31536000, immutable');
  assert.match(plain.headers['content-type'] ?? '', /^text\/javascript/);

  const gz = await raw(app, 'gzip');
  assert.equal(gz.headers['content-encoding'], 'gzip');
  assert.equal(gz.headers.vary, 'accept-encoding');
  assert.ok(gz.body.length < plain.body.length);
  assert.ok(gunzipSync(gz.body).equals(plain.body));

  const br = await raw(app, 'gzip, deflate, br');
  assert.equal(br.headers['content-encoding'], 'br');
  assert.ok(brotliDecompressSync(br.body).equals(plain.body));

  // q=0 refuses an encoding.
  assert.equal((await raw(app, 'br;q=0, gzip')).headers['content-encoding'], 'gzip');

  assert.equal((await get('/assets/app-NOTTHERE.js')).status, 404);
});
