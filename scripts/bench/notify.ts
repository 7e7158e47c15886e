/**
 * Benchmark of issue 14's notification target: `--count` notifications (default 1,000) are queued
 * while the SMTP server is down; then it comes back. Target: all delivered within 60 s after it
 * came back, in order, none twice. Usage:
 *   npm run bench:notify [-- --count 1000 --down 20]
 *
 * A gateway made in this process (`createGateway`, a temp data dir) with the default retry
 * settings; one EMAIL rule; `--count` alarms raised through the alarm service (each commits its
 * outbox row with it). The SMTP port stays closed for `--down` seconds, so the head of the queue
 * backs off a few times; then a real `smtp-server` listens on that port.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { startSmtp } from '../../test/helpers/notify.js';
import { loadAverage, startGatewayInProcess } from './support.js';

const { values } = parseArgs({
  options: { count: { type: 'string', default: '1000' }, down: { type: 'string', default: '20' } },
});
const count = Number(values.count);
const downSec = Number(values.down);

const probe = await startSmtp();
const port = probe.port;
await probe.close();

const { gw, stop } = await startGatewayInProcess('notify');
const s = gw.services;
const n = s.notifications.service;
s.notifications.settings.save({
  key: 'mail',
  jsonValue: { mailFrom: 'bench@local', smtpHost: '127.0.0.1', smtpPort: port, timeout: 2000 },
});
const target = n.saveTarget({
  name: 'bench',
  configuration: { type: 'EMAIL_ADDRESSES', emails: ['ops@bench.local'] },
});
const template = n.saveTemplate({
  name: 'bench',
  notificationType: 'ALARM',
  configuration: {
    deliveryMethodsTemplates: { EMAIL: { subject: 'N ${alarmType}', body: 'b' } },
  },
});
n.saveRule({
  name: 'bench',
  templateId: template.id,
  triggerType: 'ALARM',
  triggerConfig: { triggerType: 'ALARM', notifyOn: ['CREATED'] },
  recipientsConfig: { escalationTable: { '0': [target.id.id] } },
});
const device = s.devices.save({ name: 'bench-device' });
const actor = { userId: 'bench', email: 'bench@local' };
const t0 = performance.now();
for (let i = 0; i < count; i++) {
  s.alarms.save(
    {
      type: `A${String(i).padStart(5, '0')}`,
      originator: { entityType: 'DEVICE', id: device.id.id },
      severity: 'MAJOR',
    },
    actor,
  );
}
const queueMs = performance.now() - t0;
console.log(`queued ${count} alarms with their outbox rows in ${queueMs.toFixed(0)} ms`);
await sleep(downSec * 1000);
console.log(`pending after ${downSec} s down: ${n.stats().pending}`);

const smtp = await startSmtp(port);
const up = performance.now();
let doneAt = 0;
while (performance.now() - up < 120_000) {
  if (smtp.mails.length >= count) {
    doneAt = performance.now();
    break;
  }
  await sleep(50);
}
await sleep(1000);
const subjects = smtp.mails.map((m) => /Subject: N (\S+)/.exec(m.data)?.[1] ?? '?');
const inOrder = subjects.every((x, i) => i === 0 || x > subjects[i - 1]);
const unique = new Set(subjects).size;
console.log(
  JSON.stringify({
    count,
    delivered: smtp.mails.length,
    unique,
    inOrder,
    secondsAfterSmtpCameBack: doneAt ? ((doneAt - up) / 1000).toFixed(1) : 'not within 120 s',
    load: loadAverage(),
  }),
);
await smtp.close();
await stop();
