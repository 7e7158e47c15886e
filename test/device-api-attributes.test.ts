import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pollTimeout } from '../src/transports/http/device-api/long-poll.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';

const NO_SUCH_DEVICE = '2c8f0a1e-0000-4000-8000-000000000000';

describe('device attribute API over HTTP', () => {
  let t: TestGateway;
  let admin: string;
  let dev: { id: string; token: string };
  let n = 0;
  const freshDevice = () => createDevice(t, `attr-dev-${n++}`);
  const counts = () => t.gw.services.attributes.counts;
  const restAttrs = async (id: string, suffix = '') => {
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${id}/values/attributes${suffix}`, {
      token: admin,
    });
    return { status: res.status, text: await res.text() };
  };
  const setShared = (id: string, body: unknown, scope = 'SHARED_SCOPE') =>
    t.api(`/api/plugins/telemetry/DEVICE/${id}/attributes/${scope}`, { body, token: admin });

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    dev = await freshDevice();
  });
  after(() => t.close());

  it('stores client attributes with the reference value typing and answers 200 empty', async () => {
    const d = await freshDevice();
    const body =
      '{"i":42,"d":42.0,"s":"42","z":"0123","hex":"0x10","exp":"1e5","b":true,"j":{"a":[1]},' +
      '"n":null,"big":12345678901234567890,"e":1E2,"f":0.12345678901234567,"neg":-3.5}';
    const res = await t.api(`/api/v1/${d.token}/attributes`, { body });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), '');
    const { status, text } = await restAttrs(d.id, '/CLIENT_SCOPE');
    assert.equal(status, 200);
    const byKey = Object.fromEntries(
      (JSON.parse(text) as Array<{ key: string; value: unknown; lastUpdateTs: number }>).map(
        (kv) => [kv.key, kv.value],
      ),
    );
    assert.deepEqual(byKey, {
      b: true,
      big: '12345678901234567890',
      d: 42,
      e: 100,
      exp: '1e5',
      f: '0.12345678901234567',
      hex: '0x10',
      i: 42,
      j: { a: [1] },
      neg: -3.5,
      s: 42,
      z: 123,
    });
    // A DOUBLE keeps its fraction on output; a LONG does not get one.
    assert.match(text, /"key":"d","value":42\.0,/);
    assert.match(text, /"key":"i","value":42,/);
    assert.match(text, /"key":"e","value":100,/);
  });

  it('answers attribute requests with client and shared sections, never server scope', async () => {
    const d = await freshDevice();
    await t.api(`/api/v1/${d.token}/attributes`, { body: { a: 1, b: 'x', ' b': 2 } });
    assert.equal((await setShared(d.id, { c: true, r: 1.5 })).status, 200);
    assert.equal((await setShared(d.id, { secret: 1 }, 'SERVER_SCOPE')).status, 200);
    const get = async (q: string) => {
      const res = await t.api(`/api/v1/${d.token}/attributes${q}`);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /application\/json/);
      return res.text();
    };
    assert.equal(await get(''), '{"client":{" b":2,"a":1,"b":"x"},"shared":{"c":true,"r":1.5}}');
    assert.equal(
      await get('?clientKeys=a,b&sharedKeys=c'),
      '{"client":{"a":1,"b":"x"},"shared":{"c":true}}',
    );
    assert.equal(await get('?clientKeys=a'), '{"client":{"a":1}}');
    assert.equal(await get('?sharedKeys=r,secret'), '{"shared":{"r":1.5}}');
    // No trimming: "a, b" asks for "a" and " b".
    assert.equal(await get('?clientKeys=a,%20b'), '{"client":{" b":2,"a":1}}');
    assert.equal(await get('?clientKeys=nope&sharedKeys=nope'), '{}');
  });

  it('rejects bad client attribute payloads with 400 and stores nothing', async () => {
    const d = await freshDevice();
    for (const body of ['{"a":', '[{"a":1}]', '5', 'null', '"x"', '']) {
      const res = await t.api(`/api/v1/${d.token}/attributes`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(res.status, 400, body);
      const err = (await res.json()) as { status: number; message: string };
      assert.equal(err.status, 400);
      assert.ok(err.message.length > 0);
    }
    // The requests still count as device activity (server scope); nothing else is stored.
    assert.equal((await restAttrs(d.id, '/CLIENT_SCOPE')).text, '[]');
    assert.equal((await restAttrs(d.id, '/SHARED_SCOPE')).text, '[]');
  });

  it('answers 401 with an empty body for an unknown token on every device endpoint', async () => {
    const paths: Array<[string, string]> = [
      ['POST', '/api/v1/nope/attributes'],
      ['GET', '/api/v1/nope/attributes'],
      ['GET', '/api/v1/nope/attributes/updates?timeout=100'],
    ];
    for (const [method, path] of paths) {
      const res = await t.api(path, { method, body: method === 'POST' ? { a: 1 } : undefined });
      assert.equal(res.status, 401, path);
      assert.equal(await res.text(), '', path);
    }
  });

  it('answers 413 for a body over the limit and stores nothing', async () => {
    const d = await freshDevice();
    const big = JSON.stringify({ k: 'x'.repeat(70 * 1024) });
    const res = await t.api(`/api/v1/${d.token}/attributes`, { body: big });
    assert.equal(res.status, 413);
    const rest = await setShared(d.id, big);
    assert.equal(rest.status, 413);
    assert.equal((await restAttrs(d.id, '/CLIENT_SCOPE')).text, '[]');
    assert.equal((await restAttrs(d.id, '/SHARED_SCOPE')).text, '[]');
  });

  it('REST: saves shared and server attributes, reads them by scope and keys, deletes them', async () => {
    const d = await freshDevice();
    assert.equal((await setShared(d.id, '{"s1":"a","s2":2.0}')).status, 200);
    // ThingsBoard's v1 path `POST /{type}/{id}/{scope}`.
    const v1 = await t.api(`/api/plugins/telemetry/DEVICE/${d.id}/SERVER_SCOPE`, {
      body: { srv: 7 },
      token: admin,
    });
    assert.equal(v1.status, 200);
    const shared = JSON.parse((await restAttrs(d.id, '/SHARED_SCOPE')).text) as Array<{
      key: string;
      lastUpdateTs: number;
    }>;
    assert.deepEqual(
      shared.map((kv) => kv.key),
      ['s1', 's2'],
    );
    assert.ok(Math.abs(shared[0].lastUpdateTs - Date.now()) < 10_000);
    const some = await restAttrs(d.id, '?keys=s2,srv');
    assert.match(some.text, /"key":"s2","value":2\.0,/);
    assert.deepEqual(
      (JSON.parse(some.text) as Array<{ key: string }>).map((kv) => kv.key),
      ['s2', 'srv'],
    );
    const keys = await t.api(`/api/plugins/telemetry/DEVICE/${d.id}/keys/attributes`, {
      token: admin,
    });
    assert.deepEqual(await keys.json(), ['s1', 's2', 'srv']);
    const serverKeys = await t.api(
      `/api/plugins/telemetry/DEVICE/${d.id}/keys/attributes/SERVER_SCOPE`,
      { token: admin },
    );
    assert.deepEqual(await serverKeys.json(), ['srv']);
    const del = await t.api(`/api/plugins/telemetry/DEVICE/${d.id}/SHARED_SCOPE?keys=s1`, {
      method: 'DELETE',
      token: admin,
    });
    assert.equal(del.status, 200);
    assert.deepEqual(
      (JSON.parse((await restAttrs(d.id, '/SHARED_SCOPE')).text) as Array<{ key: string }>).map(
        (kv) => kv.key,
      ),
      ['s2'],
    );
  });

  it('REST: every error status', async () => {
    const base = `/api/plugins/telemetry/DEVICE/${dev.id}`;
    const cases: Array<[string, string, unknown, number, string?]> = [
      ['POST', `${base}/attributes/CLIENT_SCOPE`, { a: 1 }, 400, 'Invalid scope'],
      ['POST', `${base}/attributes/BOGUS`, { a: 1 }, 400, 'Invalid scope'],
      ['POST', `${base}/attributes/SHARED_SCOPE`, { '  ': 1 }, 400, 'blank'],
      ['POST', `${base}/attributes/SHARED_SCOPE`, {}, 400, 'No attributes'],
      ['POST', `${base}/attributes/SHARED_SCOPE`, '{"a":', 400, 'Invalid JSON'],
      ['POST', `${base}/attributes/SHARED_SCOPE`, '[1]', 400, 'JSON object'],
      ['DELETE', `${base}/SHARED_SCOPE`, undefined, 400, 'keys'],
      ['DELETE', `${base}/NOPE?keys=a`, undefined, 400, 'Invalid scope'],
      ['GET', `${base}/values/attributes/NOPE`, undefined, 400, 'Invalid scope'],
      ['GET', '/api/plugins/telemetry/DEVICE/not-a-uuid/values/attributes', undefined, 400],
      ['GET', `/api/plugins/telemetry/DEVICE/${NO_SUCH_DEVICE}/values/attributes`, undefined, 404],
      [
        'POST',
        `/api/plugins/telemetry/DEVICE/${NO_SUCH_DEVICE}/attributes/SHARED_SCOPE`,
        { a: 1 },
        404,
      ],
      [
        'DELETE',
        `/api/plugins/telemetry/DEVICE/${NO_SUCH_DEVICE}/SHARED_SCOPE?keys=a`,
        undefined,
        404,
      ],
    ];
    for (const [method, path, body, status, message] of cases) {
      const res = await t.api(path, { method, body, token: admin });
      assert.equal(res.status, status, `${method} ${path}`);
      const err = (await res.json()) as { status: number; message: string };
      assert.equal(err.status, status);
      if (message) assert.match(err.message, new RegExp(message), `${method} ${path}`);
    }
    const anon = await t.api(`${base}/values/attributes`);
    assert.equal(anon.status, 401);
    assert.equal((await restAttrs(dev.id)).text, '[]');
  });

  it('long poll delivers the first shared change as a flat object, then a delete', async () => {
    const d = await freshDevice();
    const poll = t.api(`/api/v1/${d.token}/attributes/updates?timeout=5000`);
    await waitFor(() => counts().polls === 1, 5000, 'poll registered');
    assert.equal((await setShared(d.id, '{"fw":"1.2","ratio":1.0}')).status, 200);
    const res = await poll;
    assert.equal(res.status, 200);
    assert.equal(await res.text(), '{"fw":"1.2","ratio":1.0}');

    const poll2 = t.api(`/api/v1/${d.token}/attributes/updates?timeout=5000`);
    await waitFor(() => counts().polls === 1, 5000, 'second poll registered');
    const del = await t.api(`/api/plugins/telemetry/DEVICE/${d.id}/SHARED_SCOPE?keys=fw,none`, {
      method: 'DELETE',
      token: admin,
    });
    assert.equal(del.status, 200);
    const res2 = await poll2;
    assert.equal(res2.status, 200);
    assert.deepEqual(await res2.json(), { deleted: ['fw'] });
    assert.deepEqual(counts(), { subscribers: 0, polls: 0 });
  });

  it('reaches every subscribed session of a device at once', async () => {
    const d = await freshDevice();
    const polls = [1, 2, 3].map(() => t.api(`/api/v1/${d.token}/attributes/updates?timeout=5000`));
    await waitFor(() => counts().polls === 3, 5000, 'three polls');
    await setShared(d.id, { x: 1 });
    for (const res of await Promise.all(polls)) {
      assert.equal(res.status, 200);
      assert.equal(await res.text(), '{"x":1}');
    }
  });

  it('long poll ends with 408 and an empty body when nothing came (client and server scope do not count)', async () => {
    const d = await freshDevice();
    const started = Date.now();
    const poll = t.api(`/api/v1/${d.token}/attributes/updates?timeout=400`);
    await waitFor(() => counts().polls === 1, 5000, 'poll registered');
    await t.api(`/api/v1/${d.token}/attributes`, { body: { mine: 1 } });
    await setShared(d.id, { srv: 1 }, 'SERVER_SCOPE');
    const res = await poll;
    assert.equal(res.status, 408);
    assert.equal(await res.text(), '');
    const took = Date.now() - started;
    assert.ok(took >= 380 && took < 3000, `took ${took} ms`);
    assert.deepEqual(counts(), { subscribers: 0, polls: 0 });
  });

  it('parses the timeout: default 60 s, capped at 300 s, 400 for garbage', async () => {
    assert.equal(pollTimeout(undefined), 60_000);
    assert.equal(pollTimeout('0'), 60_000);
    assert.equal(pollTimeout('250'), 250);
    assert.equal(pollTimeout('999999999'), 300_000);
    for (const bad of ['-1', '1.5', 'abc', '1e3']) {
      const res = await t.api(`/api/v1/${dev.token}/attributes/updates?timeout=${bad}`);
      assert.equal(res.status, 400, bad);
      assert.match(((await res.json()) as { message: string }).message, /timeout/);
    }
    // A huge timeout is accepted (cut to 300 s) and still delivers.
    const poll = t.api(`/api/v1/${dev.token}/attributes/updates?timeout=999999999`);
    await waitFor(() => counts().polls === 1, 5000, 'poll registered');
    await setShared(dev.id, { cap: true });
    assert.equal((await poll).status, 200);
    await t.api(`/api/plugins/telemetry/DEVICE/${dev.id}/SHARED_SCOPE?keys=cap`, {
      method: 'DELETE',
      token: admin,
    });
  });

  it('a client that goes away mid-poll leaves no subscription, timer or listener behind', async () => {
    const d = await freshDevice();
    const ac = new AbortController();
    const poll = fetch(`${t.baseUrl}/api/v1/${d.token}/attributes/updates?timeout=60000`, {
      signal: ac.signal,
    }).catch((err: Error) => err);
    await waitFor(() => counts().polls === 1 && counts().subscribers === 1, 5000, 'poll');
    ac.abort();
    assert.equal(((await poll) as Error).name, 'AbortError');
    await waitFor(
      () => counts().polls === 0 && counts().subscribers === 0,
      5000,
      'poll released after abort',
    );
  });

  it('ends a poll with 403 "Device was deleted!" when the device is deleted', async () => {
    const d = await freshDevice();
    const poll = t.api(`/api/v1/${d.token}/attributes/updates?timeout=10000`);
    await waitFor(() => counts().polls === 1, 5000, 'poll registered');
    const del = await t.api(`/api/device/${d.id}`, { method: 'DELETE', token: admin });
    assert.equal(del.status, 200);
    const res = await poll;
    assert.equal(res.status, 403);
    assert.equal(await res.text(), 'Device was deleted!');
  });
});

describe('gateway stop and attribute long polls', () => {
  it('releases a pending poll with 503 before the HTTP server closes', async () => {
    const t = await startGateway();
    try {
      const d = await createDevice(t, 'stop-dev');
      const poll = t.api(`/api/v1/${d.token}/attributes/updates?timeout=60000`);
      await waitFor(() => t.gw.services.attributes.counts.polls === 1, 5000, 'poll registered');
      const started = Date.now();
      await t.gw.stop();
      const res = await poll;
      assert.equal(res.status, 503);
      assert.equal(((await res.json()) as { status: number }).status, 503);
      // Released at once, not cut after the HTTP server's 2 s grace period.
      assert.ok(Date.now() - started < 1500, `stop took ${Date.now() - started} ms`);
    } finally {
      await t.close();
    }
  });
});
