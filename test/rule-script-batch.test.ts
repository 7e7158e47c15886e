/**
 * Script nodes on many messages at once (issue 14's ingest target): messages queued together walk
 * the chain together and each script node runs them in one sandbox call. Each message keeps its
 * own outcome (one exception sends only that message to Failure, a runaway script stops only its
 * own message), and every node sees the messages in the order they were queued.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { GatewayMsg } from '../src/messages/types.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { chainFile, type Link, type NodeDef } from './helpers/rule-chain.js';

describe('script nodes on batches of messages', () => {
  let t: TestGateway;
  let admin: string;
  let device: { id: string; token: string };

  const api = async (path: string, body?: unknown, method?: string) => {
    const res = await t.api(path, { body, method, token: admin });
    const text = await res.text();
    assert.ok(res.status === 200, `${path}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : {}) as Record<string, unknown>;
  };
  const msg = (data: unknown): GatewayMsg => ({
    id: randomUUID(),
    type: 'POST_ATTRIBUTES_REQUEST',
    originator: { entityType: 'DEVICE', id: device.id },
    metadata: { deviceName: 'batch-device', deviceType: 'default', ts: String(Date.now()) },
    data,
    ts: Date.now(),
  });
  const attributes = async () => {
    const res = await t.api(
      `/api/plugins/telemetry/DEVICE/${device.id}/values/attributes/SERVER_SCOPE`,
      {
        token: admin,
      },
    );
    const list = (await res.json()) as Array<{ key: string; value: unknown }>;
    return Object.fromEntries(list.map((a) => [a.key, a.value]));
  };
  const stats = async (chainId: string) => {
    const s = (await api('/api/ruleChains/stats')) as {
      chains: Array<{ id: string; failed: number; processed: number }>;
    };
    return s.chains.find((c) => c.id === chainId);
  };
  const failed = async (chainId: string) => (await stats(chainId))?.failed;
  /** A chain of the given nodes in a row (Success/True links), ending in save attributes. */
  const useChain = async (name: string, scripts: Array<[type: string, script: string]>) => {
    const file = chainFile(
      name,
      [
        ...scripts.map(
          ([type, jsScript], i): NodeDef => [type, `script ${i}`, { scriptLang: 'JS', jsScript }],
        ),
        ['telemetry.TbMsgAttributesNode', 'Save', { scope: 'SERVER_SCOPE' }],
      ],
      scripts.map(([type], i): Link => [i, i + 1, type.includes('Filter') ? 'True' : 'Success']),
    );
    const id = ((await api('/api/ruleChain/import', file)).id as { id: string }).id;
    await api(`/api/ruleChain/${id}/root`, undefined, 'POST');
    // The sandbox loads on the first script call: one message first, so that the rest are batched.
    t.gw.services.rules.engine.process(msg({ i: -1 }));
    await waitFor(async () => (await stats(id))?.processed === 1, 20_000, 'warm-up');
    return id;
  };

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
    device = await createDevice(t, 'batch-device');
  });
  after(async () => {
    await t.close();
  });

  it('keeps each message its own outcome and the queue order at every node', async () => {
    const chainId = await useChain('Batched', [
      [
        'transform.TbTransformMsgNode',
        `if (msg.i % 5 === 3) throw new Error('bad ' + msg.i);
globalThis.n = (globalThis.n || 0) + 1;
var out = {i: msg.i}; out['k' + msg.i] = globalThis.n;
return {msg: out, metadata: metadata, msgType: msgType};`,
      ],
      // No name of metadata in the text: reached through arguments, it is still passed.
      [
        'filter.TbJsFilterNode',
        "return arguments.length === 3 && arguments[1].deviceName === 'batch-device';",
      ],
      // Only msg named: metadata and msgType are not passed, msg is.
      ['filter.TbJsFilterNode', 'return msg.i >= 0 || msg.i === -1;'],
    ]);
    const engine = t.gw.services.rules.engine;
    for (let i = 0; i < 20; i++) engine.process(msg({ i }));
    const attrs = await waitFor(
      async () => {
        const a = await attributes();
        return a.k19 !== undefined ? a : undefined;
      },
      20_000,
      'the last message',
    );
    // The warm-up message was call 1; the 16 good messages are calls 2..17, in queue order.
    const good = Array.from({ length: 20 }, (_, i) => i).filter((i) => i % 5 !== 3);
    assert.deepEqual(
      good.map((i) => attrs[`k${i}`]),
      good.map((_, rank) => 2 + rank),
    );
    for (const i of [3, 8, 13, 18]) assert.equal(attrs[`k${i}`], undefined);
    assert.equal(await failed(chainId), 4);
  });

  it('stops only the runaway message of a batch; the others go on', async () => {
    const chainId = await useChain('Runaway in a batch', [
      [
        'transform.TbTransformMsgNode',
        `if (msg.loop) { for (;;) {} }
var out = {}; out['r' + msg.i] = msg.i;
return {msg: out, metadata: metadata, msgType: msgType};`,
      ],
    ]);
    const engine = t.gw.services.rules.engine;
    for (let i = 0; i < 6; i++) engine.process(msg({ i, loop: i === 2 }));
    const attrs = await waitFor(
      async () => {
        const a = await attributes();
        return a.r5 !== undefined ? a : undefined;
      },
      30_000,
      'the last message',
    );
    assert.deepEqual(
      [0, 1, 3, 4, 5].map((i) => attrs[`r${i}`]),
      [0, 1, 3, 4, 5],
    );
    assert.equal(attrs.r2, undefined);
    assert.equal(await failed(chainId), 1);
  });
});
