import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { ACK, CON, encode, NON, RawCoap, RST, uriPath } from './helpers/raw-coap.js';

const OBSERVE = 6;
const TOKEN = Buffer.from('0a0b0c0d', 'hex');

describe('hardening: CoAP strictness, RFC 7252 §4.2-4.3 (issue 20 case 5)', () => {
  let t: TestGateway;
  let dev: { id: string; token: string };
  let coap: RawCoap;
  let mid = 100;

  before(async () => {
    t = await startGateway();
    dev = await createDevice(t, 'coap-strict');
    coap = new RawCoap(t.gw.ports.coap);
  });
  after(async () => {
    coap.close();
    await t.close();
  });

  const telemetry = (extra: Partial<Parameters<typeof encode>[0]> = {}) =>
    encode({
      type: CON,
      code: '0.02',
      messageId: ++mid,
      token: TOKEN,
      options: uriPath(`/api/v1/${dev.token}/telemetry`),
      payload: '{"bad":1}',
      ...extra,
    });

  /**
   * Sends `datagram`, then a ping: the ping's RST arriving first proves the datagram got no
   * answer at all (the server answers in order).
   */
  const assertNoAnswer = async (datagram: Buffer) => {
    coap.send(datagram);
    const ping = ++mid;
    coap.send(encode({ type: CON, code: '0.00', messageId: ping }));
    const first = await coap.next();
    assert.deepEqual([first.type, first.code, first.messageId], [RST, '0.00', ping]);
  };

  it('an Empty CON (a ping) gets a RST with its Message ID', async () => {
    coap.send(encode({ type: CON, code: '0.00', messageId: 4242 }));
    const r = await coap.next();
    assert.deepEqual([r.type, r.code, r.messageId, r.payload], [RST, '0.00', 4242, '']);
  });

  it('a 1-byte datagram and a truncated header are dropped, no internal error text', async () => {
    await assertNoAnswer(Buffer.from([0x42]));
    await assertNoAnswer(Buffer.from([0x42, 0x01, 0x00]));
  });

  it('a CON whose option runs past the end gets a RST; a NON one is ignored', async () => {
    const good = telemetry();
    // Cut inside the last Uri-Path option.
    const cut = good.subarray(0, good.indexOf(Buffer.from('telemetry')) + 3);
    coap.send(cut);
    const r = await coap.next();
    assert.deepEqual([r.type, r.messageId, r.payload], [RST, cut.readUInt16BE(2), '']);
    const non = Buffer.from(cut);
    non[0] = (non[0] & 0xcf) | (NON << 4);
    await assertNoAnswer(non);
  });

  it('token length 9 is a format error: RST, nothing stored', async () => {
    const msg = telemetry({ token: Buffer.alloc(9, 1) });
    coap.send(msg);
    const r = await coap.next();
    assert.deepEqual([r.type, r.messageId], [RST, msg.readUInt16BE(2)]);
  });

  it('an unrecognized critical option (9999) gets 4.02 naming it, nothing stored', async () => {
    const msg = telemetry({
      options: [...uriPath(`/api/v1/${dev.token}/telemetry`), [9999, Buffer.from([1])]],
    });
    coap.send(msg);
    const r = await coap.next();
    assert.deepEqual([r.type, r.code, r.messageId], [ACK, '4.02', msg.readUInt16BE(2)]);
    assert.equal(r.token.toString('hex'), TOKEN.toString('hex'));
    assert.match(r.payload, /unrecognized critical option 9999/);
  });

  it('a RST carrying a POST is ignored and stores nothing', async () => {
    await assertNoAnswer(telemetry({ type: RST }));
    await assertNoAnswer(telemetry({ type: ACK }));
  });

  it('nothing of the refused datagrams was stored; a well-formed POST still is', async () => {
    assert.deepEqual(t.gw.services.telemetry.keys(dev.id), []);
    const msg = telemetry({ payload: '{"good":1}' });
    coap.send(msg);
    const r = await coap.next();
    assert.deepEqual([r.type, r.code, r.messageId], [ACK, '2.01', msg.readUInt16BE(2)]);
    assert.deepEqual(t.gw.services.telemetry.keys(dev.id), ['good']);
    assert.ok(t.gw.coapObservations.malformedDatagrams >= 8);
  });
});

describe('hardening: CoAP observers are bounded, RFC 7641 (issue 20 case 6)', () => {
  let t: TestGateway;
  let admin: string;
  let n = 0;
  let mid = 1000;

  before(async () => {
    t = await startGateway({
      config: {
        coap: {
          notificationAckTimeoutMs: 300,
          maxObserversPerEndpoint: 3,
          maxObservers: 5,
          observeLifetimeSec: 3600,
        },
      },
    });
    admin = await t.adminToken();
  });
  after(() => t.close());

  const setShared = async (id: string, value: number) => {
    const res = await t.api(`/api/plugins/telemetry/DEVICE/${id}/attributes/SHARED_SCOPE`, {
      body: { v: value },
      token: admin,
    });
    assert.equal(res.status, 200);
  };

  /** Registers Observe on the shared attributes of a device; returns after the first reply. */
  const register = async (coap: RawCoap, device?: { id: string; token: string }) => {
    const dev = device ?? (await createDevice(t, `obs-${n++}`));
    n++;
    const token = Buffer.from([n & 0xff, 7]);
    coap.send(
      encode({
        type: CON,
        code: '0.01',
        messageId: ++mid,
        token,
        options: [[OBSERVE, Buffer.alloc(0)], ...uriPath(`/api/v1/${dev.token}/attributes`)],
      }),
    );
    const first = await coap.next();
    return { dev, first };
  };

  const live = () => t.gw.coapObservations.live;

  it('an unacknowledged confirmable notification removes the observer', async () => {
    const coap = new RawCoap(t.gw.ports.coap);
    try {
      const { dev, first } = await register(coap);
      assert.equal(first.code, '2.05');
      assert.equal(live(), 1);
      await setShared(dev.id, 1);
      const note = await coap.next();
      assert.equal(note.type, CON);
      // No ACK: the observer goes away.
      await waitFor(() => live() === 0, 10_000, 'observer removed');
      assert.ok(
        t.logs.some((l) => l.reason === 'confirmable notification not acknowledged'),
        'logged',
      );
    } finally {
      coap.close();
    }
  });

  it('an acknowledged notification keeps it; a RST to a notification removes it', async () => {
    const coap = new RawCoap(t.gw.ports.coap);
    try {
      const { dev } = await register(coap);
      await setShared(dev.id, 2);
      const note = await coap.next();
      coap.send(encode({ type: ACK, code: '0.00', messageId: note.messageId }));
      await new Promise((r) => setTimeout(r, 600));
      assert.equal(live(), 1, 'an acknowledged notification keeps the observer');
      await setShared(dev.id, 3);
      const again = await coap.next();
      coap.send(encode({ type: RST, code: '0.00', messageId: again.messageId }));
      await waitFor(() => live() === 0, 10_000, 'observer removed after RST');
    } finally {
      coap.close();
    }
  });

  it('observers are capped per endpoint (oldest ends) and in total (5.03)', async () => {
    const a = new RawCoap(t.gw.ports.coap);
    const b = new RawCoap(t.gw.ports.coap);
    const devs = [];
    for (let i = 0; i < 8; i++) devs.push(await createDevice(t, `cap-${i}`));
    try {
      for (let i = 0; i < 5; i++) await register(a, devs[i]);
      assert.equal(live(), 3, 'one endpoint keeps at most 3');
      for (let i = 5; i < 7; i++) assert.equal((await register(b, devs[i])).first.code, '2.05');
      assert.equal(live(), 5);
      const refused = await register(b, devs[7]);
      assert.equal(refused.first.code, '5.03');
      assert.equal(live(), 5, 'the total stays at its bound');
      assert.ok(t.gw.coapObservations.observationsRefused >= 1);
    } finally {
      a.close();
      b.close();
    }
  });
});

describe('hardening: CoAP observer lifetime (issue 20 case 6)', () => {
  let t: TestGateway;

  before(async () => {
    t = await startGateway({ config: { coap: { observeLifetimeSec: 1 } } });
  });
  after(() => t.close());

  it('an observer not re-registered within its lifetime ends', async () => {
    const dev = await createDevice(t, 'lifetime');
    const coap = new RawCoap(t.gw.ports.coap);
    try {
      coap.send(
        encode({
          type: CON,
          code: '0.01',
          messageId: 77,
          token: TOKEN,
          options: [[OBSERVE, Buffer.alloc(0)], ...uriPath(`/api/v1/${dev.token}/attributes`)],
        }),
      );
      assert.equal((await coap.next()).code, '2.05');
      assert.equal(t.gw.coapObservations.live, 1);
      await waitFor(() => t.gw.coapObservations.live === 0, 15_000, 'observer past its lifetime');
      assert.ok(t.logs.some((l) => l.reason === 'lifetime passed'));
    } finally {
      coap.close();
    }
  });
});
