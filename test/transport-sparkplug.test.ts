/**
 * Issue 21 part 3: a Sparkplug B edge node over a real socket, driven by Eclipse Tahu's
 * third-party client (`sparkplug-client`, with its own payload encoder), not by our code.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import { newClient, type UPayload } from 'sparkplug-client';
import { get as sparkplugCodec } from 'sparkplug-payload';
import type { GatewayMsg } from '../src/messages/types.js';
import { createProfiledDevice, latest } from './helpers/alarms.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect, mqttRefusal, nextMessage } from './helpers/mqtt.js';

type SparkplugClient = ReturnType<typeof newClient>;

/** A device's id by its name; undefined while it does not exist. */
async function deviceIdOf(
  t: TestGateway,
  admin: string,
  name: string,
): Promise<string | undefined> {
  const res = await t.api(`/api/tenant/devices?deviceName=${encodeURIComponent(name)}`, {
    token: admin,
  });
  return res.status === 200 ? ((await res.json()) as { id: { id: string } }).id.id : undefined;
}

/** A profile whose devices are Sparkplug B edge nodes; returns its id. */
async function sparkplugProfile(
  t: TestGateway,
  admin: string,
  name: string,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const res = await t.api('/api/deviceProfile', {
    token: admin,
    body: {
      name,
      transportType: 'MQTT',
      profileData: { transportConfiguration: { type: 'MQTT', sparkplug: true, ...extra } },
    },
  });
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as { id: { id: string } }).id.id;
}

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
    const profileId = await sparkplugProfile(t, admin, 'Sparkplug nodes', {
      sparkplugAttributesMetricNames: ['Properties/*'],
    });
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

  const deviceId = (name: string) => deviceIdOf(t, admin, name);
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

/**
 * The rest of transport-profiles.md §4 with mqtt.js as the edge node (a will of QoS 1, as
 * ThingsBoard asks) and Tahu's `sparkplug-payload` encoder: the will checked at CONNECT,
 * connection-state telemetry, verb-keyed shared attributes, `mqttTopic`
 * metadata and the ingest labels.
 */
describe('Sparkplug B details (mqtt.js edge node)', () => {
  const codec = sparkplugCodec('spBv1.0');
  if (!codec) throw new Error('no spBv1.0 codec');
  const encode = (p: Parameters<typeof codec.encodePayload>[0]) =>
    Buffer.from(codec.encodePayload(p));
  const msgs: GatewayMsg[] = [];
  let t: TestGateway;
  let admin: string;
  let node: { id: string; token: string };
  let client: MqttClient;
  const will = (bdSeq: number) => ({
    topic: 'spBv1.0/G1/NDEATH/E1',
    payload: encode({
      timestamp: Date.now(),
      metrics: [{ name: 'bdSeq', type: 'UInt64', value: bdSeq }],
    }),
    qos: 1 as const,
    retain: false,
  });

  before(async () => {
    t = await startGateway({ messageProcessor: { process: (m) => void msgs.push(m) } });
    admin = await t.adminToken();
    const profileId = await sparkplugProfile(t, admin, 'Sparkplug details');
    node = await createProfiledDevice(t, 'edge-node-2', profileId);
  });
  after(async () => {
    await client?.endAsync().catch(() => undefined);
    await t.close();
  });

  const latestOf = async (id: string, key: string) => {
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${id}/values/timeseries?keys=${encodeURIComponent(key)}&useStrictDataTypes=true`,
      { token: admin },
    );
    return ((await res.json()) as Record<string, Array<{ value: unknown }>>)[key]?.[0]?.value;
  };
  const deviceId = (name: string) => deviceIdOf(t, admin, name);

  it('refuses a CONNECT without an NDEATH will; stores the will bdSeq as NDEATH bdSeq', async () => {
    const refused = await mqttRefusal(t.gw.ports.mqtt, {
      username: node.token,
      protocolVersion: 4,
    });
    assert.equal(refused, 3, 'server unavailable, as ThingsBoard answers');
    const wrong = await mqttRefusal(t.gw.ports.mqtt, {
      username: node.token,
      protocolVersion: 4,
      will: { ...will(1), topic: 'spBv1.0/G1/NDATA/E1' },
    });
    assert.equal(wrong, 3);
    client = await mqttConnect(t.gw.ports.mqtt, {
      username: node.token,
      protocolVersion: 5,
      clean: true,
      properties: { sessionExpiryInterval: 0 },
      will: will(3),
    });
    await waitFor(
      async () => (await latestOf(node.id, 'NDEATH bdSeq')) === 3,
      10_000,
      'NDEATH bdSeq',
    );
  });

  it('NBIRTH must repeat the will bdSeq; then the node is ONLINE with NBIRTH bdSeq', async () => {
    const birth = (bdSeq: number) =>
      encode({
        timestamp: Date.now(),
        seq: 0,
        metrics: [
          { name: 'bdSeq', type: 'UInt64', value: bdSeq },
          { name: 'temp', type: 'Double', value: 20.5, alias: 1 },
        ],
      });
    await assert.rejects(client.publishAsync('spBv1.0/G1/NBIRTH/E1', birth(4), { qos: 1 }));
    await client.publishAsync('spBv1.0/G1/NBIRTH/E1', birth(3), { qos: 1 });
    assert.equal(await latestOf(node.id, 'sparkplugConnectionState'), 'ONLINE');
    assert.equal(await latestOf(node.id, 'NBIRTH bdSeq'), 3);
    assert.equal(await latestOf(node.id, 'temp'), 20.5);
    const tel = await waitFor(
      () =>
        msgs.find(
          (m) =>
            m.originator.id === node.id &&
            m.type === 'POST_TELEMETRY_REQUEST' &&
            (m.data as Record<string, unknown>).temp !== undefined,
        ),
      10_000,
      'telemetry message',
    );
    assert.equal(tel.metadata.mqttTopic, 'spBv1.0/G1/NBIRTH/E1');
  });

  it('DBIRTH stores ONLINE and DBIRTH seq; DDEATH stores OFFLINE', async () => {
    const now = Date.now();
    for (const [i, name] of ['D1', 'D2'].entries()) {
      await client.publishAsync(
        `spBv1.0/G1/DBIRTH/E1/${name}`,
        encode({
          timestamp: now,
          seq: i + 1,
          metrics: [{ name: 'level', type: 'Int32', value: i, alias: 10 + i, timestamp: now }],
        }),
        { qos: 1 },
      );
    }
    const d1 = (await deviceId('D1')) as string;
    const d2 = (await deviceId('D2')) as string;
    for (const [id, seq] of [
      [d1, 1],
      [d2, 2],
    ] as const) {
      assert.equal(await latestOf(id, 'sparkplugConnectionState'), 'ONLINE');
      assert.equal(await latestOf(id, 'DBIRTH seq'), seq);
    }
    await client.publishAsync(
      'spBv1.0/G1/DDATA/E1/D1',
      encode({ timestamp: now + 1, seq: 3, metrics: [{ alias: 10, type: 'Int32', value: 42 }] }),
      { qos: 1 },
    );
    assert.equal(await latestOf(d1, 'level'), 42);
    await client.publishAsync(
      'spBv1.0/G1/DDEATH/E1/D2',
      encode({ timestamp: now + 2, seq: 4, metrics: [] }),
      { qos: 1 },
    );
    await waitFor(
      async () => (await latestOf(d2, 'sparkplugConnectionState')) === 'OFFLINE',
      10_000,
      'D2 OFFLINE',
    );
    assert.equal(await latestOf(d1, 'sparkplugConnectionState'), 'ONLINE');
  });

  it('a JSON shared attribute keyed by a verb picks the verb: {"DDATA":{"level":5}}', async () => {
    await client.subscribeAsync('spBv1.0/G1/+/E1/#', { qos: 1 });
    const d1 = (await deviceId('D1')) as string;
    const next = nextMessage(client, 'spBv1.0/G1/DDATA/E1/D1', 10_000);
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${d1}/SHARED_SCOPE`, {
      token: admin,
      body: { DDATA: { level: 5 } },
    });
    assert.equal(res.status, 200);
    const cmd = codec.decodePayload((await next).payload);
    const metric = cmd.metrics?.[0];
    assert.equal(Number(metric?.alias), 10, 'written by the DBIRTH alias');
    assert.equal(metric?.value, 5);
  });

  it('labels Sparkplug messages in edge_ingest_messages_total; the node goes OFFLINE with its connection', async () => {
    const res = await t.api('/metrics', { token: admin });
    const text = await res.text();
    assert.match(
      text,
      /edge_ingest_messages_total\{transport="mqtt",type="sparkplug_birth"\} [1-9]/,
    );
    assert.match(
      text,
      /edge_ingest_messages_total\{transport="mqtt",type="sparkplug_data"\} [1-9]/,
    );
    assert.doesNotMatch(text, /type="other"/);
    await client.endAsync();
    await waitFor(
      async () => (await latestOf(node.id, 'sparkplugConnectionState')) === 'OFFLINE',
      10_000,
      'node OFFLINE',
    );
  });
});
