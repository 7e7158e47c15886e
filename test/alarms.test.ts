/**
 * Issue 13 "Done when": device-profile alarm rules over real sockets (MQTT, HTTP, CoAP) and the
 * alarm lifecycle over REST.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  alarmsOf,
  createProfile,
  createProfiledDevice,
  latest,
  numeric,
  rule,
} from './helpers/alarms.js';
import { coapRequest } from './helpers/coap.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';

const HIGH_TEMP = {
  id: 'highTemp',
  alarmType: 'High Temperature',
  createRules: {
    CRITICAL: rule(
      [numeric('temperature', 'GREATER', 30)],
      { type: 'SIMPLE' },
      {
        alarmDetails: 'Temperature is ${temperature}',
      },
    ),
    MAJOR: rule([numeric('temperature', 'GREATER', 28)]),
  },
  clearRule: rule([numeric('temperature', 'LESS_OR_EQUAL', 25)]),
  propagate: false,
  propagateToOwner: false,
  propagateToTenant: false,
  propagateRelationTypes: null,
};

describe('alarm engine: temperature > 30 CRITICAL, clear <= 25', () => {
  let t: TestGateway;
  let admin: string;
  let profileId: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    profileId = await createProfile(t, 'Thermostat', [HIGH_TEMP]);
  });
  after(() => t.close());

  it('MQTT 35 raises ACTIVE_UNACK; ack; 29 never downgrades; 20 clears to CLEARED_ACK', async () => {
    const d = await createProfiledDevice(t, 'thermo-1', profileId);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'thermo-1' });
    try {
      await c.publishAsync('v1/devices/me/telemetry', '{"temperature":35}', { qos: 1 });
      const [alarm] = await waitFor(async () => {
        const list = await alarmsOf(t, d.id);
        return list.length > 0 ? list : undefined;
      });
      assert.equal(alarm.status, 'ACTIVE_UNACK');
      assert.equal(alarm.severity, 'CRITICAL');
      assert.equal(alarm.type, 'High Temperature');
      assert.deepEqual(alarm.details, { data: 'Temperature is 35' });
      assert.equal(alarm.originatorName, 'thermo-1');

      const ack = await t.api(`/api/alarm/${alarm.id.id}/ack`, { method: 'POST', token: admin });
      assert.equal(ack.status, 200);
      assert.equal(((await ack.json()) as { status: string }).status, 'ACTIVE_ACK');
      const again = await t.api(`/api/alarm/${alarm.id.id}/ack`, { method: 'POST', token: admin });
      assert.equal(again.status, 400);
      assert.match(((await again.json()) as { message: string }).message, /already acknowledged/);

      // MAJOR matches 29, but a lower severity never downgrades the active alarm.
      await c.publishAsync('v1/devices/me/telemetry', '{"temperature":29}', { qos: 1 });
      await waitFor(async () => (await latest(t, d.id, 'temperature')) === 29);
      const [still] = await alarmsOf(t, d.id);
      assert.equal(still.severity, 'CRITICAL');
      assert.equal(still.status, 'ACTIVE_ACK');

      await c.publishAsync('v1/devices/me/telemetry', '{"temperature":20}', { qos: 1 });
      const cleared = await waitFor(async () => {
        const [a] = await alarmsOf(t, d.id);
        return a.cleared ? a : undefined;
      });
      assert.equal(cleared.status, 'CLEARED_ACK');
      const clearAgain = await t.api(`/api/alarm/${alarm.id.id}/clear`, {
        method: 'POST',
        token: admin,
      });
      assert.equal(clearAgain.status, 400);

      // System comments record the acknowledgement and the clear.
      const comments = await t.api(`/api/alarm/${alarm.id.id}/comment?pageSize=10&page=0`, {
        token: admin,
      });
      const texts = (
        (await comments.json()) as { data: Array<{ type: string; comment: { text: string } }> }
      ).data;
      assert.deepEqual(
        texts.map((x) => x.type),
        ['SYSTEM', 'SYSTEM'],
      );
      assert.match(texts[0].comment.text, /acknowledged by user/);
      assert.match(texts[1].comment.text, /cleared by the device profile rule/);

      // A new reading above the threshold makes a new alarm: the cleared one stays as it is.
      await c.publishAsync('v1/devices/me/telemetry', '{"temperature":31}', { qos: 1 });
      const two = await waitFor(async () => {
        const list = await alarmsOf(t, d.id);
        return list.length === 2 ? list : undefined;
      });
      assert.equal(two[0].status, 'ACTIVE_UNACK');
      assert.equal(two[1].status, 'CLEARED_ACK');
    } finally {
      await c.endAsync();
    }
  });

  it('severity goes up from MAJOR to CRITICAL on the same alarm; /metrics counts it', async () => {
    /** `edge_active_alarms` by severity, from /metrics. */
    const active = async (): Promise<Record<string, number>> => {
      const text = await (await t.api('/metrics', { token: admin })).text();
      const counts: Record<string, number> = {};
      for (const m of text.matchAll(/^edge_active_alarms\{severity="(\w+)"\} (\d+)$/gm))
        counts[m[1]] = Number(m[2]);
      return counts;
    };
    const before = await active();
    assert.deepEqual(Object.keys(before).sort(), [
      'CRITICAL',
      'INDETERMINATE',
      'MAJOR',
      'MINOR',
      'WARNING',
    ]);
    const d = await createProfiledDevice(t, 'thermo-up', profileId);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'thermo-up' });
    try {
      await c.publishAsync('v1/devices/me/telemetry', '{"temperature":29}', { qos: 1 });
      const [major] = await waitFor(async () => {
        const list = await alarmsOf(t, d.id);
        return list.length ? list : undefined;
      });
      assert.equal(major.severity, 'MAJOR');
      assert.deepEqual(await active(), { ...before, MAJOR: before.MAJOR + 1 });
      await c.publishAsync('v1/devices/me/telemetry', '{"temperature":40}', { qos: 1 });
      const crit = await waitFor(async () => {
        const list = await alarmsOf(t, d.id);
        return list[0].severity === 'CRITICAL' ? list : undefined;
      });
      assert.equal(crit.length, 1);
      assert.equal(crit[0].id.id, major.id.id);
      assert.deepEqual(await active(), { ...before, CRITICAL: before.CRITICAL + 1 });
    } finally {
      await c.endAsync();
    }
  });

  it('a profile change takes effect at once for its devices', async () => {
    const plain = await createProfile(t, 'Plain', []);
    const d = await createProfiledDevice(t, 'plain-1', plain);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'plain-1' });
    try {
      await c.publishAsync('v1/devices/me/telemetry', '{"temperature":35}', { qos: 1 });
      await waitFor(async () => (await latest(t, d.id, 'temperature')) === 35);
      assert.deepEqual(await alarmsOf(t, d.id), []);
      const res = await t.api(`/api/deviceProfile/${plain}`, { token: admin });
      const profile = (await res.json()) as { profileData: Record<string, unknown> };
      const saved = await t.api('/api/deviceProfile', {
        token: admin,
        body: { ...profile, profileData: { ...profile.profileData, alarms: [HIGH_TEMP] } },
      });
      assert.equal(saved.status, 200);
      await c.publishAsync('v1/devices/me/telemetry', '{"temperature":36}', { qos: 1 });
      await waitFor(async () => (await alarmsOf(t, d.id)).length === 1);
    } finally {
      await c.endAsync();
    }
  });

  it('the same reading over HTTP, MQTT and CoAP raises the same alarm', async () => {
    const http = await createProfiledDevice(t, 'via-http', profileId);
    const mqtt = await createProfiledDevice(t, 'via-mqtt', profileId);
    const coap = await createProfiledDevice(t, 'via-coap', profileId);
    const body = '{"temperature":33.5}';
    const res = await fetch(`${t.baseUrl}/api/v1/${http.token}/telemetry`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    assert.equal(res.status, 200);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: mqtt.token, clientId: 'via-mqtt' });
    await c.publishAsync('v1/devices/me/telemetry', body, { qos: 1 });
    await c.endAsync();
    const reply = await coapRequest({
      port: t.gw.ports.coap,
      method: 'POST',
      pathname: `/api/v1/${coap.token}/telemetry`,
      payload: body,
    });
    assert.equal(reply.code, '2.01');
    const seen = [];
    for (const d of [http, mqtt, coap]) {
      const [a] = await waitFor(async () => {
        const list = await alarmsOf(t, d.id);
        return list.length ? list : undefined;
      });
      seen.push({ type: a.type, severity: a.severity, status: a.status, details: a.details });
    }
    const expected = {
      type: 'High Temperature',
      severity: 'CRITICAL',
      status: 'ACTIVE_UNACK',
      details: { data: 'Temperature is 33.5' },
    };
    assert.deepEqual(seen, [expected, expected, expected]);
  });
});
