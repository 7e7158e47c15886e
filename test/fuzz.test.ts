/**
 * Property tests over the device-input parsers (issue 20): telemetry, attributes, RPC,
 * provisioning, the MQTT topic router and the CoAP datagram checks. Invariants: no exception but
 * a GatewayError escapes, every refusal names the problem, nothing of a refused payload is stored.
 *
 * `npm test` runs a fixed seed and a small budget; `npm run fuzz` runs longer (FUZZ_RUNS, and
 * FUZZ_SEED to replay a failure).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { parseTypedObject } from '../src/attributes/kv-value.js';
import { GatewayError } from '../src/errors.js';
import { parseTelemetryText, TELEMETRY_LIMITS } from '../src/telemetry/telemetry-parser.js';
import { inspectDatagram } from '../src/transports/coap/strict.js';
import { DeviceSession, ProvisionSession } from '../src/transports/mqtt/device-session.js';
import { filterProblem } from '../src/transports/mqtt/strict.js';
import { maySubscribe, messageType, TOPIC } from '../src/transports/mqtt/topics.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 150);
const SEED = Number(process.env.FUZZ_SEED ?? 20_2026);
const params = { numRuns: RUNS, seed: SEED };

/** A refusal must be a domain error with a message that says something. */
function assertRefusal(err: unknown): void {
  assert.ok(err instanceof GatewayError, `escaped: ${String(err)}`);
  assert.ok(err.message.length > 5, `refusal without a reason: ${err.message}`);
}

/** Numbers as devices write them, the hostile ones included. */
const numberText = fc.oneof(
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
  fc
    .tuple(fc.integer({ min: -9, max: 9 }), fc.integer({ min: -70_000, max: 70_000 }))
    .map(([m, e]) => `${m}e${e}`),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
  fc.constantFrom('1e65000', '-1e309', '0.12345678901234567', '1.5E1', '9223372036854775808'),
);

const key = fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('', 'ts', 'values', '__proto__'));
const value = fc.oneof(
  numberText,
  fc.string({ maxLength: 20 }).map((s) => JSON.stringify(s)),
  fc.constantFrom('true', 'false', 'null', '{}', '[]', '{"a":[1,2]}', '"42"', '"1e5"'),
);
const objectText = fc
  .array(fc.tuple(key, value), { maxLength: 12 })
  .map((kvs) => `{${kvs.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`);
/** Device payload text: objects, ts/values forms, arrays, and broken JSON. */
const payloadText = fc.oneof(
  objectText,
  fc
    .tuple(fc.integer({ min: -5, max: 2e12 }), objectText)
    .map(([ts, o]) => `{"ts":${ts},"values":${o}}`),
  fc.array(objectText, { maxLength: 4 }).map((a) => `[${a.join(',')}]`),
  fc.json(),
  fc.string({ maxLength: 60 }),
  objectText.chain((t) => fc.nat({ max: Math.max(0, t.length - 1) }).map((cut) => t.slice(0, cut))),
);

describe('fuzz: device-input parsers (pure)', () => {
  it('telemetry: typed points within every bound, or a named refusal', () => {
    fc.assert(
      fc.property(payloadText, (text) => {
        let points: ReturnType<typeof parseTelemetryText>;
        try {
          points = parseTelemetryText(text, 1_700_000_000_000);
        } catch (err) {
          assertRefusal(err);
          return;
        }
        for (const p of points) {
          assert.ok(p.key.length > 0 && p.key.length <= TELEMETRY_LIMITS.maxKeyLength);
          assert.ok(Number.isSafeInteger(p.ts) && p.ts >= 0);
          if (typeof p.value === 'number') assert.ok(Number.isFinite(p.value));
          // Never stored larger than it was sent (the exponent blow-up).
          if (typeof p.value === 'string') assert.ok(p.value.length <= text.length);
        }
      }),
      params,
    );
  });

  it('attributes: typed members or a named refusal; numbers are finite', () => {
    fc.assert(
      fc.property(payloadText, fc.boolean(), (text, cast) => {
        try {
          for (const kv of parseTypedObject(text, { cast }).values()) {
            if (typeof kv.value === 'number') assert.ok(Number.isFinite(kv.value));
            if (kv.type === 'STRING') assert.ok(String(kv.value).length <= text.length);
          }
        } catch (err) {
          assertRefusal(err);
        }
      }),
      params,
    );
  });

  it('MQTT topics: the subscribe filter check and the message type never throw', () => {
    const topic = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc
        .constantFrom(...Object.values(TOPIC))
        .chain((p) => fc.string({ maxLength: 12 }).map((s) => p + s)),
    );
    fc.assert(
      fc.property(topic, fc.boolean(), (t, gw) => {
        assert.equal(typeof maySubscribe('device', t, gw), 'boolean');
        assert.equal(typeof maySubscribe('provision', t), 'boolean');
        assert.equal(typeof messageType(t), 'string');
        const problem = filterProblem(t);
        assert.ok(problem === undefined || problem.length > 0);
      }),
      params,
    );
  });

  it('CoAP datagrams: a verdict for every byte string; answers are RST or 4.02 only', () => {
    const header = fc
      .tuple(
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 0, max: 15 }),
        fc.integer({ min: 0, max: 255 }),
        fc.integer({ min: 0, max: 0xffff }),
      )
      .map(([type, tkl, code, mid]) =>
        Buffer.from([0x40 | (type << 4) | tkl, code, mid >> 8, mid & 0xff]),
      );
    const datagram = fc.oneof(
      fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
      fc
        .tuple(header, fc.uint8Array({ maxLength: 48 }))
        .map(([h, rest]) => Buffer.concat([h, Buffer.from(rest)])),
    );
    fc.assert(
      fc.property(datagram, (msg) => {
        const v = inspectDatagram(msg);
        assert.ok(v.kind === 'pass' || v.reason.length > 0);
        if (v.kind === 'answer') {
          const code = v.reply[1];
          // RST (type 3, Empty) or a 4.02 naming the option.
          assert.ok(
            ((v.reply[0] >> 4) & 3) === 3 ? code === 0 : code === 0x82,
            v.reply.toString('hex'),
          );
          assert.equal(v.reply.readUInt16BE(2), msg.readUInt16BE(2), 'answers its Message ID');
        }
      }),
      params,
    );
  });
});

describe('fuzz: device-input paths against a running core', () => {
  let t: TestGateway;
  let session: DeviceSession;
  let provision: ProvisionSession;
  let deviceId: string;

  before(async () => {
    t = await startGateway({ config: { logLevel: 'warn' } });
    const dev = await createDevice(t, 'fuzz-dev');
    deviceId = dev.id;
    const s = t.gw.services;
    const identity = s.devices.byAccessToken(dev.token);
    assert.ok(identity);
    const send = () => Promise.resolve();
    session = new DeviceSession(identity, s, s.devices, send, t.gw.loggers.mqtt);
    provision = new ProvisionSession(s.messages, send);
  });
  after(async () => {
    session.close();
    await t.close();
  });

  const stored = () => ({
    telemetry: t.gw.services.telemetry.keys(deviceId).length,
    attributes: t.gw.services.attributes.get(deviceId, 'CLIENT_SCOPE').length,
  });

  it('the MQTT topic router: handled, unknown, or refused with nothing stored', async () => {
    const topic = fc.constantFrom(
      TOPIC.telemetry,
      TOPIC.attributes,
      `${TOPIC.attributesRequestPrefix}1`,
      `${TOPIC.rpcRequestPrefix}7`,
      `${TOPIC.rpcResponsePrefix}x`,
      `${TOPIC.rpcRequestPrefix}`,
      'v1/devices/me/claim',
      'v2/fw/request/1/chunk/0',
      'v1/devices/me/other',
    );
    await fc.assert(
      fc.asyncProperty(topic, payloadText, async (tp, text) => {
        const before = stored();
        try {
          await session.publish(tp, Buffer.from(text));
        } catch (err) {
          assertRefusal(err);
          assert.deepEqual(stored(), before, `refused ${tp} ${text} but stored`);
        }
      }),
      { ...params, numRuns: Math.ceil(RUNS / 2) },
    );
  });

  it('provisioning and client RPC requests: an answer or a named refusal', async () => {
    const body = fc.oneof(
      fc.json().map((j) => JSON.parse(j) as unknown),
      fc.record(
        {
          deviceName: fc.oneof(fc.string({ maxLength: 10 }), fc.integer()),
          provisionDeviceKey: fc.string({ maxLength: 10 }),
          provisionDeviceSecret: fc.string({ maxLength: 10 }),
          method: fc.oneof(fc.string({ maxLength: 10 }), fc.constant(null)),
          params: fc.json().map((j) => JSON.parse(j) as unknown),
        },
        { requiredKeys: [] },
      ),
    );
    const s = t.gw.services;
    const identity = s.devices.byAccessToken((await createDevice(t, 'fuzz-rpc')).token);
    assert.ok(identity);
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        try {
          provision.publish(TOPIC.provisionRequest, Buffer.from(JSON.stringify(b) ?? 'null'));
        } catch (err) {
          assertRefusal(err);
        }
        try {
          await s.clientRpc.call(identity, b, { timeoutMs: 1 });
        } catch (err) {
          assertRefusal(err);
        }
      }),
      { ...params, numRuns: Math.ceil(RUNS / 2) },
    );
  });
});
