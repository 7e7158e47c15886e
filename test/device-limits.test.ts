import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DEVICE_LIMITS, nonNegativeInt } from '../src/common/limits.js';
import { coapRequest } from './helpers/coap.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { mqttConnect, nextMessage } from './helpers/mqtt.js';

const MAX = String(DEVICE_LIMITS.maxInt); // 2147483647, a Java int as ThingsBoard parses it
const OVER = String(DEVICE_LIMITS.maxInt + 1);

describe('one limits table: the same numbers are accepted over HTTP, MQTT and CoAP', () => {
  let t: TestGateway;
  let dev: { id: string; token: string };
  before(async () => {
    t = await startGateway();
    dev = await createDevice(t, 'limits-device');
  });
  after(() => t.close());

  it('nonNegativeInt takes digits up to the bound and names the problem otherwise', () => {
    assert.equal(nonNegativeInt('0', 'x'), 0);
    assert.equal(nonNegativeInt(MAX, 'x'), DEVICE_LIMITS.maxInt);
    for (const bad of [OVER, '-1', '1.5', '1e3', '', ' 1', '0x10', '99999999999999999999']) {
      assert.throws(() => nonNegativeInt(bad, 'chunk'), /chunk must be an integer from 0 to/, bad);
    }
  });

  it('firmware `chunk`: a Java int on every transport', async () => {
    const http = (chunk: string) =>
      t.api(`/api/v1/${dev.token}/firmware?title=fw&version=1&chunk=${chunk}`);
    // Valid: nothing is assigned, so 404; over the bound: 400 naming the parameter.
    assert.equal((await http(MAX)).status, 404);
    const over = await http(OVER);
    assert.equal(over.status, 400);
    assert.match(((await over.json()) as { message: string }).message, /chunk/);
    // Fifteen digits were accepted over HTTP before the table; not any more.
    assert.equal((await http('123456789012345')).status, 400);

    const coap = (chunk: string) =>
      coapRequest({ port: t.gw.ports.coap, pathname: `/fw/${dev.token}`, query: `chunk=${chunk}` });
    assert.equal((await coap(MAX)).code, '4.04');
    assert.equal((await coap(OVER)).code, '4.00');

    // MQTT 5: a valid chunk number reaches the core (nothing assigned: NOT_FOUND on v2/fw/error);
    // one over the bound is refused as invalid input (PUBACK 0x99).
    const v5 = await mqttConnect(t.gw.ports.mqtt, {
      username: dev.token,
      clientId: 'limits-fw',
      protocolVersion: 5,
    });
    try {
      await assert.rejects(
        v5.publishAsync(`v2/fw/request/1/chunk/${OVER}`, '', { qos: 1 }),
        (err: Error & { code?: number }) => err.code === 0x99,
      );
      await v5.subscribeAsync('v2/fw/error', { qos: 1 });
      const error = nextMessage(v5, 'v2/fw/error');
      v5.publish(`v2/fw/request/1/chunk/${MAX}`, '', { qos: 1 });
      assert.equal((await error).payload.toString(), 'NOT_FOUND');
    } finally {
      v5.end(true);
    }
  });

  it('RPC reply ids: a Java int on every transport', async () => {
    const http = (id: string) => t.api(`/api/v1/${dev.token}/rpc/${id}`, { body: '{"r":1}' });
    assert.equal((await http(MAX)).status, 200);
    assert.equal((await http(OVER)).status, 400);

    const coap = (id: string) =>
      coapRequest({
        port: t.gw.ports.coap,
        method: 'POST',
        pathname: `/api/v1/${dev.token}/rpc/${id}`,
        payload: '{"r":1}',
      });
    assert.equal((await coap(MAX)).code, '2.01');
    assert.equal((await coap(OVER)).code, '4.00');

    const v5 = await mqttConnect(t.gw.ports.mqtt, {
      username: dev.token,
      clientId: 'limits-rpc',
      protocolVersion: 5,
    });
    try {
      await v5.publishAsync(`v1/devices/me/rpc/response/${MAX}`, '{"r":1}', { qos: 1 });
      await assert.rejects(
        v5.publishAsync(`v1/devices/me/rpc/response/${OVER}`, '{"r":1}', { qos: 1 }),
        (err: Error & { code?: number }) => err.code === 0x99,
      );
      assert.ok(v5.connected);
    } finally {
      await v5.endAsync();
    }
  });
});
