/**
 * Rule nodes of issue 14 on the notification center's settings: create alarm and clear alarm
 * (the alarm service), send email with `useSystemSmtpSettings: true` (the system mail settings,
 * a real `smtp-server`), and send SMS through the system SMS provider (a local HTTP server).
 * Telemetry comes over MQTT into an imported ThingsBoard-format root chain.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createDevice, startGateway, type TestGateway, waitFor } from './helpers/gateway.js';
import { mqttConnect } from './helpers/mqtt.js';
import { adminPost, startRecorder, startSmtp } from './helpers/notify.js';

const P = 'org.thingsboard.rule.engine.';

describe('create/clear alarm, send email (system SMTP) and send SMS nodes', () => {
  let t: TestGateway;
  let admin: string;

  before(async () => {
    t = await startGateway();
    admin = await t.adminToken();
  });
  after(() => t.close());

  it('raises, updates and clears an alarm from MQTT telemetry; emails and texts on creation', async () => {
    const smtp = await startSmtp();
    const sms = await startRecorder(() => 200);
    try {
      await adminPost(t, '/api/admin/settings', {
        key: 'mail',
        jsonValue: { mailFrom: 'rules@plant.local', smtpHost: '127.0.0.1', smtpPort: smtp.port },
      });
      await adminPost(t, '/api/admin/settings', {
        key: 'sms',
        jsonValue: { type: 'HTTP', url: `${sms.url}/sms` },
      });
      const chain = {
        ruleChain: { name: 'Alarm nodes', type: 'CORE', root: false, debugMode: false },
        metadata: {
          firstNodeIndex: 0,
          nodes: [
            {
              type: `${P}filter.TbMsgTypeFilterNode`,
              name: 'telemetry only',
              configuration: { messageTypes: ['POST_TELEMETRY_REQUEST'] },
            },
            {
              type: `${P}filter.TbJsFilterNode`,
              name: 'hot?',
              configuration: { scriptLang: 'JS', jsScript: 'return msg.temperature > 50;' },
            },
            {
              type: `${P}action.TbCreateAlarmNode`,
              name: 'raise',
              configuration: {
                scriptLang: 'JS',
                alarmDetailsBuildJs:
                  'var d = metadata.prevAlarmDetails ? JSON.parse(metadata.prevAlarmDetails) : {count: 0};\nd.count = d.count + 1; d.temperature = msg.temperature; return d;',
                alarmType: 'Hot ${deviceType}',
                severity: 'MAJOR',
              },
            },
            {
              type: `${P}action.TbClearAlarmNode`,
              name: 'clear',
              configuration: {
                scriptLang: 'JS',
                alarmDetailsBuildJs: 'return {cleared: true};',
                alarmType: 'Hot ${deviceType}',
              },
            },
            {
              type: `${P}mail.TbMsgToEmailNode`,
              name: 'to email',
              configuration: {
                fromTemplate: '',
                toTemplate: 'ops@plant.local',
                subjectTemplate: 'Alarm ${deviceName}',
                bodyTemplate: 'Temperature $[details.temperature], severity $[severity]',
                mailBodyType: 'false',
              },
            },
            {
              type: `${P}mail.TbSendEmailNode`,
              name: 'send email',
              configuration: { useSystemSmtpSettings: true },
            },
            {
              type: `${P}sms.TbSendSmsNode`,
              name: 'send sms',
              configuration: {
                numbersToTemplate: '+4915100000009, +4915100000010',
                smsMessageTemplate: 'Hot: ${deviceName} $[details.temperature]',
                useSystemSmsSettings: true,
              },
            },
          ],
          connections: [
            { fromIndex: 0, toIndex: 1, type: 'True' },
            { fromIndex: 1, toIndex: 2, type: 'True' },
            { fromIndex: 1, toIndex: 3, type: 'False' },
            { fromIndex: 2, toIndex: 4, type: 'Created' },
            { fromIndex: 4, toIndex: 5, type: 'Success' },
            { fromIndex: 2, toIndex: 6, type: 'Created' },
          ],
          ruleChainConnections: null,
        },
      };
      const imported = await adminPost(t, '/api/ruleChain/import', chain);
      const root = await t.api(`/api/ruleChain/${imported.id.id}/root`, {
        method: 'POST',
        token: admin,
      });
      assert.equal(root.status, 200);

      const device = await createDevice(t, 'Oven 2');
      const client = await mqttConnect(t.gw.ports.mqtt, { username: device.token });
      const alarms = async () => {
        const res = await t.api(
          `/api/alarm/DEVICE/${device.id}?pageSize=10&page=0&searchStatus=ANY`,
          { token: admin },
        );
        assert.equal(res.status, 200);
        return (
          (await res.json()) as {
            data: Array<{
              type: string;
              status: string;
              details: Record<string, unknown>;
              severity: string;
            }>;
          }
        ).data;
      };
      try {
        await client.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 61 }));
        const raised = await waitFor(async () =>
          (await alarms()).find((a) => a.type === 'Hot Default'),
        );
        assert.equal(raised.severity, 'MAJOR');
        assert.equal(raised.status, 'ACTIVE_UNACK');
        const mail = await waitFor(() => smtp.mails.find((m) => m.to.includes('ops@plant.local')));
        assert.equal(mail.from, 'rules@plant.local');
        assert.match(mail.data, /Subject: Alarm Oven 2/);
        assert.match(mail.data, /Temperature 61, severity MAJOR/);
        await waitFor(() => sms.requests.length >= 2, 5000, 'two SMS');
        assert.deepEqual(
          sms.requests.map((r) => JSON.parse(r.body)),
          [
            { to: '+4915100000009', text: 'Hot: Oven 2 61' },
            { to: '+4915100000010', text: 'Hot: Oven 2 61' },
          ],
        );

        await client.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 70 }));
        await waitFor(async () => (await alarms()).find((a) => a.details.count === 2));
        assert.equal(smtp.mails.length, 1, 'an update is not a new alarm: no second email');

        await client.publishAsync('v1/devices/me/telemetry', JSON.stringify({ temperature: 20 }));
        const cleared = await waitFor(async () =>
          (await alarms()).find((a) => a.status === 'CLEARED_UNACK'),
        );
        assert.deepEqual(cleared.details, { cleared: true });
        assert.equal((await alarms()).length, 1);
      } finally {
        await client.endAsync();
      }
      // The node's alarm reached the default notification rule too (same transaction).
      const inbox = await t.api('/api/notifications?pageSize=20&page=0', { token: admin });
      const page = (await inbox.json()) as { data: Array<{ subject: string }> };
      assert.ok(page.data.some((n) => n.subject === "New alarm 'Hot Default'"));
    } finally {
      await smtp.close();
      await sms.close();
    }
  });

  it('refuses unsupported SMS providers and bad severities on save, naming them', async () => {
    const res = await t.api('/api/ruleChain/import', {
      token: admin,
      body: {
        ruleChain: { name: 'bad', type: 'CORE', root: false, debugMode: false },
        metadata: {
          firstNodeIndex: 0,
          nodes: [
            {
              type: `${P}sms.TbSendSmsNode`,
              name: 'sns',
              configuration: {
                useSystemSmsSettings: false,
                smsProviderConfiguration: { type: 'AWS_SNS', accessKeyId: 'a' },
              },
            },
            {
              type: `${P}action.TbCreateAlarmNode`,
              name: 'raise',
              configuration: { severity: 'LOUD' },
            },
          ],
          connections: [{ fromIndex: 0, toIndex: 1, type: 'Success' }],
          ruleChainConnections: null,
        },
      },
    });
    assert.equal(res.status, 400);
    const { message } = (await res.json()) as { message: string };
    assert.match(message, /AWS_SNS is not supported/);
    assert.match(message, /severity must be one of/);
  });
});
