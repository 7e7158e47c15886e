import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import {
  DEFAULT_SCRIPT_LIMITS,
  MAX_ARGS_CHARS,
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
    engine = await ScriptEngine.load({ timeoutMs: 200, memoryBytes: 4 * 1024 * 1024 });
  });

  const cpuMs = () => {
    const u = process.threadCpuUsage();
    return (u.user + u.system) / 1000;
  };

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

  it('stops a script that runs past the time limit (CPU time), and the script still works after', () => {
    const script = engine.compile('if (msg.loop) { for (;;) {} } return 1;', ARGS);
    const started = cpuMs();
    assert.throws(
      () => script.invoke(['{"loop":true}', '{}', '""']),
      (err: unknown) => err instanceof ScriptRuntimeError && /200 ms of CPU time/.test(err.message),
    );
    // It ran for its limit, not for ever (a wall clock would say nothing on a loaded machine).
    const spent = cpuMs() - started;
    assert.ok(spent >= 190 && spent < 5_000, `spent ${spent} ms of CPU`);
    assert.equal(script.invoke(['{}', '{}', '""']), '1');
    script.dispose();
  });

  it('never stops a compile or a short call for the time the machine spends elsewhere, however small the limit', async () => {
    // 1 ms: a wall-clock limit would trip on any pause of a loaded machine; a compile and a
    // call with no loop are never polled, so they cannot be stopped.
    const tight = await ScriptEngine.load({ timeoutMs: 1, compileTimeoutMs: 1 });
    for (let i = 0; i < 50; i++) {
      const script = tight.compile("return msg.method === 'getCurrentTime';", ARGS);
      for (let j = 0; j < 20; j++)
        assert.equal(script.invoke(['{"method":"getCurrentTime"}', '{}', '""']), 'true');
      script.dispose();
    }
  });

  it('holds a compile to its own limit, not the call limit: top-level work compiles, a top-level loop is stopped', async () => {
    const strict = await ScriptEngine.load({ timeoutMs: 1, compileTimeoutMs: 400 });
    assert.equal(DEFAULT_SCRIPT_LIMITS.compileTimeoutMs, 5_000);
    // A body that closes its function runs code when it is compiled: 300,000 turns take far
    // longer than the 1 ms call limit, far less than the compile limit.
    const busy = '}; var s = 0; for (var i = 0; i < 3e5; i++) { s += i; } var __g = function() {';
    strict.compile(busy, ARGS).dispose();
    const started = cpuMs();
    assert.throws(
      () => strict.compile('}; for (;;) {} var __g = function() {', ARGS),
      (err: unknown) => err instanceof ScriptCompileError && /interrupted/.test(err.message),
    );
    const spent = cpuMs() - started;
    assert.ok(spent >= 390 && spent < 5_000, `spent ${spent} ms of CPU`);
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

  it('runs many calls in one crossing, each with its own result or error, as invoke would', () => {
    const script = engine.compile(
      'if (msg.throw) throw new Error("bad " + msg.i); if (msg.str) throw "plain"; if (msg.none) return; return {i: msg.i, d: metadata.deviceName, t: msgType};',
      ARGS,
    );
    const calls = [
      { i: 0 },
      { i: 1, throw: true },
      { i: 2, none: true },
      { i: 3, str: true },
      { i: 4 },
    ].map((m) => [JSON.stringify(m), '{"deviceName":"d1"}', '"POST_TELEMETRY_REQUEST"']);
    const outcomes = script.invokeMany(calls);
    const single = calls.map((c) => {
      try {
        const text = script.invoke(c);
        return { ok: true, value: text === undefined ? undefined : JSON.parse(text) };
      } catch (err) {
        return { ok: false, error: (err as Error).message };
      }
    });
    assert.deepEqual(
      outcomes.map((o) => (o.ok ? o : { ok: false, error: o.error.message })),
      single,
    );
    assert.deepEqual(outcomes[0], {
      ok: true,
      value: { i: 0, d: 'd1', t: 'POST_TELEMETRY_REQUEST' },
    });
    assert.equal(outcomes[1]?.ok === false && outcomes[1].error.message, 'Error: bad 1');
    assert.ok(outcomes[1]?.ok === false && outcomes[1].error instanceof ScriptRuntimeError);
    assert.deepEqual(outcomes[2], { ok: true, value: undefined });
    assert.equal(outcomes[3]?.ok === false && outcomes[3].error.message, 'plain');
    // An argument over the size limit fails its own call only.
    const big = script.invokeMany([
      calls[0] as string[],
      [`{"s":"${'x'.repeat(100_001)}"}`, '{}', '""'],
    ]);
    assert.equal(big[0]?.ok, true);
    assert.match(big[1]?.ok === false ? big[1].error.message : '', /at most 100000/);
    script.dispose();
  });

  it('stops only the runaway call of a batch (each call keeps its own time limit)', () => {
    const script = engine.compile('if (msg.loop) { for (;;) {} } return msg.i;', ARGS);
    const calls = [{ i: 0 }, { i: 1, loop: true }, { i: 2 }].map((m) => [
      JSON.stringify(m),
      '{}',
      '""',
    ]);
    const started = cpuMs();
    const outcomes = script.invokeMany(calls);
    const spent = cpuMs() - started;
    assert.deepEqual(outcomes[0], { ok: true, value: 0 });
    assert.match(outcomes[1]?.ok === false ? outcomes[1].error.message : '', /200 ms of CPU time/);
    assert.deepEqual(outcomes[2], { ok: true, value: 2 });
    // The batch stopped at its limit, then the calls ran alone: at most twice the limit.
    assert.ok(spent >= 190 && spent < 5_000, `spent ${spent} ms of CPU`);
    script.dispose();
  });

  it('fails only the call of a batch that runs out of memory, and the script still works after', async () => {
    const small = await ScriptEngine.load({ timeoutMs: 10_000, memoryBytes: 1024 * 1024 });
    const script = small.compile(
      'if (msg.grow) { var a = []; for (;;) a.push("xxxxxxxxxxxxxxxxxxxxxxxxxxxxx" + a.length); } return msg.i;',
      ARGS,
    );
    const outcomes = script.invokeMany(
      [{ i: 0 }, { i: 1, grow: true }, { i: 2 }].map((m) => [JSON.stringify(m), '{}', '""']),
    );
    assert.deepEqual(outcomes[0], { ok: true, value: 0 });
    assert.match(outcomes[1]?.ok === false ? outcomes[1].error.message : '', /out of memory/);
    assert.deepEqual(outcomes[2], { ok: true, value: 2 });
    assert.equal(script.invoke(['{"i":3}', '{}', '""']), '3');
    script.dispose();
  });

  it('passes any text in and out unchanged: non-ASCII, escaped lone surrogates, near the size limit', () => {
    const script = engine.compile('return {msg: msg, len: msg.s.length};', ARGS);
    try {
      const texts = [
        'plain',
        'é ü ß ✓ 温度 🌡️ \u0000 "quoted" \\ back',
        'lone \ud800 and \udc00 surrogates',
        'x'.repeat(MAX_ARGS_CHARS - 200),
        '温'.repeat(30_000),
      ];
      for (const s of texts) {
        const arg = JSON.stringify({ s });
        const out = JSON.parse(script.invoke([arg, '{}', '""']) as string) as unknown;
        assert.deepEqual(out, { msg: { s }, len: s.length });
      }
      const many = script.invokeMany(texts.map((s) => [JSON.stringify({ s }), 'null', 'null']));
      assert.deepEqual(
        many.map((o) => (o.ok ? o.value : o.error.message)),
        texts.map((s) => ({ msg: { s }, len: s.length })),
      );
      // Many calls: every string the host makes in the sandbox's memory is freed again.
      for (let i = 0; i < 2000; i++) script.invoke([JSON.stringify({ s: `é${i}` }), '{}', '""']);
      assert.equal(
        script.invoke([JSON.stringify({ s: 'ok' }), '{}', '""']),
        '{"msg":{"s":"ok"},"len":2}',
      );
    } finally {
      script.dispose();
    }
  });

  it('turns a thrown error into ScriptRuntimeError with its message', () => {
    assert.throws(() => call(engine, 'throw new Error("bad input");'), /Error: bad input/);
  });
});
