/**
 * The rule nodes that no other test drives (docs/rules.md "Supported nodes"), over real sockets:
 * a ThingsBoard-format chain imported over REST and made the root; MQTT devices publish
 * telemetry; REST API call nodes report what reached each branch to the test's HTTP server.
 * check fields presence (True/False), originator attributes (shared and server scope into
 * metadata; Failure when absent), originator telemetry (ALL within metadata interval patterns),
 * copy keys (metadata -> data), delete keys (regular expressions), script switch (one label, two
 * labels), log (its script's text in the gateway's log), delay (the copy comes later; past maxPendingMsgs to Failure) and rpc call request (the
 * device's reply over MQTT continues the chain on Success).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { adminPost, type Recorded, startRecorder } from './helpers/notify.js';
import { chainFile, type Link, type NodeDef } from './helpers/rule-chain.js';

/** What a branch's REST API call node posted: the envelope the chain built. */
interface Envelope {
  data: Record<string, unknown>;
  history: Array<{ ts: number; value: unknown }> | null;
}

describe('rule nodes', () => {
  let t: TestGateway;
  let recorder: Awaited<ReturnType<typeof startRecorder>>;
  let hall: { id: string; token: string };
  let bare: { id: string; token: string };
  let hallClient: MqttClient;
  const OLD = Date.now() - 3_600_000;

  before(async () => {
    t = await startGateway();
    recorder = await startRecorder();
    hall = await createDevice(t, 'Hall sensor');
    bare = await createDevice(t, 'Bare sensor');
    const admin = await t.adminToken();
    const save = async (scope: string, body: unknown) => {
      const res = await t.api(`/api/plugins/telemetry/DEVICE/${hall.id}/attributes/${scope}`, {
        body,
        token: admin,
      });
      assert.equal(res.status, 200, await res.text());
    };
    await save('SHARED_SCOPE', { setpoint: 21 });
    await save('SERVER_SCOPE', { site: 'Hall 3' });
    hallClient = await mqttConnect(t.gw.ports.mqtt, { username: hall.token });
    // Two old points for the telemetry node, stored by the default root chain.
    await hallClient.publishAsync(
      'v1/devices/me/telemetry',
      JSON.stringify([
        { ts: OLD, values: { temperature: 40 } },
        { ts: OLD + 1000, values: { temperature: 45 } },
      ]),
      { qos: 1 },
    );

    const rest = (path: string): NodeDef => [
      'rest.TbRestApiCallNode',
      `POST ${path}`,
      { restEndpointUrlPattern: `${recorder.url}${path}`, requestMethod: 'POST' },
    ];
    const nodes: NodeDef[] = [
      /* 0 */ [
        'filter.TbCheckMessageNode',
        'Has temperature',
        { messageNames: ['temperature'], metadataNames: ['deviceName'], checkAllKeys: true },
      ],
      /* 1 */ [
        'metadata.TbGetAttributesNode',
        'Setpoint and site',
        {
          sharedAttributeNames: ['setpoint'],
          serverAttributeNames: ['site'],
          tellFailureIfAbsent: true,
          fetchTo: 'METADATA',
        },
      ],
      /* 2 */ [
        'metadata.TbGetTelemetryNode',
        'Earlier temperatures',
        {
          latestTsKeyNames: ['temperature'],
          fetchMode: 'ALL',
          useMetadataIntervalPatterns: true,
          startIntervalPattern: '0',
          endIntervalPattern: `${OLD + 60_000}`,
          orderBy: 'ASC',
        },
      ],
      /* 3 */ [
        'transform.TbCopyKeysNode',
        'Attributes into data',
        { copyFrom: 'METADATA', keys: ['shared_.*', 'ss_site'] },
      ],
      /* 4 */ ['transform.TbDeleteKeysNode', 'No junk', { deleteFrom: 'DATA', keys: ['junk.*'] }],
      /* 5 */ [
        'transform.TbTransformMsgNode',
        'Envelope',
        {
          scriptLang: 'JS',
          jsScript:
            'return {msg: {data: msg, history: metadata.temperature ? JSON.parse(metadata.temperature) : null}, metadata: metadata, msgType: msgType};',
        },
      ],
      /* 6 */ [
        'filter.TbJsSwitchNode',
        'Route',
        {
          scriptLang: 'JS',
          jsScript:
            "if (msg.data.rpc) return 'rpc'; return msg.data.temperature > 50 ? ['hot', 'audit'] : 'cold';",
        },
      ],
      /* 7 */ rest('/hot'),
      /* 8 */ rest('/audit'),
      /* 9 */ ['delay.TbMsgDelayNode', 'Wait', { periodInSeconds: 2, maxPendingMsgs: 2 }],
      /* 10 */ rest('/cold'),
      /* 11 */ rest('/delay-full'),
      /* 12 */ [
        'transform.TbTransformMsgNode',
        'To RPC',
        {
          scriptLang: 'JS',
          jsScript:
            "return {msg: {method: 'setGpio', params: {pin: msg.data.rpc}}, metadata: metadata, msgType: 'RPC_CALL_FROM_SERVER_TO_DEVICE'};",
        },
      ],
      /* 13 */ ['rpc.TbSendRPCRequestNode', 'Call device', { timeoutInSeconds: 60 }],
      /* 14 */ rest('/rpc-reply'),
      /* 15 */ rest('/missing'),
      /* 16 */ rest('/absent'),
      /* 17 */ [
        'action.TbLogNode',
        'Log missing',
        {
          scriptLang: 'JS',
          jsScript:
            "return 'no temperature from ' + metadata.deviceName + ': ' + JSON.stringify(msg);",
        },
      ],
    ];
    const links: Link[] = [
      [0, 1, 'True'],
      [0, 15, 'False'],
      [0, 17, 'False'],
      [1, 2, 'Success'],
      [1, 16, 'Failure'],
      [2, 3, 'Success'],
      [3, 4, 'Success'],
      [4, 5, 'Success'],
      [5, 6, 'Success'],
      [6, 7, 'hot'],
      [6, 8, 'audit'],
      [6, 9, 'cold'],
      [6, 12, 'rpc'],
      [9, 10, 'Success'],
      [9, 11, 'Failure'],
      [12, 13, 'Success'],
      [13, 14, 'Success'],
    ];
    // Everything above was stored under the default root chain; now the test's chain takes over.
    await waitFor(async () => {
      const res = await t.api(
        `/api/plugins/telemetry/DEVICE/${hall.id}/values/timeseries?keys=temperature&startTs=0&endTs=${OLD + 2000}`,
        { token: admin },
      );
      const body = (await res.json()) as { temperature?: unknown[] };
      return body.temperature?.length === 2;
    });
    const imported = await adminPost(t, '/api/ruleChain/import', chainFile('Nodes', nodes, links));
    const root = await t.api(`/api/ruleChain/${imported.id.id}/root`, {
      method: 'POST',
      token: admin,
    });
    assert.equal(root.status, 200);
  });
  after(async () => {
    await hallClient?.endAsync();
    await t.close();
    await recorder.close();
  });

  const posted = (path: string): Recorded[] => recorder.requests.filter((r) => r.url === path);
  const envelope = (r: Recorded | undefined): Envelope => JSON.parse(r?.body ?? '{}') as Envelope;
  const publish = (client: MqttClient, values: unknown) =>
    client.publishAsync('v1/devices/me/telemetry', JSON.stringify(values), { qos: 1 });

  it('enriches, copies and deletes keys, then a script switch sends one message down two branches', async () => {
    await publish(hallClient, { temperature: 61, junk1: 1, junkY: 2, keep: 3 });
    await waitFor(() => posted('/hot').length === 1 && posted('/audit').length === 1, 20_000);
    const hot = envelope(posted('/hot')[0]);
    assert.deepEqual(hot.data, {
      temperature: 61,
      keep: 3,
      shared_setpoint: '21',
      ss_site: 'Hall 3',
    });
    assert.deepEqual(
      hot.history?.map((p) => [p.ts, p.value]),
      [
        [OLD, 40],
        [OLD + 1000, 45],
      ],
    );
    assert.deepEqual(envelope(posted('/audit')[0]), hot);
  });

  it('check fields presence sends a message without the field to False; absent attributes go to Failure', async () => {
    await publish(hallClient, { humidity: 50 });
    const bareClient = await mqttConnect(t.gw.ports.mqtt, { username: bare.token });
    try {
      await publish(bareClient, { temperature: 5 });
    } finally {
      await bareClient.endAsync();
    }
    // Other messages without the field (the bare device's connect and activity events) also
    // reach /missing; the telemetry is the one with data.
    const missing = await waitFor(
      () => posted('/missing').find((r) => r.body.includes('humidity')),
      20_000,
      'the telemetry without temperature',
    );
    assert.deepEqual(JSON.parse(missing.body), { humidity: 50 });
    const logged = await waitFor(
      () => t.logs.find((l) => l.msg === 'no temperature from Hall sensor: {"humidity":50}'),
      20_000,
      'the log node',
    );
    assert.equal(logged.node, 'Log missing');
    assert.equal(logged.level, 'info');
    const absent = await waitFor(() => posted('/absent')[0], 20_000, 'the bare device');
    assert.deepEqual(JSON.parse(absent.body), { temperature: 5 });
    assert.equal(posted('/absent').length, 1);
  });

  it('a delay node passes copies after its period; past maxPendingMsgs the message goes to Failure', async () => {
    const start = Date.now();
    await Promise.all([11, 12, 13].map((temperature) => publish(hallClient, { temperature })));
    await waitFor(() => posted('/delay-full').length === 1, 20_000, 'the third message to fail');
    await waitFor(() => posted('/cold').length === 2, 20_000, 'two delayed copies');
    assert.ok(Date.now() - start >= 2000, 'the copies came after the 2 s period');
    const temps = posted('/cold')
      .map((r) => envelope(r).data.temperature)
      .sort();
    assert.equal(temps.length, 2);
    assert.ok(temps.every((x) => [11, 12, 13].includes(x as number)));
    assert.equal(posted('/hot').length, 1, 'nothing cold went to /hot');
  });

  it('an rpc call request node calls the device over MQTT; its reply continues the chain', async () => {
    await hallClient.subscribeAsync('v1/devices/me/rpc/request/+', { qos: 1 });
    hallClient.on('message', (topic, payload) => {
      const m = /^v1\/devices\/me\/rpc\/request\/(\d+)$/.exec(topic);
      if (!m) return;
      const req = JSON.parse(payload.toString()) as { method: string; params: { pin: number } };
      void hallClient.publishAsync(
        `v1/devices/me/rpc/response/${m[1]}`,
        JSON.stringify({ method: req.method, pin: req.params.pin, ok: true }),
        { qos: 1 },
      );
    });
    await publish(hallClient, { temperature: 20, rpc: 7 });
    await waitFor(() => posted('/rpc-reply').length === 1, 20_000, 'the reply');
    assert.deepEqual(JSON.parse(posted('/rpc-reply')[0]?.body ?? '{}'), {
      method: 'setGpio',
      pin: 7,
      ok: true,
    });
  });
});
