/** Receivers for notification tests: a real SMTP server and a recording HTTP server. */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import type { RequestInfo } from '../../src/notifications/types.js';
import { type TestGateway, waitFor } from './gateway.js';

export interface Mail {
  readonly from: string;
  readonly to: string[];
  readonly data: string;
}

/**
 * An SMTP server on 127.0.0.1:`port` (0 = any) that keeps every mail it accepts; with `auth`,
 * only that user and password may log in (PLAIN/LOGIN over the loopback).
 */
export async function startSmtp(
  port = 0,
  auth?: { user: string; pass: string },
): Promise<{
  port: number;
  mails: Mail[];
  close(): Promise<void>;
}> {
  const mails: Mail[] = [];
  const smtp = new SMTPServer({
    authOptional: auth === undefined,
    allowInsecureAuth: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onAuth(a, _session, callback) {
      if (auth && a.username === auth.user && a.password === auth.pass)
        callback(null, { user: a.username });
      else callback(new Error('Invalid username or password'));
    },
    onData(stream, session, callback) {
      let data = '';
      stream.on('data', (c: Buffer) => {
        data += c.toString();
      });
      stream.on('end', () => {
        mails.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          data,
        });
        callback();
      });
    },
  });
  const bound = await new Promise<number>((resolve, reject) => {
    smtp.server.once('error', reject);
    smtp.listen(port, '127.0.0.1', () => resolve((smtp.server.address() as AddressInfo).port));
  });
  return {
    port: bound,
    mails,
    close: () => new Promise<void>((resolve) => smtp.close(() => resolve())),
  };
}

export interface Recorded {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

/** An HTTP server that records each request and answers with `answer(n)` (n from 1). */
export async function startRecorder(
  answer: (n: number, req: Recorded) => number = () => 200,
): Promise<{ url: string; requests: Recorded[]; close(): Promise<void> }> {
  const requests: Recorded[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString();
    });
    req.on('end', () => {
      const r = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
      requests.push(r);
      res.statusCode = answer(requests.length, r);
      res.setHeader('content-type', 'application/json');
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** POSTs `body` as the admin and returns the JSON answer; throws on a non-200. */
export async function adminPost<T = { id: { id: string } }>(
  t: TestGateway,
  path: string,
  body: unknown,
): Promise<T> {
  const res = await t.api(path, { body, token: await t.adminToken() });
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** A target, a template and an ALARM rule (notify on CREATED) tying them; returns their ids. */
export async function alarmRule(
  t: TestGateway,
  opts: {
    target: unknown;
    templates: Record<string, { subject?: string; body: string }>;
    escalation?: (targetId: string) => Record<string, string[]>;
    trigger?: Record<string, unknown>;
    name?: string;
  },
): Promise<{ targetId: string; templateId: string; ruleId: string }> {
  const name = opts.name ?? `rule-${Math.random().toString(36).slice(2, 8)}`;
  const target = await adminPost(t, '/api/notification/target', {
    name: `${name} target`,
    configuration: opts.target,
  });
  const template = await adminPost(t, '/api/notification/template', {
    name: `${name} template`,
    notificationType: 'ALARM',
    configuration: {
      deliveryMethodsTemplates: Object.fromEntries(
        Object.entries(opts.templates).map(([m, v]) => [m, { method: m, enabled: true, ...v }]),
      ),
    },
  });
  const targetId = target.id.id;
  const rule = await adminPost(t, '/api/notification/rule', {
    name,
    enabled: true,
    templateId: template.id,
    triggerType: 'ALARM',
    triggerConfig: {
      triggerType: 'ALARM',
      alarmTypes: null,
      alarmSeverities: null,
      notifyOn: ['CREATED'],
      clearRule: null,
      ...opts.trigger,
    },
    recipientsConfig: {
      triggerType: 'ALARM',
      escalationTable: opts.escalation?.(targetId) ?? { '0': [targetId] },
    },
  });
  return { targetId, templateId: template.id.id, ruleId: rule.id.id };
}

/** Raises an alarm on a device over REST; returns its id. */
export async function raiseAlarm(
  t: TestGateway,
  deviceId: string,
  type: string,
  details: unknown = {},
  severity = 'CRITICAL',
): Promise<string> {
  const alarm = await adminPost(t, '/api/alarm', {
    type,
    originator: { entityType: 'DEVICE', id: deviceId },
    severity,
    details,
  });
  return alarm.id.id;
}

/** Waits until an ad-hoc notification request is SENT (nothing of it undelivered); returns it. */
export function requestSent(t: TestGateway, id: string, timeoutMs = 20_000): Promise<RequestInfo> {
  return waitFor(
    async () => {
      const res = await t.api(`/api/notification/request/${id}`, { token: await t.adminToken() });
      const r = (await res.json()) as RequestInfo;
      return r.status === 'SENT' ? r : undefined;
    },
    timeoutMs,
    `request ${id} to be SENT`,
  );
}
