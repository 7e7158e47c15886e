import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { closed, mqttConnect } from './helpers/mqtt.js';
import { rawMqttConnect, rawPublish, rawSubscribe } from './helpers/raw-mqtt.js';

const TELEMETRY = Buffer.from('v1/devices/me/telemetry');

describe('hardening: MQTT protocol strictness (issue 20)', () => {
  let t: TestGateway;
  let port: number;
  let n = 0;

  before(async () => {
    t = await startGateway();
    port = t.gw.ports.mqtt;
  });
  after(() => t.close());

  const latest = async (id: string): Promise<Record<string, unknown>> => {
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${id}/values/timeseries`, {
      token: await t.adminToken(),
    });
    return (await res.json()) as Record<string, unknown>;
  };

  const bad: Array<[string, Buffer, number | undefined]> = [
    [
      'a topic with invalid UTF-8',
      Buffer.concat([TELEMETRY.subarray(0, 10), Buffer.from([0xff, 0xfe]), TELEMETRY.subarray(10)]),
      7,
    ],
    [
      'a topic with a truncated 4-byte sequence',
      Buffer.concat([TELEMETRY, Buffer.from([0xf0, 0x90, 0x80])]),
      7,
    ],
    ['a topic with a NUL', Buffer.concat([TELEMETRY, Buffer.from([0])]), 7],
    ['a QoS 1 PUBLISH with packet id 0', TELEMETRY, 0],
  ];
  for (const version of [4, 5] as const) {
    for (const [what, topic, id] of bad) {
      it(`case 9: ${what} closes the connection without a PUBACK (MQTT ${version === 4 ? '3.1.1' : '5'})`, async () => {
        const dev = await createDevice(t, `strict-${n++}`);
        const c = await rawMqttConnect(port, dev.token, { version });
        c.write(rawPublish(topic, '{"bad":1}', id, version));
        await c.closed();
        const got = c.received();
        // Nothing but (on MQTT 5) a DISCONNECT: no PUBACK (0x40).
        assert.ok(!got.includes(0x40) || got[0] === 0xe0, `got ${got.toString('hex')}`);
        if (version === 5) {
          assert.equal(got[0], 0xe0, 'MQTT 5: DISCONNECT first');
          assert.ok([0x81, 0x82].includes(got[2]), `reason ${got[2]}`);
        } else assert.equal(got.length, 0);
        assert.deepEqual(await latest(dev.id), {});
      });
    }
  }

  const badFilters: Array<[string, Buffer]> = [
    ["'+' inside a level", Buffer.from('v1/devices/me/rpc/request/+x')],
    ["'+' after a character", Buffer.from('x+/y')],
    ["'#' not last", Buffer.from('v1/devices/me/#/x')],
    ["'#' inside a level", Buffer.from('v1/devices/me/attributes#')],
    ['an empty filter', Buffer.alloc(0)],
    ['a NUL', Buffer.from('v1/devices/me/attributes\u0000')],
    ['invalid UTF-8', Buffer.concat([Buffer.from('v1/devices/me/'), Buffer.from([0xc3, 0x28])])],
  ];
  for (const version of [4, 5] as const) {
    for (const [what, filter] of badFilters) {
      it(`a SUBSCRIBE with a malformed filter (${what}) closes the connection without a SUBACK (MQTT ${version === 4 ? '3.1.1' : '5'})`, async () => {
        const dev = await createDevice(t, `strict-sub-${n++}`);
        const c = await rawMqttConnect(port, dev.token, { version });
        c.write(rawSubscribe(filter, version));
        await c.closed();
        const got = c.received();
        if (version === 5) {
          // DISCONNECT, Malformed Packet (MQTT 5 §4.13), and nothing else.
          assert.equal(got[0], 0xe0, `got ${got.toString('hex')}`);
          assert.equal(got[2], 0x81, `got ${got.toString('hex')}`);
          assert.equal(got.length, 2 + got[1], `got ${got.toString('hex')}`);
        } else assert.equal(got.length, 0, `got ${got.toString('hex')}`);
      });
    }
  }

  for (const protocolVersion of [4, 5] as const) {
    it(`mqtt.js (protocol ${protocolVersion}): a NUL in a filter closes; a well-formed filter off the list is refused in the SUBACK`, async () => {
      const dev = await createDevice(t, `strict-sub-${n++}`);
      const c = await mqttConnect(port, {
        username: dev.token,
        protocolVersion,
        reconnectPeriod: 0,
      });
      const granted = await c.subscribeAsync('v1/devices/me/attributes', { qos: 1 });
      assert.deepEqual(
        granted.map((g) => g.qos),
        [1],
      );
      // Well formed, not one of the gateway's topics: refused in the SUBACK (0x80; MQTT 5 0x87).
      await assert.rejects(
        c.subscribeAsync('not/a/gateway/topic', { qos: 1 }),
        protocolVersion === 5 ? /Not authorized/ : /Unspecified error/,
      );
      assert.equal(c.connected, true);
      const gone = closed(c);
      c.subscribe('v1/devices/me/attributes\u0000', { qos: 1 });
      await gone;
      c.end(true);
    });
  }

  it('case 9: well-formed topics and packet ids are still acknowledged', async () => {
    const dev = await createDevice(t, `strict-${n++}`);
    const c = await rawMqttConnect(port, dev.token);
    c.write(rawPublish(TELEMETRY, '{"ok":1}', 1));
    const deadline = Date.now() + 5000;
    while (c.received().length < 4 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    assert.equal(c.received().subarray(0, 4).toString('hex'), '40020001');
    c.end();
    assert.deepEqual(Object.keys(await latest(dev.id)), ['ok']);
  });

  it('case 4: a second device with the same client id never takes over the first one', async () => {
    const d1 = await createDevice(t, `shared-${n++}`);
    const d2 = await createDevice(t, `shared-${n++}`);
    const c1 = await mqttConnect(port, { clientId: 'shared-id', username: d1.token });
    let c1Closed = false;
    c1.on('close', () => {
      c1Closed = true;
    });
    const c2 = await mqttConnect(port, { clientId: 'shared-id', username: d2.token });
    await c2.publishAsync('v1/devices/me/telemetry', '{"from2":1}', { qos: 1 });
    await c1.publishAsync('v1/devices/me/telemetry', '{"from1":1}', { qos: 1 });
    assert.equal(c1Closed, false, 'the first device stays connected');
    assert.deepEqual(Object.keys(await latest(d1.id)), ['from1']);
    assert.deepEqual(Object.keys(await latest(d2.id)), ['from2']);
    // The same device reconnecting with its client id still takes its own session over.
    const gone = closed(c1);
    const c1b = await mqttConnect(port, { clientId: 'shared-id', username: d1.token });
    await gone;
    assert.equal(c2.connected, true);
    await Promise.all([c1b.endAsync(), c2.endAsync()]);
    c1.end(true);
  });
});
