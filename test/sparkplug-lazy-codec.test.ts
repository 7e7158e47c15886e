/**
 * The Sparkplug codec (sparkplug-payload) is loaded when the first Sparkplug node connects, not at
 * start: a profile switched to Sparkplug after start serves its nodes as one that was Sparkplug
 * from the start (commands encoded by the codec). Its own file: the codec is loaded once per
 * process.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newClient, type UPayload } from 'sparkplug-client';
import { sparkplugCodecLoaded } from '../src/transports/mqtt/sparkplug-session.js';
import {
  createPlainMqttProfile,
  createProfiledDevice,
  latest,
  setProfileTransport,
} from './helpers/alarms.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { closed, mqttConnect } from './helpers/mqtt.js';

describe('Sparkplug codec loaded on the first Sparkplug node', () => {
  let t: TestGateway;

  before(async () => {
    t = await startGateway();
  });
  after(async () => {
    await t.close();
  });

  it('a profile switched to Sparkplug after start: the node connects, reports and gets an NCMD', async () => {
    const profile = await createPlainMqttProfile(t, 'Plain MQTT, later Sparkplug');
    const node = await createProfiledDevice(t, 'late-edge-node', profile.id.id);

    // A plain MQTT device of the profile needs no codec.
    const plain = await mqttConnect(t.gw.ports.mqtt, { username: node.token });
    await plain.publishAsync('v1/devices/me/telemetry', JSON.stringify({ plain: 1 }), { qos: 1 });
    assert.equal(sparkplugCodecLoaded(), false, 'not loaded before a Sparkplug node');

    // The profile becomes Sparkplug: the plain session is closed to reconnect under it.
    const gone = closed(plain, 10_000);
    await setProfileTransport(t, profile, { type: 'MQTT', sparkplug: true });
    await gone;
    plain.end(true);

    const ncmds: UPayload[] = [];
    const client = newClient({
      serverUrl: `mqtt://127.0.0.1:${t.gw.ports.mqtt}`,
      username: node.token,
      password: '',
      groupId: 'Plant9',
      edgeNode: 'Late',
      clientId: 'late-edge',
      mqttOptions: { reconnectPeriod: 0 },
    });
    try {
      client.on('ncmd', (p) => ncmds.push(p));
      await new Promise<void>((resolve) => client.once('birth', () => resolve()));
      client.publishNodeBirth({
        timestamp: Date.now(),
        metrics: [{ name: 'uptime', type: 'Int64', value: 5 }],
      });
      await waitFor(async () => (await latest(t, node.id, 'uptime')) === 5, 10_000, 'NBIRTH');
      assert.equal(sparkplugCodecLoaded(), true);
      // A sequence gap is answered with a rebirth NCMD, which the codec encodes.
      (client as unknown as { seq: number }).seq += 3;
      client.publishNodeData({
        timestamp: Date.now(),
        metrics: [{ name: 'uptime', type: 'Int64', value: 6 }],
      });
      const rebirth = await waitFor(() => ncmds.at(-1), 10_000, 'NCMD');
      assert.equal(rebirth.metrics?.[0]?.name, 'Node Control/Rebirth');
      assert.equal(rebirth.metrics?.[0]?.value, true);
    } finally {
      client.stop();
    }
  });
});
