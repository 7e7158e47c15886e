import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Config, configWith, type DeepPartial, type Secrets } from '../../src/config.js';
import { createGateway, type Gateway, type GatewayOverrides } from '../../src/gateway.js';

export const ADMIN_EMAIL = 'admin@test.local';
export const ADMIN_PASSWORD = 'admin-password-1';

export interface TestGateway {
  readonly gw: Gateway;
  readonly dataDir: string;
  readonly baseUrl: string;
  /** Every log line the gateway wrote, parsed. */
  readonly logs: Array<Record<string, unknown>>;
  /** Logs in as the tenant administrator (cached) and returns the access token. */
  adminToken(): Promise<string>;
  /** fetch against the gateway; objects are sent as JSON; `token` adds X-Authorization. */
  api(
    path: string,
    init?: { method?: string; body?: unknown; token?: string; headers?: Record<string, string> },
  ): Promise<Response>;
  /** Stops the gateway; keeps the data directory unless `removeData` (default true). */
  close(removeData?: boolean): Promise<void>;
}

export interface StartOptions {
  readonly config?: DeepPartial<Config>;
  /** Reuse a data directory (restart tests); a fresh temp dir otherwise. */
  readonly dataDir?: string;
  readonly secrets?: Secrets;
  /** Environment for systemd notification (default none). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** The processing entry point instead of the gateway's own (GatewayOverrides). */
  readonly messageProcessor?: GatewayOverrides['messageProcessor'];
  /** The gateway's wall clock (fault drills make it jump). */
  readonly wallClock?: GatewayOverrides['wallClock'];
  /** Extra composition-root overrides (a controlled clock, ...). */
  readonly overrides?: Partial<GatewayOverrides>;
}

/** Starts a real gateway on ephemeral loopback ports with a temp data directory. */
export async function startGateway(opts: StartOptions = {}): Promise<TestGateway> {
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'edge-gw-test-')));
  const config = configWith({
    dataDir,
    bind: '127.0.0.1',
    logLevel: 'debug',
    ...opts.config,
    http: { port: 0, ...opts.config?.http },
    // HTTPS is on by default in production; tests that need it turn it on.
    https: { enabled: false, port: 0, ...opts.config?.https },
    mqtt: { port: 0, tlsPort: 0, ...opts.config?.mqtt },
    coap: { port: 0, ...opts.config?.coap },
    // The heap here is the test runner's: a trim would pause the tests for the runner's garbage.
    // Its own tests turn it on (test/metrics-health.test.ts); gateways run as processes trim.
    memory: { trimAfterMb: 0, ...opts.config?.memory },
  });
  const logs: Array<Record<string, unknown>> = [];
  const gw = createGateway(config, {
    ...opts.overrides,
    secrets: opts.secrets ?? { adminEmail: ADMIN_EMAIL, adminPassword: ADMIN_PASSWORD },
    logDestination: { write: (line: string) => void logs.push(JSON.parse(line)) },
    env: opts.env ?? {},
    messageProcessor: opts.messageProcessor,
    wallClock: opts.wallClock,
  });
  await gw.start();
  const baseUrl = `http://127.0.0.1:${gw.ports.http}`;
  let token: string | undefined;

  const api: TestGateway['api'] = (path, init = {}) => {
    const headers: Record<string, string> = { ...init.headers };
    if (init.token) headers['X-Authorization'] = `Bearer ${init.token}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
      headers['content-type'] ??= 'application/json';
    }
    return fetch(`${baseUrl}${path}`, {
      method: init.method ?? (body ? 'POST' : 'GET'),
      headers,
      body,
    });
  };

  return {
    gw,
    dataDir,
    baseUrl,
    logs,
    api,
    async adminToken() {
      if (token) return token;
      const res = await api('/api/auth/login', {
        body: { username: ADMIN_EMAIL, password: ADMIN_PASSWORD },
      });
      if (res.status !== 200)
        throw new Error(`admin login failed: ${res.status} ${await res.text()}`);
      token = ((await res.json()) as { token: string }).token;
      return token;
    },
    async close(removeData = true) {
      await gw.stop();
      if (removeData && !opts.dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Creates a device (of profile `type`, else the default) through the REST API; its id and token. */
export async function createDevice(
  t: TestGateway,
  name: string,
  accessToken?: string,
  type?: string,
): Promise<{ id: string; token: string }> {
  const q = accessToken ? `?accessToken=${encodeURIComponent(accessToken)}` : '';
  const body = type ? { name, type } : { name };
  const res = await t.api(`/api/device${q}`, { body, token: await t.adminToken() });
  if (res.status !== 200)
    throw new Error(`create device failed: ${res.status} ${await res.text()}`);
  const device = (await res.json()) as { id: { id: string } };
  const creds = await t.api(`/api/device/${device.id.id}/credentials`, {
    token: await t.adminToken(),
  });
  const { credentialsId } = (await creds.json()) as { credentialsId: string };
  return { id: device.id.id, token: credentialsId };
}

/** Creates devices `[name, profile]` whose tokens are their names in lower case, "-" for spaces. */
export async function createDevices(
  t: TestGateway,
  list: ReadonlyArray<readonly [string, string]>,
): Promise<Record<string, string>> {
  const ids: Record<string, string> = {};
  for (const [name, type] of list)
    ids[name] = (await createDevice(t, name, name.replaceAll(' ', '-').toLowerCase(), type)).id;
  return ids;
}

/** Polls `check` until it returns a truthy value or the timeout passes. */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  timeoutMs = 5000,
  what = 'condition',
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
