import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, mock } from 'node:test';
import { MIGRATIONS } from '../db/migrations/index.js';
import { migrate } from '../db/migrator.js';
import { type Db, openDb } from '../db/open.js';
import { DeviceProfileService } from '../devices/device-profile-service.js';
import { DeviceService } from '../devices/device-service.js';
import { NotFoundError, UnavailableError, ValidationError } from '../errors.js';
import { EventBus, type GatewayEvents } from '../events.js';
import { createLoggers, type Loggers } from '../logger.js';
import { TenantService } from '../tenant/tenant-service.js';
import { ClientRpcService } from './client-rpc.js';
import { RpcService, type ToDeviceRpc } from './rpc-service.js';

describe('RpcService', () => {
  let dir: string;
  let db: Db;
  let bus: EventBus;
  let loggers: Loggers;
  let devices: DeviceService;
  let tenants: TenantService;
  let rpc: RpcService;
  let n = 0;
  const newDevice = () => devices.save({ name: `rpc-svc-${n++}` }).id.id;
  const soon = (ms: number) => Date.now() + ms;
  const newService = () => {
    const s = new RpcService({ db, devices, tenants, bus, log: loggers.rpc });
    s.start();
    return s;
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-gw-rpc-'));
    db = openDb({ dataDir: dir, durability: 'normal' });
    loggers = createLoggers('silent');
    migrate(db, MIGRATIONS, loggers.db);
    bus = new EventBus(loggers.gateway);
    tenants = new TenantService({ db });
    tenants.init();
    const profiles = new DeviceProfileService({ db, tenants });
    profiles.init();
    devices = new DeviceService({ db, tenants, profiles, bus });
    rpc = newService();
  });
  after(async () => {
    rpc.stop();
    db.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('pushes all pending requests in id order to a new subscriber (BURST), then new ones', async () => {
    const id = newDevice();
    const a = rpc.call(id, { method: 'a', params: 1, expirationTime: soon(5000) }, true);
    const b = rpc.call(id, { method: 'b', params: 2, expirationTime: soon(5000) }, true);
    const got: ToDeviceRpc[] = [];
    const sub = rpc.subscribe(id, (req) => {
      got.push(req);
      rpc.delivered(id, req.id);
    });
    const c = rpc.call(id, { method: 'c', params: null, expirationTime: soon(5000) }, true);
    assert.deepEqual(got, [
      { id: 0, method: 'a', params: 1 },
      { id: 1, method: 'b', params: 2 },
      { id: 2, method: 'c', params: null },
    ]);
    for (const r of await Promise.all([a, b, c])) assert.deepEqual(r, { kind: 'delivered' });
    sub.unsubscribe();
    assert.deepEqual(rpc.counts, { subscribers: 0, polls: 0, pending: 0 });
  });

  it('a once-subscriber takes only the first pending request', async () => {
    const id = newDevice();
    const calls = [0, 1, 2].map((i) =>
      rpc.call(id, { method: `m${i}`, params: {}, expirationTime: soon(5000) }, false),
    );
    const first = await rpc.poll(id, { timeoutMs: 1000 });
    assert.equal(first.kind === 'value' && first.value.method, 'm0');
    assert.equal(rpc.counts.pending, 3);
    const second = await rpc.poll(id, { timeoutMs: 1000 });
    assert.equal(second.kind === 'value' && second.value.method, 'm1');
    for (const [i, req] of [first, second].entries()) {
      if (req.kind === 'value') assert.equal(rpc.reply(id, req.value.id, `"r${i}"`), true);
    }
    assert.equal(rpc.reply(id, 99, '{}'), false);
    assert.deepEqual(await calls[0], { kind: 'reply', body: '"r0"' });
    assert.deepEqual(await calls[1], { kind: 'reply', body: '"r1"' });
    // The third was never sent: expired when its time is up.
    const third = rpc.call(id, { method: 'late', params: {}, expirationTime: soon(50) }, false);
    assert.deepEqual(await third, { kind: 'expired' });
  });

  it('persistent RPC: statuses, events, FAILED, and restore after a restart', async () => {
    const id = newDevice();
    const statuses: GatewayEvents['rpc.status'][] = [];
    bus.on('test', 'rpc.status', (e) => statuses.push(e));
    const res = await rpc.call(
      id,
      { method: 'p', params: { x: 1 }, persistent: true, expirationTime: soon(10_000), retries: 2 },
      false,
    );
    assert.equal(res.kind, 'persisted');
    const rpcId = res.kind === 'persisted' ? res.rpcId : '';
    assert.equal(rpc.get(rpcId).status, 'QUEUED');
    assert.equal(rpc.get(rpcId).request.retries, 2);

    // Restart: a new service instance restores the queued request with the same id.
    rpc.stop();
    rpc = newService();
    const got: ToDeviceRpc[] = [];
    const sub = rpc.subscribe(id, (req) => got.push(req));
    assert.equal(got.length, 1);
    assert.equal(rpc.get(rpcId).status, 'SENT');
    rpc.failed(id, got[0].id, 'gave up');
    sub.unsubscribe();
    const failed = rpc.get(rpcId);
    assert.equal(failed.status, 'FAILED');
    assert.deepEqual(failed.response, { error: 'gave up' });
    bus.removeOwner('test');
    assert.deepEqual(
      statuses.filter((s) => s.rpcId === rpcId).map((s) => s.status),
      ['QUEUED', 'SENT', 'FAILED'],
    );
  });

  it('expired persistent rows become EXPIRED or TIMEOUT at start', async () => {
    const id = newDevice();
    const q = await rpc.call(
      id,
      { method: 'q', params: {}, persistent: true, expirationTime: soon(150) },
      true,
    );
    const s = await rpc.call(
      id,
      { method: 's', params: {}, persistent: true, expirationTime: soon(150) },
      false,
    );
    const sub = rpc.subscribe(id, () => {});
    sub.unsubscribe();
    rpc.stop();
    await new Promise((r) => setTimeout(r, 200));
    rpc = newService();
    const status = (r: typeof q) => (r.kind === 'persisted' ? rpc.get(r.rpcId).status : '');
    // q was SENT too (the subscriber took both), so both were sent but unanswered.
    assert.equal(status(q), 'TIMEOUT');
    assert.equal(status(s), 'TIMEOUT');
    assert.equal(rpc.counts.pending, 0);
  });

  it('expires an RPC whose expiry is beyond the 24.8-day timer limit only when due', async () => {
    const id = newDevice();
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: Date.now() });
    try {
      const thirtyDays = 30 * 24 * 3600 * 1000;
      const res = await rpc.call(
        id,
        { method: 'far', params: {}, persistent: true, expirationTime: Date.now() + thirtyDays },
        true,
      );
      const rpcId = res.kind === 'persisted' ? res.rpcId : '';
      mock.timers.tick(2 ** 31);
      assert.equal(rpc.get(rpcId).status, 'QUEUED');
      assert.equal(rpc.counts.pending, 1);
      mock.timers.tick(thirtyDays - 2 ** 31);
      assert.equal(rpc.get(rpcId).status, 'EXPIRED');
      assert.equal(rpc.counts.pending, 0);
    } finally {
      mock.timers.reset();
    }
  });

  it('validates requests and refuses calls while stopping', async () => {
    const id = newDevice();
    assert.throws(() => rpc.call(id, { params: {} }, false), ValidationError);
    assert.throws(() => rpc.call(id, { method: 'x' }, false), ValidationError);
    assert.throws(
      () => rpc.call(id, { method: 'x', params: {}, timeout: -1 }, false),
      ValidationError,
    );
    assert.throws(
      () => rpc.call('2c8f0a1e-0000-4000-8000-000000000000', { method: 'x', params: {} }, false),
      NotFoundError,
    );
    assert.throws(() => rpc.get('2c8f0a1e-0000-4000-8000-000000000000'), NotFoundError);
    const waiting = rpc.call(id, { method: 'w', params: {}, timeout: 60_000 }, false);
    const poll = rpc.poll(newDevice(), { timeoutMs: 60_000 });
    rpc.releasePolls();
    assert.deepEqual(await waiting, { kind: 'closed', reason: 'stopping' });
    assert.deepEqual(await poll, { kind: 'closed', reason: 'stopping' });
    assert.throws(() => rpc.call(id, { method: 'x', params: {} }, false), UnavailableError);
    rpc.stop();
    rpc = newService();
  });
});

describe('ClientRpcService', () => {
  const log = createLoggers('silent').rpc;
  const device = { rid: 1, id: 'd', name: 'dev', profileId: 'p', isGateway: false };

  it('answers getCurrentTime, times out otherwise, and lets a router replace the built-in', async () => {
    const svc = new ClientRpcService({ log, timeoutMs: 50 });
    const now = await svc.call(device, { method: 'getCurrentTime', params: {} });
    assert.equal(now.kind, 'value');
    assert.ok(now.kind === 'value' && Math.abs(Number(now.value) - Date.now()) < 1000);
    assert.equal((await svc.call(device, { method: 'other', params: null })).kind, 'timeout');
    svc.setRouter((req, reply) => setTimeout(() => reply(JSON.stringify({ echo: req.params })), 5));
    assert.deepEqual(await svc.call(device, { method: 'any', params: [1] }), {
      kind: 'value',
      value: '{"echo":[1]}',
    });
    svc.setRouter(() => {
      throw new Error('broken rule chain');
    });
    assert.equal((await svc.call(device, { method: 'x', params: 1 })).kind, 'timeout');
    assert.throws(() => svc.call(device, { params: 1 }), ValidationError);
    assert.equal(svc.pending, 0);
  });
});
