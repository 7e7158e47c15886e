/**
 * RS-485 mode and low-latency mode per serial port (issue 17 item 3), on socat virtual serial
 * pairs. A pty has no RS-485 support, so the gateway must refuse the port clearly (status and
 * device lastError "RS-485 mode not offered by <port>: ENOTTY"), keep retrying it as an unplugged
 * port, not crash, and use the same port once the setting is taken out. The kernel accepting the
 * mode needs a real UART (docs/connectors.md); the bytes it is handed: test/edge-native.test.ts.
 * Also: the other per-port settings, read back from the pty with stty.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { SerialPort } from 'serialport';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import {
  type ConnectorStatus,
  connectorApi,
  RegisterBank,
  SocatPair,
  startRtuSlave,
} from './helpers/modbus.js';

describe('per-port serial settings: RS-485 mode, low latency, line settings', () => {
  let t: TestGateway;
  let admin: string;
  let linePair: SocatPair;
  let rtuPair: SocatPair;
  let rtu: { close(): Promise<void> } | undefined;
  const bank = new RegisterBank();

  before(async () => {
    bank.unit(1).holding[0] = 1234;
    linePair = await SocatPair.create();
    rtuPair = await SocatPair.create();
    rtu = await startRtuSlave(bank, rtuPair.b, 115200);
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(async () => {
    await t.close();
    await rtu?.close();
    await linePair.close();
    await rtuPair.close();
  });

  const { status, latest } = connectorApi(() => ({ t, token: admin }));

  async function save(body: Record<string, unknown>): Promise<string> {
    const res = await t.api('/api/connector', { token: admin, body });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { id: string }).id;
  }

  it('a text-line port asking for RS-485 mode on a pty is refused with ENOTTY and retried; without it the port reads', async () => {
    const port = {
      port: linePair.a,
      baudrate: 9600,
      format: 'keyValue',
      deviceName: 'Meter 485',
      reopenDelayMs: 50,
      rs485: { enabled: true, rtsOnSend: true, delayRtsAfterSend: 1 },
    };
    const body = {
      name: 'meters',
      type: 'SERIAL',
      enabled: true,
      configuration: { devices: [port] },
    };
    const id = await save(body);
    const expected = `RS-485 mode not offered by ${linePair.a}: ENOTTY`;
    const s = await waitFor(
      async () => {
        const s = await status(id);
        return s.lines[0]?.lastError === expected ? s : undefined;
      },
      15_000,
      'the RS-485 refusal in the status',
    );
    assert.equal(s.running, true, 'the connector runs; only its port is not used');
    assert.equal(s.lines[0].open, false);
    assert.equal(s.devices[0].active, false);
    assert.equal(s.devices[0].lastError, `connection: ${linePair.a}: ${expected}`);
    // Retried as an unplugged port, the gateway answering all along.
    await waitFor(
      () =>
        t.logs.filter((l) => l.msg === 'serial port cannot open; retrying' && l.port === linePair.a)
          .length >= 3,
      15_000,
      'three attempts',
    );
    const health = await t.api('/healthz');
    assert.equal(health.status, 200);

    // The same connector without rs485: the port opens and its lines are read.
    const { rs485: _, ...plain } = port;
    await save({ ...body, id, configuration: { devices: [plain] } });
    await waitFor(async () => (await status(id)).lines[0]?.open, 15_000, 'the port open');
    const device = new SerialPort({ path: linePair.b, baudRate: 9600, autoOpen: false });
    await new Promise<void>((resolve, reject) => device.open((e) => (e ? reject(e) : resolve())));
    await new Promise<void>((resolve, reject) =>
      device.write('kwh=12.5\n', (e) => (e ? reject(e) : device.drain(() => resolve()))),
    );
    await waitFor(async () => (await latest('Meter 485')).kwh === '12.5', 15_000, 'the reading');
    await new Promise<void>((resolve) => device.close(() => resolve()));

    // RS-485 mode asked off on a port that has none (ENOTTY): already off, so the port is used.
    await save({
      ...body,
      id,
      configuration: { devices: [{ ...plain, rs485: { enabled: false } }] },
    });
    await waitFor(
      () =>
        t.logs.some(
          (l) => l.msg === 'RS-485 mode off: the driver has none' && l.port === linePair.a,
        ),
      15_000,
      'the switch-off logged',
    );
    await waitFor(async () => (await status(id)).lines[0]?.open, 15_000, 'the port open again');
    await new Promise<void>((resolve, reject) => device.open((e) => (e ? reject(e) : resolve())));
    await new Promise<void>((resolve, reject) =>
      device.write('kwh=13.5\n', (e) => (e ? reject(e) : device.drain(() => resolve()))),
    );
    await waitFor(
      async () => (await latest('Meter 485')).kwh === '13.5',
      15_000,
      'the next reading',
    );
    assert.equal((await status(id)).lines[0]?.lastError ?? null, null);
    await new Promise<void>((resolve) => device.close(() => resolve()));
    await t.api(`/api/connector/${id}`, { method: 'DELETE', token: admin });
  });

  const rtuSlave = (extra: Record<string, unknown> = {}) => ({
    type: 'serial',
    method: 'rtu',
    port: rtuPair.a,
    baudrate: 115200,
    unitId: 1,
    deviceName: 'Drive 485',
    byteOrder: 'BIG',
    timeout: 0.3,
    retries: 0,
    pollPeriod: 200,
    connectAttemptTimeMs: 50,
    connectAttemptCount: 2,
    waitAfterFailedAttemptsMs: 100,
    timeseries: [{ tag: 'speed', type: '16uint', functionCode: 3, address: 0 }],
    ...extra,
  });

  it('a Modbus RTU slave asking for RS-485 (or low-latency) mode on a pty is refused and retried; without it it is polled', async () => {
    const body = (slave: Record<string, unknown>) => ({
      name: 'drives',
      type: 'MODBUS',
      enabled: true,
      configuration: { master: { slaves: [slave] } },
    });
    const id = await save(body(rtuSlave({ rs485: { enabled: true, delayRtsBeforeSend: 2 } })));
    const expected = `RS-485 mode not offered by ${rtuPair.a}: ENOTTY`;
    const s = await waitFor(
      async () => {
        const s = await status(id);
        // Every attempt is counted against the device: three of them show it retries.
        return s.devices[0]?.counters.connectionErrors >= 3 ? s : undefined;
      },
      15_000,
      'three refused attempts',
    );
    assert.equal(s.lines[0].open, false);
    assert.equal(s.lines[0].lastError, expected);
    assert.equal(s.devices[0].active, false);
    assert.equal(s.devices[0].lastError, `connection: ${rtuPair.a}: ${expected}`);
    assert.equal(s.devices[0].counters.polls, 0, 'no request went out on the refused port');

    await save({ ...body(rtuSlave({ lowLatency: true })), id });
    await waitFor(
      async () =>
        (await status(id)).lines[0]?.lastError ===
        `low-latency mode not offered by ${rtuPair.a}: ENOTTY`,
      15_000,
      'the low-latency refusal',
    );

    await save({ ...body(rtuSlave()), id });
    await waitFor(async () => (await latest('Drive 485')).speed === '1234', 15_000, 'polled');
    assert.equal((await status(id)).lines[0].open, true);
    await t.api(`/api/connector/${id}`, { method: 'DELETE', token: admin });
  });

  it('refuses a bad rs485 or lowLatency setting with a 400 naming the field', async () => {
    const refused = async (type: 'SERIAL' | 'MODBUS', configuration: unknown, field: RegExp) => {
      const res = await t.api('/api/connector', {
        token: admin,
        body: { name: 'bad', type, enabled: true, configuration },
      });
      const text = await res.text();
      assert.equal(res.status, 400, text);
      assert.match(text, field);
    };
    const line = (extra: Record<string, unknown>) => ({
      devices: [{ port: linePair.a, format: 'json', deviceName: 'x', ...extra }],
    });
    await refused(
      'SERIAL',
      line({ rs485: { delayRtsBeforeSend: 500 } }),
      /configuration\.devices\.0\.rs485\.delayRtsBeforeSend: must be 0 to 100 \(ms\)/,
    );
    await refused(
      'SERIAL',
      line({ rs485: { enabled: 'yes' } }),
      /configuration\.devices\.0\.rs485\.enabled: /,
    );
    await refused(
      'SERIAL',
      line({ rs485: { rtsOnSent: true } }),
      /configuration\.devices\.0\.rs485: Unrecognized key: \\"rtsOnSent\\"/,
    );
    await refused(
      'SERIAL',
      line({ rs485: true }),
      /configuration\.devices\.0\.rs485: must be an object/,
    );
    await refused('SERIAL', line({ lowLatency: 1 }), /configuration\.devices\.0\.lowLatency: /);
    const tcp = {
      type: 'tcp',
      method: 'socket',
      host: '127.0.0.1',
      port: 502,
      unitId: 1,
      deviceName: 'T',
      pollPeriod: 1000,
    };
    await refused(
      'MODBUS',
      { master: { slaves: [{ ...tcp, rs485: { enabled: true } }] } },
      /configuration\.master\.slaves\.0\.rs485: is for a serial port only/,
    );
    await refused(
      'MODBUS',
      { master: { slaves: [rtuSlave({ rs485: {} }), rtuSlave({ deviceName: 'B', unitId: 2 })] } },
      /configuration\.master\.slaves\.1\.rs485: differs from the first slave on /,
    );
    const list = await t.api('/api/connectors', { token: admin });
    assert.ok(!((await list.json()) as Array<{ name: string }>).some((c) => c.name === 'bad'));
  });

  it('without the native addon the gateway runs and a port asking for rs485 says it is not available', async () => {
    const bare = await startGateway({
      overrides: { nativeAddonFile: '/nonexistent/edge_native.node' },
    });
    try {
      assert.ok(
        bare.logs.some(
          (l) => typeof l.msg === 'string' && l.msg.startsWith('native addon not available'),
        ),
      );
      const token = await bare.adminToken();
      const res = await bare.api('/api/connector', {
        token,
        body: {
          name: 'no addon',
          type: 'SERIAL',
          enabled: true,
          configuration: {
            devices: [{ port: linePair.a, format: 'json', deviceName: 'x', rs485: {} }],
          },
        },
      });
      assert.equal(res.status, 200);
      const { id } = (await res.json()) as { id: string };
      await waitFor(
        async () => {
          const r = await bare.api(`/api/connector/${id}/status`, { token });
          const { lines } = (await r.json()) as ConnectorStatus;
          return lines[0]?.lastError?.startsWith(
            'RS-485 mode not available: the native addon edge_native.node was not built',
          );
        },
        15_000,
        'the not-available error',
      );
      assert.equal((await bare.api('/healthz')).status, 200);
      // Asking RS-485 mode off needs no addon: the port is used as the driver has it.
      const off = await bare.api('/api/connector', {
        token,
        body: {
          id,
          name: 'no addon',
          type: 'SERIAL',
          enabled: true,
          configuration: {
            devices: [
              { port: linePair.a, format: 'json', deviceName: 'x', rs485: { enabled: false } },
            ],
          },
        },
      });
      assert.equal(off.status, 200);
      await waitFor(
        async () => {
          const r = await bare.api(`/api/connector/${id}/status`, { token });
          return ((await r.json()) as ConnectorStatus).lines[0]?.open;
        },
        15_000,
        'the port open without the addon',
      );
    } finally {
      await bare.close();
    }
  });

  it('the other per-port settings reach the port: baud rate, stop bits, RTS/CTS (text lines), baud rate (Modbus)', async () => {
    // Read back with stty while the gateway holds the port (root passes serialport's TIOCEXCL).
    // A pty keeps baud rate, stop bits and RTS/CTS, but forces 8 data bits and no parity
    // (Linux's pty_set_termios), so those two cannot be seen here.
    const pair = await SocatPair.create();
    const stty = () => execFileSync('stty', ['-F', pair.a, '-a'], { encoding: 'utf8' });
    try {
      assert.doesNotMatch(stty(), /speed 4800 baud|(?<!-)cstopb|(?<!-)crtscts/);
      const id = await save({
        name: 'line settings',
        type: 'SERIAL',
        enabled: true,
        configuration: {
          devices: [
            {
              port: pair.a,
              baudrate: 4800,
              bytesize: 7,
              parity: 'E',
              stopbits: 2,
              rtscts: true,
              format: 'json',
              deviceName: 'Settings',
            },
          ],
        },
      });
      await waitFor(async () => (await status(id)).lines[0]?.open, 15_000, 'the port open');
      const open = stty();
      assert.match(open, /speed 4800 baud/);
      assert.match(open, /(?<!-)cstopb/);
      assert.match(open, /(?<!-)crtscts/);
      await t.api(`/api/connector/${id}`, { method: 'DELETE', token: admin });

      const modbus = await save({
        name: 'modbus settings',
        type: 'MODBUS',
        enabled: true,
        configuration: {
          master: { slaves: [{ ...rtuSlave(), port: pair.a, baudrate: 57600, stopbits: 1 }] },
        },
      });
      await waitFor(async () => (await status(modbus)).lines[0]?.open, 15_000, 'the line open');
      const line = stty();
      assert.match(line, /speed 57600 baud/);
      assert.match(line, /-cstopb/);
      await t.api(`/api/connector/${modbus}`, { method: 'DELETE', token: admin });
    } finally {
      await pair.close();
    }
  });
});
