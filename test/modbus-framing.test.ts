/**
 * Modbus RTU over TCP (issue 17: `type tcp, method rtu`, what a serial-to-Ethernet converter
 * carries) and Modbus UDP (`type udp`), end to end over real sockets. modbus-serial has neither an
 * RTU-over-TCP nor a UDP server, so `socat` bridges them: a TCP listener to a pty on which
 * modbus-serial's RTU server answers, and a UDP listener to modbus-serial's TCP server (Modbus UDP
 * carries the same MBAP frames as Modbus TCP, one per datagram). Values are read back over REST; a
 * shared attribute is written to a holding register.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import {
  freePort,
  RegisterBank,
  type RunningSlave,
  socatBridge,
  startRtuSlave,
  startTcpSlave,
} from './helpers/modbus.js';

function slave(name: string, type: string, method: string, port: number, unitId: number) {
  return {
    host: '127.0.0.1',
    port,
    type,
    method,
    unitId,
    deviceName: name,
    deviceType: 'meter',
    timeout: 1,
    pollPeriod: 200,
    byteOrder: 'BIG',
    wordOrder: 'BIG',
    timeseries: [
      { tag: 'power', type: '16int', functionCode: 3, objectsCount: 1, address: 0 },
      { tag: 'energy', type: '32float', functionCode: 4, objectsCount: 2, address: 2 },
    ],
    attributeUpdates: [
      { tag: 'limit', type: '16uint', functionCode: 6, objectsCount: 1, address: 10 },
    ],
  };
}

describe('Modbus RTU over TCP and Modbus UDP', () => {
  let t: TestGateway;
  let admin: string;
  let dir: string;
  const rtuBank = new RegisterBank();
  let rtuSlave: { close(): Promise<void> };
  const bridges: Array<{ close(): Promise<void> }> = [];
  let rtuPort: number;
  const udpBank = new RegisterBank();
  let tcpSlave: RunningSlave;
  let udpPort: number;

  before(async () => {
    const u = rtuBank.unit(3);
    u.holding[0] = 1234;
    const f = Buffer.alloc(4);
    f.writeFloatBE(12.5);
    u.input[2] = f.readUInt16BE(0);
    u.input[3] = f.readUInt16BE(2);
    dir = await mkdtemp(join(tmpdir(), 'edge-gw-framing-'));
    const pty = join(dir, 'rtu');
    rtuPort = await freePort();
    // socat opens the pty first, then listens: the RTU slave can open the pty before a client.
    bridges.push(
      await socatBridge(`pty,raw,echo=0,link=${pty}`, `tcp4-listen:${rtuPort},bind=127.0.0.1`, () =>
        existsSync(pty),
      ),
    );
    rtuSlave = await startRtuSlave(rtuBank, pty);
    const v = udpBank.unit(4);
    v.holding[0] = 4321;
    f.writeFloatBE(-7.25);
    v.input[2] = f.readUInt16BE(0);
    v.input[3] = f.readUInt16BE(2);
    tcpSlave = await startTcpSlave(udpBank);
    udpPort = await freePort();
    // One UDP peer (the gateway's socket) to one TCP connection to the slave.
    bridges.push(
      await socatBridge(`udp4-listen:${udpPort},bind=127.0.0.1`, `tcp4:127.0.0.1:${tcpSlave.port}`),
    );
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(async () => {
    await t.close();
    await rtuSlave.close();
    await tcpSlave.close();
    for (const b of bridges) await b.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function deviceId(name: string): Promise<string> {
    return await waitFor(
      async () => {
        const res = await t.api(`/api/tenant/devices?deviceName=${encodeURIComponent(name)}`, {
          token: admin,
        });
        return res.status === 200
          ? ((await res.json()) as { id: { id: string } }).id.id
          : undefined;
      },
      15_000,
      `device ${name}`,
    );
  }

  it('polls an RTU slave over TCP and a UDP slave; a shared attribute becomes a register write', async () => {
    // The UDP slave is named by host name: modbus-serial keeps only replies from the address as
    // written, so an unresolved name used to time out every request.
    const udp = { ...slave('Over UDP', 'udp', 'socket', udpPort, 4), host: 'localhost' };
    const res = await t.api('/api/connector', {
      token: admin,
      body: {
        name: 'converter',
        type: 'MODBUS',
        enabled: true,
        configuration: {
          master: {
            slaves: [slave('RTU over TCP', 'tcp', 'rtu', rtuPort, 3), udp],
          },
        },
      },
    });
    assert.equal(res.status, 200, await res.clone().text());
    for (const [name, bank, unit, power, energy] of [
      ['RTU over TCP', rtuBank, 3, '1234', '12.5'],
      ['Over UDP', udpBank, 4, '4321', '-7.25'],
    ] as const) {
      const id = await deviceId(name);
      const values = await waitFor(
        async () => {
          const r = await t.api(`/api/plugins/telemetry/DEVICE/${id}/values/timeseries`, {
            token: admin,
          });
          const body = (await r.json()) as Record<string, Array<{ value: string }>>;
          return body.power && body.energy
            ? { power: body.power[0].value, energy: body.energy[0].value }
            : undefined;
        },
        15_000,
        `telemetry of ${name}`,
      );
      assert.deepEqual(values, { power, energy }, name);
      const saved = await t.api(`/api/plugins/telemetry/DEVICE/${id}/attributes/SHARED_SCOPE`, {
        token: admin,
        body: { limit: 700 + unit },
      });
      assert.equal(saved.status, 200);
      await waitFor(() => bank.unit(unit).holding[10] === 700 + unit, 15_000, `write on ${name}`);
    }
  });

  it('refuses RTU framing over UDP with a 400 naming the field', async () => {
    const res = await t.api('/api/connector', {
      token: admin,
      body: {
        name: 'udp-rtu',
        type: 'MODBUS',
        configuration: { master: { slaves: [slave('UDP RTU', 'udp', 'rtu', udpPort, 5)] } },
      },
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as { message: string };
    assert.match(body.message, /master\.slaves\.0\.method: must be socket over UDP/);
  });
});
