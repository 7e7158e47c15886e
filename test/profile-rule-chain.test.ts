/**
 * `defaultRuleChainId` of a device profile (issue 14 §3): messages of the profile's devices go
 * to that chain instead of the root chain; other devices stay on the root chain.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { adminPost } from './helpers/notify.js';

const P = 'org.thingsboard.rule.engine.';

describe('device profile default rule chain', () => {
  let t: TestGateway;
  let admin: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  const device = async (name: string, profileId?: string) => {
    const d = await adminPost(t, '/api/device', {
      name,
      ...(profileId ? { deviceProfileId: { entityType: 'DEVICE_PROFILE', id: profileId } } : {}),
    });
    const res = await t.api(`/api/device/${d.id.id}/credentials`, { token: admin });
    return { id: d.id.id, token: ((await res.json()) as { credentialsId: string }).credentialsId };
  };
  const latest = async (id: string) => {
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${id}/values/timeseries?keys=v,routed`, {
      token: admin,
    });
    const body = (await res.json()) as Record<string, Array<{ value: unknown }> | undefined>;
    // A key without data comes back as one entry with a null value.
    const value = (k: string) => body[k]?.[0]?.value ?? null;
    return { v: value('v'), routed: value('routed') };
  };

  it('routes a profile’s devices to its chain; others stay on the root chain', async () => {
    const chain = await adminPost(t, '/api/ruleChain/import', {
      ruleChain: { name: 'Line 2 chain', type: 'CORE', root: false, debugMode: false },
      metadata: {
        firstNodeIndex: 0,
        nodes: [
          {
            type: `${P}transform.TbTransformMsgNode`,
            name: 'mark',
            configuration: {
              scriptLang: 'JS',
              jsScript: 'msg.routed = 1; return {msg: msg, metadata: metadata, msgType: msgType};',
            },
          },
          { type: `${P}telemetry.TbMsgTimeseriesNode`, name: 'save', configuration: {} },
        ],
        connections: [{ fromIndex: 0, toIndex: 1, type: 'Success' }],
        ruleChainConnections: null,
      },
    });
    const profile = await adminPost<{
      id: { id: string };
      defaultRuleChainId: { id: string } | null;
    }>(t, '/api/deviceProfile', {
      name: 'Line 2',
      type: 'DEFAULT',
      defaultRuleChainId: { entityType: 'RULE_CHAIN', id: chain.id.id },
      profileData: {},
    });
    assert.equal(profile.defaultRuleChainId?.id, chain.id.id);
    const read = await t.api(`/api/deviceProfile/${profile.id.id}`, { token: admin });
    assert.equal(
      ((await read.json()) as { defaultRuleChainId: { id: string } }).defaultRuleChainId.id,
      chain.id.id,
    );

    const onLine = await device('line2-sensor', profile.id.id);
    const plain = await device('plain-sensor');
    for (const d of [onLine, plain]) {
      const client = await mqttConnect(t.gw.ports.mqtt, { username: d.token });
      await client.publishAsync('v1/devices/me/telemetry', JSON.stringify({ v: 5 }));
      await client.endAsync();
    }
    const routed = await waitFor(async () => {
      const l = await latest(onLine.id);
      return l.routed !== null ? l : undefined;
    });
    assert.equal(Number(routed.routed), 1);
    assert.equal(Number(routed.v), 5);
    await waitFor(async () => (await latest(plain.id)).v !== null);
    assert.equal((await latest(plain.id)).routed, null);

    const unknown = await t.api('/api/deviceProfile', {
      token: admin,
      body: {
        name: 'Line 3',
        type: 'DEFAULT',
        defaultRuleChainId: {
          entityType: 'RULE_CHAIN',
          id: '00000000-0000-4000-8000-000000000001',
        },
      },
    });
    assert.equal(unknown.status, 400);
    assert.match(((await unknown.json()) as { message: string }).message, /defaultRuleChainId/);
  });
});
