/**
 * Issue 21 part 3: a Sparkplug B edge node over a real socket, driven by Eclipse Tahu's
 * third-party client (`sparkplug-client`, with its own payload encoder), not by our code.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newClient, type UPayload } from 'sparkplug-client';
import { createProfiledDevice, latest } from './helpers/alarms.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';

type SparkplugClient = ReturnType<typeof newClient>;

describe('Sparkplug B edge node', () => {
  let t: TestGateway;
  let admin: string;
  let node: { id: string; token: string };
  let client: SparkplugClient;
  const ncmds: UPayload[] = [];
  const dcmds: Array<{ device: string; payload: UPayload }> = [];

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    const res = await t.api('/api/deviceProfile', {
      token: admin,
      body: {
        name: 'Sparkplug nodes',
        transportType: 'MQTT',
        profileData: {
          transportConfiguration: {
            type: 'MQTT',
            sparkplug: true,
            sparkplugAttributesMetricNames: ['Properties/*'],
          },
        },
      },
    });
    assert.equal(res.status, 200, await res.clone().text());
    const profileId = ((await res.json()) as { id: { id: string } }).id.id;
    node = await createProfiledDevice(t, 'edge-node-1', profileId);
    client = newClient({
      serverUrl: `mqtt://127.0.0.1:${t.gw.ports.mqtt}`,
      username: node.token,
      password: '',
      groupId: 'Plant1',
      edgeNode: 'Line4',
      clientId: 'line4-edge',
      mqttOptions: { reconnectPeriod: 0 },
    });
    client.on('ncmd', (p) => ncmds.push(p));
    client.on('dcmd', (device, payload) => dcmds.push({ device, payload }));
    await new Promise<void>((resolve) => client.once('birth', () => resolve()));
  });
  after(async () => {
    client.stop();
    await t.close();
  });

  const deviceId = async (name: string) => {
    const res = await t.api(`/api/tenant/devices?deviceName=${encodeURIComponent(name)}`, {
      token: admin,
    });
    return res.status === 200 ? ((await res.json()) as { id: { id: string } }).id.id : undefined;
  };
  const attribute = async (id: string, scope: string, key: string) => {
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${id}/values/attributes/${scope}?keys=${encodeURIComponent(key)}`,
      { token: admin },
    );
    return ((await res.json()) as Array<{ value: unknown }>)[0]?.value;
  };

  it('NBIRTH, DBIRTH of two devices, NDATA and DDATA are stored; children created on first sight', async () => {
    const now = Date.now();
    client.publishNodeBirth({
      timestamp: now,
      metrics: [
        { name: 'Node Control/Rebirth', type: 'Boolean', value: false },
        { name: 'Properties/Hardware', type: 'String', value: 'rev3' },
        { name: 'uptime', type: 'Int64', value: 120, alias: 1, timestamp: now },
      ],
    });
    for (const [device, alias] of [
      ['Pump1', 10],
      ['Pump2', 20],
    ] as const) {
      client.publishDeviceBirth(device, {
        timestamp: now,
        metrics: [
          { name: 'pressure', type: 'Float', value: 2.5, alias, timestamp: now },
          { name: 'setpoint', type: 'Int32', value: 4, alias: alias + 1, timestamp: now },
        ],
      });
    }
    client.publishNodeData({
      timestamp: now + 1,
      metrics: [{ alias: 1, type: 'Int64', value: 121, timestamp: now + 1 } as never],
    });
    client.publishDeviceData('Pump1', {
      timestamp: now + 2,
      metrics: [{ name: 'pressure', type: 'Float', value: 3.25, timestamp: now + 2 }],
    });
    const pump1 = await waitFor(() => deviceId('Pump1'), 10_000, 'child Pump1');
    const pump2 = await waitFor(() => deviceId('Pump2'), 10_000, 'child Pump2');
    await waitFor(async () => (await latest(t, pump1, 'pressure')) === 3.25, 10_000, 'DDATA');
    assert.equal(await latest(t, pump2, 'pressure'), 2.5);
    assert.equal(await latest(t, pump2, 'setpoint'), 4);
    // NDATA by alias only: the name comes from the NBIRTH.
    await waitFor(async () => (await latest(t, node.id, 'uptime')) === 121, 10_000, 'NDATA');
    assert.equal(await attribute(node.id, 'CLIENT_SCOPE', 'Properties/Hardware'), 'rev3');
    assert.equal(ncmds.length, 0, 'no rebirth while the sequence is whole');
  });

  it('a sequence gap is answered with an NCMD rebirth request', async () => {
    // The client's own counter, moved on as if three messages were lost on the way.
    (client as unknown as { seq: number }).seq += 3;
    client.publishNodeData({
      timestamp: Date.now(),
      metrics: [{ name: 'uptime', type: 'Int64', value: 130 }],
    });
    const rebirth = await waitFor(() => ncmds.at(-1), 10_000, 'NCMD');
    const metric = rebirth.metrics?.[0];
    assert.equal(metric?.name, 'Node Control/Rebirth');
    assert.equal(metric?.value, true);
    // The data itself is kept.
    await waitFor(async () => (await latest(t, node.id, 'uptime')) === 130, 10_000, 'NDATA');
  });

  it('a REST RPC to a Sparkplug device goes out as a DCMD metric write', async () => {
    const pump1 = await deviceId('Pump1');
    const res = await t.api(`/api/rpc/twoway/${pump1}`, {
      token: admin,
      body: { method: 'DCMD', params: { metricName: 'setpoint', value: 7 }, timeout: 10_000 },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { result: 'Success: DCMD' });
    const cmd = await waitFor(() => dcmds.at(-1), 10_000, 'DCMD');
    assert.equal(cmd.device, 'Pump1');
    const metric = cmd.payload.metrics?.[0];
    // Written by alias, with the DBIRTH type.
    assert.equal(Number(metric?.alias), 11);
    assert.equal(metric?.type, 'Int32');
    assert.equal(metric?.value, 7);
    const unknown = await t.api(`/api/rpc/twoway/${pump1}`, {
      token: admin,
      body: { method: 'DCMD', params: { metricName: 'nope', value: 1 }, timeout: 10_000 },
    });
    assert.match(((await unknown.json()) as { error: string }).error, /does not have a metricName/);
  });

  it('a shared attribute named like a birth metric goes out as a DCMD', async () => {
    const pump2 = await deviceId('Pump2');
    const before = dcmds.length;
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${pump2}/SHARED_SCOPE`, {
      token: admin,
      body: { setpoint: 9, notAMetric: 1 },
    });
    assert.equal(res.status, 200);
    const cmd = await waitFor(() => dcmds[before], 10_000, 'DCMD');
    assert.equal(cmd.device, 'Pump2');
    assert.deepEqual(
      cmd.payload.metrics?.map((m) => [Number(m.alias), m.value]),
      [[21, 9]],
    );
  });

  it('NDEATH on an unclean disconnect marks the node and its devices inactive', async () => {
    const pump1 = (await deviceId('Pump1')) as string;
    const pump2 = (await deviceId('Pump2')) as string;
    assert.equal(await attribute(pump1, 'SERVER_SCOPE', 'active'), true);
    // The socket dies without a DISCONNECT: the broker publishes the node's will (NDEATH).
    const mqttClient = (client as unknown as { client: { stream: { destroy(): void } } }).client;
    mqttClient.stream.destroy();
    for (const id of [node.id, pump1, pump2]) {
      await waitFor(
        async () => (await attribute(id, 'SERVER_SCOPE', 'active')) === false,
        10_000,
        `${id} inactive`,
      );
    }
  });
});
