import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Hono } from 'hono';
import pino from 'pino';
import type { HttpEnv } from '../src/transports/http/context.js';
import { deviceByToken } from '../src/transports/http/device-api/device-auth.js';
import { telemetryFastLane } from '../src/transports/http/device-api/telemetry.js';
import { HttpServer } from '../src/transports/http/http-server.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';

type Series = Record<string, Array<{ ts: number; value: unknown }>>;

describe('device telemetry upload over HTTP', () => {
  let t: TestGateway;
  let dev: { id: string; token: string };
  before(async () => {
    t = await startGateway();
    dev = await createDevice(t, 'http-telemetry');
  });
  after(() => t.close());

  const post = (body: string, token = dev.token) =>
    t.api(`/api/v1/${token}/telemetry`, { method: 'POST', body });
  const latest = async (keys?: string) => {
    const q = keys ? `?keys=${keys}` : '';
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${dev.id}/values/timeseries${q}`, {
      token: await t.adminToken(),
    });
    assert.equal(res.status, 200);
    return (await res.json()) as Series;
  };

  it('every payload form answers 200 with an empty body, and is stored when answered', async () => {
    const forms = [
      '{"f1":1}',
      '[{"f2":2},{"f3":3}]',
      '{"ts":1451649600512,"values":{"f4":4}}',
      '[{"ts":1451649600513,"values":{"f5":5}},{"f6":6}]',
    ];
    for (const body of forms) {
      const res = await post(body);
      assert.equal(res.status, 200, body);
      assert.equal(await res.text(), '');
    }
    const values = await latest();
    for (const k of ['f1', 'f2', 'f3', 'f4', 'f5', 'f6']) assert.ok(values[k], k);
    assert.equal(values.f4[0].ts, 1451649600512);
    assert.equal(values.f2[0].ts, values.f3[0].ts);
  });

  it('{} is accepted (SDK connection test)', async () => {
    const res = await post('{}');
    assert.equal(res.status, 200);
  });

  it('types values as ThingsBoard does', async () => {
    const res = await post(
      '{"ts":1000,"values":{"d":42.0,"e":1E2,"s":"0123","big":12345678901234567890,"j":{"a":[1]},"b":true}}',
    );
    assert.equal(res.status, 200);
    const strict = await t.api(
      `/api/plugins/telemetry/DEVICE/${dev.id}/values/timeseries?keys=d,e,s,big,j,b&useStrictDataTypes=true`,
      { token: await t.adminToken() },
    );
    assert.deepEqual(await strict.json(), {
      d: [{ ts: 1000, value: 42 }],
      e: [{ ts: 1000, value: 100 }],
      s: [{ ts: 1000, value: 123 }],
      big: [{ ts: 1000, value: '12345678901234567890' }],
      j: [{ ts: 1000, value: { a: [1] } }],
      b: [{ ts: 1000, value: true }],
    });
    const loose = await latest('d,e,b');
    assert.deepEqual(loose, {
      d: [{ ts: 1000, value: '42.0' }],
      e: [{ ts: 1000, value: '100' }],
      b: [{ ts: 1000, value: 'true' }],
    });
  });

  it('malformed JSON and bad payloads are 400 with a JSON message; nothing is stored', async () => {
    const cases: Array<[string, RegExp]> = [
      ['{"a":', /Invalid JSON/],
      ['5', /must be a JSON object or array/],
      ['{"ts":"x","values":{"bad1":1}}', /'ts' must be/],
      ['{"ts":1,"values":[1]}', /'values' must be a JSON object/],
      ['{"":1}', /key must not be empty/],
      [`{"${'k'.repeat(300)}":1}`, /longer than 255/],
      ['', /empty/],
    ];
    for (const [body, message] of cases) {
      const res = await post(body);
      assert.equal(res.status, 400, body);
      const err = (await res.json()) as { status: number; message: string; errorCode: number };
      assert.equal(err.status, 400);
      assert.match(err.message, message);
    }
    assert.ok(!('bad1' in (await latest())));
  });

  it('an unknown token is 401 with an empty body', async () => {
    const res = await post('{"a":1}', 'no-such-token');
    assert.equal(res.status, 401);
    assert.equal(await res.text(), '');
  });

  /** The same POST with a chunked body: the Hono route instead of the fast lane. */
  const postChunked = (body: string, token = dev.token) =>
    fetch(`${t.baseUrl}/api/v1/${token}/telemetry`, {
      method: 'POST',
      body: new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode(body));
          c.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
  const answer = async (res: Response) => {
    const text = await res.text();
    const json = text ? (JSON.parse(text) as Record<string, unknown>) : undefined;
    if (json) delete json.timestamp;
    return { status: res.status, type: res.headers.get('content-type'), json };
  };

  it('answers alike with a declared length (fast lane) and a chunked body (Hono route)', async () => {
    for (const body of ['{"lane1":1}', '{"a":', '[1]', '', '{"ts":"x","values":{"v":1}}']) {
      const declared = await answer(await post(body));
      const chunked = await answer(await postChunked(body));
      assert.deepEqual(declared, chunked, body);
    }
    const unknown = await answer(await postChunked('{"a":1}', 'no-such-token'));
    assert.deepEqual(unknown, await answer(await post('{"a":1}', 'no-such-token')));
    assert.equal(unknown.status, 401);
    const values = await latest('lane1');
    assert.equal(values.lane1[0].value, '1');
  });

  it('the fast lane serves declared bodies of known devices and leaves the rest to the app', async () => {
    const s = t.gw.services;
    const app = new Hono<HttpEnv>();
    app.all('*', (c) => c.text('app', 299 as 200));
    const log = pino({ level: 'silent' });
    const server = new HttpServer({
      app,
      host: '127.0.0.1',
      port: 0,
      log,
      lanes: [
        telemetryFastLane({
          device: deviceByToken(s),
          telemetry: s.telemetry,
          maxBodyBytes: 1024,
          log,
        }),
      ],
    });
    const port = await server.start();
    try {
      const url = (token: string) => `http://127.0.0.1:${port}/api/v1/${token}/telemetry`;
      const lane = await fetch(url(dev.token), { method: 'POST', body: '{"fast1":1}' });
      assert.equal(lane.status, 200);
      const bad = await fetch(url(dev.token), { method: 'POST', body: '{"a":' });
      assert.equal(bad.status, 400);
      assert.match(((await bad.json()) as { message: string }).message, /Invalid JSON/);
      for (const res of [
        await fetch(url('no-such-token'), { method: 'POST', body: '{"a":1}' }),
        await fetch(url(dev.token), { method: 'POST', body: 'x'.repeat(2000) }),
        await fetch(url(dev.token), { method: 'GET' }),
        await fetch(`${url(dev.token)}/more`, { method: 'POST', body: '{}' }),
      ]) {
        assert.equal(res.status, 299);
        assert.equal(await res.text(), 'app');
      }
      assert.equal((await latest('fast1')).fast1[0].value, '1');
    } finally {
      await server.stop();
    }
  });

  it('accepts a query string and a percent-encoded token', async () => {
    assert.equal(
      (await t.api(`/api/v1/${dev.token}/telemetry?x=1`, { body: '{"q1":1}' })).status,
      200,
    );
    const encoded = [...dev.token].map((ch) => `%${ch.charCodeAt(0).toString(16)}`).join('');
    assert.equal((await post('{"q2":2}', encoded)).status, 200);
    const values = await latest('q1,q2');
    assert.deepEqual(Object.keys(values).sort(), ['q1', 'q2']);
  });

  it('a body over the limit is 413 either way, and nothing is stored', async () => {
    const big = JSON.stringify({ big1: 'x'.repeat(70 * 1024) });
    for (const res of [await post(big), await postChunked(big)]) {
      assert.equal(res.status, 413);
      assert.match(((await res.json()) as { message: string }).message, /larger than/);
    }
    assert.ok(!('big1' in (await latest())));
  });

  it('a client that leaves mid-body stores nothing, and the next one is served', async () => {
    const { port } = new URL(t.baseUrl);
    const socket = connect(Number(port), '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.write(
      `POST /api/v1/${dev.token}/telemetry HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"half1":`,
    );
    await new Promise((r) => setTimeout(r, 50));
    socket.destroy();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal((await post('{"after1":1}')).status, 200);
    const values = await latest();
    assert.ok(!('half1' in values));
    assert.ok('after1' in values);
  });
});

describe('telemetry REST API', () => {
  let t: TestGateway;
  let dev: { id: string; token: string };
  let token: string;
  const base = () => `/api/plugins/telemetry/DEVICE/${dev.id}`;
  const get = async (path: string) => {
    const res = await t.api(`${base()}${path}`, { token });
    return { status: res.status, body: (await res.json()) as unknown };
  };
  before(async () => {
    t = await startGateway();
    dev = await createDevice(t, 'rest-telemetry');
    token = await t.adminToken();
    // One point per second for 10 minutes, and a string key.
    const payload = Array.from({ length: 600 }, (_, i) => ({
      ts: 1_700_000_000_000 + i * 1000,
      values: { temp: i % 60, ...(i % 120 === 0 ? { state: `s${i}` } : {}) },
    }));
    const res = await t.api(`/api/v1/${dev.token}/telemetry`, { body: payload });
    assert.equal(res.status, 200);
  });
  after(() => t.close());

  it('requires a user token', async () => {
    const res = await t.api(`${base()}/keys/timeseries`);
    assert.equal(res.status, 401);
  });

  it('lists keys', async () => {
    const { status, body } = await get('/keys/timeseries');
    assert.equal(status, 200);
    assert.deepEqual(body, ['state', 'temp']);
  });

  it('returns latest values without a time range', async () => {
    const { body } = await get('/values/timeseries?keys=temp');
    assert.deepEqual(body, { temp: [{ ts: 1_700_000_599_000, value: '59' }] });
  });

  it('returns raw history with limit and order', async () => {
    const { body } = await get(
      '/values/timeseries?keys=temp,state&startTs=1700000000000&endTs=1700000600000&limit=3&orderBy=ASC&useStrictDataTypes=true',
    );
    assert.deepEqual(body, {
      temp: [
        { ts: 1_700_000_000_000, value: 0 },
        { ts: 1_700_000_001_000, value: 1 },
        { ts: 1_700_000_002_000, value: 2 },
      ],
      state: [
        { ts: 1_700_000_000_000, value: 's0' },
        { ts: 1_700_000_120_000, value: 's120' },
        { ts: 1_700_000_240_000, value: 's240' },
      ],
    });
    const dflt = (await get(
      '/values/timeseries?keys=temp&startTs=1700000000000&endTs=1700000600000',
    )) as { body: Series };
    assert.equal(dflt.body.temp.length, 100);
    assert.equal(dflt.body.temp[0].ts, 1_700_000_599_000);
  });

  it('aggregates over 1-minute buckets', async () => {
    const { body } = (await get(
      '/values/timeseries?keys=temp&startTs=1700000000000&endTs=1700000600000&agg=AVG&interval=60000&orderBy=ASC',
    )) as { body: Series };
    assert.equal(body.temp.length, 10);
    assert.deepEqual(body.temp[0], { ts: 1_700_000_030_000, value: '29.5' });
    const count = (await get(
      '/values/timeseries?keys=temp&startTs=1700000000000&endTs=1700000600000&agg=COUNT&interval=600000',
    )) as { body: Series };
    assert.deepEqual(count.body.temp, [{ ts: 1_700_000_300_000, value: '600' }]);
  });

  it('bad parameters are 400 with a message', async () => {
    for (const [q, re] of [
      ['?keys=temp&startTs=1', /endTs is required/],
      ['?keys=temp&startTs=0&endTs=10&agg=AVG', /interval must be at least 1/],
      ['?keys=temp&startTs=0&endTs=10&agg=FOO&interval=1', /agg must be one of/],
      ['?keys=temp&startTs=0&endTs=10&limit=-1', /limit must be/],
    ] as const) {
      const { status, body } = await get(`/values/timeseries${q}`);
      assert.equal(status, 400, q);
      assert.match((body as { message: string }).message, re);
    }
    const badId = await t.api('/api/plugins/telemetry/DEVICE/not-a-uuid/keys/timeseries', {
      token,
    });
    assert.equal(badId.status, 400);
    const unknown = await t.api(
      '/api/plugins/telemetry/DEVICE/6a2f4e1c-0000-4000-8000-000000000000/keys/timeseries',
      { token },
    );
    assert.equal(unknown.status, 404);
  });

  it('server-side writes with POST .../timeseries/ANY', async () => {
    const res = await t.api(`${base()}/timeseries/ANY`, {
      token,
      body: { ts: 1_600_000_000_000, values: { server: 7 } },
    });
    assert.equal(res.status, 200);
    const { body } = await get('/values/timeseries?keys=server&useStrictDataTypes=true');
    assert.deepEqual(body, { server: [{ ts: 1_600_000_000_000, value: 7 }] });
    const empty = await t.api(`${base()}/timeseries/ANY`, { token, body: {} });
    assert.equal(empty.status, 400);
    const withTtl = await t.api(`${base()}/timeseries/SERVER_SCOPE/3600`, {
      token,
      body: { server: 8 },
    });
    assert.equal(withTtl.status, 200);
  });

  it('deletes a range and all data of a key', async () => {
    const del = await t.api(
      `${base()}/timeseries/delete?keys=temp&startTs=1700000000000&endTs=1700000300000`,
      { method: 'DELETE', token },
    );
    assert.equal(del.status, 200);
    const { body } = (await get(
      '/values/timeseries?keys=temp&startTs=1700000000000&endTs=1700000600000&agg=COUNT&interval=600000',
    )) as { body: Series };
    assert.deepEqual(body.temp, [{ ts: 1_700_000_300_000, value: '300' }]);
    const all = await t.api(`${base()}/timeseries/delete?keys=state&deleteAllDataForKeys=true`, {
      method: 'DELETE',
      token,
    });
    assert.equal(all.status, 200);
    const keys = await get('/keys/timeseries');
    assert.deepEqual(keys.body, ['server', 'temp']);
    const bad = await t.api(`${base()}/timeseries/delete?keys=temp`, { method: 'DELETE', token });
    assert.equal(bad.status, 400);
  });

  it('keeps data across a gateway restart', async () => {
    const dataDir = t.dataDir;
    await t.gw.stop();
    const t2 = await startGateway({ dataDir });
    try {
      const res = await t2.api(
        `/api/plugins/telemetry/DEVICE/${dev.id}/values/timeseries?keys=temp&startTs=1700000000000&endTs=1700000600000&agg=COUNT&interval=600000`,
        { token: await t2.adminToken() },
      );
      assert.deepEqual(((await res.json()) as Series).temp, [
        { ts: 1_700_000_300_000, value: '300' },
      ]);
    } finally {
      await t2.close(false);
    }
  });
});
