import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import {
  COMPILE_TIMEOUT_MS,
  ScriptCompileError,
  ScriptEngine,
  ScriptRuntimeError,
} from './sandbox.js';

const ARGS = ['msg', 'metadata', 'msgType'];
const call = (engine: ScriptEngine, body: string, msg: unknown = {}) => {
  const script = engine.compile(body, ARGS);
  try {
    const text = script.invoke([
      JSON.stringify(msg),
      '{"deviceName":"d1"}',
      '"POST_TELEMETRY_REQUEST"',
    ]);
    return text === undefined ? undefined : (JSON.parse(text) as unknown);
  } finally {
    script.dispose();
  }
};

describe('script sandbox (QuickJS in WebAssembly)', () => {
  let engine: ScriptEngine;
  before(async () => {
    // A call limit a loaded machine does not reach by accident; the limit test waits for it.
    engine = await ScriptEngine.load({ timeoutMs: 1_000, memoryBytes: 4 * 1024 * 1024 });
  });

  it("runs ThingsBoard's contract: msg, metadata, msgType in; JSON out", () => {
    assert.deepEqual(
      call(engine, 'return {msg: {t: msg.t * 2}, metadata: metadata, msgType: msgType};', {
        t: 21,
      }),
      { msg: { t: 42 }, metadata: { deviceName: 'd1' }, msgType: 'POST_TELEMETRY_REQUEST' },
    );
    assert.equal(call(engine, 'var x = 1;'), undefined);
  });

  it('compiles once: state kept between calls of one script, not shared between scripts', () => {
    const a = engine.compile('globalThis.n = (globalThis.n || 0) + 1; return n;', ARGS);
    const b = engine.compile('return typeof globalThis.n;', ARGS);
    assert.equal(a.invoke(['{}', '{}', '""']), '1');
    assert.equal(a.invoke(['{}', '{}', '""']), '2');
    assert.equal(b.invoke(['{}', '{}', '""']), '"undefined"');
    a.dispose();
    b.dispose();
  });

  it('has no access to the host: no require, process, timers, fetch or file system', () => {
    assert.deepEqual(
      call(
        engine,
        'return [typeof require, typeof process, typeof setTimeout, typeof fetch, typeof Deno, typeof module];',
      ),
      ['undefined', 'undefined', 'undefined', 'undefined', 'undefined', 'undefined'],
    );
  });

  it('stops a script that runs past the time limit, and the script still works after', () => {
    const script = engine.compile('if (msg.loop) { for (;;) {} } return 1;', ARGS);
    const started = Date.now();
    assert.throws(() => script.invoke(['{"loop":true}', '{}', '""']), ScriptRuntimeError);
    assert.ok(Date.now() - started < 20_000);
    assert.equal(script.invoke(['{}', '{}', '""']), '1');
    script.dispose();
  });

  it('holds a compile to its own limit, not the call limit: top-level work compiles, a top-level loop is stopped', async () => {
    const strict = await ScriptEngine.load({ timeoutMs: 1, memoryBytes: 4 * 1024 * 1024 });
    // A body that closes its function runs code when it is compiled: 3 million turns take far
    // longer than the 1 ms call limit, far less than the compile limit.
    const busy = '}; var s = 0; for (var i = 0; i < 3e6; i++) { s += i; } var __g = function() {';
    strict.compile(busy, ARGS).dispose();
    const started = Date.now();
    assert.throws(
      () => strict.compile('}; for (;;) {} var __g = function() {', ARGS),
      (err: unknown) => err instanceof ScriptCompileError && /interrupted/.test(err.message),
    );
    const took = Date.now() - started;
    assert.ok(
      took >= COMPILE_TIMEOUT_MS - 50 && took < COMPILE_TIMEOUT_MS + 15_000,
      `took ${took} ms`,
    );
  });

  it('stops a script that runs past the memory limit, and the script still works after', async () => {
    const small = await ScriptEngine.load({ timeoutMs: 10_000, memoryBytes: 1024 * 1024 });
    const script = small.compile(
      'if (msg.grow) { var a = []; for (;;) a.push("xxxxxxxxxxxxxxxxxxxxxxxxxxxxx" + a.length); } return 2;',
      ARGS,
    );
    assert.throws(() => script.invoke(['{"grow":true}', '{}', '""']), /out of memory/);
    assert.equal(script.invoke(['{}', '{}', '""']), '2');
    script.dispose();
  });

  it('refuses a script that does not parse, with the line of the body', () => {
    assert.throws(
      () => engine.compile('var a = 1;\nvar b = 2;\nreturn a +;', ARGS),
      (err: unknown) => err instanceof ScriptCompileError && err.line === 3,
    );
    assert.throws(() => engine.compile('   ', ARGS), ScriptCompileError);
  });

  it('turns a thrown error into ScriptRuntimeError with its message', () => {
    assert.throws(() => call(engine, 'throw new Error("bad input");'), /Error: bad input/);
  });
});
