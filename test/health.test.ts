import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { configWith } from '../src/config.js';
import { createGateway } from '../src/gateway.js';
import { createHttpApp } from '../src/transports/http/app.js';
import { startGateway } from './helpers/gateway.js';

describe('health', () => {
  it('is 200 with status, version and uptime once every listener is up', async () => {
    const t = await startGateway();
    try {
      const res = await t.api('/healthz');
      assert.equal(res.status, 200);
      const body = (await res.json()) as { status: string; version: string; uptimeMs: number };
      assert.equal(body.status, 'UP');
      assert.equal(typeof body.version, 'string');
      assert.equal(typeof body.uptimeMs, 'number');
      assert.ok(t.gw.ports.mqtt > 0 && t.gw.ports.coap > 0 && t.gw.ports.http > 0);

      // The same route answers 503 while the gateway is starting or stopping.
      const s = t.gw.services;
      const app = createHttpApp({
        log: t.gw.loggers.http,
        maxBodyBytes: 1024,
        health: () => ({ ready: false, status: 'STOPPING', version: '0', uptimeMs: 5 }),
        auth: s.auth,
        users: s.users,
        devices: s.devices,
        profiles: s.profiles,
      });
      const down = await app.request('/healthz');
      assert.equal(down.status, 503);
      assert.equal(((await down.json()) as { status: string }).status, 'STOPPING');
    } finally {
      await t.close();
    }
  });

  it('reports not ready before start and after stop; stop is safe to call twice', async () => {
    const gw = createGateway(configWith({ dataDir: '/nonexistent', logLevel: 'silent' }));
    assert.equal(gw.health().ready, false);
    assert.equal(gw.health().status, 'CREATED');
    const t = await startGateway();
    assert.equal(t.gw.health().ready, true);
    await Promise.all([t.gw.stop(), t.gw.stop()]);
    assert.equal(t.gw.state, 'stopped');
    assert.equal(t.gw.health().ready, false);
    await t.close();
  });
});
