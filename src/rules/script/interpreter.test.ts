import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { FastScript, sameJson, toJsonResult } from './interpreter.js';
import { ScriptEngine } from './sandbox.js';

import { ARGS, LIMITS, META, MSG, plain, scriptChecks, TYPE } from './script-test-kit.js';

describe('script interpreter (the fast path in front of QuickJS)', () => {
  let engine: ScriptEngine;
  const { both } = scriptChecks(() => engine);
  before(async () => {
    engine = await ScriptEngine.load(LIMITS);
  });

  it('answers in the interpreter what QuickJS answers, for the subset it runs', () => {
    const scripts = [
      'return msg.a > 20;',
      'return msg.temperature > -100;',
      'metadata.checked = "yes";\nreturn {msg: msg, metadata: metadata, msgType: msgType};',
      'return {msg: {t: msg.a * 2, unit: "C"}, metadata: metadata, msgType: "CUSTOM"};',
      `function nextRelation(metadata, msg) {
         return ['one', 'nine'];
       }
       if (msgType === 'POST_TELEMETRY_REQUEST') {
         return ['two'];
       }
       return nextRelation(metadata, msg);`,
      'var s = 0; for (var i = 0; i < msg.c.length; i++) { s += msg.c[i]; } return s;',
      'let t = 0; for (const x of msg.c) t += x * x; return t;',
      'var keys = []; for (var k in msg.d) keys.push(k); return keys.join("|");',
      'return msg.c.slice().sort().map(x => x * 10);',
      'return msg.c.filter(x => x > 1).reduce((s, x) => s + x, 0);',
      'return [msg.b.toUpperCase(), msg.b.toLowerCase(), msg.b.slice(1, 4), msg.b.indexOf("o")];',
      'return msg.b.split(", ").concat(["!"]).join("-");',
      'return msg.b.replace("l", "L") + msg.b.replaceAll("l", "_") + msg.b.padStart(15, "*");',
      'return [msg.a.toFixed(2), msg.a.toPrecision(3), (255).toString(16), String(msg.a)];',
      'return [parseInt(msg.s), parseFloat("3.5e2"), Number("x"), isNaN("x"), isFinite(msg.a)];',
      'return [Math.max(msg.a, 3), Math.floor(msg.a), Math.round(-2.5), Math.abs(-msg.a), Math.PI];',
      'return JSON.stringify(msg) + JSON.stringify(metadata, null, 2);',
      'return JSON.parse(\'{"x": [1, 2, {"y": null}]}\');',
      'return [Object.keys(msg.d), Object.values(msg.d), Object.entries({p: 1})];',
      'var o = Object.assign({}, msg.d, {h: 1}); delete o.e; return o;',
      'return [typeof msg, typeof msg.c, typeof msgType, typeof parseInt, typeof null];',
      'return `${msg.b} is ${msg.a} (${msgType.length})`;',
      'return msg.n?.x ?? msg.d?.e ?? 0;',
      'return msg.missing?.deep.deeper;',
      'switch (msg.s) { case 42: return "number"; case "42": return "string"; default: return "none"; }',
      'var n = 0; while (n < 10) { if (n === 5) break; n++; } do { n += 10; } while (n < 30); return n;',
      'for (var i = 0; i < 5; i++) { if (i % 2) continue; msg.c.push(i); } return msg.c;',
      'var o = {n: 1}; o.n++; ++o.n; o.n += 10; o.n **= 2; o.m ||= "set"; o.n &&= o.n - 1; return o;',
      'var x = 5; x -= 2; x *= 3; x /= 2; x %= 4; x <<= 3; x >>= 1; x >>>= 0; x |= 1; x &= 7; x ^= 2; return x;',
      'var a = [1, , 3]; a[5] = 6; return a;',
      'var a = msg.c; a.length = 1; return {a: a, c: msg.c};',
      'return [1 / 0, -1 / 0, 0 / 0, -0, undefined, function () {}];',
      'return {u: undefined, f: function () {}, n: 0 / 0, nested: {x: undefined}};',
      'return msg.d.g.indexOf(null) + msg.c.includes(2) + [1, [2, [3]]].flat();',
      'var fib = function f(n) { return n < 2 ? n : f(n - 1) + f(n - 2); }; return fib(15);',
      'function counter() { var c = 0; return function () { return ++c; }; } var k = counter(); k(); k(); return k();',
      'var d = msg.d; d.e = d.e + 1; return {msg: msg};',
      'msg.c.reverse(); msg.d.e = 0; return msg;',
      'return "abc" < "abd" && null == undefined && "1" == 1 && !("" === 0);',
      'return [1 + "2", "3" * "4", true + 1, [] + {}, [1, 2] + "", null + 1, "x" - 1];',
      'return ["a", "b"].map(String).concat([1, 2].map(Number)).filter(Boolean);',
      'return ["10", "10", "10"].map(parseInt);',
      'return String.fromCharCode(72, 105) + Number.isInteger(msg.a) + Number.MAX_SAFE_INTEGER;',
      'return Array.isArray(msg.c) && !Array.isArray(msg.d) && Date.now() > 0;',
      'var o = {}; o["__proto__x"] = 1; o[1] = 2; o[msg.s] = 3; return Object.keys(o);',
      'return msg.b.charAt(1) + msg.b[0] + msg.b.length + msg.b.at(-1) + msg.b.charCodeAt(0);',
      'return msg.d.hasOwnProperty("e") && !msg.d.hasOwnProperty("toString") && "e" in msg.d;',
      'if (msg.a > 100) return "hot"; else if (msg.a > 20) return "warm"; else return "cold";',
      'var r = []; [3, 2, 1].forEach(function (x, i) { r.push(x * i); }); return r;',
      'return [msg.c.some(x => x > 2), msg.c.every(x => x > 0), msg.c.find(x => x < 3), msg.c.findIndex(x => x === 2)];',
      'var x; return [x, typeof x, void 0];',
      'return;',
      'var nothing = 1;',
      'var d; try { d = JSON.parse(msg.b); } catch (e) { d = "bad"; } return d;',
      'var d; try { d = JSON.parse(metadata.missing); } catch { d = {}; } return d;',
      'try { return JSON.parse("[1, 2]").length; } catch (e) { return -1; }',
      'var r = []; ["%41", "%E0%A4%A"].forEach(function (x) { try { r.push(decodeURIComponent(x)); } catch (err) { r.push(null); } }); return r;',
      'try { return ["1", "x"].map(function (t) { return JSON.parse(t); }); } catch (e) { return "one failed"; }',
    ];
    const slow: string[] = [];
    for (const body of scripts) {
      const r = both(body);
      if (!r.fast) slow.push(`${body} (${r.reason})`);
    }
    assert.deepEqual(slow, [], 'every script above runs in the interpreter');
  });

  it('hands to QuickJS what it does not do exactly: same outcome, errors included', () => {
    const deferred = [
      // Exceptions are QuickJS's to word.
      'return msg.missing.x;',
      'throw new Error("boom");',
      'return undefinedName;',
      'return msg.b.toFixed(2);',
      'var f = 1; return f();',
      'const c = 1; c = 2; return c;',
      'return x; let x = 1;',
      // Outside the subset, compiled there.
      'try { return JSON.parse("{"); } catch (e) { return "caught " + e.name; }',
      'try { return JSON.parse("{"); } finally { msg.a = 1; }',
      'try { return msg.x.y; } catch (e) { return 2; }',
      'try { throw 1; } catch (e) { return 3; }',
      'return JSON.parse("{");',
      'return JSON.parse("[".repeat(2000) + "]".repeat(2000)).length;',
      'return new Date(0).toISOString();',
      'return /a+/.test(msg.b);',
      'return msg.b.match("o");',
      'return this;',
      'return arguments.length;',
      'globalThis.n = 1; return typeof globalThis;',
      'counter = 1; return counter;',
      'return [...msg.c];',
      'var {e} = msg.d; return e;',
      'class A {} return typeof A;',
      'label: for (;;) { break label; } return 1;',
      'return [1, 2].map(x => x).constructor === Array;',
      'return msg.constructor.name;',
      'return Object.getPrototypeOf(msg) === Object.prototype;',
      'return String(function f() { return 1; });',
      'return "" + parseInt;',
      'return Math;',
      'return [3, 1, 2].sort((a, b) => a > b);',
      'return msg.c.slice().sort(function (x, y) { return x - y; });',
      'return [typeof nothing, typeof Symbol, typeof Map];',
      'return msg.b.localeCompare("a");',
      'var fs = []; for (let i = 0; i < 3; i++) fs.push(() => i); return fs.map(f => f());',
      'return {toJSON: function () { return "j"; }};',
      'var o = {}; o.self = o; return o;',
      'function deep(n) { return n === 0 ? 0 : 1 + deep(n - 1); } return deep(1000);',
      'return 12345678901234567890n;',
      'return 010;',
    ];
    for (const body of deferred) {
      const r = both(body);
      assert.equal(r.fast, false, `QuickJS answered: ${body}`);
    }
  });

  it('keeps the script away from the host: no prototype, constructor, global or host object', () => {
    const attempts = [
      'return msg.constructor.constructor("return process")();',
      'return msg.__proto__.polluted = 1;',
      'var o = {}; o.__proto__.polluted = 1; return 1;',
      'var o = {}; o["__proto__"] = {polluted: 1}; return o.polluted;',
      'msg.c.__proto__.push = 1; return 1;',
      'Math.max = null; return 1;',
      'JSON.parse = null; return 1;',
      'Object.keys = null; return 1;',
      'var f = function () {}; f.x = 1; return f.prototype;',
      'return parseInt.call(null, "1");',
      'return parseInt.constructor;',
      'return Object.assign(Object.prototype, {polluted: 1});',
      'return Object.assign({}, JSON.parse(\'{"__proto__": {"polluted": 1}}\')).polluted;',
      'return Object.fromEntries([["__proto__", {"polluted": 1}]]).polluted;',
      'return eval("1");',
      'return Function("return 1")();',
      'return require("fs");',
      'return process.pid;',
      'return import("fs");',
      'return msg.c.map.call([1], x => x);',
      'return "".toString.constructor("return 1")();',
      'var a = []; a.length = 1e9; return a.length;',
      'var a = []; a[1e9] = 1; return a.length;',
    ];
    for (const body of attempts) both(body);
    // Nothing leaked into this process.
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(typeof Math.max, 'function');
    assert.equal(typeof JSON.parse, 'function');
    assert.equal(typeof Object.keys, 'function');
    assert.equal(Object.getPrototypeOf(Math.max), Function.prototype);
    assert.equal(Object.getPrototypeOf(parseInt), Function.prototype);
  });

  it('stops a runaway loop at the time limit, in the interpreter', () => {
    for (const body of [
      'while (true) {}',
      'for (;;) { msg.a++; }',
      'var a = [1, 2, 3]; while (a.length) { a.indexOf(3); }',
      'function f() { for (var i = 0; ; i++) {} } f();',
      'var n = 0; [1, 2].forEach(function g() { while (true) n++; });',
    ]) {
      const script = engine.compile(body, ARGS, { fast: true });
      const t0 = process.threadCpuUsage();
      const o = script.call([MSG, META, TYPE]);
      const used = process.threadCpuUsage(t0);
      assert.equal(o.ok, false);
      assert.match(o.ok ? '' : o.error.message, /script stopped after 200 ms of CPU time/);
      assert.equal(script.calls.fast, 1, `the interpreter stopped it, not QuickJS: ${body}`);
      assert.ok((used.user + used.system) / 1000 < 200 * 3, 'stopped near the limit');
      script.dispose();
    }
  });

  it('defers a call that would allocate past the memory limit: QuickJS then refuses it', () => {
    for (const body of [
      'var s = "x"; while (true) s = s + s;',
      'var o = null; for (var i = 0; i < 1e7; i++) o = {next: o}; return 1;',
      'return "x".repeat(1e8).length;',
      'var a = []; for (var i = 0; i < 1e7; i++) a.push(i, i, i, i, i, i, i, i); return a.length;',
    ]) {
      const r = both(body);
      assert.equal(r.fast, false, body);
      assert.equal(r.outcome.ok, false, body);
    }
    // Below the limit, the interpreter answers.
    assert.equal(
      both('var a = []; for (var i = 0; i < 1000; i++) a.push(i); return a.length;').fast,
      true,
    );
  });

  it('answers the argument and result size limits as QuickJS does', () => {
    const big = { text: 'y'.repeat(120_000) };
    const a = both('return msg.text.length;', [big, META, TYPE]);
    const chars = [big, META, TYPE].reduce((n: number, v) => n + JSON.stringify(v).length, 0);
    assert.deepEqual(a.outcome, {
      ok: false,
      error: `script arguments are ${chars} characters, at most 100000`,
    });
    const b = both('return "z".repeat(310000);');
    assert.equal(b.fast, true);
    assert.deepEqual(b.outcome, {
      ok: false,
      error: 'script result is 310002 characters, at most 300000',
    });
  });

  it('gives a script its arguments themselves when it cannot change them, else copies', () => {
    const copies = (body: string) => (FastScript.compile(body, ARGS, LIMITS) as FastScript).copies;
    assert.deepEqual(copies('return msg.a > 1;'), [false, false, false]);
    assert.deepEqual(copies('metadata.checked = "yes"; return {msg: msg, metadata: metadata};'), [
      false,
      true,
      false,
    ]);
    assert.deepEqual(copies('var m = msg; m.x = 1; return m;'), [true, false, false]);
    assert.deepEqual(copies('var a = []; a.push(msg); metadata.x = 1; return a;'), [
      true,
      true,
      false,
    ]);
    assert.deepEqual(copies('function f(msg) { msg.y = 2; } f(metadata); return 1;'), [
      true,
      true,
      false,
    ]);
    assert.deepEqual(copies('if (msg.a.b) metadata.x = 1; return {msg: [msg.d]};'), [
      false,
      true,
      false,
    ]);
    // The result that is an argument itself is not copied either (messages never change).
    const script = engine.compile('return {msg: msg};', ARGS, { fast: true });
    const msg = { a: 1 };
    const o = script.call([msg, META, TYPE]);
    assert.ok(o.ok && (o.value as { msg: unknown }).msg === msg);
    script.dispose();
  });

  it('runs many calls: the interpreter answers most, QuickJS the deferred ones, in order', () => {
    const script = engine.compile(
      'if (msg.x === 3) throw new Error("three"); return msg.x * 2;',
      ARGS,
      {
        fast: true,
      },
    );
    const outcomes = script.callMany([1, 2, 3, 4].map((x) => [{ x }, META, TYPE])).map(plain);
    assert.deepEqual(outcomes, [
      { ok: true, value: 2 },
      { ok: true, value: 4 },
      { ok: false, error: 'Error: three' },
      { ok: true, value: 8 },
    ]);
    assert.deepEqual(script.calls, { fast: 3, quickjs: 1 });
    script.dispose();
  });

  it('stops trying the interpreter for a script that defers every call', () => {
    const script = engine.compile('return new Date(msg.t).getTime();', ARGS, { fast: true });
    assert.equal(script.fast, true);
    for (let i = 0; i < 100; i++)
      assert.deepEqual(plain(script.call([{ t: i }, META, TYPE])), { ok: true, value: i });
    assert.equal(script.fast, false);
    assert.equal(script.calls.quickjs, 100);
    script.dispose();
  });

  it('compares results as their JSON texts would be compared', () => {
    assert.equal(sameJson({ a: 1, b: [1, 2] }, { a: 1, b: [1, 2] }), true);
    assert.equal(sameJson({ a: 1, b: 2 }, { b: 2, a: 1 }), false, 'key order counts');
    assert.equal(sameJson({ a: 1, u: undefined }, { a: 1 }), true);
    assert.equal(sameJson([Number.NaN], [null]), true);
    assert.equal(sameJson(-0, 0), true);
    assert.equal(sameJson('1', 1), false);
    assert.deepEqual(toJsonResult({ a: Number.NaN, u: undefined }, 1000), { value: { a: null } });
    assert.deepEqual(toJsonResult([undefined, () => 1], 1000), { value: [null, null] });
    const same = { a: [1, { b: 'c' }] };
    assert.equal(toJsonResult(same, 1000).value, same, 'a JSON-ready value is not copied');
  });

  it('agrees with QuickJS on random expressions (differential fuzz, seeded)', () => {
    // More runs or another seed: SCRIPT_FUZZ_RUNS=5000 SCRIPT_FUZZ_SEED=7 (CI runs the default).
    let seed = Number(process.env.SCRIPT_FUZZ_SEED ?? 0x2545f491) | 0 || 1;
    const rnd = (n: number) => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) % n;
    };
    const pick = <T>(xs: readonly T[]): T => xs[rnd(xs.length)] as T;
    const leaves = [
      '0',
      '1',
      '-1',
      '2.5',
      '1e21',
      '0.1',
      '-0',
      '"a"',
      '""',
      '"10"',
      '" 7 "',
      'true',
      'false',
      'null',
      'undefined',
      'msg.a',
      'msg.b',
      'msg.c',
      'msg.d',
      'msg.d.e',
      'msg.d.f',
      'msg.n',
      'msg.s',
      'msg.h',
      'metadata.deviceName',
      'metadata.ts',
      'msgType',
      '[1, "2", null]',
      '{k: 1}',
      'msg.c[1]',
      'msg.d.g',
    ];
    const binary = [
      '+',
      '-',
      '*',
      '/',
      '%',
      '**',
      '==',
      '!=',
      '===',
      '!==',
      '<',
      '<=',
      '>',
      '>=',
      '&&',
      '||',
      '??',
      '&',
      '|',
      '^',
      '<<',
      '>>',
      '>>>',
    ];
    const expr = (depth: number): string => {
      if (depth <= 0) return pick(leaves);
      const e = () => expr(depth - 1);
      switch (rnd(16)) {
        case 0:
        case 1:
        case 2:
          return `((${e()}) ${pick(binary)} (${e()}))`;
        case 3:
          return `${pick(['-', '+', '!', '~', 'typeof ', 'void '])}(${e()})`;
        case 4:
          return `(${e()} ? ${e()} : ${e()})`;
        case 5:
          return `String(${e()})${pick(['.toUpperCase()', '.slice(1)', '.indexOf("a")', '.split("")', '.trim()', '.length', '.padEnd(4, "-")', '.replace("1", "x")', '.includes("u")', '[0]'])}`;
        case 6:
          return `${pick(['Number', 'String', 'Boolean', 'parseInt', 'parseFloat', 'isNaN', 'isFinite'])}(${e()})`;
        case 7:
          return `Math.${pick(['floor', 'ceil', 'round', 'abs', 'sqrt', 'trunc', 'sign', 'max', 'min'])}(${e()})`;
        case 8:
          return `JSON.stringify(${e()})`;
        case 9:
          return `[${e()}, ${e()}]`;
        case 10:
          return `{x: ${e()}, y: ${e()}}`;
        case 11:
          return `\`${'${'}${e()}} and ${'${'}${e()}}\``;
        case 12:
          return `msg.c.${pick(['map(v => v * 2)', 'filter(v => v > 1)', 'join("-")', 'slice(1)', 'concat([9])', 'indexOf(2)', 'reduce((s, v) => s + v, 0)'])}`;
        case 13:
          return `(${e()})${pick(['.length', '.e', '[0]'])}`;
        case 14:
          return `Number(${e()}).toFixed(${rnd(4)})`;
        default:
          return `Object.${pick(['keys', 'values'])}(msg.d)`;
      }
    };
    let fastRuns = 0;
    const runs = Number(process.env.SCRIPT_FUZZ_RUNS ?? 400);
    for (let i = 0; i < runs; i++) {
      const body = `var x = ${expr(3)}; var y = ${expr(2)}; if (${expr(2)}) { x = [x, ${expr(2)}]; } return {x: x, y: y};`;
      if (both(body).fast) fastRuns++;
    }
    // Most random scripts are the interpreter's; the rest (an exception) went to QuickJS.
    assert.ok(fastRuns > runs / 2, `interpreter answered ${fastRuns} of ${runs}`);
  });
});
