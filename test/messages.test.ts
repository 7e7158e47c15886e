import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import type { GatewayMsg, MessageProcessor } from '../src/messages/types.js';
import { coapObserve, coapRequest } from './helpers/coap.js';
import {
  ADMIN_EMAIL,
  createDevice,
  startGateway,
  type TestGateway,
  waitFor,
} from './helpers/gateway.js';
import { mqttConnect, nextMessage } from './helpers/mqtt.js';

/** A processing entry point that keeps every message it is given. */
class Collector implements MessageProcessor {
  readonly msgs: GatewayMsg[] = [];

  process(msg: GatewayMsg): void {
    this.msgs.push(msg);
  }

  of(deviceId: string, type: string): GatewayMsg[] {
    return this.msgs.filter((m) => m.originator.id === deviceId && m.type === type);
  }

  /** Waits until `count` messages of that device and type arrived; returns them. */
  async wait(deviceId: string, type: string, count = 1): Promise<GatewayMsg[]> {
    return await waitFor(
      () => {
        const found = this.of(deviceId, type);
        return found.length >= count ? found : undefined;
      },
      10_000,
      `${count} ${type} of ${deviceId}`,
    );
  }
}

interface Dev {
  readonly id: string;
  readonly token: string;
  readonly type: string;
}

async function device(t: TestGateway, name: string): Promise<Dev> {
  const d = await createDevice(t, name);
  const res = await t.api(`/api/device/${d.id}`, { token: await t.adminToken() });
  const { type } = (await res.json()) as { type: string };
  return { ...d, type };
}

function assertDeviceMsg(msg: GatewayMsg, dev: Dev, name: string): void {
  assert.deepEqual(msg.originator, { entityType: 'DEVICE', id: dev.id });
  assert.equal(msg.metadata.deviceName, name);
  assert.equal(msg.metadata.deviceType, dev.type);
  assert.match(msg.id, /^[0-9a-f-]{36}$/);
  assert.equal(typeof msg.ts, 'number');
}

/** platform.md §7.4: the device state as event data, without `active`. */
function assertConnectEvent(connect: GatewayMsg, dev: Dev, name: string): void {
  assertDeviceMsg(connect, dev, name);
  assert.equal(connect.metadata.scope, 'SERVER_SCOPE');
  const data = connect.data as Record<string, unknown>;
  assert.ok((data.lastConnectTime as number) > 0);
  assert.equal('active' in data, false, 'platform.md §7.4: no `active` in CONNECT_EVENT');
}

describe('one way in: every device message reaches the processing entry point', () => {
  const collector = new Collector();
  let t: TestGateway;
  before(async () => {
    t = await startGateway({ messageProcessor: collector });
  });
  after(() => t.close());

  it('telemetry over HTTP, MQTT and CoAP: one POST_TELEMETRY_REQUEST per timestamp', async () => {
    const dev = await device(t, 'msg-telemetry');
    const body =
      '[{"ts":2000,"values":{"a":2}},{"ts":1000,"values":{"a":1,"b":"x","j":{"n":[1]}}}]';
    const res = await t.api(`/api/v1/${dev.token}/telemetry`, { body });
    assert.equal(res.status, 200);
    const [first, second] = await collector.wait(dev.id, 'POST_TELEMETRY_REQUEST', 2);
    assertDeviceMsg(first, dev, 'msg-telemetry');
    // Ascending by timestamp, whatever the order in the payload.
    assert.equal(first.metadata.ts, '1000');
    assert.deepEqual(first.data, { a: 1, b: 'x', j: { n: [1] } });
    assert.equal(second.metadata.ts, '2000');
    assert.deepEqual(second.data, { a: 2 });
    assert.equal(first.customerId, null);

    const client = await mqttConnect(t.gw.ports.mqtt, { username: dev.token });
    try {
      await client.publishAsync('v1/devices/me/telemetry', '{"mq":21.5}', { qos: 1 });
    } finally {
      await client.endAsync();
    }
    const mq = (await collector.wait(dev.id, 'POST_TELEMETRY_REQUEST', 3))[2];
    assert.deepEqual(mq.data, { mq: 21.5 });
    assert.ok(Number(mq.metadata.ts) > 1_600_000_000_000, 'server timestamp');

    const coap = await coapRequest({
      port: t.gw.ports.coap,
      method: 'POST',
      pathname: `/api/v1/${dev.token}/telemetry`,
      payload: '{"co":true}',
    });
    assert.equal(coap.code, '2.01');
    const co = (await collector.wait(dev.id, 'POST_TELEMETRY_REQUEST', 4))[3];
    assertDeviceMsg(co, dev, 'msg-telemetry');
    assert.deepEqual(co.data, { co: true });
  });

  it('client attributes over HTTP, MQTT, CoAP and the gateway API: POST_ATTRIBUTES_REQUEST', async () => {
    const dev = await device(t, 'msg-attributes');
    const http = await t.api(`/api/v1/${dev.token}/attributes`, { body: '{"fw":"1.2.0","n":"5"}' });
    assert.equal(http.status, 200);
    const [a] = await collector.wait(dev.id, 'POST_ATTRIBUTES_REQUEST');
    assertDeviceMsg(a, dev, 'msg-attributes');
    // Typed as stored: a numeric string is cast (device-api.md §1.2).
    assert.deepEqual(a.data, { fw: '1.2.0', n: 5 });
    assert.equal(a.metadata.notifyDevice, 'false');

    const client = await mqttConnect(t.gw.ports.mqtt, { username: dev.token });
    try {
      await client.publishAsync('v1/devices/me/attributes', '{"mode":"eco"}', { qos: 1 });
    } finally {
      await client.endAsync();
    }
    assert.deepEqual((await collector.wait(dev.id, 'POST_ATTRIBUTES_REQUEST', 2))[1].data, {
      mode: 'eco',
    });

    const coap = await coapRequest({
      port: t.gw.ports.coap,
      method: 'POST',
      pathname: `/api/v1/${dev.token}/attributes`,
      payload: '{"on":false}',
    });
    assert.equal(coap.code, '2.01');
    assert.deepEqual((await collector.wait(dev.id, 'POST_ATTRIBUTES_REQUEST', 3))[2].data, {
      on: false,
    });

    // A gateway's child device: the message comes from the child.
    const gw = await createDevice(t, 'msg-gateway');
    const admin = await t.adminToken();
    const got = (await (await t.api(`/api/device/${gw.id}`, { token: admin })).json()) as object;
    await t.api('/api/device', {
      token: admin,
      body: { ...got, additionalInfo: { gateway: true } },
    });
    const gwc = await mqttConnect(t.gw.ports.mqtt, { username: gw.token });
    try {
      await gwc.publishAsync('v1/gateway/attributes', '{"msg-child":{"c":1}}', { qos: 1 });
      await gwc.publishAsync('v1/gateway/telemetry', '{"msg-child":[{"ts":5,"values":{"v":7}}]}', {
        qos: 1,
      });
    } finally {
      await gwc.endAsync();
    }
    const childId = (
      (await (
        await t.api('/api/tenant/devices?deviceName=msg-child', { token: admin })
      ).json()) as { id: { id: string } }
    ).id.id;
    assert.deepEqual((await collector.wait(childId, 'POST_ATTRIBUTES_REQUEST'))[0].data, { c: 1 });
    const tel = (await collector.wait(childId, 'POST_TELEMETRY_REQUEST'))[0];
    assert.equal(tel.metadata.deviceName, 'msg-child');
    assert.equal(tel.metadata.ts, '5');
    assert.deepEqual(tel.data, { v: 7 });
    // The child's session follows the gateway's: connected on first sight, disconnected when the
    // gateway goes away.
    assert.equal(
      (await collector.wait(childId, 'CONNECT_EVENT'))[0].metadata.deviceName,
      'msg-child',
    );
    assert.ok((await collector.wait(childId, 'DISCONNECT_EVENT')).length >= 1);
  });

  it('client-side RPC: TO_SERVER_RPC_REQUEST names the session, and a reply by its ids reaches the device', async () => {
    const dev = await device(t, 'msg-rpc');
    const client: MqttClient = await mqttConnect(t.gw.ports.mqtt, { username: dev.token });
    try {
      await client.subscribeAsync('v1/devices/me/rpc/response/+', { qos: 1 });
      const answer = nextMessage(client, 'v1/devices/me/rpc/response/7', 10_000);
      await client.publishAsync(
        'v1/devices/me/rpc/request/7',
        '{"method":"echo","params":{"x":1}}',
        {
          qos: 1,
        },
      );
      const [msg] = await collector.wait(dev.id, 'TO_SERVER_RPC_REQUEST');
      assertDeviceMsg(msg, dev, 'msg-rpc');
      assert.deepEqual(msg.data, { method: 'echo', params: { x: 1 } });
      assert.equal(msg.metadata.requestId, '7');
      assert.ok(msg.metadata.serviceId, 'serviceId');
      assert.match(msg.metadata.sessionId, /^[0-9a-f-]{36}$/);
      // What an "rpc call reply" node does with that metadata.
      const replied = t.gw.services.clientRpc.reply(
        msg.metadata.sessionId,
        Number(msg.metadata.requestId),
        '{"echoed":{"x":1}}',
      );
      assert.equal(replied, true);
      assert.deepEqual(JSON.parse((await answer).payload.toString()), { echoed: { x: 1 } });
      // Answered once: a second reply finds nothing waiting.
      assert.equal(t.gw.services.clientRpc.reply(msg.metadata.sessionId, 7, '{}'), false);
    } finally {
      await client.endAsync();
    }

    // HTTP: a session of its own per request, request id 0; getCurrentTime is still answered.
    const res = await t.api(`/api/v1/${dev.token}/rpc`, {
      body: { method: 'getCurrentTime', params: {} },
    });
    assert.equal(res.status, 200);
    const http = (await collector.wait(dev.id, 'TO_SERVER_RPC_REQUEST', 2))[1];
    assert.equal(http.metadata.requestId, '0');
    assert.notEqual(
      http.metadata.sessionId,
      (await collector.wait(dev.id, 'TO_SERVER_RPC_REQUEST'))[0].metadata.sessionId,
    );
  });

  it('MQTT connect and disconnect: CONNECT_EVENT, ACTIVITY_EVENT, DISCONNECT_EVENT', async () => {
    const dev = await device(t, 'msg-connect');
    const client = await mqttConnect(t.gw.ports.mqtt, { username: dev.token });
    assertConnectEvent((await collector.wait(dev.id, 'CONNECT_EVENT'))[0], dev, 'msg-connect');
    const [activity] = await collector.wait(dev.id, 'ACTIVITY_EVENT');
    assert.equal((activity.data as { active: boolean }).active, true);
    await client.endAsync();
    const [disconnect] = await collector.wait(dev.id, 'DISCONNECT_EVENT');
    assert.ok(((disconnect.data as Record<string, number>).lastDisconnectTime ?? 0) > 0);
  });

  it('CoAP: the first observation opens the session (CONNECT_EVENT), the end of the last closes it (DISCONNECT_EVENT)', async () => {
    const dev = await device(t, 'msg-coap-session');
    const port = t.gw.ports.coap;
    const live = () => t.gw.coapObservations.live;
    const base = live();
    // A plain request is a sync session in ThingsBoard: activity, no connect event.
    const posted = await coapRequest({
      port,
      method: 'POST',
      pathname: `/api/v1/${dev.token}/telemetry`,
      payload: '{"a":1}',
    });
    assert.equal(posted.code, '2.01');
    await collector.wait(dev.id, 'POST_TELEMETRY_REQUEST');
    assert.equal(collector.of(dev.id, 'CONNECT_EVENT').length, 0);

    const attrs = await coapObserve({ port, pathname: `/api/v1/${dev.token}/attributes` });
    const [connect] = await collector.wait(dev.id, 'CONNECT_EVENT');
    assertConnectEvent(connect, dev, 'msg-coap-session');
    const rpc = await coapObserve({ port, pathname: `/api/v1/${dev.token}/rpc` });
    await waitFor(() => live() === base + 2, 10_000, 'two observations');

    attrs.close();
    await waitFor(() => live() === base + 1, 10_000, 'the attribute observation ended');
    t.gw.services.messages.flush();
    assert.equal(collector.of(dev.id, 'CONNECT_EVENT').length, 1, 'one session for both');
    assert.equal(collector.of(dev.id, 'DISCONNECT_EVENT').length, 0, 'the RPC one still observes');

    rpc.close();
    const [disconnect] = await collector.wait(dev.id, 'DISCONNECT_EVENT');
    assertDeviceMsg(disconnect, dev, 'msg-coap-session');
    assert.ok(((disconnect.data as Record<string, number>).lastDisconnectTime ?? 0) > 0);
    assert.equal(live(), base);

    // A new observation is a new session.
    const again = await coapObserve({ port, pathname: `/api/v1/${dev.token}/attributes` });
    await collector.wait(dev.id, 'CONNECT_EVENT', 2);
    again.close();
    await collector.wait(dev.id, 'DISCONNECT_EVENT', 2);
  });

  it('REST writes: ATTRIBUTES_UPDATED/DELETED with scope and user, TIMESERIES_UPDATED/DELETED', async () => {
    const dev = await device(t, 'msg-rest');
    const token = await t.adminToken();
    const base = `/api/plugins/telemetry/DEVICE/${dev.id}`;
    const saved = await t.api(`${base}/attributes/SERVER_SCOPE`, { token, body: { limit: 30 } });
    assert.equal(saved.status, 200);
    const [upd] = await collector.wait(dev.id, 'ATTRIBUTES_UPDATED');
    assertDeviceMsg(upd, dev, 'msg-rest');
    assert.equal(upd.metadata.scope, 'SERVER_SCOPE');
    assert.equal(upd.metadata.userName, ADMIN_EMAIL);
    assert.ok(upd.metadata.userId);
    assert.deepEqual(upd.data, { limit: 30 });
    // A REST write is not a device's post.
    assert.equal(collector.of(dev.id, 'POST_ATTRIBUTES_REQUEST').length, 0);

    const del = await t.api(`${base}/SERVER_SCOPE?keys=limit`, { token, method: 'DELETE' });
    assert.equal(del.status, 200);
    const [deleted] = await collector.wait(dev.id, 'ATTRIBUTES_DELETED');
    assert.equal(deleted.metadata.scope, 'SERVER_SCOPE');
    assert.deepEqual(deleted.data, { attributes: ['limit'] });

    const ts = await t.api(`${base}/timeseries/ANY`, {
      token,
      body: { ts: 1234, values: { rt: 5 } },
    });
    assert.equal(ts.status, 200);
    const [series] = await collector.wait(dev.id, 'TIMESERIES_UPDATED');
    assert.deepEqual(series.data, { timeseries: [{ ts: 1234, values: { rt: 5 } }] });
    assert.equal(series.metadata.userName, ADMIN_EMAIL);
    assert.equal(collector.of(dev.id, 'POST_TELEMETRY_REQUEST').length, 0);

    const rm = await t.api(`${base}/timeseries/delete?keys=rt&deleteAllDataForKeys=true`, {
      token,
      method: 'DELETE',
    });
    assert.equal(rm.status, 200);
    const [gone] = await collector.wait(dev.id, 'TIMESERIES_DELETED');
    assert.deepEqual((gone.data as { timeseries: string[] }).timeseries, ['rt']);

    // Activity written by the gateway itself makes no ATTRIBUTES_UPDATED.
    assert.equal(
      collector.msgs.filter(
        (m) =>
          m.type === 'ATTRIBUTES_UPDATED' &&
          m.metadata.scope === 'SERVER_SCOPE' &&
          !m.metadata.userId,
      ).length,
      0,
    );
  });

  it('device lifecycle: ENTITY_CREATED, ENTITY_UPDATED, ENTITY_DELETED with the device as data', async () => {
    const dev = await device(t, 'msg-entity');
    const token = await t.adminToken();
    const [created] = await collector.wait(dev.id, 'ENTITY_CREATED');
    assert.equal((created.data as { name: string }).name, 'msg-entity');
    const got = (await (await t.api(`/api/device/${dev.id}`, { token })).json()) as object;
    await t.api('/api/device', { token, body: { ...got, label: 'L1' } });
    const [updated] = await collector.wait(dev.id, 'ENTITY_UPDATED');
    assert.equal((updated.data as { label: string }).label, 'L1');
    await t.api(`/api/device/${dev.id}`, { token, method: 'DELETE' });
    const [deleted] = await collector.wait(dev.id, 'ENTITY_DELETED');
    assert.equal(deleted.metadata.deviceName, 'msg-entity');
  });
});

describe('the processing entry point never harms acknowledgements or stored data', () => {
  it('a processor that throws: devices are acknowledged, data is stored, failures are counted', async () => {
    let calls = 0;
    const t = await startGateway({
      messageProcessor: {
        process() {
          calls++;
          throw new Error('processor broken');
        },
      },
    });
    try {
      const dev = await createDevice(t, 'msg-broken');
      assert.equal(
        (await t.api(`/api/v1/${dev.token}/telemetry`, { body: '{"h":1}' })).status,
        200,
      );
      const client = await mqttConnect(t.gw.ports.mqtt, { username: dev.token });
      try {
        await client.publishAsync('v1/devices/me/telemetry', '{"m":2}', { qos: 1 });
        await client.publishAsync('v1/devices/me/attributes', '{"at":3}', { qos: 1 });
      } finally {
        await client.endAsync();
      }
      const token = await t.adminToken();
      const base = `/api/plugins/telemetry/DEVICE/${dev.id}`;
      const values = (await (
        await t.api(`${base}/values/timeseries?keys=h,m`, { token })
      ).json()) as Record<string, Array<{ value: unknown }>>;
      assert.equal(values.h[0].value, '1');
      assert.equal(values.m[0].value, '2');
      const attrs = (await (
        await t.api(`${base}/values/attributes/CLIENT_SCOPE`, { token })
      ).json()) as Array<{ key: string; value: unknown }>;
      assert.deepEqual(
        attrs.map((a) => [a.key, a.value]),
        [['at', 3]],
      );
      await waitFor(() => t.gw.services.messages.stats().failed >= 3, 10_000, 'failures');
      assert.ok(calls >= 3);
      const health = await t.api('/healthz');
      assert.equal(health.status, 200);
      const h = (await health.json()) as { messages: { failed: number; processed: number } };
      assert.ok(h.messages.failed >= 3);
      assert.equal(h.messages.failed, h.messages.processed);
      // Logged, but not once per message.
      const lines = t.logs.filter((l) => String(l.msg).startsWith('message processing failed'));
      assert.ok(lines.length >= 1 && lines.length < calls, `${lines.length} lines`);
    } finally {
      await t.close();
    }
  });

  it('a full queue drops the oldest messages, counts them and logs once per burst', async () => {
    const collector = new Collector();
    const t = await startGateway({
      config: { messages: { queueSize: 16 } },
      messageProcessor: collector,
    });
    try {
      const { messages } = t.gw.services;
      const before = messages.stats().dropped;
      const sent = [];
      for (let i = 0; i < 100; i++) {
        const msg = messages.newMsg({
          type: 'ALARM_ACK',
          originator: { entityType: 'ALARM', id: `alarm-${i}` },
          data: { i },
        });
        sent.push(msg);
        messages.submit(msg);
      }
      assert.equal(messages.stats().dropped - before, 84);
      await waitFor(() => messages.stats().queued === 0, 10_000, 'drained');
      const acks = collector.msgs.filter((m) => m.type === 'ALARM_ACK');
      assert.deepEqual(
        acks.map((m) => m.id),
        sent.slice(84).map((m) => m.id),
        'the newest 16 are processed, in order',
      );
      const h = (await (await t.api('/healthz')).json()) as {
        messages: { dropped: number; capacity: number };
      };
      assert.equal(h.messages.capacity, 16);
      assert.ok(h.messages.dropped >= 84);
      const full = t.logs.filter((l) => String(l.msg).startsWith('message queue full'));
      assert.equal(full.length, 1);
      // Devices are still served at the bound.
      const dev = await createDevice(t, 'msg-after-drops');
      assert.equal(
        (await t.api(`/api/v1/${dev.token}/telemetry`, { body: '{"z":1}' })).status,
        200,
      );
      await collector.wait(dev.id, 'POST_TELEMETRY_REQUEST');
    } finally {
      await t.close();
    }
  });
});
