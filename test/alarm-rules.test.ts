/**
 * Issue 13 "Done when", the rule types: DURATION (with a restart in the middle) and REPEATING
 * with a controlled clock, dynamic thresholds (device attribute, then the customer with
 * `inherit`), a schedule window in a named time zone, an inactivity alarm and the platform.md
 * §1.8 example profile. Devices talk MQTT; alarms are read over REST.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { MqttClient } from 'mqtt';
import {
  alarmsOf,
  createProfile,
  createProfiledDevice,
  highTempAlarm,
  latest,
  numeric,
  rule,
} from './helpers/alarms.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { createCustomer } from './helpers/users.js';

const MIN = 60_000;

async function publish(t: TestGateway, token: string, payload: unknown): Promise<void> {
  const c: MqttClient = await mqttConnect(t.gw.ports.mqtt, { username: token, clientId: token });
  await c.publishAsync('v1/devices/me/telemetry', JSON.stringify(payload), { qos: 1 });
  await c.endAsync();
}

describe('DURATION and REPEATING with a controlled clock', () => {
  const clock = { now: Date.now() };
  const overrides = { now: () => clock.now, alarmCheckIntervalMs: 100 };
  let dataDir: string;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'edge-gw-alarm-'));
  });
  after(() => rm(dataDir, { recursive: true, force: true }));

  it('a 5-minute DURATION that ran 4 fires 1 minute after a restart, not 5', async () => {
    let t = await startGateway({ dataDir, overrides });
    const t0 = clock.now;
    const profileId = await createProfile(t, 'Oven', [
      {
        id: 'hot',
        alarmType: 'Hot for 5 minutes',
        createRules: {
          CRITICAL: rule([numeric('temperature', 'GREATER', 50)], {
            type: 'DURATION',
            unit: 'MINUTES',
            predicate: { defaultValue: 5, userValue: null, dynamicValue: null },
          }),
        },
        clearRule: null,
      },
    ]);
    const d = await createProfiledDevice(t, 'oven-1', profileId);
    await publish(t, d.token, { ts: t0, values: { temperature: 60 } });
    clock.now = t0 + 4 * MIN;
    await publish(t, d.token, { ts: t0 + 4 * MIN, values: { temperature: 61 } });
    await waitFor(async () => (await latest(t, d.id, 'temperature')) === 61);
    await sleep(300);
    assert.deepEqual(await alarmsOf(t, d.id), [], 'not yet: 4 of 5 minutes');
    await t.close(false);

    t = await startGateway({ dataDir, overrides });
    try {
      clock.now = t0 + 4 * MIN + 30_000;
      await sleep(500);
      assert.deepEqual(await alarmsOf(t, d.id), [], 'not yet: 4.5 of 5 minutes');
      // Strictly longer than 5 minutes, with no new reading: the timer raises it.
      clock.now = t0 + 5 * MIN + 1000;
      const [a] = await waitFor(async () => {
        const list = await alarmsOf(t, d.id);
        return list.length ? list : undefined;
      });
      assert.equal(a.type, 'Hot for 5 minutes');
      assert.equal(a.severity, 'CRITICAL');
      assert.equal(a.status, 'ACTIVE_UNACK');
    } finally {
      await t.close(false);
    }
  });

  it('a reading committed but never evaluated (as in a crash) is evaluated on the next start', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'edge-gw-alarm-crash-'));
    try {
      // @NOTE: a processor that drops every message: the reading is committed but never
      // evaluated, as if the gateway crashed right after the commit. A server-side write: it is
      // evaluated after its commit, by the Device Profile node (a device's own reading is
      // evaluated inside its commit, test/alarms-in-commit.test.ts).
      let t = await startGateway({ dataDir: dir, messageProcessor: { process: () => undefined } });
      const profileId = await createProfile(t, 'Crashy', [
        {
          id: 'hot',
          alarmType: 'Hot',
          createRules: { MAJOR: rule([numeric('t', 'GREATER', 30)]) },
        },
      ]);
      const d = await createProfiledDevice(t, 'crashy-1', profileId);
      const saved = await t.api(`/api/plugins/telemetry/DEVICE/${d.id}/timeseries/ANY`, {
        token: await t.adminToken(),
        body: { t: 35 },
      });
      assert.equal(saved.status, 200);
      await waitFor(async () => (await latest(t, d.id, 't')) === 35);
      assert.deepEqual(await alarmsOf(t, d.id), []);
      await t.close(false);
      t = await startGateway({ dataDir: dir });
      try {
        const [a] = await alarmsOf(t, d.id);
        assert.equal(a?.type, 'Hot');
      } finally {
        await t.close(false);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('REPEATING 3 raises on the third consecutive match; a miss resets the count', async () => {
    const t = await startGateway({ overrides });
    try {
      const profileId = await createProfile(t, 'Humid', [
        {
          id: 'humid',
          alarmType: 'Humid',
          createRules: {
            WARNING: rule([numeric('humidity', 'GREATER', 80)], {
              type: 'REPEATING',
              predicate: { defaultValue: 3, userValue: null, dynamicValue: null },
            }),
          },
        },
      ]);
      const d = await createProfiledDevice(t, 'humid-1', profileId);
      const base = clock.now;
      // Data ts in the future would start the alarm at "now" (§1.9): the clock is ahead of them.
      clock.now = base + 10_000;
      const send = async (i: number, humidity: number) => {
        await publish(t, d.token, { ts: base + i * 1000, values: { humidity } });
        await waitFor(async () => (await latest(t, d.id, 'humidity')) === humidity);
      };
      await send(1, 81);
      await send(2, 82);
      await send(3, 50);
      await send(4, 83);
      await send(5, 84);
      assert.deepEqual(await alarmsOf(t, d.id), [], 'two in a row after a miss');
      await send(6, 85);
      const [a] = await alarmsOf(t, d.id);
      assert.equal(a?.severity, 'WARNING');
      assert.equal(a.startTs, base + 6000);
    } finally {
      await t.close();
    }
  });
});

describe('dynamic thresholds, schedules, inactivity, the §1.8 example', () => {
  let t: TestGateway;
  let admin: string;

  before(async () => {
    t = await startGateway({
      config: { activity: { inactivityTimeoutSec: 1, checkIntervalSec: 1 } },
    });
    admin = await t.adminToken();
  });
  after(() => t.close());

  it('a threshold from a device attribute, then from the customer with inherit', async () => {
    const dynamicValue = {
      sourceType: 'CURRENT_DEVICE',
      sourceAttribute: 'tempThreshold',
      inherit: true,
    };
    const profileId = await createProfile(t, 'Dynamic', [
      {
        id: 'dyn',
        alarmType: 'Over threshold',
        createRules: {
          MAJOR: rule([numeric('temperature', 'GREATER', 100, { dynamicValue })]),
        },
      },
    ]);
    const own = await createProfiledDevice(t, 'dyn-own', profileId);
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${own.id}/attributes/SERVER_SCOPE`, {
      token: admin,
      body: { tempThreshold: 40 },
    });
    assert.equal(res.status, 200);
    await publish(t, own.token, { temperature: 35 });
    await waitFor(async () => (await latest(t, own.id, 'temperature')) === 35);
    assert.deepEqual(await alarmsOf(t, own.id), [], '35 is under the device threshold 40');
    // Changing the threshold re-evaluates at once, without a new reading.
    await t.api(`/api/plugins/telemetry/DEVICE/${own.id}/attributes/SERVER_SCOPE`, {
      token: admin,
      body: { tempThreshold: 30 },
    });
    await waitFor(async () => (await alarmsOf(t, own.id)).length === 1);

    // No device attribute: the customer's server attribute, through inherit.
    const customerId = await createCustomer(t, 'Dynamic customer');
    const inherited = await createProfiledDevice(t, 'dyn-inherit', profileId);
    const alone = await createProfiledDevice(t, 'dyn-alone', profileId);
    const assign = await t.api(`/api/customer/${customerId}/device/${inherited.id}`, {
      method: 'POST',
      token: admin,
    });
    assert.equal(assign.status, 200);
    const attr = await t.api(
      `/api/plugins/telemetry/CUSTOMER/${customerId}/attributes/SERVER_SCOPE`,
      { token: admin, body: { tempThreshold: 20 } },
    );
    assert.equal(attr.status, 200);
    await publish(t, inherited.token, { temperature: 25 });
    await publish(t, alone.token, { temperature: 25 });
    await waitFor(async () => (await alarmsOf(t, inherited.id)).length === 1);
    await waitFor(async () => (await latest(t, alone.id, 'temperature')) === 25);
    assert.deepEqual(await alarmsOf(t, alone.id), [], 'no customer: the default 100 applies');
  });

  it('a changed tenant or customer threshold re-evaluates at once, with no new reading', async () => {
    const me = (await (await t.api('/api/auth/user', { token: admin })).json()) as {
      tenantId: { id: string };
    };
    const tenantLimit = { sourceType: 'CURRENT_TENANT', sourceAttribute: 'kilnLimit' };
    const customerLimit = { sourceType: 'CURRENT_CUSTOMER', sourceAttribute: 'kilnLimit' };
    const profileId = await createProfile(t, 'Owner thresholds', [
      {
        id: 'tenant',
        alarmType: 'Over the tenant limit',
        createRules: {
          MAJOR: rule([numeric('temperature', 'GREATER', 100, { dynamicValue: tenantLimit })]),
        },
      },
      {
        id: 'customer',
        alarmType: 'Over the customer limit',
        createRules: {
          MINOR: rule([numeric('temperature', 'GREATER', 100, { dynamicValue: customerLimit })]),
        },
      },
    ]);
    const d = await createProfiledDevice(t, 'owner-limit-1', profileId);
    const customerId = await createCustomer(t, 'Owner limit customer');
    const assign = await t.api(`/api/customer/${customerId}/device/${d.id}`, {
      method: 'POST',
      token: admin,
    });
    assert.equal(assign.status, 200);
    await publish(t, d.token, { temperature: 50 });
    await waitFor(async () => (await latest(t, d.id, 'temperature')) === 50);
    await sleep(300);
    assert.deepEqual(await alarmsOf(t, d.id), [], 'both limits default to 100');
    // The limits were read (and cached) at 100: a change must reach the engine all the same.
    const set = async (owner: string, id: string, limit: number) => {
      const res = await t.api(`/api/plugins/telemetry/${owner}/${id}/attributes/SERVER_SCOPE`, {
        token: admin,
        body: { kilnLimit: limit },
      });
      assert.equal(res.status, 200);
    };
    await set('TENANT', me.tenantId.id, 40);
    const types = async () => (await alarmsOf(t, d.id)).map((a) => a.type).sort();
    await waitFor(async () => (await types()).length === 1);
    assert.deepEqual(await types(), ['Over the tenant limit']);
    await set('CUSTOMER', customerId, 45);
    await waitFor(async () => (await types()).length === 2);
    assert.deepEqual(await types(), ['Over the customer limit', 'Over the tenant limit']);
  });

  it('a SPECIFIC_TIME window in a named time zone', async () => {
    // A two-hour window around "now" in Kathmandu (UTC+05:45): UTC time is outside it.
    const zone = 'Asia/Kathmandu';
    const parts = Object.fromEntries(
      new Intl.DateTimeFormat('en-US', {
        timeZone: zone,
        hourCycle: 'h23',
        hour: '2-digit',
        minute: '2-digit',
      })
        .formatToParts(Date.now())
        .map((p) => [p.type, p.value]),
    );
    const local = (Number(parts.hour) * 60 + Number(parts.minute)) * MIN;
    const day = 24 * 60 * MIN;
    const window = {
      type: 'SPECIFIC_TIME',
      timezone: zone,
      daysOfWeek: [1, 2, 3, 4, 5, 6, 7],
      startsOn: (local - 60 * MIN + day) % day,
      endsOn: (local + 60 * MIN) % day,
    };
    const profileId = await createProfile(t, 'Night shift', [
      {
        id: 'sched',
        alarmType: 'In window',
        createRules: { MINOR: rule([numeric('load', 'GREATER', 1)], null, { schedule: window }) },
      },
    ]);
    const inside = await createProfiledDevice(t, 'sched-in', profileId);
    const outside = await createProfiledDevice(t, 'sched-out', profileId);
    await publish(t, inside.token, { ts: Date.now(), values: { load: 5 } });
    await publish(t, outside.token, { ts: Date.now() - 3 * 60 * MIN, values: { load: 5 } });
    await waitFor(async () => (await alarmsOf(t, inside.id)).length === 1);
    await waitFor(async () => (await latest(t, outside.id, 'load')) === 5);
    assert.deepEqual(
      await alarmsOf(t, outside.id),
      [],
      'three hours earlier is outside the window',
    );
  });

  it('an inactivity alarm from the active attribute', async () => {
    const profileId = await createProfile(t, 'Watched', [
      {
        id: 'offline',
        alarmType: 'Device offline',
        createRules: {
          MAJOR: rule([
            {
              key: { type: 'ATTRIBUTE', key: 'active' },
              valueType: 'BOOLEAN',
              value: null,
              predicate: {
                type: 'BOOLEAN',
                operation: 'EQUAL',
                value: { defaultValue: false, userValue: null, dynamicValue: null },
              },
            },
          ]),
        },
        clearRule: rule([
          {
            key: { type: 'ATTRIBUTE', key: 'active' },
            valueType: 'BOOLEAN',
            value: null,
            predicate: {
              type: 'BOOLEAN',
              operation: 'EQUAL',
              value: { defaultValue: true, userValue: null, dynamicValue: null },
            },
          },
        ]),
      },
    ]);
    const d = await createProfiledDevice(t, 'watched-1', profileId);
    await publish(t, d.token, { x: 1 });
    // One second without a message: inactive, and the rule raises the alarm.
    const [a] = await waitFor(async () => {
      const list = await alarmsOf(t, d.id);
      return list.length ? list : undefined;
    }, 15_000);
    assert.equal(a.type, 'Device offline');
    assert.equal(a.status, 'ACTIVE_UNACK');
    // Back online: the clear rule clears it.
    const c = await mqttConnect(t.gw.ports.mqtt, { username: d.token, clientId: 'watched-1' });
    try {
      await c.publishAsync('v1/devices/me/telemetry', '{"x":2}', { qos: 1 });
      await waitFor(async () => (await alarmsOf(t, d.id))[0].cleared, 15_000);
    } finally {
      await c.endAsync();
    }
  });

  it('the platform.md §1.8 example profile, filled in, is accepted and works', async () => {
    const example = highTempAlarm();
    const profileId = await createProfile(t, 'Section 1.8', [example]);
    const saved = await t.api(`/api/deviceProfile/${profileId}`, { token: admin });
    const alarms = ((await saved.json()) as { profileData: { alarms: unknown[] } }).profileData
      .alarms;
    assert.deepEqual(alarms, [example], 'kept as written');
    const d = await createProfiledDevice(t, 'example-1', profileId);
    await publish(t, d.token, { temperature: 45 });
    const [major] = await waitFor(async () => {
      const list = await alarmsOf(t, d.id);
      return list.length ? list : undefined;
    });
    assert.equal(major.severity, 'MAJOR');
    for (const [i, v] of [39, 38].entries()) {
      await publish(t, d.token, { ts: Date.now() + i, values: { temperature: v } });
      await waitFor(async () => (await latest(t, d.id, 'temperature')) === v);
    }
    assert.equal((await alarmsOf(t, d.id))[0].cleared, false, 'two of three clear readings');
    await publish(t, d.token, { temperature: 37 });
    await waitFor(async () => (await alarmsOf(t, d.id))[0].cleared);
  });
});
