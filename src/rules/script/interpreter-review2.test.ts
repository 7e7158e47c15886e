/**
 * Second adversarial review of the script interpreter (interpreter.ts) in front of QuickJS
 * (sandbox.ts), aimed at the code added by 62b0897 and 5f65059: walkBudget/guardText/guardArgs,
 * try/catch (Thrown), method lookup, stack accounting, results and argument copies. Each case runs
 * both ways (QuickJS alone, and the interpreter deferring where it must) and asserts the same
 * outcome, unchanged arguments and an untouched host, as interpreter-adversarial.test.ts does.
 *
 * The cases of the problems the review found (each failed before its fix, see its comment) are
 * kept as regression tests; the one that hung the process runs in a child process.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { ScriptEngine } from './sandbox.js';

import { assertHostUnchanged, hostSnapshot, LIMITS, scriptChecks } from './script-test-kit.js';

describe('script interpreter, second review', () => {
  let engine: ScriptEngine;
  const { both, fastOnly } = scriptChecks(() => engine);
  let host: Map<string, unknown>;
  before(async () => {
    engine = await ScriptEngine.load(LIMITS);
    host = hostSnapshot();
  });
  after(() => assertHostUnchanged(host, 'the whole file'));

  // try/catch takes only Thrown, but `raising` wraps everything its thunk throws, and the URI
  // functions convert their argument inside it: a script function run by that conversion (a
  // toString) or the function-as-text Defer raises a Defer or ScriptTimeout that becomes a
  // catchable Thrown. Fixed (the suggestion was): convert the argument to a string before `raising` (outside it), or
  // let `raising` rethrow Defer and ScriptTimeout unwrapped.
  describe('try/catch and exceptions raised inside built-ins', () => {
    it('catches what QuickJS catches, and only that', () => {
      for (const body of [
        'try { return decodeURIComponent("%"); } catch (e) { return "caught"; }',
        'try { return JSON.parse("{"); } catch (e) { return "caught"; }',
        'try { return JSON.parse(msg.b); } catch { return null; }',
        'try { return Math.sin(1); } catch (e) { return "caught"; }',
        'try { return null.x; } catch (e) { return "caught"; }',
        'try { return [1].map(decodeURIComponent("%")); } catch (e) { return "caught"; }',
        'try { return ["%"].map(decodeURIComponent); } catch (e) { return "caught"; }',
        'var n = 0; var o = {toString: function () { n++; return "%"; }}; try { decodeURIComponent(o); } catch (e) {} return n;',
        'var o = {toString: function () { return {}; }}; try { return encodeURIComponent(o); } catch (e) { return "caught"; }',
        'var a = []; try { a.push(1); JSON.parse("x"); a.push(2); } catch (e) { a.push(3); } return a;',
        'var r = 0; for (var i = 0; i < 3; i++) { try { r += JSON.parse("[" + i + "]")[0]; } catch (e) { r = -1; } } return r;',
      ])
        both(body);
    });

    it('lets the time limit through a try', () => {
      for (const body of [
        'try { while (true) {} } catch (e) { return 1; }',
        'try { while (true) { JSON.parse("1"); } } catch (e) { return 1; }',
      ])
        assert.deepEqual(both(body).outcome, {
          ok: false,
          error: 'script stopped after 200 ms of CPU time',
        });
    });

    // Defer('function as text') inside encodeURIComponent's conversion is caught.
    it('does not catch a function turned into text by a URI function', () => {
      both('try { return encodeURIComponent(function () {}); } catch (e) { return "caught"; }');
    });

    // Defer('built-in member sin') inside the argument's toString is caught: QuickJS says "0".
    it('does not catch a Defer from a toString the URI function runs', () => {
      both(
        'var o = {toString: function () { return String(Math.sin(0)); }}; try { return encodeURIComponent(o); } catch (e) { return "caught"; }',
      );
    });

    // ScriptTimeout inside the toString is caught: the interpreter answers 1, QuickJS times out.
    it('does not catch the time limit inside a URI conversion', () => {
      both(
        'var o = {toString: function () { while (true) {} }}; try { encodeURIComponent(o); } catch (e) {} return 1;',
      );
    });

    // Worse: every later timeout lands inside the toString and is caught again, so the call
    // never ends and the event loop is blocked for ever. Runs in a child process, killed at 10 s.
    it('stops a loop that catches its own timeout', () => {
      const code = `
        import { ScriptEngine } from ${JSON.stringify(new URL('./sandbox.ts', import.meta.url).pathname)};
        const engine = await ScriptEngine.load({ timeoutMs: 200, memoryBytes: 4 * 1024 * 1024 });
        const s = engine.compile('var o = {toString: function () { while (true) {} }}; while (true) { try { encodeURIComponent(o); } catch (e) {} }', ['msg'], { fast: true });
        const r = s.call([{}]);
        console.log(r.ok ? 'ok' : r.error.message);`;
      const r = spawnSync(
        process.execPath,
        ['--import', 'tsx', '--input-type=module', '-e', code],
        {
          cwd: new URL('../../../', import.meta.url).pathname,
          timeout: 10_000,
          encoding: 'utf8',
        },
      );
      assert.equal(r.signal, null, 'the call did not end within 10 s');
      assert.match(r.stdout, /script stopped after 200 ms of CPU time/);
    });
  });

  // Host conversions of arrays (ToPrimitive joins them) must be walked first (guardText).
  // objectMethod's hasOwnProperty converts its argument with no guard: an exponentially shared
  // array makes the host join millions of elements without a look at the clock (22 levels:
  // 1.5 s of CPU against 200 ms; 25 levels: 14 s CPU, 48 s wall, +430 MB; QuickJS times out).
  // Fixed (the suggestion was): guardArgs(meter, args) at the top of objectMethod (or in callBuiltin for every type).
  describe('host conversions of arrays', () => {
    const shared = (n: number) => `var a = [1]; for (var i = 0; i < ${n}; i++) a = [a, a];`;

    it('walks the array first wherever the host converts it', () => {
      for (const use of [
        'return a + "";',
        'return `${a}`;',
        'return a == "x";',
        'return a < 1;',
        'return -a;',
        'var o = {}; return o[a];',
        'var o = {}; o[a] = 1; return 1;',
        'var o = {}; return a in o;',
        'var o = {[a]: 1}; return 1;',
        'var o = {}; delete o[a]; return 1;',
        'return String(a);',
        'return Number(a);',
        'return parseInt(a);',
        'return Math.max(a);',
        'return isNaN(a);',
        'return encodeURIComponent(a);',
        'return JSON.parse(a);',
        'return Object.fromEntries([[a, 1]]);',
        'return "x".indexOf(a);',
        'return "x".padStart(a);',
        'return (1).toFixed(a);',
        'return [1].join(a);',
        'return [a].join();',
        'return [1].map(Math.max.bind);',
        'var x = 1; x += a; return x;',
        'var o = {k: 1}; o.k += a; return o.k;',
        'switch (a + "") { default: return 1; }',
        'return JSON.stringify({x: [a]});',
        'return String({toString: function () { return a; }});',
        'return "" + {valueOf: function () { return a; }};',
      ]) {
        const t = fastOnly(`${shared(24)} ${use}`);
        assert.ok(t.cpuMs < 500, `${use}: ${t.cpuMs} ms of CPU`);
      }
    });

    it('walks the argument of hasOwnProperty', () => {
      const t = fastOnly(`${shared(22)} var o = {}; return o.hasOwnProperty(a);`);
      assert.ok(t.cpuMs < 500, `${t.cpuMs} ms of CPU (answered ${String(t.end)})`);
    });
  });

  // walkBudget counts nodes, not the length of the strings in them: a join or JSON.stringify of
  // many references to one long string builds hundreds of MB in the host before the result is
  // charged. 5,000 references to a 100,000-char string: JSON.stringify takes 2.4 s CPU, 11 s
  // wall, +500 MB, and answers "stopped after 200 ms" where QuickJS answers "ran out of memory";
  // join/String take 0.4 s CPU, 1.8 s wall, +500 MB. Fixed (the suggestion was): have walkBudget add each string's
  // length (JSON: times 6) to its count against meter.memory.
  describe('text built by the host from long strings', () => {
    const many =
      'var s = "x".repeat(100000); var a = []; for (var i = 0; i < 2000; i++) a.push(s);';

    it('charges the text before JSON.stringify builds it', () => {
      const t = fastOnly(`${many} return JSON.stringify(a).length;`);
      assert.ok(t.cpuMs < 100, `${t.cpuMs} ms of CPU`);
      both(`${many} return JSON.stringify(a).length;`);
    });

    it('charges the text before join builds it', () => {
      const t = fastOnly(`${many} return a.join("").length;`);
      assert.ok(t.cpuMs < 100, `${t.cpuMs} ms of CPU`);
    });
  });

  // Method lookup before the arguments run, conversions run once, callbacks that change the
  // array they walk, and which arguments are copies: all as QuickJS, arguments untouched.
  describe('method lookup order and argument copies', () => {
    it('looks up, converts and copies as QuickJS does', () => {
      for (const body of [
        'var o = {f: function () { return 1; }}; return o.f((o.f = function () { return 2; }, 0));',
        'var a = [1]; return a.push((a.push = 5, 2));',
        'var o = {}; return o.hasOwnProperty((o.hasOwnProperty = function () { return "own"; }, "x"));',
        'var o = {toString: function () { return "t"; }}; return o.toString((delete o.toString, 1));',
        'var o = {}; o.toString = function () { return "mine"; }; return [o.toString(), "" + o];',
        'var a = [1, 2]; a.map = function () { return "own"; }; return a.map(function (x) { return x; });',
        'var a = [1, 2]; a.join = 5; return a.join();',
        'var a = [3, 1]; a.sort = null; return a.sort();',
        'var s = "abc"; return s[1]();',
        'var o = {a: {b: function () { return "ab"; }}}; return o.a.b();',
        'var o = null; return o?.f();',
        'var o = {}; return o.f?.();',
        'var o = {}; return o?.f.g;',
        'var n = 0; var o = {}; o[(n++, "k")] = n; return [o, n];',
        'var n = 0; var o = {k: 1}; o[(n++, "k")] += n; return [o, n];',
        'var o = {k: 1}; var k = {toString: function () { o.k = 10; return "k"; }}; o[k] += 1; return o;',
        'var o = {k: 1}; var calls = 0; var k = {toString: function () { calls++; return "k"; }}; o[k]++; o[k] += 1; o[k] ||= 5; return [o, calls];',
        'var a = [1, 2, 3]; var i = 0; a[i++] = a[i++]; return [a, i];',
        'var x = 1; x += (x = 5, 1); return x;',
        'var o = {v: 1}; o.v += (o.v = 5, 1); return o.v;',
        'return [1, 2, 3].indexOf(2, {valueOf: function () { return 1; }});',
        'var a = [1, 2, 3]; return a.slice({valueOf: function () { a.length = 1; return 0; }});',
        'var a = [1, 2, 3]; return a.map(function (x, i, arr) { if (i === 0) arr.push(9); return x; });',
        'var a = [1, 2, 3]; return a.filter(function (x, i, arr) { arr.pop(); return true; });',
        'var a = [1, 2, 3]; var r = 0; a.forEach(function (x, i, arr) { arr.length = 0; r++; }); return r;',
        'var a = [5, 1, 4]; a.reduce(function (s, x, i, arr) { arr[2] = 100; return s + x; }, 0); return a;',
        'var a = [1, 2, 3]; return a.join({toString: function () { a.push(4); return "-"; }});',
        'var a = [1, 2, 3]; return a.concat({toString: function () { return 1; }});',
        'var s = "abc"; return s.split({toString: function () { return "b"; }}, {valueOf: function () { return 1; }});',
        'return "abc".includes({toString: function () { return "b"; }});',
        'return "abc".startsWith("b", {valueOf: function () { return 1; }});',
        'return "aaa".replaceAll("a", function (m, i) { return i; });',
        'return "aaa".replace("a", function () { return arguments.length; });',
        'return "abc".replace("b", function (m, off, str) { return [m, off, str].join("|"); });',
        'return "a-b".replace("-", "$0$1$<x>");',
        'return msg.c.concat(msg.c).length + msg.c.length;',
        'var c = msg.c; c.sort(); return msg.c;',
        'return [msg.c.sort(), msg.c];',
        'var o = {x: 1}; var o2 = Object.assign(o, msg); o2.a = 99; return [o, msg.a];',
        'var e = Object.entries(msg.d); e[0][1] = 99; return msg.d.e;',
        'var k = Object.values(msg.d); k[2].i.push(5); return msg.d.h;',
        'var r = msg.c.slice(); r.push(1); return msg.c;',
        'return msg.c.reverse();',
        'var f = function () { return msg; }; var m = f(); m.a = 5; return msg.a;',
        'var m = [msg][0]; m.a = 5; return msg;',
        'return (function (m) { m.a = 5; return msg.a; })(msg);',
        'var x = msg.d; x.e = 8; return msg;',
        'var x = msg.d.h; return {h: x, y: (x.i = 1)};',
        'return {m: msg, w: msg.c.push(1)};',
        'return [msg, msg.a = 3];',
        'return {m: msg, f: function () { msg.a = 1; }};',
      ])
        both(body);
    });
  });

  // Exceptions of JSON.parse and the URI functions on edge inputs, caught or not, as QuickJS.
  describe('built-in exceptions on edge inputs', () => {
    it('raises and catches as QuickJS does', () => {
      for (const body of [
        'try { return JSON.parse("\\ufeff1"); } catch (e) { return "c"; }',
        'try { return JSON.parse("\\u00a01"); } catch (e) { return "c"; }',
        'try { return JSON.parse("\\u20281"); } catch (e) { return "c"; }',
        'try { return JSON.parse("1\\u000b"); } catch (e) { return "c"; }',
        'try { return JSON.parse("\\f1"); } catch (e) { return "c"; }',
        'try { return JSON.parse(\'"\\t"\'); } catch (e) { return "c"; }',
        'try { return JSON.parse(\'"\\u2028"\'); } catch (e) { return "c"; }',
        'try { return JSON.parse(\'"\\\\ud800"\'); } catch (e) { return "c"; }',
        'try { return JSON.parse(\'"\\\\x41"\'); } catch (e) { return "c"; }',
        'try { return JSON.parse(\'"\\\\u00"\'); } catch (e) { return "c"; }',
        'try { return JSON.parse("\'a\'"); } catch (e) { return "c"; }',
        'try { return JSON.parse("[1,]"); } catch (e) { return "c"; }',
        'try { return JSON.parse("{a:1}"); } catch (e) { return "c"; }',
        'try { return JSON.parse("+1"); } catch (e) { return "c"; }',
        'try { return JSON.parse(".5"); } catch (e) { return "c"; }',
        'try { return JSON.parse("1e"); } catch (e) { return "c"; }',
        'try { return JSON.parse("0x10"); } catch (e) { return "c"; }',
        'try { return JSON.parse("Infinity"); } catch (e) { return "c"; }',
        'try { return JSON.parse("NaN"); } catch (e) { return "c"; }',
        'try { return JSON.parse("-0.0e-0"); } catch (e) { return "c"; }',
        'try { return JSON.parse("1 2"); } catch (e) { return "c"; }',
        'try { return JSON.parse(""); } catch (e) { return "c"; }',
        'try { return JSON.parse(null); } catch (e) { return "c"; }',
        'try { return JSON.parse(undefined); } catch (e) { return "c"; }',
        'try { return JSON.parse([1]); } catch (e) { return "c"; }',
        'try { return JSON.parse({}); } catch (e) { return "c"; }',
        'try { return JSON.parse(function () {}); } catch (e) { return "c"; }',
        'try { return JSON.parse({toString: function () { return "[1]"; }}); } catch (e) { return "c"; }',
        'try { return JSON.parse({toString: function () { return Math.sin(1); }}); } catch (e) { return "c"; }',
        'try { return JSON.parse(\'{"a":1,}\'); } catch (e) { return "c"; }',
        'try { return JSON.parse(\'"\\u0000"\'); } catch (e) { return "c"; }',
        'try { return JSON.parse(\'"\\u007f"\'); } catch (e) { return "c"; }',
        'try { return JSON.parse("123456789012345678901234567890"); } catch (e) { return "c"; }',
        'try { return JSON.parse("[" + "1,".repeat(10) + "1]"); } catch (e) { return "c"; }',
        'try { return JSON.stringify(JSON.parse("[".repeat(1500) + "]".repeat(1500))).length; } catch (e) { return "c"; }',
        'try { return JSON.stringify(JSON.parse("[".repeat(5000) + "]".repeat(5000))).length; } catch (e) { return "c"; }',
        'try { return JSON.parse("[".repeat(5000)); } catch (e) { return "c"; }',
        'try { return JSON.parse("[".repeat(100000)); } catch (e) { return "c"; }',
        'try { return decodeURIComponent("%ED%A0%80"); } catch (e) { return "c"; }',
        'try { return decodeURIComponent("%F4%90%80%80"); } catch (e) { return "c"; }',
        'try { return decodeURIComponent("%F0%80%80%80"); } catch (e) { return "c"; }',
        'try { return decodeURIComponent("%C2"); } catch (e) { return "c"; }',
        'try { return decodeURIComponent("%c3%a9%E2%82%AC"); } catch (e) { return "c"; }',
        'try { return decodeURIComponent("%zz"); } catch (e) { return "c"; }',
        'try { return decodeURIComponent("%"); } catch (e) { return "c"; }',
        'try { return decodeURIComponent("%FF"); } catch (e) { return "c"; }',
        'try { return decodeURIComponent("%80"); } catch (e) { return "c"; }',
        'try { return decodeURIComponent("%EF%BF%BF"); } catch (e) { return "c"; }',
        'try { return decodeURI("%23%24%26%2B%2C%2F%3A%3B%3D%3F%40"); } catch (e) { return "c"; }',
        'try { return encodeURIComponent("\\udc00"); } catch (e) { return "c"; }',
        'try { return encodeURIComponent("\\ud800\\udc00"); } catch (e) { return "c"; }',
        'try { return encodeURI("\\ud800"); } catch (e) { return "c"; }',
        'try { return encodeURIComponent(); } catch (e) { return "c"; }',
        'try { return decodeURIComponent(); } catch (e) { return "c"; }',
        'try { return encodeURIComponent(null); } catch (e) { return "c"; }',
        'try { return encodeURIComponent([1, [2]]); } catch (e) { return "c"; }',
        'try { return encodeURIComponent(1e21); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({}); } catch (e) { return "c"; }',
        'try { return encodeURIComponent(msg); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function () { return "x".repeat(5000000); }}); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function () { throw 1; }}); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function () { return new Date(); }}); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function () { return [].x.y; }}); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function () { return undeclaredName; }}); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function f(n) { return f(1); }}); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function () { return {}; }}); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function () { return JSON.stringify({toJSON: 1}); }}); } catch (e) { return "c"; }',
        'try { var r = ["%", "a"].map(function (x) { return decodeURIComponent(x); }); return r; } catch (e) { return "c"; }',
        'var n = 0; try { ["a", "%", "b"].forEach(function (x) { decodeURIComponent(x); n++; }); } catch (e) { } return n;',
        'var a = []; try { a.push(decodeURIComponent("%41")); a.push(JSON.parse("[")); } catch (e) { a.push("c"); } return a;',
        'try { try { JSON.parse("x"); } catch (e) { return JSON.parse("y"); } } catch (e) { return "outer"; }',
        'for (var i = 0; i < 3; i++) { try { if (i == 1) continue; JSON.parse("x"); } catch (e) { break; } } return i;',
      ])
        both(body);
    });

    // Every one of these is caught by the interpreter (a Defer inside `raising`, see above)
    // and answered by QuickJS without an exception.
    it('does not catch Defers raised while converting a URI argument', () => {
      const failed: string[] = [];
      for (const body of [
        'try { return encodeURIComponent(Math.max); } catch (e) { return "c"; }',
        'try { return encodeURI(function () { return 1; }); } catch (e) { return "c"; }',
        'try { return decodeURI([function () {}]); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function () { return 2 ** 0.5; }}); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function () { return "\\u00e9".toUpperCase(); }}); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function () { return "a".localeCompare("b"); }}); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function () { return (0.1).toString(3); }}); } catch (e) { return "c"; }',
        'try { return encodeURIComponent({toString: function () { return [function(){}].join(); }}); } catch (e) { return "c"; }',
      ])
        try {
          both(body);
        } catch {
          failed.push(body);
        }
      assert.deepEqual(failed, []);
    });
  });

  // Script functions the host runs inside JSON.stringify (toJSON) return structures walkBudget
  // never saw: an exponentially shared array returned by toJSON is walked by the host unmetered
  // (25 levels: 4.4 s of CPU against 200 ms, then deferred, and QuickJS runs it again). The same
  // after the call: toJsonResult stringifies an array with an own toJSON (jsonNormal only defers
  // a plain object's), 26 levels: 10 s CPU, +400 MB, and "result is 402653181 characters" where
  // QuickJS says "ran out of memory". Fixed (the suggestion was): walkBudget (deep) and jsonNormal defer on any own
  // toJSON function, arrays included.
  describe('toJSON run by the host', () => {
    const big = 'var big = [1]; for (var i = 0; i < 22; i++) big = [big, big];';

    it('walks what toJSON returns inside JSON.stringify', () => {
      const t = fastOnly(
        `${big} return JSON.stringify([{toJSON: function () { return big; }}]).length;`,
      );
      assert.ok(t.cpuMs < 400, `${t.cpuMs} ms of CPU`);
    });

    it("walks what an array result's toJSON returns", () => {
      both(`${big} var a = []; a.toJSON = function () { return big; }; return a;`);
    });
  });

  // meter.stack counts the script's own frames only; the host's recursion between them (a
  // nested join calling an element's toString) is not counted, so nested joins across script
  // functions add up past QuickJS's ~118 levels. Fixed: a join whose elements have their own
  // toString or valueOf (script code the host would run inside the join) goes to QuickJS.
  describe('stack: script functions run by the host', () => {
    it('agrees on depth through callbacks and conversions', () => {
      for (const body of [
        'function f(n) { return n ? [n].map(function (x) { return f(x - 1); })[0] : 0; } return f(60);',
        'function f(n) { return n ? [n].map(function (x) { return f(x - 1); })[0] : 0; } return f(100);',
        'function f(n) { return n ? "" + {toString: function () { return f(n - 1); }} : "x"; } return f(55);',
        'function f(n) { return n ? "" + {toString: function () { return f(n - 1); }} : "x"; } return f(300);',
        'function g(n) { return n ? g(n - 1) : "y"; } var a = {toString: function () { return g(80); }}; for (var i = 0; i < 60; i++) a = [a]; return String(a);',
        'function mk(d, o) { var a = o; for (var i = 0; i < d; i++) a = {x: a}; return a; } function f(n) { if (n === 0) return 1; return JSON.stringify(mk(900, {toJSON: function () { return f(n - 1); }})).length; } return f(5);',
      ])
        both(body);
    });

    // QuickJS: "InternalError: stack overflow"; the interpreter answers "x".
    // QuickJS's frame holds the function's operand stack too (a deep expression pending around
    // the recursive call), which FRAME_BYTES + SLOT_BYTES * slots does not count: with 100
    // pending additions QuickJS overflows at 70 calls, the interpreter answers 7000. Fixed (the suggestion was): add
    // the function's maximum expression depth (computed at compile time) to its slots.
    it('counts the operand stack of a frame', () => {
      let e = 'f(n - 1, a)';
      for (let i = 0; i < 100; i++) e = `a + (${e})`;
      both(`function f(n, a) { if (n === 0) return 0; return ${e}; } return f(70, 1);`);
    });

    it('counts nested joins across script functions', () => {
      both(
        'function mk(d, o) { var a = o; for (var i = 0; i < d; i++) a = [a]; return a; } function f(n) { if (n === 0) return "x"; return String(mk(50, {toString: function () { return f(n - 1); }})); } return f(3);',
      );
    });
  });

  // Results converted after the call (toJsonResult) may run the script's own toJSON on an
  // array; uncopied arguments stay unchanged whatever closures run then.
  describe('results and argument copies', () => {
    it('gives the result QuickJS gives, arguments untouched', () => {
      for (const body of [
        'var a = [1]; a.toJSON = function () { return "x"; }; return [a];',
        'var a = [1]; a.toJSON = function () { var s = "x"; for (var i = 0; i < 22; i++) s = s + s; return s.length; }; return [a];',
        'var a = [1]; a.toJSON = function () { while (true) {} }; return a;',
        'var a = [1]; a.toJSON = function () { return Math.sin(1); }; return {m: msg, a: a};',
        'var res; var a = []; a.toJSON = function () { res.m.a = 99; return 1; }; res = {m: msg, a: a}; return res;',
        'var a = []; a.toJSON = function () { msg.a = 99; return 1; }; return {m: msg, a: a};',
        'try { JSON.parse("x"); } catch (e) { msg.a = 1; } return msg;',
        'var f = function () { msg.c.push(4); }; try { f(); JSON.parse("x"); } catch (e) { } return msg;',
        'var f = function () { msg.c.push(4); return Math.sin(1); }; try { f(); } catch (e) { } return msg;',
        'var o = {toString: function () { msg.a = 2; return "%"; }}; try { decodeURIComponent(o); } catch (e) { } return msg.a;',
        'return {m: msg, k: Object.keys(msg), c: msg.c.slice()};',
      ])
        both(body);
    });
  });
});
