/**
 * The rule engine over real sockets (issue 14 "Done when"): client-side RPC over MQTT and HTTP
 * answered by an rpc call reply node, a REST API call node hitting the test's HTTP server with a
 * templated URL and body, a runaway script stopped, an email received by a real SMTP server, a
 * chain's bounded queue dropping (counted) when it is slow, and a generator node. Messages that
 * the device pipeline does not produce yet are handed to the engine's entry point directly.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { SMTPServer } from 'smtp-server';
import type { GatewayMsg } from '../src/messages/types.js';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect, nextMessage } from './helpers/mqtt.js';
import { chainFile } from './helpers/rule-chain.js';

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString();
    });
    req.on('end', () => resolve(body));
  });
}

describe('rule engine', () => {
  let t: TestGateway;
  let admin: string;
  let defaultRoot: string;
  let device: { id: string; token: string };

  const api = async (path: string, body?: unknown, method?: string) => {
    const res = await t.api(path, { body, method, token: admin });
    const text = await res.text();
    assert.ok(res.status === 200, `${path}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : {}) as Record<string, unknown>;
  };
  /** Imports a chain and makes it the root; returns its id. */
  const useChain = async (file: ReturnType<typeof chainFile>): Promise<string> => {
    const id = ((await api('/api/ruleChain/import', file)).id as { id: string }).id;
    await api(`/api/ruleChain/${id}/root`, undefined, 'POST');
    return id;
  };
  const msg = (type: string, data: unknown, extra: Partial<GatewayMsg> = {}): GatewayMsg => ({
    id: randomUUID(),
    type,
    originator: { entityType: 'DEVICE', id: device.id },
    metadata: { deviceName: 'engine-device', deviceType: 'default', ts: String(Date.now()) },
    data,
    ts: Date.now(),
    ...extra,
  });
  const stats = async (chainId: string) => {
    const s = (await api('/api/ruleChains/stats')) as {
      chains: Array<{ id: string; failed: number; dropped: number; processed: number }>;
    };
    const found = s.chains.find((c) => c.id === chainId);
    assert.ok(found, 'chain is loaded');
    return found;
  };
  const attribute = async (scope: string, key: string) => {
    const values = (await (
      await t.api(
        `/api/plugins/telemetry/DEVICE/${device.id}/values/attributes/${scope}?keys=${key}`,
        { token: admin },
      )
    ).json()) as Array<{ key: string; value: unknown }>;
    return values.find((v) => v.key === key)?.value;
  };

  before(async () => {
    t = await startGateway({ config: { rules: { queueSize: 5, maxInFlight: 1 } } });
    admin = await t.adminToken();
    device = await createDevice(t, 'engine-device');
    const list = (await api('/api/ruleChains?pageSize=10&page=0')) as {
      data: Array<{ id: { id: string }; root: boolean }>;
    };
    defaultRoot = list.data.find((c) => c.root)?.id.id ?? '';
  });
  after(async () => {
    await t.close();
  });

  it('answers client-side RPC over MQTT and over HTTP with an rpc call reply node', async () => {
    const chainId = await useChain(
      chainFile(
        'Echo RPC',
        [
          ['filter.TbMsgTypeSwitchNode', 'Switch', { version: 0 }],
          [
            'transform.TbTransformMsgNode',
            'Echo',
            {
              scriptLang: 'JS',
              jsScript:
                'return {msg: {echo: msg.params, method: msg.method, device: metadata.deviceName}, metadata: metadata, msgType: msgType};',
            },
          ],
          ['rpc.TbSendRPCReplyNode', 'Reply', {}],
        ],
        [
          [0, 1, 'RPC Request from Device'],
          [1, 2, 'Success'],
        ],
      ),
    );
    const client = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
    try {
      await client.subscribeAsync('v1/devices/me/rpc/response/+', { qos: 1 });
      const reply = nextMessage(client, 'v1/devices/me/rpc/response/7');
      await client.publishAsync('v1/devices/me/rpc/request/7', '{"method":"ping","params":[1,2]}', {
        qos: 1,
      });
      assert.deepEqual(JSON.parse((await reply).payload.toString()), {
        echo: [1, 2],
        method: 'ping',
        device: 'engine-device',
      });
    } finally {
      await client.endAsync();
    }
    const res = await t.api(`/api/v1/${device.token}/rpc`, {
      body: { method: 'status', params: { full: true } },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), {
      echo: { full: true },
      method: 'status',
      device: 'engine-device',
    });
    await api(`/api/ruleChain/${defaultRoot}/root`, undefined, 'POST');
    await api(`/api/ruleChain/${chainId}`, undefined, 'DELETE');
    // The default chain answers getCurrentTime again, as the built-in handler did.
    const time = await t.api(`/api/v1/${device.token}/rpc`, {
      body: { method: 'getCurrentTime', params: {} },
    });
    assert.equal(typeof (await time.json()), 'number');
  });

  it('calls a REST API with a templated URL, headers and basic auth; the response is stored', async () => {
    const requests: Array<{ url: string; body: string; auth?: string; device?: string }> = [];
    const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
      requests.push({
        url: req.url ?? '',
        body: await readBody(req),
        auth: req.headers.authorization,
        device: req.headers['x-device'] as string | undefined,
      });
      if (req.url?.includes('/fail')) {
        res.writeHead(503, { 'content-type': 'text/plain' }).end('down for maintenance');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"fahrenheit":71.6}');
    });
    const port = await listen(server);
    try {
      const chainId = await useChain(
        chainFile(
          'REST',
          [
            [
              'rest.TbRestApiCallNode',
              'Convert',
              {
                restEndpointUrlPattern: `http://127.0.0.1:${port}/convert/\${deviceName}/$[temperature]`,
                requestMethod: 'POST',
                headers: { 'Content-Type': 'application/json', 'X-Device': '${deviceName}' },
                readTimeoutMs: 5000,
                credentials: { type: 'basic', username: 'plant', password: 's3cret' },
              },
            ],
            ['telemetry.TbMsgTimeseriesNode', 'Save', {}],
            [
              'transform.TbTransformMsgNode',
              'Failure details',
              {
                scriptLang: 'JS',
                jsScript:
                  'return {msg: {restStatus: metadata.statusCode, restError: metadata.error_body}, metadata: metadata, msgType: "POST_ATTRIBUTES_REQUEST"};',
              },
            ],
            ['telemetry.TbMsgAttributesNode', 'Save failure', { scope: 'SERVER_SCOPE' }],
          ],
          [
            [0, 1, 'Success'],
            [0, 2, 'Failure'],
            [2, 3, 'Success'],
          ],
        ),
      );
      t.gw.services.rules.engine.process(msg('POST_TELEMETRY_REQUEST', { temperature: 22 }));
      const values = await waitFor(async () => {
        const res = await t.api(
          `/api/plugins/telemetry/DEVICE/${device.id}/values/timeseries?keys=fahrenheit`,
          { token: admin },
        );
        const body = (await res.json()) as Record<string, Array<{ value: unknown }>>;
        return body.fahrenheit?.[0]?.value === '71.6' ? body : undefined;
      }, 10_000);
      assert.ok(values);
      assert.equal(requests[0]?.url, '/convert/engine-device/22');
      assert.deepEqual(JSON.parse(requests[0]?.body ?? ''), { temperature: 22 });
      assert.equal(requests[0]?.device, 'engine-device');
      assert.equal(requests[0]?.auth, `Basic ${Buffer.from('plant:s3cret').toString('base64')}`);

      // An error answer goes to Failure with the status and the body in metadata.
      t.gw.services.rules.engine.process(
        msg(
          'POST_TELEMETRY_REQUEST',
          { temperature: 'fail' },
          { metadata: { deviceName: 'x/fail' } },
        ),
      );
      assert.equal(await waitFor(() => attribute('SERVER_SCOPE', 'restStatus'), 10_000), '503');
      assert.equal(await attribute('SERVER_SCOPE', 'restError'), 'down for maintenance');
      await api(`/api/ruleChain/${defaultRoot}/root`, undefined, 'POST');
      await api(`/api/ruleChain/${chainId}`, undefined, 'DELETE');
    } finally {
      server.close();
    }
  });

  it('does not store committed device data twice, and stores what a chain made', async () => {
    // Device telemetry over MQTT reaches the default root chain after it is committed: Save
    // Timeseries passes it without a second write.
    const client = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
    try {
      const before = t.gw.services.telemetry.devicePoints(device.id);
      await client.publishAsync('v1/devices/me/telemetry', '{"overMqtt":1}', { qos: 1 });
      await t.gw.services.rules.engine.idle();
      // A message that was not stored (as a transform or REST would make) is stored once.
      t.gw.services.rules.engine.process(msg('POST_TELEMETRY_REQUEST', { injected: 5 }));
      t.gw.services.rules.engine.process(
        msg('POST_TELEMETRY_REQUEST', { alreadyStored: 1 }, { committed: true }),
      );
      await t.gw.services.rules.engine.idle();
      t.gw.services.telemetry.flush();
      await waitFor(() => t.gw.services.telemetry.devicePoints(device.id) >= before + 2);
      await new Promise((r) => setTimeout(r, 200));
      t.gw.services.telemetry.flush();
      assert.equal(t.gw.services.telemetry.devicePoints(device.id), before + 2);
      const keys = t.gw.services.telemetry.keys(device.id);
      assert.ok(keys.includes('injected') && keys.includes('overMqtt'));
      assert.ok(!keys.includes('alreadyStored'));
    } finally {
      await client.endAsync();
    }
  });

  it('stores what a chain changed: device telemetry over MQTT renamed by a transform', async () => {
    const chainId = await useChain(
      chainFile(
        'Rename and save',
        [
          ['filter.TbMsgTypeSwitchNode', 'Switch', { version: 0 }],
          [
            'transform.TbRenameKeysNode',
            'To Celsius name',
            { renameIn: 'DATA', renameKeysMapping: { t: 'temperatureC' } },
          ],
          ['telemetry.TbMsgTimeseriesNode', 'Save', {}],
        ],
        [
          [0, 1, 'Post telemetry'],
          [1, 2, 'Success'],
        ],
      ),
    );
    const client = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
    try {
      await client.publishAsync(
        'v1/devices/me/telemetry',
        '{"ts":1700000000000,"values":{"t":21.5}}',
        {
          qos: 1,
        },
      );
    } finally {
      await client.endAsync();
    }
    const stored = await waitFor(async () => {
      t.gw.services.telemetry.flush();
      const res = await t.api(
        `/api/plugins/telemetry/DEVICE/${device.id}/values/timeseries?keys=t,temperatureC&startTs=0&endTs=1800000000000`,
        { token: admin },
      );
      const body = (await res.json()) as Record<string, Array<{ ts: number; value: unknown }>>;
      return body.temperatureC ? body : undefined;
    }, 10_000);
    assert.deepEqual(stored.temperatureC, [{ ts: 1700000000000, value: '21.5' }]);
    assert.deepEqual(stored.t, [{ ts: 1700000000000, value: '21.5' }]);
    await api(`/api/ruleChain/${defaultRoot}/root`, undefined, 'POST');
    await api(`/api/ruleChain/${chainId}`, undefined, 'DELETE');
  });

  it('stops a runaway script and sends the message to Failure; the node keeps working', async () => {
    const chainId = await useChain(
      chainFile(
        'Runaway',
        [
          [
            'filter.TbJsFilterNode',
            'Loops on demand',
            { scriptLang: 'JS', jsScript: 'if (msg.loop) { while (true) {} }\nreturn true;' },
          ],
          ['telemetry.TbMsgAttributesNode', 'Save', { scope: 'SERVER_SCOPE' }],
        ],
        [
          [0, 1, 'Failure'],
          [0, 1, 'True'],
        ],
      ),
    );
    const started = Date.now();
    t.gw.services.rules.engine.process(msg('POST_ATTRIBUTES_REQUEST', { loop: true, stopped: 1 }));
    assert.equal(await waitFor(() => attribute('SERVER_SCOPE', 'stopped'), 20_000), 1);
    // The gateway's default limit is 500 ms; a loaded machine adds to it, never 20 s.
    assert.ok(Date.now() - started < 20_000);
    t.gw.services.rules.engine.process(msg('POST_ATTRIBUTES_REQUEST', { fine: 2 }));
    assert.equal(await waitFor(() => attribute('SERVER_SCOPE', 'fine'), 10_000), 2);
    assert.equal((await stats(chainId)).failed, 0);
    await api(`/api/ruleChain/${defaultRoot}/root`, undefined, 'POST');
    await api(`/api/ruleChain/${chainId}`, undefined, 'DELETE');
  });

  it('sends an email through a real SMTP server, with templates filled in', async () => {
    const received: Array<{ from: string; to: string[]; data: string }> = [];
    const smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      onData(stream, session, callback) {
        let data = '';
        stream.on('data', (c: Buffer) => {
          data += c.toString();
        });
        stream.on('end', () => {
          received.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address),
            data,
          });
          callback();
        });
      },
    });
    const port = await new Promise<number>((resolve) => {
      smtp.listen(0, '127.0.0.1', () => resolve((smtp.server.address() as AddressInfo).port));
    });
    try {
      const chainId = await useChain(
        chainFile(
          'Mail',
          [
            [
              'mail.TbMsgToEmailNode',
              'To email',
              {
                fromTemplate: 'gateway@plant.local',
                toTemplate: '${userEmail}',
                subjectTemplate: 'Alarm ${alarmType} on ${deviceName}',
                bodyTemplate: 'Temperature is $[temperature] on ${deviceName}',
                mailBodyType: 'false',
              },
            ],
            [
              'mail.TbSendEmailNode',
              'Send',
              {
                useSystemSmtpSettings: false,
                smtpHost: '127.0.0.1',
                smtpPort: port,
                smtpProtocol: 'smtp',
                timeout: 5000,
                enableTls: false,
              },
            ],
          ],
          [[0, 1, 'Success']],
        ),
      );
      t.gw.services.rules.engine.process(
        msg(
          'POST_TELEMETRY_REQUEST',
          { temperature: 93 },
          {
            metadata: {
              deviceName: 'boiler-3',
              alarmType: 'High Temperature',
              userEmail: 'operator@plant.local',
            },
          },
        ),
      );
      const mail = await waitFor(() => received[0], 10_000);
      assert.equal(mail.from, 'gateway@plant.local');
      assert.deepEqual(mail.to, ['operator@plant.local']);
      assert.match(mail.data, /Subject: Alarm High Temperature on boiler-3/);
      assert.match(mail.data, /Temperature is 93 on boiler-3/);
      await api(`/api/ruleChain/${defaultRoot}/root`, undefined, 'POST');
      await api(`/api/ruleChain/${chainId}`, undefined, 'DELETE');
    } finally {
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
    }
  });

  it('bounds a slow chain: the oldest waiting messages are dropped, counted and logged', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let served = 0;
    const server = createServer(async (_req, res) => {
      await gate;
      served++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
    const port = await listen(server);
    try {
      const chainId = await useChain(
        chainFile(
          'Slow',
          [
            [
              'rest.TbRestApiCallNode',
              'Slow call',
              { restEndpointUrlPattern: `http://127.0.0.1:${port}/slow`, readTimeoutMs: 30_000 },
            ],
          ],
          [],
        ),
      );
      // The 20 arrive before the chain runs: five wait (queueSize 5), 15 are dropped; then one at
      // a time (maxInFlight 1) goes to the server, which answers nothing until released.
      for (let i = 0; i < 20; i++) {
        t.gw.services.rules.engine.process(msg('POST_TELEMETRY_REQUEST', { i }));
      }
      await waitFor(async () => (await stats(chainId)).dropped === 15, 10_000, '15 drops');
      assert.ok(t.logs.some((l) => l.msg === 'rule chain queue full: oldest messages dropped'));
      const metrics = await (await t.api('/metrics', { token: admin })).text();
      assert.match(metrics, /edge_rule_chain_dropped_total\{chain="Slow"\} 15/);
      release();
      await waitFor(async () => (await stats(chainId)).processed === 5, 20_000, '5 processed');
      assert.equal(served, 5);
      await api(`/api/ruleChain/${defaultRoot}/root`, undefined, 'POST');
      await api(`/api/ruleChain/${chainId}`, undefined, 'DELETE');
    } finally {
      release();
      server.close();
    }
  });

  it('runs what the message queue hands over in the same turn; maxInFlight holds only async nodes', async () => {
    // maxInFlight is 1 and the queue 5: five messages through synchronous nodes are all done
    // in the turn that takes them from the message queue, with no turn of their own.
    const chainId = await useChain(
      chainFile('Sync', [['filter.TbMsgTypeSwitchNode', 'Switch', { version: 0 }]], []),
    );
    const engine = t.gw.services.rules.engine;
    const processed = () => engine.stats().chains.find((c) => c.id === chainId)?.processed ?? -1;
    const before = processed();
    for (let i = 0; i < 5; i++) t.gw.services.messages.submit(msg('CONNECT_EVENT', { i }));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(processed(), before + 5);
    assert.equal((await stats(chainId)).dropped, 0);
    await api(`/api/ruleChain/${defaultRoot}/root`, undefined, 'POST');
    await api(`/api/ruleChain/${chainId}`, undefined, 'DELETE');
  });

  it('runs a generator node: periodic messages from a device, stored by the chain', async () => {
    const chainId = await useChain(
      chainFile(
        'Heartbeat',
        [
          [
            'debug.TbMsgGeneratorNode',
            'Heartbeat',
            {
              msgCount: 3,
              periodInSeconds: 0.1,
              originatorType: 'DEVICE',
              originatorId: device.id,
              scriptLang: 'JS',
              jsScript:
                'var n = (prevMsg.beat || 0) + 1;\nreturn {msg: {beat: n}, metadata: {}, msgType: "POST_TELEMETRY_REQUEST"};',
            },
          ],
          ['telemetry.TbMsgTimeseriesNode', 'Save', { useServerTs: true }],
        ],
        [[0, 1, 'Success']],
      ),
    );
    const beats = await waitFor(
      async () => {
        t.gw.services.telemetry.flush();
        const res = await t.api(
          `/api/plugins/telemetry/DEVICE/${device.id}/values/timeseries?keys=beat&startTs=0&endTs=${Date.now() + 1000}&limit=10`,
          { token: admin },
        );
        const body = (await res.json()) as Record<string, Array<{ value: unknown }>>;
        return body.beat?.length === 3 ? body.beat : undefined;
      },
      10_000,
      'three beats',
    );
    assert.deepEqual(beats.map((b) => b.value).sort(), ['1', '2', '3']);
    await api(`/api/ruleChain/${defaultRoot}/root`, undefined, 'POST');
    await api(`/api/ruleChain/${chainId}`, undefined, 'DELETE');
  });
});
