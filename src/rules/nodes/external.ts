/** External nodes (rule-engine reference §3.5): REST API call and send email. */
import { derive, processPattern } from '../msg.js';
import { type EmailMessage, type NodeSpec, SUCCESS } from '../types.js';
import { bool, num, PREFIX, record, str } from './support.js';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];
/** Body methods: the message data is sent as the request body (reference §3.5). */
const WITH_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** A REST node never waits longer than this, even with `readTimeoutMs` 0 ("no timeout"). */
const MAX_TIMEOUT_MS = 120_000;
/** Largest response kept as message data (TB `maxInMemoryBufferSizeInKb` default 256). */
const DEFAULT_BUFFER_KB = 256;

/** Thrown with the metadata the failure message carries (`status`, `error_body`, `error`). */
class RestCallError extends Error {
  override name = 'RestCallError';
  constructor(
    message: string,
    readonly metadata: Record<string, string>,
  ) {
    super(message);
  }
}

export const restApiCall: NodeSpec = {
  type: `${PREFIX}rest.TbRestApiCallNode`,
  defaults: {
    restEndpointUrlPattern: 'http://localhost/api',
    requestMethod: 'POST',
    headers: { 'Content-Type': 'application/json' },
    readTimeoutMs: 0,
    maxParallelRequestsCount: 0,
    parseToPlainText: false,
    ignoreRequestBody: false,
    enableProxy: false,
    useSimpleClientHttpFactory: false,
    useSystemProxyProperties: false,
    credentials: { type: 'anonymous' },
    maxInMemoryBufferSizeInKb: DEFAULT_BUFFER_KB,
  },
  check: (c) => {
    const problems: string[] = [];
    if (!METHODS.includes(str(c, 'requestMethod')))
      problems.push(`requestMethod must be one of ${METHODS.join(', ')}`);
    if (str(c, 'restEndpointUrlPattern') === '')
      problems.push('restEndpointUrlPattern is required');
    if (bool(c, 'enableProxy')) problems.push('enableProxy: proxies are not supported');
    const type = (c.credentials as { type?: unknown } | null)?.type ?? 'anonymous';
    if (type !== 'anonymous' && type !== 'basic')
      problems.push(`credentials.type ${String(type)} is not supported (anonymous, basic)`);
    return problems;
  },
  create: ({ config }) => {
    const method = str(config, 'requestMethod', 'POST');
    const urlPattern = str(config, 'restEndpointUrlPattern');
    const headers = record(config, 'headers');
    const timeout = num(config, 'readTimeoutMs', 0);
    const timeoutMs = timeout > 0 ? Math.min(timeout, MAX_TIMEOUT_MS) : MAX_TIMEOUT_MS;
    const ignoreBody = bool(config, 'ignoreRequestBody');
    const plainText = bool(config, 'parseToPlainText');
    const maxBytes = num(config, 'maxInMemoryBufferSizeInKb', DEFAULT_BUFFER_KB) * 1024;
    const credentials = (config.credentials ?? {}) as {
      type?: string;
      username?: string;
      password?: string;
    };
    const basic =
      credentials.type === 'basic'
        ? `Basic ${Buffer.from(`${credentials.username ?? ''}:${credentials.password ?? ''}`).toString('base64')}`
        : undefined;
    return {
      onMsg: async (msg) => {
        const url = processPattern(urlPattern, msg);
        const sent: Record<string, string> = {};
        for (const [k, v] of Object.entries(headers))
          sent[processPattern(k, msg)] = processPattern(v, msg);
        if (basic) sent.Authorization = basic;
        let body: string | undefined;
        if (WITH_BODY.has(method) && !ignoreBody) {
          body = typeof msg.data === 'string' ? msg.data : JSON.stringify(msg.data ?? {});
        }
        let res: Response;
        try {
          res = await fetch(url, {
            method,
            headers: sent,
            body,
            signal: AbortSignal.timeout(timeoutMs),
          });
        } catch (err) {
          const reason =
            err instanceof Error
              ? err.cause instanceof Error
                ? err.cause.message
                : err.message
              : String(err);
          throw new RestCallError(`REST call to ${url} failed: ${reason}`, { error: reason });
        }
        const text = await res.text();
        const metadata: Record<string, string> = {
          ...msg.metadata,
          status: res.statusText || String(res.status),
          statusCode: String(res.status),
          statusReason: res.statusText,
        };
        res.headers.forEach((v, k) => {
          metadata[k] = v;
        });
        if (!res.ok) {
          throw new RestCallError(`REST call to ${url} answered ${res.status}`, {
            ...metadata,
            error: `${res.status} - ${res.statusText}`,
            error_body: text.slice(0, maxBytes),
          });
        }
        if (text.length > maxBytes)
          throw new RestCallError(`REST response is larger than ${maxBytes} bytes`, metadata);
        let data: unknown = text === '' ? {} : text;
        if (!plainText && text !== '') {
          try {
            data = JSON.parse(text);
          } catch {
            data = text;
          }
        }
        return { labels: SUCCESS, msg: derive(msg, { data, metadata }) };
      },
    };
  },
};

/** The metadata a failure carries on to `Failure` (REST node: status and error body). */
export function failureMetadata(err: unknown): Record<string, string> | undefined {
  return err instanceof RestCallError ? err.metadata : undefined;
}

export const sendEmail: NodeSpec = {
  type: `${PREFIX}mail.TbSendEmailNode`,
  defaults: {
    useSystemSmtpSettings: true,
    smtpHost: 'localhost',
    smtpPort: 25,
    smtpProtocol: 'smtp',
    timeout: 10_000,
    enableTls: false,
    tlsVersion: 'TLSv1.2',
    enableProxy: false,
  },
  check: (c) => {
    const problems: string[] = [];
    const protocol = str(c, 'smtpProtocol', 'smtp');
    if (protocol !== 'smtp' && protocol !== 'smtps')
      problems.push('smtpProtocol must be smtp or smtps');
    if (bool(c, 'enableProxy')) problems.push('enableProxy: proxies are not supported');
    return problems;
  },
  create: ({ config, services }) => {
    const system = bool(config, 'useSystemSmtpSettings', true);
    const smtp = system
      ? undefined
      : {
          host: str(config, 'smtpHost', 'localhost'),
          port: num(config, 'smtpPort', 25),
          secure: str(config, 'smtpProtocol', 'smtp') === 'smtps',
          requireTls: bool(config, 'enableTls'),
          username: str(config, 'username') || undefined,
          password: str(config, 'password') || undefined,
          timeoutMs: num(config, 'timeout', 10_000),
        };
    return {
      onMsg: async (msg) => {
        if (msg.type !== 'SEND_EMAIL') throw new Error(`Unsupported msg type: ${msg.type}`);
        const d = (msg.data ?? {}) as Record<string, unknown>;
        const text = (k: string) =>
          typeof d[k] === 'string' && d[k] !== '' ? (d[k] as string) : undefined;
        const to = text('to');
        if (!to) throw new Error('Email destination can not be blank [to]');
        const mail: EmailMessage = {
          from: text('from'),
          to,
          cc: text('cc'),
          bcc: text('bcc'),
          subject: text('subject') ?? '',
          body: text('body') ?? '',
          html: d.html === true,
        };
        await services.sendEmail(mail, smtp);
        return { labels: SUCCESS, msg };
      },
    };
  },
};
