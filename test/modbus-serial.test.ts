/**
 * Serial buses (issue 17) on `socat` virtual serial pairs: a Modbus RTU slave (modbus-serial's
 * serial server) on one pair, a text-line device on another. One poll loop per port, a silent
 * slave that does not stall the other, a port that disappears (socat ends, as an unplugged USB
 * adapter) and comes back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SerialPort } from 'serialport';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { connectorApi, RegisterBank, SocatPair, startRtuSlave } from './helpers/modbus.js';

describe('serial connectors on socat pairs', () => {
  let t: TestGateway;
  let admin: string;
  let rtuPair: SocatPair;
  let linePair: SocatPair;
  let rtu: { close(): Promise<void> } | undefined;
  const bank = new RegisterBank();

  before(async () => {
    const a = bank.unit(1);
    a.holding[0] = 0x00d7; // 215 → 21.5 with divider 10
    a.holding[1] = 0x41ac; // 32float BIG/BIG 21.5 = 0x41AC0000
    a.holding[2] = 0x0000;
    a.coils[0] = true;
    const b = bank.unit(2);
    b.input[5] = 0x3412; // 16uint LITTLE → 0x1234
    rtuPair = await SocatPair.create();
    linePair = await SocatPair.create();
    rtu = await startRtuSlave(bank, rtuPair.b, 115200);
    t = await startGateway({ config: { activity: { checkIntervalSec: 1 } } });
    admin = await t.adminToken();
  });
  after(async () => {
    await t.close();
    await rtu?.close();
    await rtuPair.close();
    await linePair.close();
  });

  const { status, latest } = connectorApi(() => ({ t, token: admin }));

  async function create(body: unknown): Promise<string> {
    const res = await t.api('/api/connector', { token: admin, body });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { id: string }).id;
  }

  const rtuSlave = (unitId: number, deviceName: string) => ({
    type: 'serial',
    method: 'rtu',
    port: rtuPair.a,
    baudrate: 115200,
    bytesize: 8,
    parity: 'N',
    stopbits: 1,
    unitId,
    deviceName,
    timeout: 0.3,
    retries: 1,
    pollPeriod: 200,
    connectAttemptTimeMs: 100,
    connectAttemptCount: 2,
    waitAfterFailedAttemptsMs: 300,
  });

  it('polls two RTU slaves on one port; a silent one is counted, the other goes on; a lost port reopens', async () => {
    const id = await create({
      name: 'rs485 bus',
      type: 'MODBUS',
      enabled: true,
      configuration: {
        master: {
          slaves: [
            {
              ...rtuSlave(1, 'Boiler'),
              byteOrder: 'BIG',
              wordOrder: 'BIG',
              timeseries: [
                { tag: 'temp', type: '16int', functionCode: 3, address: 0, divider: 10 },
                { tag: 'f', type: '32float', functionCode: 3, objectsCount: 2, address: 1 },
                { tag: 'pump', type: 'bits', functionCode: 1, address: 0 },
              ],
            },
            {
              ...rtuSlave(2, 'Valve'),
              timeseries: [{ tag: 'pos', type: '16uint', functionCode: 4, address: 5 }],
            },
          ],
        },
      },
    });
    await waitFor(
      async () => {
        const v = await latest('Boiler');
        return v.temp === '21.5' && v.f === '21.5' && v.pump === 'true';
      },
      15_000,
      'Boiler values',
    );
    await waitFor(async () => (await latest('Valve')).pos === '4660', 15_000, 'Valve value');
    const s0 = await status(id);
    assert.equal(s0.lines.length, 1, 'one poll loop for the port');
    assert.equal(s0.lines[0].line, rtuPair.a);

    // The valve stops answering: timeouts counted, the boiler keeps its polls.
    bank.silent.add(2);
    await waitFor(
      async () => {
        const v = (await status(id)).devices.find((d) => d.name === 'Valve');
        return v && !v.active && v.counters.timeouts >= 2;
      },
      15_000,
      'the valve counted',
    );
    const polls = async () =>
      (await status(id)).devices.find((d) => d.name === 'Boiler')?.counters.polls ?? 0;
    const p0 = await polls();
    // Nominally 15 polls in 3 s, less the backed-off valve's 0.3 s timeouts (margins for load).
    await new Promise((r) => setTimeout(r, 3000));
    const p1 = await polls();
    assert.ok(p1 - p0 >= 5, `boiler polled ${p1 - p0} times in 3 s while the valve was silent`);
    bank.silent.delete(2);
    await waitFor(
      async () => (await status(id)).devices.find((d) => d.name === 'Valve')?.active,
      15_000,
      'the valve answers again',
    );

    // The port disappears: both devices lose it; it comes back and is reopened by itself.
    await rtu?.close();
    rtu = undefined;
    await rtuPair.down();
    await waitFor(
      async () => {
        const s = await status(id);
        return (
          !s.lines[0].open &&
          s.devices.every((d) => !d.active && d.counters.connectionErrors + d.counters.timeouts > 0)
        );
      },
      15_000,
      'the port reported lost',
    );
    await rtuPair.up();
    rtu = await startRtuSlave(bank, rtuPair.b, 115200);
    bank.unit(1).holding[0] = 0x00dc; // 22.0
    await waitFor(async () => (await latest('Boiler')).temp === '22.0', 20_000, 'polling resumed');
    const s1 = await waitFor(
      async () => {
        const s = await status(id);
        return s.devices.every((d) => d.active) ? s : undefined;
      },
      15_000,
      'both devices active again',
    );
    assert.ok(s1.lines[0].open);
    assert.ok(s1.lines[0].reopens >= 1);
    await t.api(`/api/connector/${id}`, { method: 'DELETE', token: admin });
  });

  it('reads text lines: CSV with a column map, JSON and key=value with the device named by a field', async () => {
    const device = new SerialPort({ path: linePair.b, baudRate: 9600, autoOpen: false });
    await new Promise<void>((resolve, reject) =>
      device.open((err) => (err ? reject(err) : resolve())),
    );
    const send = (line: string) =>
      new Promise<void>((resolve, reject) =>
        device.write(`${line}\n`, (err) => (err ? reject(err) : device.drain(() => resolve()))),
      );
    const id = await create({
      name: 'scales',
      type: 'SERIAL',
      enabled: true,
      configuration: {
        devices: [
          {
            port: linePair.a,
            baudrate: 9600,
            format: 'csv',
            columns: ['', 'weight', 'unit', 'serial'],
            deviceName: 'Scale 1',
            deviceType: 'scale',
            attributes: ['serial'],
          },
        ],
      },
    });
    await waitFor(async () => (await status(id)).lines[0]?.open, 10_000, 'line port open');
    await send('S,12.50,kg,SN-77');
    await waitFor(
      async () => {
        const v = await latest('Scale 1');
        return v.weight === '12.5' && v.unit === 'kg';
      },
      10_000,
      'CSV reading',
    );
    // A bad line is counted against the device; the next one is read.
    await send('only-one-column');
    await waitFor(
      async () => (await status(id)).devices[0]?.counters.decodeErrors === 1,
      10_000,
      'bad line counted',
    );

    // The same port re-configured for JSON lines naming their device.
    /** Re-configures the connector's one port; resolves once it is open again. */
    const reconfigure = async (device: Record<string, unknown>) => {
      const res = await t.api('/api/connector', {
        token: admin,
        body: {
          id,
          name: 'scales',
          type: 'SERIAL',
          enabled: true,
          configuration: { devices: [{ port: linePair.a, ...device }] },
        },
      });
      assert.equal(res.status, 200);
      await waitFor(async () => (await status(id)).lines[0]?.open, 10_000, 'line port reopened');
    };
    await reconfigure({ format: 'json', deviceNameField: 'id', deviceType: 'tank' });
    await send('{"id":"Tank 9","level":73.0,"ok":true}');
    await waitFor(
      async () => {
        const v = await latest('Tank 9');
        return v.level === '73.0' && v.ok === 'true';
      },
      10_000,
      'JSON reading',
    );

    await reconfigure({ format: 'keyValue', separator: ';', deviceNameField: 'dev' });
    await send('dev=Pump 3;rpm=1450;state=RUN');
    await waitFor(
      async () => {
        const v = await latest('Pump 3');
        return v.rpm === '1450' && v.state === 'RUN';
      },
      10_000,
      'key=value reading',
    );
    await new Promise<void>((resolve) => device.close(() => resolve()));
    await t.api(`/api/connector/${id}`, { method: 'DELETE', token: admin });
  });
});
