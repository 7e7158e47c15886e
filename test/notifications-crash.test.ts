/**
 * The notification outbox survives SIGKILL (issue 14 §8): emails queued while the SMTP server
 * is down are in SQLite with their alarms; after a kill and a restart they are all delivered
 * once, in order, when the server comes back. ENTITY_ACTION emails are written in the device
 * change's own commit: a kill right after the REST answer still delivers them after a restart.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { waitFor } from './helpers/gateway.js';
import { startSmtp } from './helpers/notify.js';
import {
  BUNDLE,
  type GatewayProcess,
  LOOPBACK_EPHEMERAL,
  loginTo,
  spawnGateway,
} from './helpers/process.js';

const EMAIL = 'notify@test.local';
const PASSWORD = 'notify-password-1';

async function start(dir: string) {
  const gw = await spawnGateway(['serve', '--data-dir', dir, ...LOOPBACK_EPHEMERAL], {
    env: {
      EDGE_ADMIN_EMAIL: EMAIL,
      EDGE_ADMIN_PASSWORD: PASSWORD,
      EDGE_NOTIFY_RETRY_BASE_MS: '100',
      EDGE_NOTIFY_RETRY_MAX_MS: '500',
      // An unreachable server does not use up attempts: the rows stay PENDING past this.
      EDGE_NOTIFY_MAX_ATTEMPTS: '2',
    },
  });
  const { base, token } = await loginTo(gw, EMAIL, PASSWORD);
  const api = async <T>(path: string, body?: unknown, method?: string): Promise<T> => {
    const res = await fetch(`${base}${path}`, {
      method: method ?? (body === undefined ? 'GET' : 'POST'),
      headers: { 'content-type': 'application/json', 'X-Authorization': `Bearer ${token}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  };
  return { gw, api };
}

/** System SMTP settings on `smtpPort` and an email target; returns the target's id. */
type Api = Awaited<ReturnType<typeof start>>['api'];

async function mailTarget(api: Api, smtpPort: number) {
  await api('/api/admin/settings', {
    key: 'mail',
    jsonValue: { mailFrom: 'gw@plant.local', smtpHost: '127.0.0.1', smtpPort, timeout: 2000 },
  });
  const target = await api<{ id: { id: string } }>('/api/notification/target', {
    name: 'shift',
    configuration: { type: 'EMAIL_ADDRESSES', emails: ['shift@plant.local'] },
  });
  return target.id.id;
}

/** A port with nothing listening: the SMTP server comes up there later. */
async function freePort(): Promise<number> {
  const probe = await startSmtp();
  await probe.close();
  return probe.port;
}

/** An EMAIL template of `type` and a rule of it; the subject is the template's. */
async function emailRule(
  api: Api,
  type: string,
  subject: string,
  triggerConfig: object,
  recipientsConfig: object,
): Promise<void> {
  const template = await api<{ id: { id: string } }>('/api/notification/template', {
    name: type,
    notificationType: type,
    configuration: {
      deliveryMethodsTemplates: { EMAIL: { method: 'EMAIL', subject, body: 'b' } },
    },
  });
  await api('/api/notification/rule', {
    name: type,
    templateId: template.id,
    triggerType: type,
    triggerConfig: { triggerType: type, ...triggerConfig },
    recipientsConfig,
  });
}

const subjects = (mails: ReadonlyArray<{ data: string }>) =>
  mails.map((m) => /Subject: (.*)/.exec(m.data)?.[1]?.trim());

describe('notification outbox across SIGKILL', () => {
  const dirs: string[] = [];
  const procs: GatewayProcess[] = [];
  after(async () => {
    for (const p of procs) await p.stop('SIGKILL').catch(() => 'already gone');
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  /** A gateway on a new data dir, its SMTP settings on a port where nothing listens yet. */
  const firstRun = async () => {
    assert.ok(existsSync(BUNDLE), 'run `node build.mjs` first: this test runs the built bundle');
    const dir = await mkdtemp(join(tmpdir(), 'edge-notify-crash-'));
    dirs.push(dir);
    const smtpPort = await freePort();
    const first = await start(dir);
    procs.push(first.gw);
    const target = await mailTarget(first.api, smtpPort);
    return { dir, smtpPort, first, api: first.api, target };
  };

  it('emails queued while SMTP is down are delivered after kill and restart, once each, in order', async () => {
    const { dir, smtpPort, first, api, target } = await firstRun();
    await emailRule(
      api,
      'ALARM',
      'A ${alarmType}',
      { notifyOn: ['CREATED'] },
      { escalationTable: { '0': [target] } },
    );
    const device = await api<{ id: { id: string } }>('/api/device', { name: 'crash-notify' });
    const types = Array.from({ length: 5 }, (_, i) => `T${i}`);
    for (const type of types) {
      await api('/api/alarm', {
        type,
        originator: { entityType: 'DEVICE', id: device.id.id },
        severity: 'MAJOR',
      });
    }
    type Page = { data: Array<{ status: string; attempts: number; lastError: string | null }> };
    // Each was tried and failed (the server is down), and waits for its retry.
    await waitFor(
      async () => {
        const p = await api<Page>('/api/notification/deliveries?pageSize=50&page=0&status=PENDING');
        return p.data.length === 5 && p.data.some((d) => d.attempts > 2 && d.lastError);
      },
      20_000,
      'five pending emails, one tried more often than EDGE_NOTIFY_MAX_ATTEMPTS',
    );
    assert.equal(await first.gw.stop('SIGKILL'), 'SIGKILL');

    const smtp = await startSmtp(smtpPort);
    try {
      const second = await start(dir);
      procs.push(second.gw);
      await waitFor(() => smtp.mails.length >= 5, 30_000, 'five emails after restart');
      await new Promise((r) => setTimeout(r, 500));
      assert.deepEqual(
        subjects(smtp.mails),
        types.map((t) => `A ${t}`),
      );
      const sent = await second.api<Page>(
        '/api/notification/deliveries?pageSize=50&page=0&status=SENT',
      );
      assert.equal(sent.data.length, 5);
    } finally {
      await smtp.close();
    }
  });

  it('device changes killed right after their REST answer still email after a restart', async () => {
    const { dir, smtpPort, first, api, target } = await firstRun();
    await emailRule(
      api,
      'ENTITY_ACTION',
      '${entityName} ${actionType}',
      { created: true, updated: true, deleted: true },
      { triggerType: 'ENTITY_ACTION', targets: [target] },
    );
    const device = await api<{ id: { id: string } }>('/api/device', { name: 'Kiln 1' });
    await api('/api/device', { id: { entityType: 'DEVICE', id: device.id.id }, name: 'Kiln 1b' });
    await api(`/api/device/${device.id.id}`, undefined, 'DELETE');
    // No wait for the sender: the kill comes right after the last answer.
    assert.equal(await first.gw.stop('SIGKILL'), 'SIGKILL');

    const smtp = await startSmtp(smtpPort);
    try {
      const second = await start(dir);
      procs.push(second.gw);
      await waitFor(() => smtp.mails.length >= 3, 30_000, 'three emails after restart');
      await new Promise((r) => setTimeout(r, 500));
      assert.deepEqual(subjects(smtp.mails), [
        'Kiln 1 created',
        'Kiln 1b updated',
        'Kiln 1b deleted',
      ]);
    } finally {
      await smtp.close();
    }
  });
});
