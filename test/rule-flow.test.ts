/**
 * Flow nodes (rule-engine reference §1.1, §1.2) over real sockets: a root chain calls a child
 * chain with a rule chain node (its filter a TBEL script that is also JavaScript); the child's
 * output nodes send the message back, and their names route it on in the root chain: "Hot" to a
 * save timeseries node (read back over REST), "Cold" to a shared attribute that the subscribed
 * MQTT device receives. The labels endpoints, legacy
 * `ruleChainConnections` turned into rule chain nodes on import, the bulk export/import of
 * ThingsBoard's `RuleChainData` with its ids rewritten, and two chains that call each other: the
 * message goes to Failure at the depth bound and is counted.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect, nextMessage } from './helpers/mqtt.js';
import { adminPost } from './helpers/notify.js';
import { chainFile } from './helpers/rule-chain.js';

const INPUT = 'org.thingsboard.rule.engine.flow.TbRuleChainInputNode';

interface Stats {
  chains: Array<{ id: string; name: string; failed: number; looped: number }>;
}

interface Metadata {
  nodes: Array<{ type: string; name: string; configuration: { ruleChainId?: string } }>;
  connections: Array<{ fromIndex: number; toIndex: number; type: string }>;
}

describe('rule chain and output nodes', () => {
  let t: TestGateway;
  let admin: string;
  let device: { id: string; token: string };
  let client: MqttClient;
  let childId: string;
  let rootId: string;
  const get = async <T>(path: string): Promise<T> => {
    const res = await t.api(path, { token: admin });
    assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
    return (await res.json()) as T;
  };

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    device = await createDevice(t, 'Kiln sensor');
    const child = await adminPost<{ id: { id: string } }>(
      t,
      '/api/ruleChain/import',
      chainFile(
        'Classify',
        [
          // TBEL that is also JavaScript runs as written (issue 14 item 5); the JS field is
          // not the one that runs.
          [
            'filter.TbJsFilterNode',
            'Is hot',
            {
              scriptLang: 'TBEL',
              tbelScript: 'return msg.temperature > 50;',
              jsScript: 'return false;',
            },
          ],
          [
            'transform.TbTransformMsgNode',
            'Hot band',
            {
              scriptLang: 'JS',
              jsScript:
                "msg.band = 'hot'; return {msg: msg, metadata: metadata, msgType: msgType};",
            },
          ],
          ['flow.TbRuleChainOutputNode', 'Cold', {}],
          ['flow.TbRuleChainOutputNode', 'Hot', {}],
        ],
        [
          [0, 1, 'True'],
          [0, 2, 'False'],
          [1, 3, 'Success'],
        ],
      ),
    );
    childId = child.id.id;
    const root = await adminPost<{ id: { id: string } }>(
      t,
      '/api/ruleChain/import',
      chainFile(
        'Flow root',
        [
          ['filter.TbMsgTypeSwitchNode', 'Type', {}],
          ['flow.TbRuleChainInputNode', 'Classify', { ruleChainId: childId }],
          ['telemetry.TbMsgTimeseriesNode', 'Save hot', {}],
          [
            'transform.TbTransformMsgNode',
            'As shared attribute',
            {
              scriptLang: 'JS',
              jsScript:
                "return {msg: {band: 'cold', last: msg.temperature}, metadata: metadata, msgType: 'POST_ATTRIBUTES_REQUEST'};",
            },
          ],
          ['telemetry.TbMsgAttributesNode', 'Save shared', { scope: 'SHARED_SCOPE' }],
        ],
        [
          [0, 1, 'Post telemetry'],
          [1, 2, 'Hot'],
          [1, 3, 'Cold'],
          [3, 4, 'Success'],
        ],
      ),
    );
    rootId = root.id.id;
    const made = await t.api(`/api/ruleChain/${rootId}/root`, { method: 'POST', token: admin });
    assert.equal(made.status, 200);
    client = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
    await client.subscribeAsync('v1/devices/me/attributes', { qos: 1 });
  });

  after(async () => {
    await client?.endAsync();
    await t?.close();
  });

  it('the child chain answers by output label: Hot is saved, Cold reaches the device', async () => {
    const cold = nextMessage(client, 'v1/devices/me/attributes', 20_000);
    await client.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 20 }), {
      qos: 1,
    });
    assert.deepEqual(JSON.parse((await cold).payload.toString()), { band: 'cold', last: 20 });

    await client.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 80 }), {
      qos: 1,
    });
    const band = await waitFor(
      async () => {
        const r = await get<Record<string, Array<{ value: string }>>>(
          `/api/plugins/telemetry/DEVICE/${device.id}/values/timeseries?keys=band`,
        );
        return r.band?.[0]?.value;
      },
      20_000,
      'the band saved by the root chain after the child answered Hot',
    );
    assert.equal(band, 'hot');
  });

  it('lists the output labels of a chain and the rule chain nodes that use them', async () => {
    assert.deepEqual(await get(`/api/ruleChain/${childId}/output/labels`), ['Cold', 'Hot']);
    assert.deepEqual(await get(`/api/ruleChain/${rootId}/output/labels`), []);
    const usage = await get<Array<Record<string, unknown>>>(
      `/api/ruleChain/${childId}/output/labels/usage`,
    );
    assert.equal(usage.length, 1);
    assert.deepEqual(usage[0]?.ruleChainId, { entityType: 'RULE_CHAIN', id: rootId });
    assert.equal(usage[0]?.ruleChainName, 'Flow root');
    assert.equal(usage[0]?.ruleNodeName, 'Classify');
    assert.deepEqual(usage[0]?.labels, ['Cold', 'Hot']);
    const bad = await t.api(`/api/ruleChain/00000000-0000-4000-8000-000000000000/output/labels`, {
      token: admin,
    });
    assert.equal(bad.status, 404);
  });

  it('turns legacy ruleChainConnections into rule chain nodes on import', async () => {
    const file = chainFile('Legacy', [['filter.TbMsgTypeSwitchNode', 'Type', {}]], []);
    const legacy = {
      ...file,
      metadata: {
        ...file.metadata,
        ruleChainConnections: [
          {
            fromIndex: 0,
            targetRuleChainId: { entityType: 'RULE_CHAIN', id: childId },
            additionalInfo: { layoutX: 400, layoutY: 150, ruleChainNodeId: 'rule-chain-node-3' },
            type: 'Post telemetry',
          },
        ],
      },
    };
    const chain = await adminPost<{ id: { id: string } }>(t, '/api/ruleChain/import', legacy);
    const meta = await get<Metadata & { ruleChainConnections: unknown }>(
      `/api/ruleChain/${chain.id.id}/metadata`,
    );
    assert.equal(meta.ruleChainConnections, null);
    assert.equal(meta.nodes[1]?.type, INPUT);
    assert.equal(meta.nodes[1]?.name, 'Classify');
    assert.equal(meta.nodes[1]?.configuration.ruleChainId, childId);
    assert.deepEqual(meta.connections, [{ fromIndex: 0, toIndex: 1, type: 'Post telemetry' }]);
    const bad = await t.api('/api/ruleChain/import', {
      token: admin,
      body: chainFile(
        'Bad call',
        [['flow.TbRuleChainInputNode', 'Nowhere', { ruleChainId: 'x' }]],
        [],
      ),
    });
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /'Nowhere' node configuration is invalid: ruleChainId/);
  });

  it('imports chains that call each other in bulk; a loop between them goes to Failure, counted', async () => {
    const ping = '11111111-1111-4111-8111-111111111111';
    const pong = '22222222-2222-4222-8222-222222222222';
    const loopChain = (id: string, name: string, calls: string) => {
      const f = chainFile(
        name,
        [['flow.TbRuleChainInputNode', `Call ${calls}`, { ruleChainId: calls }]],
        [],
      );
      return {
        ruleChain: { ...f.ruleChain, id: { entityType: 'RULE_CHAIN', id } },
        metadata: { ...f.metadata, ruleChainId: { entityType: 'RULE_CHAIN', id } },
      };
    };
    const a = loopChain(ping, 'Ping', pong);
    const b = loopChain(pong, 'Pong', ping);
    const file = { ruleChains: [a.ruleChain, b.ruleChain], metadata: [a.metadata, b.metadata] };
    // All or nothing: one refused chain stores none, and the 400 names it.
    const broken = loopChain('33333333-3333-4333-8333-333333333333', 'Broken', ping);
    broken.metadata.nodes[0] = { type: 'com.example.Custom', name: 'x', configuration: {} };
    const refused = await t.api('/api/ruleChains/import', {
      token: admin,
      body: {
        ruleChains: [...file.ruleChains, broken.ruleChain],
        metadata: [...file.metadata, broken.metadata],
      },
    });
    assert.equal(refused.status, 400);
    assert.match(
      await refused.text(),
      /Rule chain 'Broken': Unsupported rule node type: com\.example\.Custom/,
    );
    const none = await get<{ totalElements: number }>(
      '/api/ruleChains?pageSize=10&page=0&textSearch=Ping',
    );
    assert.equal(none.totalElements, 0);
    const results = await adminPost<
      Array<{ ruleChainId: { id: string }; ruleChainName: string; updated: boolean }>
    >(t, '/api/ruleChains/import', file);
    assert.deepEqual(
      results.map((r) => [r.ruleChainName, r.updated]),
      [
        ['Ping', false],
        ['Pong', false],
      ],
    );
    const [pingId, pongId] = results.map((r) => r.ruleChainId.id) as [string, string];
    assert.notEqual(pingId, ping);
    const pingMeta = await get<Metadata>(`/api/ruleChain/${pingId}/metadata`);
    assert.equal(pingMeta.nodes[0]?.configuration.ruleChainId, pongId);

    // Overwrite: the same file replaces both chains in place.
    const again = await adminPost<Array<{ ruleChainId: { id: string }; updated: boolean }>>(
      t,
      '/api/ruleChains/import?overwrite=true',
      file,
    );
    assert.deepEqual(
      again.map((r) => [r.ruleChainId.id, r.updated]),
      [
        [pingId, true],
        [pongId, true],
      ],
    );

    // The export names every chain by a fresh id, consistently inside the file.
    const exported = await get<{
      ruleChains: Array<{ id: { id: string }; name: string }>;
      metadata: Array<{ ruleChainId: { id: string } } & Metadata>;
    }>('/api/ruleChains/export?limit=100');
    const fileId = (name: string) => exported.ruleChains.find((c) => c.name === name)?.id.id;
    const exportedPing = exported.metadata.find((m) => m.ruleChainId.id === fileId('Ping'));
    assert.ok(fileId('Pong') && fileId('Pong') !== pongId);
    assert.equal(exportedPing?.nodes[0]?.configuration.ruleChainId, fileId('Pong'));
    assert.equal(exported.ruleChains.length, exported.metadata.length);

    // Attributes go from the root into Ping, which calls Pong, which calls Ping...
    const meta = await get<Metadata & { ruleChainId: unknown; version: number }>(
      `/api/ruleChain/${rootId}/metadata`,
    );
    const saved = await t.api('/api/ruleChain/metadata', {
      token: admin,
      body: {
        ...meta,
        nodes: [
          ...meta.nodes,
          { type: INPUT, name: 'Ping', configuration: { ruleChainId: pingId } },
        ],
        connections: [
          ...meta.connections,
          { fromIndex: 0, toIndex: meta.nodes.length, type: 'Post attributes' },
        ],
      },
    });
    assert.equal(saved.status, 200, await saved.clone().text());
    await client.publishAsync('v1/devices/me/attributes', JSON.stringify({ mode: 'loop' }), {
      qos: 1,
    });
    const looped = await waitFor(
      async () => {
        const s = await get<Stats>('/api/ruleChains/stats');
        const mine = s.chains.filter((c) => c.id === pingId || c.id === pongId);
        const n = mine.reduce((sum, c) => sum + c.looped, 0);
        return n > 0 ? mine : undefined;
      },
      20_000,
      'the loop between Ping and Pong stopped and counted',
    );
    assert.equal(
      looped.reduce((sum, c) => sum + c.looped, 0),
      1,
    );
    assert.equal(
      looped.reduce((sum, c) => sum + c.failed, 0),
      1,
    );
    const log = await waitFor(
      () => t.logs.find((l) => String(l.error ?? '').includes('rule chain calls nested deeper')),
      10_000,
      'the loop logged',
    );
    assert.equal(log.msg, 'rule chain message failed');
    const metrics = await (await t.api('/metrics', { token: admin })).text();
    assert.match(metrics, /edge_rule_chain_looped_total\{chain="P[io]ng"\} 1/);
  });
});
