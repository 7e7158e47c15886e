/**
 * Issue 13: device uplinks are evaluated for alarms inside the commit that stores them, so a
 * device's acknowledgement (MQTT PUBACK, HTTP 200, CoAP 2.01) implies that the alarm, the rule
 * state and the notification outbox rows are committed: the first REST read after it shows the
 * alarm. A rule whose writes fail rolls back alone; the reading still commits.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { DB_FILE } from '../src/db/open.js';
import type { GatewayMsg, MessageProcessor } from '../src/messages/types.js';
import {
  alarmsOf,
  createProfile,
  createProfiledDevice,
  latest,
  numeric,
  rule,
  settled,
} from './helpers/alarms.js';
import { coapRequest } from './helpers/coap.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { adminPost } from './helpers/notify.js';

const HOT = {
  id: 'hot',
  alarmType: 'Hot',
  createRules: { CRITICAL: rule([numeric('temperature', 'GREATER', 30)]) },
  clearRule: rule([numeric('temperature', 'LESS_OR_EQUAL', 25)]),
};
const HUMID = {
  id: 'humid',
  alarmType: 'Humid',
  createRules: {
    MAJOR: rule([numeric('humidity', 'GREATER', 80)], {
      type: 'REPEATING',
      predicate: { defaultValue: 3, userValue: null, dynamicValue: null },
    }),
  },
};

/** The alarm of a type, uncleared or not, as the first REST read shows it. */
async function current(t: TestGateway, deviceId: string, type: string) {
  return (await alarmsOf(t, deviceId)).find((a) => a.type === type);
}

async function metric(t: TestGateway, name: string): Promise<number> {
  const text = await (await t.api('/metrics', { token: await t.adminToken() })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1] ?? Number.NaN);
}

describe('alarms in the commit of the reading', () => {
  let t: TestGateway;
  let profileId: string;

  before(async () => {
    t = await startGateway();
    profileId = await createProfile(t, 'In commit', [HOT, HUMID]);
  });
  after(() => t.close());

  it('MQTT: the first REST read after each PUBACK shows the alarm raised or cleared', async () => {
    const d = await createProfiledDevice(t, 'commit-mqtt', profileId);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'commit-mqtt' });
    try {
      for (let i = 0; i < 10; i++) {
        await c.publishAsync('v1/devices/me/telemetry', `{"temperature":${35 + i}}`, { qos: 1 });
        const raised = await current(t, d.id, 'Hot');
        assert.equal(raised?.status, 'ACTIVE_UNACK', `round ${i}: alarm after the PUBACK`);
        await c.publishAsync('v1/devices/me/telemetry', '{"temperature":20}', { qos: 1 });
        const cleared = await current(t, d.id, 'Hot');
        assert.equal(cleared?.status, 'CLEARED_UNACK', `round ${i}: cleared after the PUBACK`);
      }
      assert.equal((await alarmsOf(t, d.id)).length, 10);
    } finally {
      await c.endAsync();
    }
  });

  it('HTTP and CoAP: the first REST read after the 200 / 2.01 shows the alarm', async () => {
    const h = await createProfiledDevice(t, 'commit-http', profileId);
    const res = await fetch(`${t.baseUrl}/api/v1/${h.token}/telemetry`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"temperature":40}',
    });
    assert.equal(res.status, 200);
    assert.equal((await current(t, h.id, 'Hot'))?.status, 'ACTIVE_UNACK');

    const k = await createProfiledDevice(t, 'commit-coap', profileId);
    const reply = await coapRequest({
      port: t.gw.ports.coap,
      method: 'POST',
      pathname: `/api/v1/${k.token}/telemetry`,
      payload: '{"temperature":41}',
    });
    assert.equal(reply.code, '2.01');
    assert.equal((await current(t, k.id, 'Hot'))?.status, 'ACTIVE_UNACK');
  });

  it('client attributes are evaluated in their commit too', async () => {
    const attrProfile = await createProfile(t, 'Attr in commit', [
      {
        id: 'mode',
        alarmType: 'Bad mode',
        createRules: { WARNING: rule([numeric('level', 'GREATER', 5, { type: 'ATTRIBUTE' })]) },
      },
    ]);
    const d = await createProfiledDevice(t, 'commit-attrs', attrProfile);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'commit-attrs' });
    try {
      await c.publishAsync('v1/devices/me/attributes', '{"level":9}', { qos: 1 });
      assert.equal((await current(t, d.id, 'Bad mode'))?.severity, 'WARNING');
    } finally {
      await c.endAsync();
    }
  });

  it('REPEATING: each reading counts once (the Device Profile node does not evaluate it again)', async () => {
    const d = await createProfiledDevice(t, 'commit-repeat', profileId);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'commit-repeat' });
    try {
      for (const h of [85, 86]) {
        await c.publishAsync('v1/devices/me/telemetry', `{"humidity":${h}}`, { qos: 1 });
      }
      // Every message went through the root chain (its first node is the Device Profile node).
      await settled(t);
      assert.equal(await current(t, d.id, 'Humid'), undefined, 'two of three: no alarm yet');
      await c.publishAsync('v1/devices/me/telemetry', '{"humidity":87}', { qos: 1 });
      assert.equal((await current(t, d.id, 'Humid'))?.severity, 'MAJOR');
    } finally {
      await c.endAsync();
    }
  });
});

describe('a chain where a script comes before the Device Profile node', () => {
  let t: TestGateway;

  before(async () => {
    t = await startGateway();
  });
  after(() => t.close());

  it('is evaluated by the node after the commit, on the message as the script made it', async () => {
    const P = 'org.thingsboard.rule.engine.';
    // The script lowers every temperature by 15 before the alarm rules see it.
    const chain = await adminPost(t, '/api/ruleChain/import', {
      ruleChain: { name: 'Calibrated', type: 'CORE', root: false, debugMode: false },
      metadata: {
        firstNodeIndex: 0,
        nodes: [
          {
            type: `${P}transform.TbTransformMsgNode`,
            name: 'calibrate',
            configuration: {
              scriptLang: 'JS',
              jsScript:
                'msg.temperature = msg.temperature - 15; return {msg: msg, metadata: metadata, msgType: msgType};',
            },
          },
          { type: `${P}profile.TbDeviceProfileNode`, name: 'alarms', configuration: {} },
        ],
        connections: [{ fromIndex: 0, toIndex: 1, type: 'Success' }],
        ruleChainConnections: null,
      },
    });
    const profile = await adminPost<{ id: { id: string } }>(t, '/api/deviceProfile', {
      name: 'Calibrated',
      type: 'DEFAULT',
      defaultRuleChainId: { entityType: 'RULE_CHAIN', id: chain.id.id },
      profileData: { alarms: [HOT] },
    });
    const d = await createProfiledDevice(t, 'calibrated-1', profile.id.id);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'calibrated-1' });
    try {
      // 40 raw is 25 calibrated: no alarm (an evaluation in the commit would have seen 40).
      await c.publishAsync('v1/devices/me/telemetry', '{"temperature":40}', { qos: 1 });
      await settled(t);
      assert.deepEqual(await alarmsOf(t, d.id), []);
      await c.publishAsync('v1/devices/me/telemetry', '{"temperature":50}', { qos: 1 });
      const [alarm] = await waitFor(async () => {
        const list = await alarmsOf(t, d.id);
        return list.length > 0 ? list : undefined;
      });
      assert.equal(alarm.type, 'Hot');
    } finally {
      await c.endAsync();
    }
  });
});

describe('alarms in the commit, with the processing entry point stalled', () => {
  let t: TestGateway;
  const held: string[] = [];

  before(async () => {
    // The rule chains never run: whatever is committed was written by the reading's own commit.
    const stalled: MessageProcessor = { process: (msg) => void held.push(msg.type) };
    t = await startGateway({ messageProcessor: (_s, _standard) => stalled });
  });
  after(() => t.close());

  it('the REPEATING count and the alarm commit with the reading, before any processing', async () => {
    const profileId = await createProfile(t, 'Stalled', [HUMID]);
    const d = await createProfiledDevice(t, 'stalled-1', profileId);
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'stalled-1' });
    const file = new Database(join(t.dataDir, DB_FILE), { readonly: true });
    try {
      const count = () => {
        const row = file
          .prepare('SELECT state FROM alarm_rule_state WHERE device_id = ? AND rule_id = ?')
          .get(d.id, 'humid') as { state: string } | undefined;
        return row && (JSON.parse(row.state) as { create: { MAJOR?: { eventCount: number } } });
      };
      await c.publishAsync('v1/devices/me/telemetry', '{"humidity":90}', { qos: 1 });
      assert.equal(count()?.create.MAJOR?.eventCount, 1);
      await c.publishAsync('v1/devices/me/telemetry', '{"humidity":91}', { qos: 1 });
      assert.equal(count()?.create.MAJOR?.eventCount, 2);
      await c.publishAsync('v1/devices/me/telemetry', '{"humidity":92}', { qos: 1 });
      assert.equal((await current(t, d.id, 'Humid'))?.status, 'ACTIVE_UNACK');
      assert.ok(held.includes('POST_TELEMETRY_REQUEST'), 'the messages went to the processor');
    } finally {
      file.close();
      await c.endAsync();
    }
  });
});

describe('alarm events of an in-commit evaluation', () => {
  let t: TestGateway;
  /** Every message the processing entry point got, before it runs the chains. */
  const seen: GatewayMsg[] = [];

  before(async () => {
    t = await startGateway({
      messageProcessor: (_s, standard) => ({
        process: (msg) => {
          seen.push(msg);
          standard.process(msg);
        },
        endBatch: () => standard.endBatch?.(),
      }),
    });
  });
  after(() => t.close());

  it('go on the bus and to the rule chains after the commit, after the reading, with their flags', async () => {
    const profileId = await createProfile(t, 'Events', [
      {
        ...HOT,
        createRules: {
          CRITICAL: rule([numeric('temperature', 'GREATER', 40)]),
          MAJOR: rule([numeric('temperature', 'GREATER', 30)]),
        },
      },
    ]);
    const d = await createProfiledDevice(t, 'events-1', profileId);
    const bus: string[] = [];
    t.gw.bus.on('test', 'alarm', (e) => {
      if (e.alarm.originator.id === d.id) bus.push(e.action);
    });
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'events-1' });
    try {
      for (const v of [35, 45, 20]) {
        await c.publishAsync('v1/devices/me/telemetry', `{"temperature":${v}}`, { qos: 1 });
      }
      const [alarm] = await alarmsOf(t, d.id);
      await t.api(`/api/alarm/${alarm.id.id}/ack`, { method: 'POST', token: await t.adminToken() });
      await t.api(`/api/alarm/${alarm.id.id}`, { method: 'DELETE', token: await t.adminToken() });
      await settled(t);
      assert.deepEqual(bus, ['CREATED', 'SEVERITY_UPDATED', 'CLEARED', 'ACKNOWLEDGED', 'DELETED']);
      const mine = seen
        .filter((m) => m.originator.id === d.id)
        .map((m) =>
          m.type === 'ALARM'
            ? `ALARM ${Object.keys(m.metadata).join(',')}`
            : m.type === 'POST_TELEMETRY_REQUEST'
              ? `T ${(m.data as { temperature: number }).temperature}`
              : m.type,
        )
        .filter((m) => m.startsWith('T ') || m.startsWith('ALARM'));
      // Each alarm message comes after the reading that raised it (the chain sees the reading first).
      assert.deepEqual(mine, [
        'T 35',
        'ALARM isNewAlarm',
        'T 45',
        'ALARM isSeverityUpdated',
        'T 20',
        'ALARM isClearedAlarm',
        'ALARM_ACK',
        'ALARM_DELETE',
      ]);
    } finally {
      t.gw.bus.removeOwner('test');
      await c.endAsync();
    }
  });
});

describe('a rule whose writes fail in the commit', () => {
  let t: TestGateway;

  before(async () => {
    t = await startGateway();
  });
  after(() => t.close());

  it('rolls back alone: the reading commits and is acknowledged, the failure is counted and logged once', async () => {
    const broken = await createProfile(t, 'Broken', [
      {
        id: 'broken',
        alarmType: 'Broken',
        createRules: { CRITICAL: rule([numeric('temperature', 'GREATER', 30)]) },
      },
    ]);
    const healthy = await createProfile(t, 'Healthy', [HOT]);
    const b = await createProfiledDevice(t, 'broken-1', broken);
    const h = await createProfiledDevice(t, 'healthy-1', healthy);
    // A real write failure: SQLite refuses the alarm row.
    const file = new Database(join(t.dataDir, DB_FILE));
    file.exec(`CREATE TRIGGER refuse_broken BEFORE INSERT ON alarm WHEN NEW.type = 'Broken'
               BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`);
    const failures = await metric(t, 'edge_alarm_engine_failures_total');
    const cb = await mqttConnect(t.gw.ports.mqtt, { username: b.token, clientId: 'broken-1' });
    const ch = await mqttConnect(t.gw.ports.mqtt, { username: h.token, clientId: 'healthy-1' });
    try {
      for (const v of [35, 36]) {
        await Promise.all([
          cb.publishAsync('v1/devices/me/telemetry', `{"temperature":${v}}`, { qos: 1 }),
          ch.publishAsync('v1/devices/me/telemetry', `{"temperature":${v}}`, { qos: 1 }),
        ]);
      }
      assert.equal(await latest(t, b.id, 'temperature'), 36, 'the readings committed');
      assert.deepEqual(await alarmsOf(t, b.id), []);
      assert.equal((await current(t, h.id, 'Hot'))?.status, 'ACTIVE_UNACK');
      assert.equal(await metric(t, 'edge_alarm_engine_failures_total'), failures + 2);
      const logged = t.logs.filter((l) => String(l.msg).startsWith('alarm evaluation failed in'));
      assert.equal(logged.length, 1);

      // Fixed: the device's state was reloaded, the next reading raises the alarm.
      file.exec('DROP TRIGGER refuse_broken');
      await cb.publishAsync('v1/devices/me/telemetry', '{"temperature":37}', { qos: 1 });
      assert.equal((await current(t, b.id, 'Broken'))?.status, 'ACTIVE_UNACK');
      await waitFor(async () => (await metric(t, 'edge_alarm_engine_in_commit_total')) > 0);
    } finally {
      file.close();
      await cb.endAsync();
      await ch.endAsync();
    }
  });

  it('a rule state that cannot be written: only that device loses it, the other devices of the batch keep theirs', async () => {
    const profileId = await createProfile(t, 'Repeating', [HUMID]);
    const bad = await createProfiledDevice(t, 'state-bad', profileId);
    const good = await createProfiledDevice(t, 'state-good', profileId);
    const file = new Database(join(t.dataDir, DB_FILE));
    file.exec(`CREATE TRIGGER refuse_state BEFORE INSERT ON alarm_rule_state
               WHEN NEW.device_id = '${bad.id}' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`);
    const count = (id: string) => {
      const row = file
        .prepare('SELECT state FROM alarm_rule_state WHERE device_id = ? AND rule_id = ?')
        .get(id, 'humid') as { state: string } | undefined;
      return row && (JSON.parse(row.state) as { create: { MAJOR?: { eventCount: number } } });
    };
    const failures = await metric(t, 'edge_alarm_engine_failures_total');
    const cb = await mqttConnect(t.gw.ports.mqtt, { username: bad.token, clientId: 'state-bad' });
    const cg = await mqttConnect(t.gw.ports.mqtt, { username: good.token, clientId: 'state-good' });
    try {
      // Both devices' readings usually share one group commit.
      await Promise.all([
        cb.publishAsync('v1/devices/me/telemetry', '{"humidity":90}', { qos: 1 }),
        cg.publishAsync('v1/devices/me/telemetry', '{"humidity":90}', { qos: 1 }),
      ]);
      assert.equal(count(good.id)?.create.MAJOR?.eventCount, 1, 'the good device kept its count');
      assert.equal(count(bad.id), undefined);
      assert.equal(await latest(t, bad.id, 'humidity'), 90, 'the reading committed');
      assert.equal(await metric(t, 'edge_alarm_engine_failures_total'), failures + 1);
    } finally {
      file.exec('DROP TRIGGER refuse_state');
      file.close();
      await cb.endAsync();
      await cg.endAsync();
    }
  });
});
