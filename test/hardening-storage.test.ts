import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { coapRequest } from './helpers/coap.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';
import { closed, mqttConnect } from './helpers/mqtt.js';

/** `{"b0":1e65000,...}`: 40 keys whose values ThingsBoard's typing expands to 65,001 digits. */
const EXPONENT_BOMB = `{${Array.from({ length: 40 }, (_, i) => `"b${i}":1e65000`).join(',')}}`;

describe('hardening: storage blow-up from one request (issue 20 case 1)', () => {
  let t: TestGateway;
  let admin: string;
  let n = 0;

  before(async () => {
    t = await startGateway({ config: { limits: { requestStoredBytes: 4096 } } });
    admin = await t.adminToken();
  });
  after(() => t.close());

  const fresh = () => createDevice(t, `bomb-${n++}`);
  const storedKeys = (id: string) => ({
    telemetry: t.gw.services.telemetry.keys(id),
    attributes: t.gw.services.attributes.get(id, 'CLIENT_SCOPE').map((kv) => kv.key),
  });

  it('HTTP telemetry: an exponent beyond the double range is refused with 400 naming the key', async () => {
    const d = await fresh();
    const res = await t.api(`/api/v1/${d.token}/telemetry`, { body: EXPONENT_BOMB });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /key \[b0\] is out of the double range/);
    assert.deepEqual(storedKeys(d.id), { telemetry: [], attributes: [] });
  });

  it('HTTP attributes: the same payload is refused the same way', async () => {
    const d = await fresh();
    const res = await t.api(`/api/v1/${d.token}/attributes`, { body: EXPONENT_BOMB });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /key \[b0\] is out of the double range/);
    assert.deepEqual(storedKeys(d.id), { telemetry: [], attributes: [] });
  });

  it('REST timeseries/ANY: refused with 400 naming the key', async () => {
    const d = await fresh();
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${d.id}/timeseries/ANY`, {
      body: EXPONENT_BOMB,
      token: admin,
    });
    assert.equal(res.status, 400);
    assert.match(await res.text(), /key \[b0\] is out of the double range/);
    assert.deepEqual(storedKeys(d.id), { telemetry: [], attributes: [] });
  });

  it('MQTT: the publish is refused (connection closed), nothing stored', async () => {
    const d = await fresh();
    const client = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    const gone = closed(client);
    client.publish('v1/devices/me/telemetry', EXPONENT_BOMB, { qos: 1 });
    await gone;
    client.end(true);
    const client2 = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    const gone2 = closed(client2);
    client2.publish('v1/devices/me/attributes', EXPONENT_BOMB, { qos: 1 });
    await gone2;
    client2.end(true);
    assert.deepEqual(storedKeys(d.id), { telemetry: [], attributes: [] });
  });

  it('CoAP: 4.00 with the reason, nothing stored', async () => {
    const d = await fresh();
    for (const what of ['telemetry', 'attributes']) {
      const res = await coapRequest({
        port: t.gw.ports.coap,
        method: 'POST',
        pathname: `/api/v1/${d.token}/${what}`,
        payload: '{"b0":1e65000,"b1":1e65000}',
      });
      assert.equal(res.code, '4.00');
      assert.match(res.text, /key \[b0\] is out of the double range/);
    }
    assert.deepEqual(storedKeys(d.id), { telemetry: [], attributes: [] });
  });

  it('exponent literals are typed "fits a long -> LONG, else DOUBLE", never expanded', async () => {
    const d = await fresh();
    const res = await t.api(`/api/v1/${d.token}/telemetry`, {
      body: '{"big":1e300,"tiny":1e-400,"frac":1.5e-30,"long":1E2,"plain":12345678901234567890}',
    });
    assert.equal(res.status, 200);
    const got = await t.api(
      `/api/plugins/telemetry/DEVICE/${d.id}/values/timeseries?keys=big,tiny,frac,long,plain&useStrictDataTypes=true`,
      { token: admin },
    );
    const body = (await got.json()) as Record<string, Array<{ value: unknown }>>;
    assert.equal(body.big[0].value, 1e300);
    assert.equal(body.tiny[0].value, 0);
    assert.equal(body.frac[0].value, 1.5e-30);
    assert.equal(body.long[0].value, 100);
    // A plain literal keeps ThingsBoard's typing (STRING of its digits): no larger than sent.
    assert.equal(body.plain[0].value, '12345678901234567890');
  });

  it('a request storing more than the per-request bound is refused as a whole, on every path', async () => {
    const d = await fresh();
    // 10 keys of 500 characters: under every payload limit, 5,000+ stored bytes > 4,096.
    const values = Object.fromEntries(
      Array.from({ length: 10 }, (_, i) => [`k${i}`, 'x'.repeat(500)]),
    );
    for (const path of [`/api/v1/${d.token}/telemetry`, `/api/v1/${d.token}/attributes`]) {
      const res = await t.api(path, { body: values });
      assert.equal(res.status, 400, path);
      assert.match(await res.text(), /would store more than 4096 bytes/);
    }
    const rest = await t.api(`/api/plugins/telemetry/DEVICE/${d.id}/timeseries/ANY`, {
      body: values,
      token: admin,
    });
    assert.equal(rest.status, 400);
    const client = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
    const gone = closed(client);
    client.publish('v1/devices/me/telemetry', JSON.stringify(values), { qos: 1 });
    await gone;
    client.end(true);
    assert.deepEqual(storedKeys(d.id), { telemetry: [], attributes: [] });
    // Under the bound the same shape is stored.
    const ok = await t.api(`/api/v1/${d.token}/telemetry`, { body: { k0: 'x'.repeat(500) } });
    assert.equal(ok.status, 200);
  });
});
