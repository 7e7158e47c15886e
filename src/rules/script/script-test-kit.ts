/**
 * What the script tests share (interpreter.test.ts and the review files): the arguments, the
 * host snapshot, and the checks that run a script both ways (QuickJS alone, and the interpreter
 * deferring where it must). Test support only: imported by `*.test.ts`, never by the gateway.
 */
import assert from 'node:assert/strict';
import { Defer, FastScript, ScriptTimeout } from './interpreter.js';
import type { CallOutcome, ScriptEngine } from './sandbox.js';

export const ARGS = ['msg', 'metadata', 'msgType'];
export const LIMITS = { timeoutMs: 200, memoryBytes: 4 * 1024 * 1024 };

export const MSG = {
  a: 21.5,
  b: 'Hello, World',
  c: [3, 1, 2],
  d: { e: 7, f: 'x y', g: [true, null], h: { i: [1, { j: 2 }] } },
  n: null,
  s: '42',
};
export const META = { deviceName: 'd1', deviceType: 'default', ts: '1700000000000' };
export const TYPE = 'POST_TELEMETRY_REQUEST';

export type Outcome = { ok: true; value: unknown } | { ok: false; error: string };
export const plain = (o: CallOutcome): Outcome =>
  o.ok ? { ok: true, value: o.value } : { ok: false, error: o.error.message };

/** The host objects a script could aim at: every own property is compared after a script. */
const HOST_OBJECTS: Record<string, object> = {
  'Object.prototype': Object.prototype,
  'Array.prototype': Array.prototype,
  'Function.prototype': Function.prototype,
  'String.prototype': String.prototype,
  'Number.prototype': Number.prototype,
  'Boolean.prototype': Boolean.prototype,
  Object,
  Array,
  Function,
  String,
  Number,
  Boolean,
  Math,
  JSON,
  Date,
  globalThis,
};

export function hostSnapshot(): Map<string, unknown> {
  const snap = new Map<string, unknown>();
  for (const [name, o] of Object.entries(HOST_OBJECTS)) {
    snap.set(`${name} proto`, Object.getPrototypeOf(o));
    snap.set(`${name} extensible`, Object.isExtensible(o));
    // globalThis: its names (the test runner's own symbols come and go).
    for (const key of o === globalThis ? Object.getOwnPropertyNames(o) : Reflect.ownKeys(o)) {
      const d = Object.getOwnPropertyDescriptor(o, key) as PropertyDescriptor;
      snap.set(`${name}.${String(key)}`, [d.value, d.get, d.set, d.writable, d.enumerable]);
    }
  }
  for (const f of [
    parseInt,
    parseFloat,
    Number.isNaN,
    Number.isFinite,
    encodeURIComponent,
    decodeURIComponent,
    Math.max,
    JSON.parse,
  ])
    snap.set(`${f.name} proto`, Object.getPrototypeOf(f));
  return snap;
}

export function assertHostUnchanged(before: Map<string, unknown>, what: string): void {
  const now = hostSnapshot();
  const changed: string[] = [];
  for (const k of new Set([...before.keys(), ...now.keys()])) {
    const a = before.get(k);
    const b = now.get(k);
    if (
      Array.isArray(a) && Array.isArray(b)
        ? a.some((x, i) => !Object.is(x, b[i]))
        : !Object.is(a, b)
    )
      changed.push(k);
  }
  assert.deepEqual(changed, [], `host changed by: ${what}`);
}

/** The checks, on a loaded engine (`engine()` is read when a check runs). */
export function scriptChecks(engine: () => ScriptEngine) {
  /**
   * The script by QuickJS alone and by the interpreter (deferring where it must), on the same
   * arguments: same outcome, arguments unchanged, host untouched; whether the interpreter
   * answered, and why it does not run the script when it does not.
   */
  const both = (body: string, args: unknown[] = [MSG, META, TYPE]) => {
    const copy = structuredClone(args);
    const snap = hostSnapshot();
    const quick = engine().compile(body, ARGS);
    const fast = engine().compile(body, ARGS, { fast: true });
    try {
      const q = plain(quick.call(args));
      const f = plain(fast.call(args));
      assert.deepEqual(f, q, `outcomes differ for: ${body}`);
      assert.deepEqual(args, copy, `arguments changed by: ${body}`);
      assertHostUnchanged(snap, body);
      return { outcome: f, fast: fast.calls.fast === 1, reason: fast.deferredReason };
    } finally {
      quick.dispose();
      fast.dispose();
    }
  };

  /** `both` over a list: every body that differs, reported together. */
  const allBoth = (bodies: readonly string[]) => {
    const failed: string[] = [];
    for (const body of bodies)
      try {
        both(body);
      } catch (err) {
        failed.push(`${body}\n    ${(err as Error).message.split('\n')[0]}`);
      }
    assert.deepEqual(failed, []);
  };

  /** The script through the sandbox (interpreter first), timed in CPU and wall time. */
  const timed = (body: string, args: unknown[] = [MSG, META, TYPE]) => {
    const script = engine().compile(body, ARGS, { fast: true });
    const t0 = process.threadCpuUsage();
    const w0 = performance.now();
    try {
      const outcome = plain(script.call(args));
      const used = process.threadCpuUsage(t0);
      return {
        outcome,
        cpuMs: (used.user + used.system) / 1000,
        wallMs: performance.now() - w0,
        calls: { ...script.calls },
      };
    } finally {
      script.dispose();
    }
  };

  /**
   * The interpreter alone (no QuickJS after a Defer): its CPU time, and how the call ended (a
   * value, `defer: reason`, or `timeout`).
   */
  const fastOnly = (body: string, args: unknown[] = [structuredClone(MSG), META, TYPE]) => {
    const f = FastScript.compile(body, ARGS, LIMITS);
    assert.ok(f instanceof FastScript, `not compiled: ${body}`);
    const t0 = process.threadCpuUsage();
    let end: unknown;
    try {
      end = f.call(args);
    } catch (err) {
      if (err instanceof Defer) end = `defer: ${err.reason}`;
      else if (err instanceof ScriptTimeout) end = 'timeout';
      else throw err;
    }
    const used = process.threadCpuUsage(t0);
    return { end, cpuMs: (used.user + used.system) / 1000 };
  };

  return { both, allBoth, timed, fastOnly };
}
