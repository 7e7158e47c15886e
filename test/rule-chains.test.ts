/**
 * Rule chains over REST (issue 14 §1–2, rule-engine reference §1): the default root chain, a
 * ThingsBoard-format export imported and exported back unchanged, metadata saves, the root
 * flag, deletion rules, and the 400s for unsupported node types and TBEL that is not JavaScript.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway } from './helpers/gateway.js';

const P = 'org.thingsboard.rule.engine.';

/** A chain as ThingsBoard's UI exports it (our own fixture, in its format). */
export function exportedChain(name = 'Temperature alerts') {
  return {
    ruleChain: {
      name,
      type: 'CORE',
      firstRuleNodeId: null,
      root: false,
      debugMode: false,
      configuration: null,
      additionalInfo: { description: 'imported from ThingsBoard' },
    },
    metadata: {
      firstNodeIndex: 0,
      nodes: [
        {
          type: `${P}filter.TbJsFilterNode`,
          name: 'Hot?',
          debugSettings: null,
          singletonMode: false,
          queueName: null,
          configurationVersion: 0,
          configuration: {
            scriptLang: 'TBEL',
            jsScript: 'return msg.temperature > 20;',
            tbelScript: 'return msg.temperature > 20;',
          },
          additionalInfo: { description: '', layoutX: 300, layoutY: 150 },
        },
        {
          type: `${P}transform.TbRenameKeysNode`,
          name: 'Rename',
          debugSettings: { failuresEnabled: true, allEnabled: false, allEnabledUntil: 0 },
          singletonMode: false,
          queueName: null,
          configurationVersion: 2,
          configuration: { renameIn: 'DATA', renameKeysMapping: { temperature: 'hot' } },
          additionalInfo: { description: '', layoutX: 600, layoutY: 150 },
        },
        {
          type: `${P}action.TbLogNode`,
          name: 'Log',
          debugSettings: null,
          singletonMode: false,
          queueName: null,
          configurationVersion: 0,
          configuration: {
            scriptLang: 'JS',
            jsScript: "return 'hot: ' + JSON.stringify(msg);",
            tbelScript: "return 'hot: ' + JSON.stringify(msg);",
          },
          additionalInfo: { description: '', layoutX: 900, layoutY: 150 },
        },
      ],
      connections: [
        { fromIndex: 0, toIndex: 1, type: 'True' },
        { fromIndex: 1, toIndex: 2, type: 'Success' },
      ],
      ruleChainConnections: null,
    },
  };
}

describe('rule chains over REST', () => {
  let t: TestGateway;
  let admin: string;
  const call = async (path: string, init: { method?: string; body?: unknown } = {}) => {
    const res = await t.api(path, { ...init, token: admin });
    const text = await res.text();
    return {
      status: res.status,
      body: (text ? JSON.parse(text) : {}) as Record<string, unknown>,
    };
  };

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  it('creates the default root chain on first start, and only once', async () => {
    const list = await call('/api/ruleChains?pageSize=10&page=0');
    assert.equal(list.status, 200);
    const data = list.body.data as Array<{ name: string; root: boolean; id: { id: string } }>;
    assert.equal(data.length, 1);
    assert.equal(data[0]?.name, 'Root Rule Chain');
    assert.equal(data[0]?.root, true);
    const meta = await call(`/api/ruleChain/${data[0]?.id.id}/metadata`);
    const types = (meta.body.nodes as Array<{ type: string }>).map((n) => n.type);
    assert.ok(types.includes(`${P}rpc.TbSendRPCReplyNode`));
    assert.ok(types.includes(`${P}profile.TbDeviceProfileNode`));
    assert.equal(meta.body.firstNodeIndex, 0);
    // Its scripts are compiled when they first run, not at start: the sandbox is not loaded yet.
    assert.equal(t.gw.services.rules.scripts.loaded, false);
    // It passes the save-time check, which compiles every script (init stores it unchecked).
    const saved = await call('/api/ruleChain/metadata', { body: meta.body });
    assert.equal(saved.status, 200, JSON.stringify(saved.body));
    assert.equal(t.gw.services.rules.scripts.loaded, true);
  });

  it('imports a ThingsBoard export and exports the same JSON back', async () => {
    const file = exportedChain();
    const imported = await call('/api/ruleChain/import', { body: file });
    assert.equal(imported.status, 200, JSON.stringify(imported.body));
    const id = (imported.body.id as { id: string }).id;
    assert.equal(imported.body.root, false);
    assert.equal(imported.body.name, 'Temperature alerts');
    assert.equal((imported.body.firstRuleNodeId as { entityType: string }).entityType, 'RULE_NODE');

    const exported = await call(`/api/ruleChain/${id}/export`);
    assert.equal(exported.status, 200);
    assert.deepEqual(exported.body, file);

    const meta = await call(`/api/ruleChain/${id}/metadata`);
    const nodes = meta.body.nodes as Array<{ id: { id: string }; name: string }>;
    assert.equal(nodes.length, 3);
    assert.deepEqual((meta.body.ruleChainId as { id: string }).id, id);

    // Save the metadata back with one node renamed: node ids are kept, the version moves on.
    const renamed = {
      ...meta.body,
      nodes: nodes.map((n) => (n.name === 'Log' ? { ...n, name: 'Log hot' } : n)),
    };
    const saved = await call('/api/ruleChain/metadata', { body: renamed });
    assert.equal(saved.status, 200, JSON.stringify(saved.body));
    const savedNodes = saved.body.nodes as Array<{ id: { id: string }; name: string }>;
    assert.deepEqual(
      savedNodes.map((n) => n.id.id),
      nodes.map((n) => n.id.id),
    );
    assert.equal(savedNodes[2]?.name, 'Log hot');
    // A stale version is a concurrent edit.
    const stale = await call('/api/ruleChain/metadata', { body: { ...renamed, version: 1 } });
    assert.equal(stale.status, 409);

    const got = await call(`/api/ruleChain/${id}`);
    assert.equal(got.body.name, 'Temperature alerts');
    const renamedChain = await call('/api/ruleChain', {
      body: { ...got.body, name: 'Hot things' },
    });
    assert.equal(renamedChain.status, 200);
    assert.equal(renamedChain.body.name, 'Hot things');

    const page = await call('/api/ruleChains?pageSize=1&page=0&sortProperty=name&sortOrder=ASC');
    assert.equal(page.body.totalElements, 2);
    assert.equal(page.body.hasNext, true);
    assert.equal((page.body.data as Array<{ name: string }>)[0]?.name, 'Hot things');
    const search = await call('/api/ruleChains?pageSize=10&page=0&textSearch=hot');
    assert.equal(search.body.totalElements, 1);
  });

  it('refuses unsupported node types with a 400 naming each, and stores nothing', async () => {
    const file = exportedChain('Unsupported');
    file.metadata.nodes.push(
      {
        ...file.metadata.nodes[2],
        type: `${P}flow.TbCheckpointNode`,
      } as (typeof file.metadata.nodes)[number],
      {
        ...file.metadata.nodes[2],
        type: 'com.example.CustomNode',
      } as (typeof file.metadata.nodes)[number],
      {
        ...file.metadata.nodes[2],
        type: 'com.example.CustomNode',
      } as (typeof file.metadata.nodes)[number],
    );
    const res = await call('/api/ruleChain/import', { body: file });
    assert.equal(res.status, 400);
    assert.equal(
      res.body.message,
      `Unsupported rule node types: ${P}flow.TbCheckpointNode, com.example.CustomNode`,
    );
    const list = await call('/api/ruleChains?pageSize=10&page=0&textSearch=Unsupported');
    assert.equal(list.body.totalElements, 0);
  });

  it('refuses TBEL that is not JavaScript on save, naming the line', async () => {
    const file = exportedChain('TBEL');
    const node = file.metadata.nodes[0] as { configuration: Record<string, unknown> };
    node.configuration = {
      scriptLang: 'TBEL',
      tbelScript:
        'var total = 0;\nforeach (item : msg.items) { total += item; }\nreturn total > 3;',
      jsScript: '',
    };
    const res = await call('/api/ruleChain/import', { body: file });
    assert.equal(res.status, 400);
    assert.match(
      String(res.body.message),
      /'Hot\?' node configuration is invalid: tbelScript: .*line 2/,
    );
    // TBEL that is also JavaScript is accepted (the other nodes of the fixture).
    node.configuration = { scriptLang: 'TBEL', tbelScript: 'return msg.items.length > 3;' };
    assert.equal((await call('/api/ruleChain/import', { body: file })).status, 200);
  });

  it('refuses bad graphs and bad configurations with every problem named', async () => {
    const file = exportedChain('Broken');
    file.metadata.connections.push({ fromIndex: 2, toIndex: 0, type: 'Success' });
    file.metadata.connections.push({ fromIndex: 1, toIndex: 7, type: 'Success' });
    (file.metadata.nodes[1] as { configuration: unknown }).configuration = {
      renameIn: 'DATA',
      renameKeysMapping: {},
    };
    const res = await call('/api/ruleChain/import', { body: file });
    assert.equal(res.status, 400);
    const message = String(res.body.message);
    assert.match(message, /connection 1 -> 7 \(Success\) names a node that does not exist/);
    assert.match(message, /connections make a cycle/);
    assert.match(message, /'Rename' node configuration is invalid: renameKeysMapping/);
    const noName = await call('/api/ruleChain', { body: { name: ' ' } });
    assert.equal(noName.status, 400);
  });

  it('moves the root flag and refuses to delete the root chain', async () => {
    const list = await call('/api/ruleChains?pageSize=10&page=0&sortProperty=createdTime');
    const chains = list.body.data as Array<{ id: { id: string }; root: boolean; name: string }>;
    const oldRoot = chains.find((c) => c.root);
    const other = chains.find((c) => !c.root);
    assert.ok(oldRoot && other);
    const refused = await call(`/api/ruleChain/${oldRoot.id.id}`, { method: 'DELETE' });
    assert.equal(refused.status, 400);
    assert.equal(refused.body.message, 'Deletion of Root Tenant Rule Chain is prohibited!');

    const moved = await call(`/api/ruleChain/${other.id.id}/root`, { method: 'POST' });
    assert.equal(moved.status, 200);
    assert.equal(moved.body.root, true);
    assert.equal((await call(`/api/ruleChain/${oldRoot.id.id}`)).body.root, false);
    // Back, so the default chain serves the other tests' devices.
    await call(`/api/ruleChain/${oldRoot.id.id}/root`, { method: 'POST' });

    assert.equal((await call(`/api/ruleChain/${other.id.id}`, { method: 'DELETE' })).status, 200);
    assert.equal((await call(`/api/ruleChain/${other.id.id}`)).status, 404);
    assert.equal((await call('/api/ruleChain/not-a-uuid')).status, 400);
  });
});
