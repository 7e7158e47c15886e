import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';

const NO_SUCH_DEVICE = '2c8f0a1e-0000-4000-8000-000000000000';

interface Persistent {
  status: string;
  response: unknown;
  request: { requestId: number; oneway: boolean; body: { method: string; params: string } };
}

describe('RPC over HTTP', () => {
  let t: TestGateway;
  let admin: string;
  let n = 0;
  const freshDevice = () => createDevice(t, `rpc-dev-${n++}`);
  const counts = () => t.gw.services.rpc.counts;
  const call = (kind: 'oneway' | 'twoway', deviceId: string, body: unknown) =>
    t.api(`/api/rpc/${kind}/${deviceId}`, { body, token: admin });
  const soon = (ms: number) => Date.now() + ms;
  const persistent = async (rpcId: string) => {
    const res = await t.api(`/api/rpc/persistent/${rpcId}`, { token: admin });
    assert.equal(res.status, 200);
    return (await res.json()) as Persistent;
  };

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  it('two-way: the long-polling device gets {id,method,params}, its reply goes back to the caller', async () => {
    const d = await freshDevice();
    const poll = t.api(`/api/v1/${d.token}/rpc?timeout=5000`);
    await waitFor(() => counts().polls === 1, 5000, 'rpc poll');
    const rest = call('twoway', d.id, { method: 'setGpio', params: { pin: 23, value: 1 } });
    const req = await poll;
    assert.equal(req.status, 200);
    assert.deepEqual(await req.json(), { id: 0, method: 'setGpio', params: { pin: 23, value: 1 } });
    const reply = await t.api(`/api/v1/${d.token}/rpc/0`, { body: '{"pin":23,"value":1}' });
    assert.equal(reply.status, 200);
    assert.equal(await reply.text(), '');
    const res = await rest;
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { pin: 23, value: 1 });
    assert.deepEqual(counts(), { subscribers: 0, polls: 0, pending: 0 });
  });

  it('a request issued before the poll is delivered on the next poll, ids grow per device', async () => {
    const d = await freshDevice();
    const other = await freshDevice();
    const first = call('twoway', d.id, { method: 'a', params: 'text', expirationTime: soon(5000) });
    const second = call('twoway', d.id, { method: 'b', params: [1], expirationTime: soon(5000) });
    await waitFor(() => counts().pending === 2, 5000, 'two pending');
    // An HTTP poll gets only the first pending request (§3.2).
    const p1 = await t.api(`/api/v1/${d.token}/rpc?timeout=2000`);
    assert.deepEqual(await p1.json(), { id: 0, method: 'a', params: 'text' });
    const p2 = await t.api(`/api/v1/${d.token}/rpc?timeout=2000`);
    assert.deepEqual(await p2.json(), { id: 1, method: 'b', params: [1] });
    await t.api(`/api/v1/${d.token}/rpc/1`, { body: '"second"' });
    await t.api(`/api/v1/${d.token}/rpc/0`, { body: '{"first":true}' });
    assert.deepEqual(await (await first).json(), { first: true });
    assert.equal(await (await second).json(), 'second');
    // Another device has its own counter.
    const p3 = t.api(`/api/v1/${other.token}/rpc?timeout=5000`);
    await waitFor(() => counts().polls === 1, 5000, 'poll of other device');
    const oneway = call('oneway', other.id, { method: 'ping', params: {} });
    assert.equal(((await (await p3).json()) as { id: number }).id, 0);
    assert.equal((await oneway).status, 200);
  });

  it('one-way answers 200 once delivered; undelivered calls end with 504', async () => {
    const d = await freshDevice();
    const poll = t.api(`/api/v1/${d.token}/rpc?timeout=5000`);
    await waitFor(() => counts().polls === 1, 5000, 'rpc poll');
    const res = await call('oneway', d.id, { method: 'reboot', params: {} });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), '');
    assert.equal((await poll).status, 200);

    // No session subscribes before expiry: 504 with an empty body (v2 API).
    const never = await call('oneway', d.id, {
      method: 'x',
      params: {},
      expirationTime: soon(300),
    });
    assert.equal(never.status, 504);
    assert.equal(await never.text(), '');
    assert.equal(counts().pending, 0);
  });

  it('two-way: sent but unanswered -> 504, reply that is not JSON -> 406, stale reply -> 200', async () => {
    const d = await freshDevice();
    const rest = call('twoway', d.id, { method: 'slow', params: {}, expirationTime: soon(600) });
    const poll = await t.api(`/api/v1/${d.token}/rpc?timeout=2000`);
    const { id } = (await poll.json()) as { id: number };
    const res = await rest;
    assert.equal(res.status, 504);
    // The late reply is accepted and dropped.
    const late = await t.api(`/api/v1/${d.token}/rpc/${id}`, { body: '{"late":1}' });
    assert.equal(late.status, 200);

    const rest2 = call('twoway', d.id, { method: 'm', params: {}, expirationTime: soon(5000) });
    const poll2 = await t.api(`/api/v1/${d.token}/rpc?timeout=2000`);
    const { id: id2 } = (await poll2.json()) as { id: number };
    await t.api(`/api/v1/${d.token}/rpc/${id2}`, { body: 'not json' });
    const res2 = await rest2;
    assert.equal(res2.status, 406);
    assert.match(((await res2.json()) as { message: string }).message, /not valid JSON/);
    assert.deepEqual(counts(), { subscribers: 0, polls: 0, pending: 0 });
  });

  it('RPC long poll ends with 408 and an empty body when nothing came', async () => {
    const d = await freshDevice();
    const started = Date.now();
    const res = await t.api(`/api/v1/${d.token}/rpc?timeout=300`);
    assert.equal(res.status, 408);
    assert.equal(await res.text(), '');
    assert.ok(Date.now() - started >= 280);
    assert.deepEqual(counts(), { subscribers: 0, polls: 0, pending: 0 });
  });

  it('device reply endpoint: unknown id 200, non-integer id 400, empty body 400, 413 over the limit', async () => {
    const d = await freshDevice();
    const unknown = await t.api(`/api/v1/${d.token}/rpc/4711`, { body: '{}' });
    assert.equal(unknown.status, 200);
    const bad = await t.api(`/api/v1/${d.token}/rpc/abc`, { body: '{}' });
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as { message: string }).message, /integer/);
    const empty = await t.api(`/api/v1/${d.token}/rpc/1`, { method: 'POST' });
    assert.equal(empty.status, 400);
    const big = await t.api(`/api/v1/${d.token}/rpc/1`, { body: 'x'.repeat(65537) });
    assert.equal(big.status, 413);
    const badTimeout = await t.api(`/api/v1/${d.token}/rpc?timeout=soon`);
    assert.equal(badTimeout.status, 400);
    for (const [method, path] of [
      ['GET', '/api/v1/nope/rpc?timeout=100'],
      ['POST', '/api/v1/nope/rpc/0'],
      ['POST', '/api/v1/nope/rpc'],
    ]) {
      const res = await t.api(path, { method, body: method === 'POST' ? '{}' : undefined });
      assert.equal(res.status, 401, path);
      assert.equal(await res.text(), '', path);
    }
  });

  it('client-side RPC: getCurrentTime is answered, unknown methods time out with 408', async () => {
    const d = await freshDevice();
    const before = Date.now();
    const res = await t.api(`/api/v1/${d.token}/rpc`, {
      body: { method: 'getCurrentTime', params: {} },
    });
    assert.equal(res.status, 200);
    const now = (await res.json()) as number;
    assert.equal(typeof now, 'number');
    assert.ok(now >= before && now <= Date.now());

    const started = Date.now();
    const unknown = await t.api(`/api/v1/${d.token}/rpc?timeout=300`, {
      body: { method: 'whoKnows', params: null },
    });
    assert.equal(unknown.status, 408);
    assert.equal(await unknown.text(), '');
    assert.ok(Date.now() - started >= 280);
    assert.equal(t.gw.services.clientRpc.pending, 0);
  });

  it('client-side RPC: bad bodies are 400, oversized 413', async () => {
    const d = await freshDevice();
    for (const body of ['{"method":', '{"method":"getCurrentTime"}', '{"params":{}}', '[1]', '']) {
      const res = await t.api(`/api/v1/${d.token}/rpc`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(res.status, 400, body);
      assert.equal(((await res.json()) as { status: number }).status, 400);
    }
    const big = await t.api(`/api/v1/${d.token}/rpc`, {
      body: { method: 'getCurrentTime', params: { x: 'y'.repeat(70_000) } },
    });
    assert.equal(big.status, 413);
  });

  it('REST RPC: every error status, nothing queued', async () => {
    const d = await freshDevice();
    const cases: Array<[string, unknown, number, string?]> = [
      [`/api/rpc/twoway/${d.id}`, { params: {} }, 400, 'method'],
      [`/api/rpc/twoway/${d.id}`, { method: 'x' }, 400, 'params'],
      [`/api/rpc/twoway/${d.id}`, { method: 'x', params: {}, timeout: 'soon' }, 400, 'timeout'],
      [`/api/rpc/twoway/${d.id}`, '{"method":', 400, 'Invalid JSON'],
      ['/api/rpc/twoway/not-a-uuid', { method: 'x', params: {} }, 400, 'deviceId'],
      [`/api/rpc/twoway/${NO_SUCH_DEVICE}`, { method: 'x', params: {} }, 404],
      [`/api/rpc/oneway/${NO_SUCH_DEVICE}`, { method: 'x', params: {}, persistent: true }, 404],
      [`/api/rpc/sideways/${d.id}`, { method: 'x', params: {} }, 404],
      [
        `/api/rpc/twoway/${d.id}`,
        { method: 'x', params: { big: 'z'.repeat(70_000) }, persistent: true },
        413,
      ],
    ];
    for (const [path, body, status, message] of cases) {
      const res = await t.api(path, { body, token: admin });
      assert.equal(res.status, status, `${path} ${JSON.stringify(body).slice(0, 60)}`);
      const err = (await res.json()) as { status: number; message: string };
      assert.equal(err.status, status);
      if (message) assert.match(err.message, new RegExp(message));
    }
    const anon = await t.api(`/api/rpc/twoway/${d.id}`, { body: { method: 'x', params: {} } });
    assert.equal(anon.status, 401);
    const missing = await t.api(`/api/rpc/persistent/${NO_SUCH_DEVICE}`, { token: admin });
    assert.equal(missing.status, 404);
    assert.equal(counts().pending, 0);
    const probe = await t.api(`/api/v1/${d.token}/rpc?timeout=200`);
    assert.equal(probe.status, 408, 'nothing was queued');
  });

  it('persistent RPC: QUEUED -> DELIVERED -> SUCCESSFUL, and EXPIRED when never sent', async () => {
    const d = await freshDevice();
    const res = await call('twoway', d.id, {
      method: 'setMode',
      params: { mode: 'eco' },
      persistent: true,
      expirationTime: soon(10_000),
      additionalInfo: { by: 'test' },
    });
    assert.equal(res.status, 200);
    const { rpcId } = (await res.json()) as { rpcId: string };
    assert.match(rpcId, /^[0-9a-f-]{36}$/);
    assert.equal((await persistent(rpcId)).status, 'QUEUED');
    const poll = await t.api(`/api/v1/${d.token}/rpc?timeout=2000`);
    const req = (await poll.json()) as { id: number };
    assert.deepEqual(req, { id: 0, method: 'setMode', params: { mode: 'eco' } });
    assert.equal((await persistent(rpcId)).status, 'DELIVERED');
    await t.api(`/api/v1/${d.token}/rpc/0`, { body: '{"mode":"eco"}' });
    const done = await persistent(rpcId);
    assert.equal(done.status, 'SUCCESSFUL');
    assert.deepEqual(done.response, { mode: 'eco' });
    assert.equal(done.request.body.params, '{"mode":"eco"}');

    const exp = await call('oneway', d.id, {
      method: 'never',
      params: {},
      persistent: true,
      expirationTime: soon(200),
    });
    const { rpcId: expId } = (await exp.json()) as { rpcId: string };
    await waitFor(async () => (await persistent(expId)).status === 'EXPIRED', 5000, 'EXPIRED');

    const list = await t.api(
      `/api/rpc/persistent/device/${d.id}?pageSize=10&page=0&sortProperty=createdTime&sortOrder=ASC`,
      { token: admin },
    );
    assert.equal(list.status, 200);
    const page = (await list.json()) as { data: Persistent[]; totalElements: number };
    assert.equal(page.totalElements, 2);
    assert.deepEqual(
      page.data.map((r) => r.status),
      ['SUCCESSFUL', 'EXPIRED'],
    );
    const only = await t.api(
      `/api/rpc/persistent/device/${d.id}?pageSize=10&page=0&rpcStatus=EXPIRED`,
      { token: admin },
    );
    assert.equal(((await only.json()) as { totalElements: number }).totalElements, 1);
    const badStatus = await t.api(
      `/api/rpc/persistent/device/${d.id}?pageSize=10&page=0&rpcStatus=NOPE`,
      { token: admin },
    );
    assert.equal(badStatus.status, 400);
    const noPaging = await t.api(`/api/rpc/persistent/device/${d.id}`, { token: admin });
    assert.equal(noPaging.status, 400);

    const del = await t.api(`/api/rpc/persistent/${expId}`, { method: 'DELETE', token: admin });
    assert.equal(del.status, 200);
    const gone = await t.api(`/api/rpc/persistent/${expId}`, { token: admin });
    assert.equal(gone.status, 404);
  });

  it('a client that goes away mid-poll leaves no subscription, timer or listener behind', async () => {
    const d = await freshDevice();
    const ac = new AbortController();
    const poll = fetch(`${t.baseUrl}/api/v1/${d.token}/rpc?timeout=60000`, {
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
    // A request issued afterwards waits for the next session instead of vanishing.
    const rest = call('oneway', d.id, { method: 'after', params: {}, expirationTime: soon(5000) });
    const next = await t.api(`/api/v1/${d.token}/rpc?timeout=2000`);
    assert.equal(((await next.json()) as { method: string }).method, 'after');
    assert.equal((await rest).status, 200);

    // Client-side RPC aborted mid-wait.
    const ac2 = new AbortController();
    const pending = fetch(`${t.baseUrl}/api/v1/${d.token}/rpc`, {
      method: 'POST',
      body: '{"method":"nobodyAnswers","params":{}}',
      signal: ac2.signal,
    }).catch((err: Error) => err);
    await waitFor(() => t.gw.services.clientRpc.pending === 1, 5000, 'client rpc waiting');
    ac2.abort();
    await pending;
    await waitFor(() => t.gw.services.clientRpc.pending === 0, 5000, 'client rpc released');
  });
});

describe('RPC across a gateway stop and restart', () => {
  it('stop releases a pending RPC poll and a waiting two-way call with 503', async () => {
    const t = await startGateway();
    try {
      const d = await createDevice(t, 'stop-rpc');
      const other = await createDevice(t, 'stop-rpc-2');
      const admin = await t.adminToken();
      const poll = t.api(`/api/v1/${d.token}/rpc?timeout=60000`);
      const rest = t.api(`/api/rpc/twoway/${other.id}`, {
        body: { method: 'x', params: {}, timeout: 60_000 },
        token: admin,
      });
      const clientRpc = t.api(`/api/v1/${d.token}/rpc`, { body: { method: 'y', params: {} } });
      await waitFor(
        () =>
          t.gw.services.rpc.counts.polls === 1 &&
          t.gw.services.rpc.counts.pending === 1 &&
          t.gw.services.clientRpc.pending === 1,
        5000,
        'poll and calls waiting',
      );
      const started = Date.now();
      await t.gw.stop();
      for (const res of await Promise.all([poll, rest, clientRpc])) assert.equal(res.status, 503);
      assert.ok(Date.now() - started < 1500, `stop took ${Date.now() - started} ms`);
    } finally {
      await t.close();
    }
  });

  it('a persistent RPC survives a restart, keeps its id and is delivered on the next poll', async () => {
    const first = await startGateway();
    const dataDir = first.dataDir;
    try {
      const d = await createDevice(first, 'restart-rpc');
      const admin = await first.adminToken();
      // Request id 0 is used and answered before the restart.
      const p0 = first.api(`/api/v1/${d.token}/rpc?timeout=5000`);
      await waitFor(() => first.gw.services.rpc.counts.polls === 1, 5000, 'poll');
      const r0 = await first.api(`/api/rpc/oneway/${d.id}`, {
        body: { method: 'warmup', params: {} },
        token: admin,
      });
      assert.equal(r0.status, 200);
      assert.equal(((await (await p0).json()) as { id: number }).id, 0);
      const res = await first.api(`/api/rpc/twoway/${d.id}`, {
        body: { method: 'survive', params: { n: 1 }, persistent: true, timeout: 60_000 },
        token: admin,
      });
      const { rpcId } = (await res.json()) as { rpcId: string };
      await first.close(false);

      const second = await startGateway({ dataDir });
      try {
        const admin2 = await second.adminToken();
        const get = async () =>
          (await (
            await second.api(`/api/rpc/persistent/${rpcId}`, { token: admin2 })
          ).json()) as Persistent;
        assert.equal((await get()).status, 'QUEUED');
        const poll = await second.api(`/api/v1/${d.token}/rpc?timeout=2000`);
        assert.equal(poll.status, 200);
        const req = (await poll.json()) as { id: number; method: string; params: unknown };
        assert.deepEqual(req, { id: 1, method: 'survive', params: { n: 1 } });
        assert.equal((await get()).status, 'DELIVERED');
        await second.api(`/api/v1/${d.token}/rpc/${req.id}`, { body: '{"survived":true}' });
        const done = await get();
        assert.equal(done.status, 'SUCCESSFUL');
        assert.deepEqual(done.response, { survived: true });
        // New ids continue after the stored ones, so an old reply cannot hit a new request.
        const p2 = second.api(`/api/v1/${d.token}/rpc?timeout=5000`);
        await waitFor(() => second.gw.services.rpc.counts.polls === 1, 5000, 'poll');
        await second.api(`/api/rpc/oneway/${d.id}`, {
          body: { method: 'next', params: {} },
          token: admin2,
        });
        assert.equal(((await (await p2).json()) as { id: number }).id, 2);
      } finally {
        await second.close(false);
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
