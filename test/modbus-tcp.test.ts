/**
 * Modbus TCP end to end (issue 17): modbus-serial's TCP server as the slaves, the gateway's
 * connector polling them, values read back through the REST API. Every register type and each
 * byte/word order, a shared attribute written to a holding register, RPC writing a coil and
 * reading it back, the ad-hoc RPC strings, a slave that stops answering and comes back.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { GatewayMsg } from '../src/messages/types.js';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { RegisterBank, type RunningSlave, startTcpSlave } from './helpers/modbus.js';

type Order = 'BIG' | 'LITTLE';
const ORDERS: ReadonlyArray<readonly [Order, Order]> = [
  ['BIG', 'BIG'],
  ['BIG', 'LITTLE'],
  ['LITTLE', 'BIG'],
  ['LITTLE', 'LITTLE'],
];

/** Registers for a big-endian byte image, laid out as the reference §3 describes. */
function layout(bytes: Buffer, byteOrder: Order, wordOrder: Order): number[] {
  const regs: number[] = [];
  for (let i = 0; i < bytes.length; i += 2) {
    regs.push(byteOrder === 'BIG' ? bytes.readUInt16BE(i) : bytes.readUInt16LE(i));
  }
  return wordOrder === 'LITTLE' ? regs.reverse() : regs;
}

function be(write: (b: Buffer) => void, size: number): Buffer {
  const b = Buffer.alloc(size);
  write(b);
  return b;
}

/** Every type with a known value: [tag, type, address, registers' bytes, expected REST text]. */
const NUMERIC: ReadonlyArray<readonly [string, string, number, Buffer, string]> = [
  ['i16', '16int', 2, be((b) => b.writeInt16BE(-1234), 2), '-1234'],
  ['u16', '16uint', 3, be((b) => b.writeUInt16BE(54321), 2), '54321'],
  ['f16', '16float', 4, be((b) => b.writeUInt16BE(0x3e00), 2), '1.5'],
  ['i32', '32int', 5, be((b) => b.writeInt32BE(-123456789), 4), '-123456789'],
  ['u32', '32uint', 7, be((b) => b.writeUInt32BE(4000000000), 4), '4000000000'],
  ['f32', '32float', 9, be((b) => b.writeFloatBE(21.5), 4), '21.5'],
  ['i64', '64int', 11, be((b) => b.writeBigInt64BE(-1234567890123n), 8), '-1234567890123'],
  ['u64', '64uint', 15, be((b) => b.writeBigUInt64BE(9007199254740993n), 8), '9007199254740993'],
  ['f64', '64float', 19, be((b) => b.writeDoubleBE(Math.PI), 8), '3.141593'],
];

function slaveConfig(unitId: number, port: number, byteOrder: Order, wordOrder: Order) {
  const count = (type: string) => (type.startsWith('64') ? 4 : type.startsWith('32') ? 2 : 1);
  return {
    host: '127.0.0.1',
    port,
    type: 'tcp',
    method: 'socket',
    unitId,
    deviceName: `Meter ${byteOrder}-${wordOrder}`,
    deviceType: 'power-meter',
    timeout: 0.5,
    retries: 1,
    pollPeriod: 200,
    byteOrder,
    wordOrder,
    timeseries: [
      { tag: 'i8', type: '8int', functionCode: 3, objectsCount: 1, address: 0 },
      { tag: 'u8', type: '8uint', functionCode: 3, objectsCount: 1, address: 1 },
      ...NUMERIC.map(([tag, type, address]) => ({
        tag,
        type,
        functionCode: 3,
        objectsCount: count(type),
        address,
      })),
      { tag: 'text', type: 'string', functionCode: 3, objectsCount: 3, address: 23 },
      { tag: 'scaled', type: '16int', functionCode: 3, objectsCount: 1, address: 26, divider: 10 },
      { tag: 'tripled', type: '16uint', functionCode: 3, address: 27, multiplier: 3 },
      { tag: 'flag3', type: 'bits', functionCode: 3, objectsCount: 1, address: 28, bit: 3 },
      { tag: 'input', type: '16int', functionCode: 4, objectsCount: 1, address: 0 },
      { tag: 'coil0', type: 'bits', functionCode: 1, objectsCount: 1, address: 0 },
      { tag: 'coils', type: 'bits', functionCode: 1, objectsCount: 4, address: 1 },
      { tag: 'door', type: 'bits', functionCode: 2, objectsCount: 1, address: 2 },
    ],
    attributes: [
      { tag: 'firmware', type: 'string', functionCode: 4, objectsCount: 2, address: 10 },
    ],
    attributeUpdates: [
      { tag: 'setpoint', type: '32float', functionCode: 16, objectsCount: 2, address: 40 },
      { tag: 'limit', type: '16int', functionCode: 6, objectsCount: 1, address: 42 },
    ],
    rpc: [
      { tag: 'setRelay', type: 'bits', functionCode: 5, objectsCount: 1, address: 9 },
      { tag: 'getRelay', type: 'bits', functionCode: 1, objectsCount: 1, address: 9 },
    ],
  };
}

function fillUnit(bank: RegisterBank, unitId: number, byteOrder: Order, wordOrder: Order): void {
  const u = bank.unit(unitId);
  u.holding[0] = 0xfb12; // 8int: the high byte, -5
  u.holding[1] = 0xc834; // 8uint: 200
  for (const [, , address, bytes] of NUMERIC) {
    layout(bytes, byteOrder, wordOrder).forEach((w, i) => {
      u.holding[address + i] = w;
    });
  }
  // Strings are sent as laid out, whatever the orders.
  [0x4142, 0x4344, 0x4500].forEach((w, i) => {
    u.holding[23 + i] = w;
  });
  u.holding[26] = layout(
    be((b) => b.writeInt16BE(215), 2),
    byteOrder,
    wordOrder,
  )[0];
  u.holding[27] = layout(
    be((b) => b.writeUInt16BE(7), 2),
    byteOrder,
    wordOrder,
  )[0];
  u.holding[28] = 0x0008;
  u.input[0] = layout(
    be((b) => b.writeInt16BE(42), 2),
    byteOrder,
    wordOrder,
  )[0];
  u.input[10] = 0x7631; // "v1"
  u.input[11] = 0x2e32; // ".2"
  u.coils[0] = true;
  [true, false, true, true].forEach((v, i) => {
    u.coils[1 + i] = v;
  });
  u.discrete[2] = true;
}

describe('Modbus TCP connector', () => {
  let t: TestGateway;
  let admin: string;
  let slave: RunningSlave;
  let other: RunningSlave;
  const bank = new RegisterBank();
  const otherBank = new RegisterBank();
  let connectorId: string;
  /** Every message handed to the processing entry point. */
  const msgs: GatewayMsg[] = [];
  const msgsOf = (deviceId: string, type: string) =>
    msgs.filter((m) => m.originator.id === deviceId && m.type === type);

  before(async () => {
    for (const [i, [b, w]] of ORDERS.entries()) fillUnit(bank, i + 1, b, w);
    fillUnit(otherBank, 7, 'BIG', 'BIG');
    slave = await startTcpSlave(bank);
    other = await startTcpSlave(otherBank);
    t = await startGateway({ config: { activity: { checkIntervalSec: 1 } } });
    t.gw.services.messages.setProcessor({ process: (msg) => msgs.push(msg) });
    admin = await t.adminToken();
  });
  after(async () => {
    await t.close();
    await slave.close();
    await other.close();
  });

  async function deviceId(name: string): Promise<string> {
    return await waitFor(
      async () => {
        const res = await t.api(`/api/tenant/devices?deviceName=${encodeURIComponent(name)}`, {
          token: admin,
        });
        if (res.status !== 200) return undefined;
        return ((await res.json()) as { id: { id: string } }).id.id;
      },
      10_000,
      `device ${name}`,
    );
  }

  async function latest(id: string): Promise<Record<string, string>> {
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${id}/values/timeseries`, {
      token: admin,
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as Record<string, Array<{ ts: number; value: string }>>;
    return Object.fromEntries(Object.entries(body).map(([k, v]) => [k, v[0].value]));
  }

  async function attributes(id: string, scope: string): Promise<Record<string, unknown>> {
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${id}/values/attributes/${scope}`, {
      token: admin,
    });
    assert.equal(res.status, 200);
    const list = (await res.json()) as Array<{ key: string; value: unknown; lastUpdateTs: number }>;
    return Object.fromEntries(list.map((a) => [a.key, a.value]));
  }

  /** A slave on the second TCP slave, polled every 100 ms. */
  const otherSlave = (unitId: number, deviceName: string) => ({
    host: '127.0.0.1',
    port: other.port,
    type: 'tcp',
    method: 'socket',
    unitId,
    deviceName,
    pollPeriod: 100,
    timeout: 1,
  });

  async function status() {
    const res = await t.api(`/api/connector/${connectorId}/status`, { token: admin });
    assert.equal(res.status, 200);
    return (await res.json()) as {
      running: boolean;
      lines: Array<{ line: string; open: boolean }>;
      devices: Array<{
        name: string;
        active: boolean;
        lastError: string | null;
        counters: { polls: number; timeouts: number };
      }>;
    };
  }

  it('creates a connector and polls every slave; every type and order decodes', async () => {
    const before = Date.now();
    const res = await t.api('/api/connector', {
      token: admin,
      body: {
        name: 'plant floor',
        type: 'MODBUS',
        enabled: true,
        configuration: {
          master: {
            slaves: [
              ...ORDERS.map(([b, w], i) => slaveConfig(i + 1, slave.port, b, w)),
              { ...slaveConfig(7, other.port, 'BIG', 'BIG'), deviceName: 'Other line' },
            ],
          },
        },
      },
    });
    assert.equal(res.status, 200, await res.clone().text());
    connectorId = ((await res.json()) as { id: string }).id;

    for (const [b, w] of ORDERS) {
      const id = await deviceId(`Meter ${b}-${w}`);
      const values = await waitFor(
        async () => {
          const v = await latest(id);
          return Object.keys(v).length >= 19 ? v : undefined;
        },
        10_000,
        `telemetry of ${b}-${w}`,
      );
      const expected: Record<string, string> = {
        i8: '-5',
        u8: '200',
        text: 'ABCDE',
        scaled: '21.5',
        tripled: '21',
        flag3: 'true',
        input: '42',
        coil0: 'true',
        coils: '[true,false,true,true]',
        door: 'true',
      };
      for (const [tag, , , , text] of NUMERIC) expected[tag] = text;
      assert.deepEqual(values, expected, `orders ${b}/${w}`);
      const client = await attributes(id, 'CLIENT_SCOPE');
      assert.equal(client.firmware, 'v1.2');
    }
    // The device's profile comes from deviceType; readings carry the time they were read.
    const id = await deviceId('Meter BIG-BIG');
    const dev = (await (await t.api(`/api/device/${id}`, { token: admin })).json()) as {
      type: string;
    };
    assert.equal(dev.type, 'power-meter');
    const ts = (await (
      await t.api(`/api/plugins/telemetry/DEVICE/${id}/values/timeseries?keys=i16`, {
        token: admin,
      })
    ).json()) as { i16: Array<{ ts: number }> };
    assert.ok(ts.i16[0].ts >= before && ts.i16[0].ts <= Date.now());
    const server = await attributes(id, 'SERVER_SCOPE');
    assert.equal(server.active, true);
    // Through the one way in: the same messages as any device's uplinks.
    const posted = await waitFor(() => msgsOf(id, 'POST_TELEMETRY_REQUEST')[0], 5000, 'message');
    assert.equal(posted.metadata.deviceName, 'Meter BIG-BIG');
    assert.equal(posted.metadata.deviceType, 'power-meter');
    // Its `ts` is the time the values were read.
    const readAt = Number(posted.metadata.ts);
    assert.ok(readAt >= before && readAt <= Date.now());
    assert.deepEqual((posted.data as Record<string, unknown>).u16, 54321);
    await waitFor(() => msgsOf(id, 'POST_ATTRIBUTES_REQUEST')[0], 5000, 'attributes message');
  });

  it('writes a shared attribute to holding registers (fc 16 and fc 6)', async () => {
    const id = await deviceId('Meter BIG-LITTLE');
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${id}/attributes/SHARED_SCOPE`, {
      token: admin,
      body: { setpoint: 22.25, limit: -300 },
    });
    assert.equal(res.status, 200);
    const u = bank.unit(2);
    const want = layout(
      be((b) => b.writeFloatBE(22.25), 4),
      'BIG',
      'LITTLE',
    );
    await waitFor(() => u.holding[40] === want[0] && u.holding[41] === want[1], 5000, 'setpoint');
    await waitFor(() => u.holding[42] === 0x10000 - 300, 5000, 'limit');
  });

  it('answers RPC: writes a coil, reads it back, ad-hoc get/set, unknown methods', async () => {
    const id = await deviceId('Meter LITTLE-BIG');
    const rpc = async (method: string, params: unknown) => {
      const res = await t.api(`/api/rpc/twoway/${id}`, {
        token: admin,
        body: { method, params, timeout: 10_000 },
      });
      assert.equal(res.status, 200, await res.clone().text());
      return (await res.json()) as { result: { value?: unknown; error?: string } };
    };
    const u = bank.unit(3);
    assert.equal(u.coils[9], false);
    assert.deepEqual(await rpc('setRelay', true), { result: { value: true } });
    assert.equal(u.coils[9], true);
    assert.deepEqual(await rpc('getRelay', null), { result: { value: true } });
    assert.deepEqual(await rpc('setRelay', { value: false }), {
      result: { value: { value: false } },
    });
    assert.deepEqual(await rpc('getRelay', null), { result: { value: false } });

    // Ad-hoc (reference §5): a 32-bit write in the slave's orders, then read back.
    const set = await rpc(
      'set',
      'type=32int;functionCode=16;objectsCount=2;address=50;value=-70000;',
    );
    assert.equal(set.result.error, undefined);
    const want = layout(
      be((b) => b.writeInt32BE(-70000), 4),
      'LITTLE',
      'BIG',
    );
    assert.deepEqual(u.holding.slice(50, 52), want);
    const get = await rpc('get', 'type=32int;functionCode=3;objectsCount=2;address=50;');
    assert.deepEqual(get, { result: { value: -70000 } });

    assert.match((await rpc('nope', 1)).result.error ?? '', /Method not found for nope/);
    assert.match((await rpc('get', 'type=16int;address=1;')).result.error ?? '', /schema/);
  });

  it('counts a slave that stops answering; the others keep polling; then it recovers', async () => {
    const silentId = await deviceId('Meter LITTLE-LITTLE');
    const neighbour = 'Meter BIG-BIG';
    const pollsOf = async (name: string) =>
      (await status()).devices.find((d) => d.name === name)?.counters.polls ?? 0;
    bank.silent.add(4);
    const down = await waitFor(
      async () => {
        const d = (await status()).devices.find((x) => x.name === 'Meter LITTLE-LITTLE');
        return d && !d.active && d.counters.timeouts >= 2 ? d : undefined;
      },
      10_000,
      'the silent slave counted',
    );
    assert.match(down.lastError ?? '', /^timeout: /);
    // The same counters summed per connector in /metrics.
    const text = await (await t.api('/metrics', { token: admin })).text();
    const series = (s: string) =>
      Number(
        text
          .split('\n')
          .find((l) => l.startsWith(`${s} `))
          ?.slice(s.length + 1) ?? Number.NaN,
      );
    assert.ok(series('edge_connector_events_total{connector="plant floor",event="timeouts"}') >= 2);
    assert.ok(series('edge_connector_events_total{connector="plant floor",event="polls"}') > 0);
    assert.ok(series('edge_connector_devices{connector="plant floor",state="inactive"}') >= 1);
    assert.ok(series('edge_connector_lines{connector="plant floor",state="open"}') >= 2);
    await waitFor(
      async () => (await attributes(silentId, 'SERVER_SCOPE')).active === false,
      5000,
      'active false',
    );
    await waitFor(() => msgsOf(silentId, 'INACTIVITY_EVENT')[0], 5000, 'INACTIVITY_EVENT');
    const [n0, o0] = [await pollsOf(neighbour), await pollsOf('Other line')];
    // The other line keeps its schedule (nominally 15 polls in 3 s; margins for a loaded
    // machine). The neighbour shares its connection with the silent slave, whose backed-off
    // polls cost that connection a 0.5 s timeout each: it slows down but does not stall.
    await new Promise((r) => setTimeout(r, 3000));
    const [n1, o1] = [await pollsOf(neighbour), await pollsOf('Other line')];
    assert.ok(n1 - n0 >= 2, `neighbour polled ${n1 - n0} times in 3 s`);
    assert.ok(o1 - o0 >= 6, `other line polled ${o1 - o0} times in 3 s`);

    bank.silent.delete(4);
    await waitFor(
      async () => (await status()).devices.find((x) => x.name === 'Meter LITTLE-LITTLE')?.active,
      15_000,
      'the slave answers again',
    );
    await waitFor(
      async () => (await attributes(silentId, 'SERVER_SCOPE')).active === true,
      5000,
      'active true',
    );
  });

  it('applies a configuration change without a restart', async () => {
    const res = await t.api('/api/connector', {
      token: admin,
      body: {
        id: connectorId,
        name: 'plant floor',
        type: 'MODBUS',
        enabled: true,
        configuration: {
          master: {
            slaves: [
              {
                ...slaveConfig(1, slave.port, 'BIG', 'BIG'),
                deviceName: 'Renamed meter',
                timeseries: [{ tag: 'only', type: '16uint', functionCode: 3, address: 3 }],
              },
            ],
          },
        },
      },
    });
    assert.equal(res.status, 200);
    const id = await deviceId('Renamed meter');
    await waitFor(async () => (await latest(id)).only === '54321', 10_000, 'new config polled');
    const s = await status();
    assert.deepEqual(
      s.devices.map((d) => d.name),
      ['Renamed meter'],
    );
    const list = (await (await t.api('/api/connectors', { token: admin })).json()) as unknown[];
    assert.equal(list.length, 1);
  });

  it('refuses a bad configuration with a 400 naming the field', async () => {
    const bad = async (configuration: unknown, field: RegExp, type = 'MODBUS') => {
      const res = await t.api('/api/connector', {
        token: admin,
        body: { name: 'bad', type, enabled: true, configuration },
      });
      assert.equal(res.status, 400);
      const body = (await res.json()) as { message: string };
      assert.match(body.message, field);
    };
    const good = slaveConfig(1, slave.port, 'BIG', 'BIG');
    await bad({ master: { slaves: [{ ...good, unitId: 300 }] } }, /master\.slaves\.0\.unitId/);
    await bad({ master: { slaves: [{ ...good, byteOrder: 'MIDDLE' }] } }, /slaves\.0\.byteOrder/);
    await bad(
      {
        master: {
          slaves: [
            { ...good, timeseries: [{ tag: 'x', type: '32int', functionCode: 7, address: 1 }] },
          ],
        },
      },
      /slaves\.0\.timeseries\.0\.functionCode/,
    );
    await bad(
      {
        master: {
          slaves: [
            {
              ...good,
              timeseries: [
                { tag: 'x', type: '64float', functionCode: 3, objectsCount: 2, address: 1 },
              ],
            },
          ],
        },
      },
      /timeseries\.0\.objectsCount/,
    );
    await bad({ master: { slaves: [{ ...good, method: 'ascii' }] } }, /slaves\.0\.method/);
    const ranged = (entry: Record<string, unknown>, list = 'timeseries') => ({
      master: {
        slaves: [{ ...good, [list]: [{ tag: 'r', type: '16int', functionCode: 3, ...entry }] }],
      },
    });
    await bad(ranged({ address: '100-99' }), /timeseries\.0\.address: range ends before it starts/);
    await bad(ranged({ address: '1-x' }), /timeseries\.0\.address/);
    await bad(ranged({ address: '0-5000' }), /timeseries\.0\.address: a range may yield at most/);
    await bad(
      ranged({ address: '1-4', functionCode: 16 }, 'attributeUpdates'),
      /attributeUpdates\.0\.address: a range is only for reads/,
    );
    await bad({}, /configuration\.master/);
    await bad(
      { devices: [{ port: '/dev/null', format: 'csv' }] },
      /devices\.0\.(columns|deviceName)/,
      'SERIAL',
    );
    const wrongType = await t.api('/api/connector', {
      token: admin,
      body: { name: 'bad', type: 'OPCUA', configuration: {} },
    });
    assert.equal(wrongType.status, 400);
    assert.match(((await wrongType.json()) as { message: string }).message, /type/);
  });

  it('accepts the IoT Gateway modbus.json and modbus_serial.json unchanged, and runs them', async () => {
    const dir = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'tb-gateway');
    const files = ['modbus.json', 'modbus_serial.json'];
    const [tcp, serial] = await Promise.all(
      files.map(async (f) => JSON.parse(await readFile(join(dir, f), 'utf8')) as unknown),
    );
    for (const [i, configuration] of [tcp, serial].entries()) {
      const res = await t.api('/api/connector', {
        token: admin,
        body: { name: files[i], type: 'MODBUS', enabled: false, configuration },
      });
      assert.equal(res.status, 200, await res.clone().text());
      const saved = (await res.json()) as { id: string; configuration: unknown };
      assert.deepEqual(saved.configuration, configuration);
      await t.api(`/api/connector/${saved.id}`, { method: 'DELETE', token: admin });
    }
    // The TCP example against a slave with its registers, only host and port pointed there.
    const u = otherBank.unit(1);
    [215, 450, 2300, 500].forEach((v, i) => {
      u.holding[i] = v;
    });
    u.coils[1] = true;
    const example = structuredClone(tcp) as { master: { slaves: Array<Record<string, unknown>> } };
    example.master.slaves[0].port = other.port;
    const res = await t.api('/api/connector', {
      token: admin,
      body: { name: 'tb example', type: 'MODBUS', enabled: true, configuration: example },
    });
    assert.equal(res.status, 200);
    const exampleId = ((await res.json()) as { id: string }).id;
    const id = await deviceId('Demo Device');
    await waitFor(
      async () => {
        const v = await latest(id);
        return v.temperature === '21.5' && v.humidity === '45.0' && v.relay === 'true';
      },
      10_000,
      'example telemetry',
    );
    const attrs = await attributes(id, 'CLIENT_SCOPE');
    assert.equal(attrs.power, 230);
    assert.equal(attrs.frequency, 50);
    // Its attributeUpdates entry: shared attribute "relay" writes coil 1.
    await t.api(`/api/plugins/telemetry/DEVICE/${id}/attributes/SHARED_SCOPE`, {
      token: admin,
      body: { relay: false },
    });
    await waitFor(() => u.coils[1] === false, 5000, 'relay written');
    await t.api(`/api/connector/${exampleId}`, { method: 'DELETE', token: admin });
  });

  it('applies reportStrategy: ON_CHANGE from the file, ON_RECEIVED on one key', async () => {
    const u = otherBank.unit(9);
    u.holding[0] = 100;
    u.holding[1] = 7;
    const res = await t.api('/api/connector', {
      token: admin,
      body: {
        name: 'reports',
        type: 'MODBUS',
        configuration: {
          reportStrategy: { type: 'ON_CHANGE' },
          master: {
            slaves: [
              {
                ...otherSlave(9, 'Reporter'),
                timeseries: [
                  { tag: 'steady', type: '16int', functionCode: 3, address: 0 },
                  {
                    tag: 'every',
                    type: '16int',
                    functionCode: 3,
                    address: 1,
                    reportStrategy: { type: 'ON_RECEIVED' },
                  },
                ],
              },
            ],
          },
        },
      },
    });
    assert.equal(res.status, 200, await res.clone().text());
    const reportsId = ((await res.json()) as { id: string }).id;
    const id = await deviceId('Reporter');
    const points = async () => {
      const r = await t.api(
        `/api/plugins/telemetry/DEVICE/${id}/values/timeseries?keys=steady,every&startTs=0&endTs=${Date.now() + 60_000}&limit=1000`,
        { token: admin },
      );
      const body = (await r.json()) as Record<string, Array<{ value: string }>>;
      return { steady: body.steady?.length ?? 0, every: body.every?.length ?? 0 };
    };
    await waitFor(async () => (await points()).every >= 6, 15_000, 'six readings of every');
    assert.equal((await points()).steady, 1, 'an unchanged value is sent once');
    u.holding[0] = 101;
    await waitFor(async () => (await points()).steady === 2, 15_000, 'the change is sent');
    const del = await t.api(`/api/connector/${reportsId}`, { method: 'DELETE', token: admin });
    assert.equal(del.status, 200);
  });

  it('reads wide ranges ("100-103") in requests of maxRegistersPerRequest, one key per value', async () => {
    const u = otherBank.unit(11);
    // This slave answers at most 4 registers per read, as many small devices do.
    otherBank.maxRegisters.set(11, 4);
    [11, 12, 13, 14].forEach((v, i) => {
      u.holding[100 + i] = v;
    });
    const f = Buffer.alloc(4);
    for (let i = 0; i < 6; i++) {
      f.writeFloatBE(i + 0.5); // BIG/BIG below
      u.input[20 + 2 * i] = f.readUInt16BE(0);
      u.input[21 + 2 * i] = f.readUInt16BE(2);
    }
    u.coils[0] = true;
    u.coils[2] = true;
    const res = await t.api('/api/connector', {
      token: admin,
      body: {
        name: 'ranges',
        type: 'MODBUS',
        configuration: {
          master: {
            slaves: [
              {
                ...otherSlave(11, 'Ranges'),
                byteOrder: 'BIG',
                wordOrder: 'BIG',
                timeseries: [
                  { tag: 'reg_${address}', type: '16int', functionCode: 3, address: '100-103' },
                  // 12 registers in 3 requests of 4; keys from the template.
                  {
                    tag: '${unitId}.${type}.${address}',
                    type: '32float',
                    functionCode: 4,
                    objectsCount: 2,
                    address: '20-30',
                    maxRegistersPerRequest: 4,
                  },
                  // No `${address}` in the tag: `_${address}` is appended.
                  { tag: 'coil', type: 'bits', functionCode: 1, address: '0-2' },
                ],
              },
            ],
          },
        },
      },
    });
    assert.equal(res.status, 200, await res.clone().text());
    const rangesId = ((await res.json()) as { id: string }).id;
    const id = await deviceId('Ranges');
    const values = await waitFor(
      async () => {
        const v = await latest(id);
        return Object.keys(v).length >= 13 ? v : undefined;
      },
      15_000,
      'every key of the ranges',
    );
    assert.deepEqual(values, {
      reg_100: '11',
      reg_101: '12',
      reg_102: '13',
      reg_103: '14',
      '11.32float.20': '0.5',
      '11.32float.22': '1.5',
      '11.32float.24': '2.5',
      '11.32float.26': '3.5',
      '11.32float.28': '4.5',
      '11.32float.30': '5.5',
      coil_0: 'true',
      coil_1: 'false',
      coil_2: 'true',
    });
    const st = await t.api(`/api/connector/${rangesId}/status`, { token: admin });
    const device = ((await st.json()) as { devices: Array<{ counters: { exceptions: number } }> })
      .devices[0];
    assert.equal(device.counters.exceptions, 0, 'no read asked the slave for more than 4');
    const del = await t.api(`/api/connector/${rangesId}`, { method: 'DELETE', token: admin });
    assert.equal(del.status, 200);
  });

  it('deletes a connector: polling stops', async () => {
    const res = await t.api(`/api/connector/${connectorId}`, { method: 'DELETE', token: admin });
    assert.equal(res.status, 200);
    const served = bank.served.get(1) ?? 0;
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(bank.served.get(1) ?? 0, served);
    const gone = await t.api(`/api/connector/${connectorId}`, { token: admin });
    assert.equal(gone.status, 404);
  });

  it('bounds the connector table: past 100 connectors a new one is refused', async () => {
    const made: string[] = [];
    const save = (i: number) =>
      t.api('/api/connector', {
        token: admin,
        body: {
          name: `spare ${i}`,
          type: 'MODBUS',
          enabled: false,
          configuration: { master: { slaves: [slaveConfig(1, slave.port, 'BIG', 'BIG')] } },
        },
      });
    const existing = (
      (await (await t.api('/api/connectors', { token: admin })).json()) as unknown[]
    ).length;
    for (let i = existing; i < 100; i++) {
      const res = await save(i);
      assert.equal(res.status, 200);
      made.push(((await res.json()) as { id: string }).id);
    }
    const refused = await save(100);
    assert.equal(refused.status, 400);
    assert.match(((await refused.json()) as { message: string }).message, /at most 100 connectors/);
    for (const id of made) await t.api(`/api/connector/${id}`, { method: 'DELETE', token: admin });
    assert.equal((await save(101)).status, 200, 'room again once one is deleted');
  });
});
