/**
 * Fault drill (issue 20): the data directory's filesystem fills up. The gateway runs on a
 * size-limited tmpfs mounted for this test (tests and CI run as root; see .ci/run).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { coapRequest } from './helpers/coap.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { closed, mqttConnect } from './helpers/mqtt.js';

/** Fills the filesystem of `dir` with one file until ENOSPC; returns its path. */
function fill(dir: string): string {
  const file = join(dir, 'filler');
  const fd = openSync(file, 'w');
  const chunk = Buffer.alloc(64 * 1024, 7);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
    // The last bytes.
    try {
      for (;;) writeSync(fd, chunk, 0, 512);
    } catch {
      // full
    }
  } finally {
    closeSync(fd);
  }
  return file;
}

describe('fault drill: disk full', () => {
  const mountPoint = mkdtempSync(join(tmpdir(), 'edge-gw-full-'));
  let t: TestGateway;
  let dev: { id: string; token: string };
  let admin: string;
  const acked: number[] = [];
  let n = 0;

  before(async () => {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', mountPoint]);
    t = await startGateway({ dataDir: mountPoint });
    dev = await createDevice(t, 'full-dev');
    admin = await t.adminToken();
  });
  after(async () => {
    await t?.close(false);
    execFileSync('umount', ['-l', mountPoint]);
    rmSync(mountPoint, { recursive: true, force: true });
  });

  /** Posts one point `n` with a 16 KB string beside it; records it when acknowledged. */
  const post = async () => {
    const i = n++;
    const res = await t.api(`/api/v1/${dev.token}/telemetry`, {
      body: { n: i, pad: 'p'.repeat(16 * 1024) },
    });
    if (res.status === 200) acked.push(i);
    return res;
  };

  it('refuses writes with 507 / CoAP 5.03 / an MQTT refusal, serves reads, logs once, recovers', async () => {
    for (let i = 0; i < 10; i++) assert.equal((await post()).status, 200);
    const filler = fill(mountPoint);

    // The WAL may still have room: write until the disk says no.
    let res = await post();
    for (let i = 0; i < 400 && res.status === 200; i++) res = await post();
    const text = await res.text();
    assert.equal(res.status, 507, `got ${res.status} ${text}`);
    const body = JSON.parse(text) as { message: string; status: number };
    assert.match(body.message, /Storage is full/);
    for (let i = 0; i < 3; i++) assert.equal((await post()).status, 507);

    const coap = await coapRequest({
      port: t.gw.ports.coap,
      method: 'POST',
      pathname: `/api/v1/${dev.token}/telemetry`,
      payload: JSON.stringify({ c: 'x'.repeat(700) }),
    });
    assert.equal(coap.code, '5.03');

    const mqtt = await mqttConnect(t.gw.ports.mqtt, { username: dev.token });
    const gone = closed(mqtt, 10_000);
    mqtt.publish('v1/devices/me/telemetry', JSON.stringify({ m: 'y'.repeat(16 * 1024) }), {
      qos: 1,
    });
    await gone;
    mqtt.end(true);

    // Reads and the page are still served; telemetry reads write nothing (the open range is
    // read from memory), so history and latest values are answered too.
    const fullHistory = await t.api(
      `/api/plugins/telemetry/DEVICE/${dev.id}/values/timeseries?keys=n&startTs=0&endTs=${Date.now() + 60_000}&limit=100000`,
      { token: admin },
    );
    assert.equal(fullHistory.status, 200);
    const seen = ((await fullHistory.json()) as { n: Array<{ value: string }> }).n.map((p) =>
      Number(p.value),
    );
    for (const i of acked) assert.ok(seen.includes(i), `acknowledged point ${i} not read`);
    const fullLatest = await t.api(
      `/api/plugins/telemetry/DEVICE/${dev.id}/values/timeseries?keys=n`,
      { token: admin },
    );
    assert.equal(fullLatest.status, 200);
    assert.equal(
      Number(((await fullLatest.json()) as { n: Array<{ value: string }> }).n[0].value),
      Math.max(...acked),
    );
    const attrs = await t.api(
      `/api/plugins/telemetry/DEVICE/${dev.id}/values/attributes/SHARED_SCOPE`,
      { token: admin },
    );
    assert.equal(attrs.status, 200);
    assert.equal((await t.api(`/api/device/${dev.id}`, { token: admin })).status, 200);
    assert.equal((await t.api(`/api/v1/${dev.token}/attributes`)).status, 200);
    assert.equal((await t.api('/')).status, 200);

    assert.equal(
      t.logs.filter((l) => String(l.msg).startsWith('disk full')).length,
      1,
      'the full disk is logged once',
    );

    // Space returns: writes succeed again without a restart.
    unlinkSync(filler);
    await waitFor(async () => (await post()).status === 200, 30_000, 'writes to succeed again');
    assert.ok(t.logs.some((l) => String(l.msg).startsWith('disk has space again')));

    // Nothing acknowledged was lost.
    const history = await t.api(
      `/api/plugins/telemetry/DEVICE/${dev.id}/values/timeseries?keys=n&startTs=0&endTs=${Date.now() + 60_000}&limit=100000`,
      { token: admin },
    );
    const values = ((await history.json()) as { n: Array<{ value: string }> }).n.map((p) =>
      Number(p.value),
    );
    for (const i of acked) assert.ok(values.includes(i), `acknowledged point ${i} lost`);
  });
});
