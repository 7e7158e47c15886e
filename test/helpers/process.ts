import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BUNDLE = join(PROJECT_ROOT, 'dist', 'edge-gateway.mjs');

/** `serve` flags for a gateway on loopback with every port chosen by the OS. */
export const LOOPBACK_EPHEMERAL: readonly string[] = [
  '--bind',
  '127.0.0.1',
  '--http-port',
  '0',
  '--mqtt-port',
  '0',
  '--coap-port',
  '0',
  '--https-port',
  '0',
  '--mqtt-tls-port',
  '0',
];

export interface GatewayProcess {
  readonly child: ChildProcess;
  readonly lines: Array<Record<string, unknown>>;
  readonly stderr: () => string;
  /** Ports from the `ready` log line. */
  readonly ports: { http: number; https: number; mqtt: number; mqttTls: number; coap: number };
  /** Sends a signal and resolves with the exit code (or the signal name). */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | string>;
}

/**
 * Runs the built bundle as a real process (`node dist/edge-gateway.mjs ...`) and waits for the
 * `ready` log line. Rejects with the output when the process exits first.
 */
export async function spawnGateway(
  args: readonly string[],
  opts: {
    env?: Record<string, string>;
    cwd?: string;
    timeoutMs?: number;
    bundle?: string;
    /** What runs instead of `node dist/edge-gateway.mjs` (an executable, or qemu and one). */
    command?: readonly string[];
  } = {},
): Promise<GatewayProcess> {
  const [program, ...lead] = opts.command ?? [process.execPath, opts.bundle ?? BUNDLE];
  const child = spawn(program, [...lead, ...args], {
    cwd: opts.cwd ?? PROJECT_ROOT,
    env: { PATH: process.env.PATH ?? '', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Array<Record<string, unknown>> = [];
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = once(child, 'exit');
  const ready = new Promise<Record<string, unknown>>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const obj = JSON.parse(line) as Record<string, unknown>;
        lines.push(obj);
        if (obj.msg === 'ready') resolve(obj);
      } catch {
        lines.push({ raw: line });
      }
    });
    exited.then(
      ([code]) =>
        reject(
          new Error(`gateway exited with ${code} before ready: ${stderr} ${JSON.stringify(lines)}`),
        ),
      reject,
    );
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 20_000);
  try {
    const readyLine = await ready;
    return {
      child,
      lines,
      stderr: () => stderr,
      ports: readyLine.ports as GatewayProcess['ports'],
      async stop(signal = 'SIGTERM', timeoutMs = 10_000) {
        if (child.exitCode !== null) return child.exitCode;
        const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
        child.kill(signal);
        const [code, sig] = (await exited) as [number | null, string | null];
        clearTimeout(killer);
        return code ?? sig ?? 'unknown';
      },
    };
  } finally {
    clearTimeout(timer);
  }
}

/** Runs the bundle to completion (for --help, bad flags) and returns exit code and output. */
export async function runGateway(
  args: readonly string[],
  opts: {
    env?: Record<string, string>;
    cwd?: string;
    command?: readonly string[];
    timeoutMs?: number;
  } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const [program, ...lead] = opts.command ?? [process.execPath, BUNDLE];
  const child = spawn(program, [...lead, ...args], {
    cwd: opts.cwd ?? PROJECT_ROOT,
    env: { PATH: process.env.PATH ?? '', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 20_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(killer);
  return { code, stdout, stderr };
}

/** Signs in to a spawned gateway over HTTP; its base URL and the token (asserts a 200). */
export async function loginTo(
  gw: GatewayProcess,
  username: string,
  password: string,
): Promise<{ base: string; token: string }> {
  const base = `http://127.0.0.1:${gw.ports.http}`;
  const login = await fetch(`${base}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  if (login.status !== 200) throw new Error(`login: ${login.status} ${await login.text()}`);
  const { token } = (await login.json()) as { token: string };
  return { base, token };
}
