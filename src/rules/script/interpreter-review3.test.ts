/**
 * Third adversarial review of the script interpreter (interpreter.ts) in front of QuickJS
 * (sandbox.ts), after the fixes of 62b0897, 5f65059 and 223549b: what the host does with script
 * values the earlier reviews did not reach (arguments of built-ins that never convert them, a
 * replace callback's answer, JSON.stringify's indentation, join's separator, a radix converted
 * twice), plus statement-level cases (for-in/for-of over values changed in the loop, switch, TDZ,
 * named function expressions, evaluation order of keys) and a seeded differential fuzzer of
 * statements (loops, closures, switch, try/catch) against QuickJS.
 *
 * Each case runs both ways (QuickJS alone, and the interpreter deferring where it must) and
 * asserts the same outcome, unchanged arguments and an untouched host, as the earlier files do.
 * The cases of the problems the review found (each failed before its fix; see its comment) are
 * kept as regression tests.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ScriptEngine } from './sandbox.js';

import {
  assertHostUnchanged,
  hostSnapshot,
  LIMITS,
  META,
  scriptChecks,
  TYPE,
} from './script-test-kit.js';

describe('script interpreter, third review', () => {
  let engine: ScriptEngine;
  const { both, allBoth, fastOnly } = scriptChecks(() => engine);
  let host: Map<string, unknown>;
  before(async () => {
    engine = await ScriptEngine.load(LIMITS);
    host = hostSnapshot();
  });
  after(() => assertHostUnchanged(host, 'the whole file'));

  // guardArgs walks every array argument of every built-in (arrayMethod, namespace wrappers,
  // hostFn), also where the host never converts it: `out.push(row)`, `a.indexOf(row)`,
  // `Array.isArray(row)`, `Number.isInteger(row)`, `Boolean(row)`. Each call walks the whole
  // argument (20,000 elements here), so a loop that QuickJS finishes in a few ms spends
  // O(calls x size) in the interpreter and is stopped by the time limit, which is final: the
  // outcome is "script stopped after 200 ms of CPU time" where QuickJS answers 20000. Suggested
  // fix: walk only the arguments the host converts to a primitive (join's separator, indexOf's
  // fromIndex, a string method's arguments, Math/Number/String/parseInt/isNaN/URI arguments),
  // not push/unshift/splice/fill/indexOf/includes elements nor Array.isArray/Number.is* arguments.
  describe('arguments the host never converts', () => {
    const big = 'var big = []; for (var i = 0; i < 20000; i++) big.push(i);';

    for (const [use, value] of [
      ['var out = []; for (var j = 0; j < 20000; j++) out.push(big); return out.length;', 20000],
      ['var n = 0; for (var j = 0; j < 20000; j++) if (Array.isArray(big)) n++; return n;', 20000],
      [
        'var out = [big]; var n = 0; for (var j = 0; j < 20000; j++) n += out.indexOf(big); return n;',
        0,
      ],
      [
        'var n = 0; for (var j = 0; j < 20000; j++) if (!Number.isInteger(big)) n++; return n;',
        20000,
      ],
    ] as const)
      it(`answers as QuickJS: ${use}`, () => {
        assert.deepEqual(both(`${big} ${use}`).outcome, { ok: true, value });
      });

    // What must stay walked (the host joins these): still within the limit.
    it('still walks what the host converts', () => {
      const shared = 'var a = [1]; for (var i = 0; i < 24; i++) a = [a, a];';
      for (const use of ['return [1].join(a);', 'return "x".indexOf(a);', 'return Math.max(a);'])
        assert.ok(fastOnly(`${shared} ${use}`).cpuMs < 500, use);
    });
  });

  // The callback of `replace`/`replaceAll` is a script function whose answer the wrapper turns
  // into text with String(...) and charges only after: an array answer is joined by the host
  // unwalked. 22 levels of a self-sharing array: 2.0 s of CPU and +107 MB; 24 levels: 6 s and
  // +305 MB (limit 200 ms), then Defer('memory') and QuickJS runs it again. Suggested fix:
  // guardText(meter, r) on the callback's answer before String(r) (or defer unless it is a
  // primitive).
  describe("a replace callback's answer", () => {
    it('is walked before the host joins it', () => {
      const t = fastOnly(
        'var a = [1]; for (var i = 0; i < 22; i++) a = [a, a]; return "x".replace("x", function () { return a; }).length;',
      );
      assert.ok(t.cpuMs < 500, `${t.cpuMs} ms of CPU (${String(t.end)})`);
    });

    it('answers as QuickJS on small answers', () => {
      allBoth([
        'return "abc".replace("b", function () { return [1, [2, 3]]; });',
        'return "aXbX".replaceAll("X", function (m, i) { return [i]; });',
        'return "ab".replace("a", function () { return {toString: function () { return "T"; }}; });',
        'return "ab".replace("a", function () { return null; });',
      ]);
    });
  });

  // walkBudget (deep) counts a value's own text, not JSON.stringify's indentation, which grows
  // with the depth of every line: 50 references to one 900-deep object, indented by 10, pass
  // the walk (about 1 MB) but make a ~400 MB text. The interpreter spends 1.9 s of CPU and
  // +407 MB before the time limit stops it (limit 200 ms), and answers "script stopped after
  // 200 ms of CPU time" where QuickJS answers "script ran out of memory"; with 100 references it
  // spends 2.7 s and V8 throws "Invalid string length". Suggested fix: pass the gap's width
  // (min(10, space)) to walkBudget and add depth x gap + 1 per member or element it visits.
  describe("JSON.stringify's indentation", () => {
    const deep =
      'var a = {}; for (var i = 0; i < 900; i++) a = {x: a}; var b = {}; for (var j = 0; j < 50; j++) b["k" + j] = a;';

    it('is counted before the host builds the text', () => {
      const t = fastOnly(`${deep} return JSON.stringify(b, null, 10).length;`);
      assert.ok(t.cpuMs < 400, `${t.cpuMs} ms of CPU (${String(t.end)})`);
    });

    it('answers as QuickJS', () => {
      both(`${deep} return JSON.stringify(b, null, 10).length;`);
    });

    it('answers as QuickJS on small values', () => {
      allBoth([
        'return JSON.stringify({a: [1, {b: 2}], c: "x"}, null, 4);',
        'return JSON.stringify([[[]]], null, "\\t-");',
        'return JSON.stringify({a: 1}, null, "12345678901234");',
        'return JSON.stringify({a: 1}, null, 20);',
        'return JSON.stringify({a: 1}, null, -1);',
        'return JSON.stringify({a: 1, b: [2]}, ["b"], 1);',
        'var a = {}; for (var i = 0; i < 900; i++) a = {x: a}; return JSON.stringify(a, null, 10).length;',
      ]);
    });
  });

  // join charges its text only after the host made it (chargeString), and guardText counts the
  // elements, not the separator repeated between them: 200,000 elements joined by a 2,000-char
  // separator build a 400 MB string (0.4 s of CPU, +411 MB) before Defer('memory'). Suggested
  // fix: convert the separator once, then charge (length - 1) x separator.length plus the walked
  // text before calling the host's join.
  describe("join's separator", () => {
    it('is charged before the host builds the text', () => {
      const t = fastOnly(
        'var a = []; for (var i = 0; i < 200000; i++) a.push(0); return a.join("x".repeat(2000)).length;',
      );
      assert.ok(t.cpuMs < 200, `${t.cpuMs} ms of CPU (${String(t.end)})`);
    });

    it('answers as QuickJS', () => {
      allBoth([
        'var a = []; for (var i = 0; i < 200000; i++) a.push(0); return a.join("x".repeat(2000)).length;',
        'return [1, 2, 3].join({toString: function () { return "--"; }});',
        'return [1, [2, [3]]].join(undefined);',
      ]);
    });
  });

  // numberMethod converts toString's radix itself (Number(args[0]) !== 10, to defer other bases
  // of non-integers) and the host converts it again: a valueOf runs twice, and one that answers
  // 10 and then 3 gets V8's base-3 text of 0.1 ("0.0022002200220022002200220022002201") where
  // QuickJS answers "0.1". Suggested fix: convert the radix once (`const r = args[0] === undefined
  // ? 10 : Math.trunc(Number(args[0]))`) and call the host with that number.
  describe('toString radix', () => {
    it('is converted once', () => {
      allBoth([
        'var n = 0; var r = {valueOf: function () { n++; return n === 1 ? 10 : 3; }}; return [(0.1).toString(r), n];',
        'var n = 0; var r = {valueOf: function () { n++; return 16; }}; return [(255).toString(r), n];',
      ]);
    });

    it('answers as QuickJS on plain radixes', () => {
      allBoth([
        'return [(255).toString(16), (-255).toString(36), (0).toString(2), (-0).toString(2)];',
        'return [(2 ** 53).toString(2), (0.5).toString(2), (1e21).toString(36)];',
        'return (123).toString(1);',
        'return (123).toString(37);',
        'return (12).toString("16");',
        'return (12).toString(undefined);',
      ]);
    });
  });

  describe('numbers and strings at their edges', () => {
    it('answers as QuickJS', () => {
      allBoth([
        'return [(-0).toFixed(0), (0.5).toFixed(0), (1.5).toFixed(0), (2.5).toFixed(0), (1.005).toFixed(2), (1e21).toFixed(2)];',
        'return [(-1e-7).toFixed(2), (-0.0000001).toFixed(0), (-0.5).toFixed(0), (1.45).toFixed(1), (8.345).toFixed(2), (1e20).toFixed(2), (0).toFixed(100)];',
        'return (123.456).toFixed(100);',
        'return (123.456).toFixed(101);',
        'return [(NaN).toFixed(101), (1).toExponential(101)];',
        'return [(123.456).toPrecision(100), (1e21).toPrecision(3), (0).toPrecision(1), (-0).toPrecision(3), (1e-7).toPrecision(3), (123456).toPrecision(2), (1.5e300).toPrecision(100)];',
        'return (123.456).toPrecision(0);',
        'return [(0).toExponential(), (-0).toExponential(2), (1e-7).toExponential(), (5e-324).toExponential(), (1.7976931348623157e308).toExponential(20), (NaN).toExponential(200), (Infinity).toFixed(200)];',
        'return [1e21 + "", 1e-7 + "", 123e-20 + "", String(-0), [-0].join(), JSON.stringify(-0), `${-0}`, String(5e-324), String(1.7976931348623157e308), String(0.1 + 0.2), String(1 / 3)];',
        'return [Number("2.2250738585072011e-308"), Number("9007199254740993"), Number("1.00000000000000011102230246251565404236316680908203125"), Number("0x1fffffffffffff1")];',
        'return [Number("\\u180e1"), Number("\\ufeff1"), parseInt("\\u20281"), "\\u180e".trim().length, parseFloat("\\u00a0 1.5"), Number("0b101"), Number(" 12 "), Number("1_000")];',
        'return [parseInt("9007199254740993"), parseInt("1e21"), parseInt(1e21), parseInt(0.0000001), parseInt("123", 37), parseInt("-0"), parseFloat("-0"), parseFloat("1e1000")];',
        'return [parseInt("11111111111111111111111111111111111111111111111111111111111111111111111", 2), parseInt("zzzzzzzzzzzzzzzzz", 36), parseInt("123456789012345678901234567890", 16)];',
        'return [1 << 31, 1 >>> 0, -1 >>> 0, 2 ** 31 | 0, 1e21 | 0, NaN | 0, ~~-1.5, 5.5 % 2, -5.5 % 2, 2 ** 53 + 1, 5 % -0, Math.round(-0.5), Math.round(2.5)];',
        'return [0.1 * 3, 1 / 3, 100 / 3, 1e308 * 10, -1e308 * 10, 5e-324 / 2, 2 ** -1, 0.1 + 0.7, 2 ** -1074];',
        'return ["\\u2028".trim().length, " \\t\\n\\v\\f\\r\\u00a0\\u1680\\u2000\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff".trim().length, "\\u200b".trim().length];',
        'return [String.fromCharCode(0xd800, 65), String.fromCharCode(65.9, -1, 65536 + 66), "\\ud800" < "\\uffff", "\\ud83d\\ude00" > "\\uffff"];',
        'return [JSON.stringify("\\ud800"), JSON.stringify("\\u2028\\u2029"), "\\ud83d\\ude00".split(""), "\\ud83d\\ude00".at(-1), "\\ud83d\\ude00".codePointAt(1)];',
        'var r = []; for (var c of "\\ud83d\\ude00x\\udc00") r.push(c); return r;',
        'return "a\\ud800b".toUpperCase();',
        'return ["abc".substring(NaN, 2), "abc".slice(-0), "abc".substr(1, -1), "abc".charAt(1.9), "abc".charCodeAt(-0.5), "abc".codePointAt(3), "abc".at(-4)];',
        'return ["a,b,,c".split(",", -1), "abc".split(""), "".split(""), "".split(","), "abc".split(undefined), "abc".split("", 2)];',
        'return ["aaa".lastIndexOf("a", -Infinity), "aaa".lastIndexOf("", 10), "aaa".indexOf("", 10), "abc".includes(""), "abc".startsWith("", 5)];',
        'return ["x".padStart(5, ""), "x".padEnd(5, "ab"), "abc".padStart(2), "x".padStart(3, undefined), "x".padStart(-1)];',
        'return ["abc".replace("", "-"), "abc".replaceAll("", "-"), "abc".replace("b", "$\'$`$&$$"), "aXbX".replaceAll("X", "$`")];',
      ]);
    });
  });

  describe('arrays changed by the callbacks and loops that walk them', () => {
    it('answers as QuickJS', () => {
      allBoth([
        'var a = [1, 2, 3]; var r = []; for (var k in a) { a.length = 1; r.push(k); } return r;',
        'var a = [1, 2, 3]; var r = []; for (var k in a) { a.length = 1; a.push(5, 6); r.push(k); } return r;',
        'var a = [1, 2, 3]; var r = []; for (var k in a) { a.push(9); r.push(k); } return r;',
        'var o = {x: 1, y: 2, z: 3}; var r = []; for (var k in o) { delete o.y; r.push(k); } return r;',
        'var o = {a: 1, b: 2}; var r = []; for (var k in o) { r.push(k); delete o.b; o.b = 3; o.c = 3; } return r;',
        'var a = [1, 2, 3]; var r = []; for (var v of a) { if (r.length < 5) a.push(v); r.push(v); } return r;',
        'var a = [1, 2, 3]; var r = []; for (var v of a) { a.shift(); r.push(v); } return [r, a];',
        'var o = {b: 1, a: 2, 1: 3, 0: 4, "-1": 5}; var r = []; for (var k in o) r.push(k); return r;',
        'var o = {}; o[2] = 1; o.x = 1; o[1] = 1; o["-1"] = 1; o["01"] = 1; o[4294967295] = 1; o[4294967294] = 1; return Object.keys(o);',
        'var a = [3, 2, 1]; var r = []; a.forEach(function (x, i, arr) { r.push(x); if (i === 0) arr.shift(); }); return r;',
        'var a = [1, 2, 3]; var r = a.map(function (x, i, arr) { arr.length = 1; return x * 2; }); return [r, r.length];',
        'var a = [1, 2, 3]; return a.findLast(function (x, i, arr) { arr.length = 1; return x === undefined; });',
        'var a = [1, 2, 3]; return a.reduceRight(function (s, x, i, arr) { arr.length = 0; return s + x; }, 0);',
        'var a = [1, , 3]; return [a.map(function (x) { return x; }), a.filter(function () { return true; }), a.findIndex(function (x) { return x === undefined; })];',
        'var e = [["a", 1]]; var k = {toString: function () { if (e.length < 5) e.push([k, e.length]); return "k" + e.length; }}; e.push([k, 0]); return Object.fromEntries(e);',
        'var a = [1, 2, 3]; a.length = 1.5; return a;',
        'var a = [1, 2, 3]; a.length = "1"; return a;',
        'var a = []; a["2"] = 1; a[0] = 0; return [a, a.length];',
      ]);
    });
  });

  describe('statements, scopes and evaluation order', () => {
    it('answers as QuickJS', () => {
      allBoth([
        'switch (1) { case 1: let x = 1; case 2: return typeof x; }',
        'switch (2) { case 1: let x = 1; case 2: return x; }',
        'try { switch (2) { case 1: let x = 1; case 2: return x; } } catch (e) { return "c"; }',
        'var r = []; switch (3) { case 1: r.push(1); default: r.push("d"); case 2: r.push(2); } return r;',
        'var r = []; switch (2) { default: r.push("d"); case 1: r.push(1); break; case 2: r.push(2); } return r;',
        'var r = 0; for (var i = 0; i < 5; i++) { switch (i) { case 1: continue; case 3: break; default: r += 10; } r += 1; } return r;',
        'var r = []; switch (-0) { case 0: r.push("0"); break; case NaN: r.push("nan"); } switch (NaN) { case NaN: r.push("n"); break; default: r.push("d"); } return r;',
        'var i = 0; do { i++; if (i < 3) continue; break; } while (true); return i;',
        'var r = []; for (var i = 0; i < 3; i++) { let j = i * 2; r.push(j); } return r;',
        'var r = []; for (let i = 0; i < 3; i++) { r.push(i); i++; } return r;',
        'var fs = []; for (let i = 0; i < 3; i++) { fs.push(function () { return i; }); i++; } return fs.map(function (f) { return f(); });',
        'var fs = []; for (const k in {a: 1, b: 2}) fs.push(function () { return k; }); return fs.map(function (f) { return f(); });',
        'var x = 1; { let x = 2; { var y = x; } } return [x, y];',
        'return typeof q; let q;',
        'let x = x; return 1;',
        'const c = 1; c ||= 2; return c;',
        'const c = 0; c ||= 2; return c;',
        'var f = function g() { return typeof g; }; return f();',
        'var f = function g() { g = 1; return typeof g; }; return f();',
        'var f = function g(g) { return typeof g; }; return f(1);',
        'var f = function g() { var g = 2; return g; }; return f();',
        'var f = function g(n) { return n ? g(n - 1) : typeof g; }; var g = 5; return [f(3), g];',
        'return (function f(n) { return n ? f(n - 1) + 1 : 0; })(100);',
        'function p(p) { return typeof p; } return p(1);',
        'return (function (p) { function p() {} return typeof p; })(1);',
        'var undefined = 5; return undefined;',
        'var s = "abc"; s.x = 1; return s.x;',
        'var n = 5; n.x = 1; return n;',
        'var log = []; var o = {}; o[{toString: function () { log.push("k"); return "k"; }}] = (log.push("v"), 1); return log;',
        'var log = []; var o = {[{toString: function () { log.push("k"); return "k"; }}]: (log.push("v"), 1)}; return [log, o];',
        'var log = []; var k = {toString: function () { log.push("k"); return "k"; }}; var r = (log.push("l"), k) in (log.push("r"), {}); return [log, r];',
        'var log = []; var o = {f: function () { return 1; }}; var r = o[{toString: function () { log.push("k"); return "f"; }}]((log.push("a"), 0)); return [log, r];',
        'var o = JSON.parse(\'{"__proto__": {"x": 1}, "y": 2}\'); var t = {}; for (var k in o) t[k] = 1; return [o.x, o.__proto__, Object.keys(o), Object.entries(o)];',
        'var o = Object.fromEntries([["__proto__", {x: 1}]]); return [o.x, Object.keys(o), o];',
        'var o = JSON.parse(\'{"__proto__": 1}\'); return Object.assign({}, o);',
        'var a = [1, 2]; return [Object.assign({}, a, "xy"), Object.assign([], {0: "a", 5: "b"})];',
        'return Object.fromEntries([[1, 2], [{toString: function () { return "t"; }}, 3], ["a"]]);',
        'return [{valueOf: Math.max} + 1, "" + {toString: JSON.stringify}, {toString: 1, valueOf: function () { return 2; }} * 2];',
        'try { return [] + {toString: 1}; } catch (e) { return "c"; }',
      ]);
    });
  });

  // Host work with no charge and no tick: Object.assign onto keys the target already has charges
  // nothing (writeMember charges new keys only) and ticks nothing, and a for-in makes the host
  // list every key before the first turn, which ticks once. The clock is looked at every 2,048
  // ticks, so each look is thousands of whole-object operations apart: 100,000 keys assigned
  // 10^6 times ran 23 s of CPU before the 200 ms limit stopped it; `for (k in big) break;` over
  // 100,000 keys, 5.8 s (200,000 array elements: 4.9 s, +276 MB). Suggested fix: in `assign`,
  // meter.tick(keys.length >> 5) per source; in a for-in, take the keys with Object.keys (what
  // for-in lists for a plain object or an array), charge and tick them, and walk that list,
  // skipping keys deleted meanwhile (hasOwn), as both engines do.
  describe('host work with no charge and no tick', () => {
    const big = 'var big = {}; for (var i = 0; i < 20000; i++) big["k" + i] = i;';

    it('Object.assign onto existing keys is stopped by the limit', () => {
      const t = fastOnly(
        `${big} var t = {}; for (var j = 0; j < 3000; j++) Object.assign(t, big); return 1;`,
      );
      assert.ok(t.cpuMs < 600, `${t.cpuMs} ms of CPU (${String(t.end)})`);
    });

    it('a for-in that breaks at once is stopped by the limit', () => {
      const t = fastOnly(
        `${big} var n = 0; for (var j = 0; j < 3000; j++) { for (var k in big) { n++; break; } } return n;`,
      );
      assert.ok(t.cpuMs < 600, `${t.cpuMs} ms of CPU (${String(t.end)})`);
    });
  });

  // The interpreter gets the caller's values (or copyJson's copies, which keep them as they
  // are), QuickJS their JSON text. A value JSON does not carry the same way is seen differently:
  // V8's JSON.parse gives -0 for a device's "-0.0" (a C printf of a small negative reading), so
  // `1 / msg.t < 0` is true in the interpreter and false in QuickJS; NaN or Infinity (null in
  // QuickJS), an undefined member (absent in QuickJS) or a Date (a string in QuickJS) in a
  // message built by the gateway's own code differ alike. Suggested fix: have the argument walk
  // (the argument walk, now jsonArgSize, which visits every member) report whether the value is JSON-normal
  // (as jsonNormal does for results) and copy such an argument through JSON (or defer the call).
  describe('arguments that are not JSON values', () => {
    it('answers as QuickJS for -0 parsed from a message', () => {
      both('return [1 / msg.t < 0, String(1 / msg.t)];', [JSON.parse('{"t": -0.0}'), META, TYPE]);
    });

    it('answers as QuickJS for NaN, undefined and Date members', () => {
      for (const m of [{ t: Number.NaN }, { t: 1, u: undefined }, { d: new Date(0) }])
        both('return [typeof msg.t, "u" in msg, typeof msg.d, Object.keys(msg)];', [m, META, TYPE]);
    });
  });

  // `Number.parseInt === parseInt` and `Number.parseFloat === parseFloat` are true in JavaScript
  // (one function object each); the interpreter makes separate wrappers (statics and globals),
  // so the script sees false. Suggested fix: give the Number namespace the globals' own
  // parseInt and parseFloat wrappers.
  describe('identity of built-ins', () => {
    it('answers as QuickJS', () => {
      both('return [Number.parseInt === parseInt, Number.parseFloat === parseFloat];');
    });

    it('answers as QuickJS where the functions differ', () => {
      allBoth([
        'return [Math.max === Math.max, Number.isNaN === isNaN, Number === Number, typeof Date.now];',
        'return [{valueOf: Math.max} + 1, "" + {toString: JSON.stringify}, "" + {toString: String}, "" + {toString: Array.isArray}];',
        'return [[1, 2].map(String.fromCharCode), ["1", "2", "3"].map(parseInt), [[1]].map(Object.values)];',
      ]);
    });
  });

  // Statements (loops, closures, switch, try/catch, for-in/for-of over values the body changes,
  // named function expressions) drawn from a seeded generator, run both ways. 9,000 programs in
  // 12 seeds (about 4,000 answered by the interpreter) agreed during the review; more with
  // SCRIPT_FUZZ3_RUNS=3000 SCRIPT_FUZZ3_SEED=11.
  it('agrees with QuickJS on random statements (differential fuzz, seeded)', () => {
    let seed = Number(process.env.SCRIPT_FUZZ3_SEED ?? 0x3c6ef372) | 0 || 1;
    const rnd = () => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) / 4294967296;
    };
    const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)] as T;
    const vars = ['x', 'y', 'z', 'o', 'a', 'k'];
    const lits = [
      '0',
      '-0',
      '1',
      '2',
      '-1',
      '0.5',
      '1e21',
      'NaN',
      'Infinity',
      '""',
      '"a"',
      '"10"',
      '" 1 "',
      'null',
      'undefined',
      'true',
      'false',
      '[]',
      '[1,2]',
      '[[1],[2,3]]',
      '{}',
      '{p: 1}',
      '"\\u2028"',
      '"\\ud800"',
      'msg.a',
      'msg.b',
      'msg.c',
      'msg.d',
      'msg.n',
      'msg.s',
      '{valueOf: function () { return 3; }}',
      '{toString: function () { return "t"; }}',
    ];
    const expr = (d = 0): string => {
      if (d > 2 || rnd() < 0.3) return rnd() < 0.5 ? pick(lits) : pick(vars);
      const r = rnd();
      if (r < 0.35)
        return `(${expr(d + 1)} ${pick(['+', '-', '*', '/', '%', '==', '===', '!=', '<', '>=', '&&', '||', '??', '|', '&', '<<', '>>>', '<='])} ${expr(d + 1)})`;
      if (r < 0.45) return `${pick(['!', '-', '+', 'typeof ', '~'])}(${expr(d + 1)})`;
      if (r < 0.55) return `(${expr(d + 1)} ? ${expr(d + 1)} : ${expr(d + 1)})`;
      if (r < 0.62)
        return `${pick(vars)}${pick(['[0]', '.p', '.length', '[1]', '["p"]', '?.p', '[k]'])}`;
      if (r < 0.7) return `String(${expr(d + 1)})`;
      if (r < 0.75) return `f(${expr(d + 1)})`;
      if (r < 0.8) return `[${expr(d + 1)}, ${expr(d + 1)}]`;
      if (r < 0.85) return `{q: ${expr(d + 1)}}`;
      if (r < 0.9) return `(${pick(vars)} = ${expr(d + 1)})`;
      if (r < 0.95)
        return `(${pick(['x', 'y', 'z'])}${pick(['++', '--', ' += 1', ' ||= 2', ' ??= 3'])})`;
      return `JSON.stringify(${expr(d + 1)})`;
    };
    const stmt = (d = 0): string => {
      const r = rnd();
      if (d > 2 || r < 0.2) return `${pick(vars)} = ${expr()};`;
      if (r < 0.3) return `if (${expr()}) { ${stmt(d + 1)} } else { ${stmt(d + 1)} }`;
      if (r < 0.4)
        return `for (var i${d} = 0; i${d} < 3; i${d}++) { ${stmt(d + 1)} ${rnd() < 0.3 ? pick(['break;', 'continue;']) : ''} ${stmt(d + 1)} }`;
      if (r < 0.47)
        return `for (${pick(['var', 'let', 'const'])} q${d} in ${pick(vars)}) { r.push(q${d}); ${stmt(d + 1)} }`;
      if (r < 0.54)
        return `for (${pick(['var', 'let', 'const'])} q${d} of ${pick(['a', '"ab"', 'msg.c', '[1,2,3]'])}) { r.push(q${d}); ${stmt(d + 1)} }`;
      if (r < 0.64)
        return `switch (${expr()}) { case ${pick(lits)}: ${stmt(d + 1)} case ${pick(lits)}: ${stmt(d + 1)} break; default: ${stmt(d + 1)} case ${pick(lits)}: ${stmt(d + 1)} }`;
      if (r < 0.72)
        return `try { ${stmt(d + 1)} ${rnd() < 0.5 ? `JSON.parse(${expr()});` : ''} ${stmt(d + 1)} } catch (e) { ${stmt(d + 1)} }`;
      if (r < 0.78) return `{ let v${d} = ${expr()}; ${stmt(d + 1)} r.push(v${d}); }`;
      if (r < 0.84) return `r.push(${expr()});`;
      if (r < 0.88) return `var w${d} = 0; while (w${d}++ < 3) { ${stmt(d + 1)} }`;
      if (r < 0.92)
        return pick([
          `g = function (p) { ${stmt(d + 1)} return p; }; r.push(g(${expr()}));`,
          `for (var m${d} in o) { delete o[m${d}]; o[m${d} + "x"] = 1; r.push(m${d}); }`,
          `for (var m${d} in a) { a.pop(); a.unshift(m${d}); r.push(m${d}); if (r.length > 20) break; }`,
          `for (var m${d} of a) { a.shift(); r.push(m${d}); }`,
          `var h${d} = function h(n) { return n > 0 ? h(n - 1) + ${expr()} : 0; }; r.push(h${d}(3));`,
        ]);
      if (r < 0.96) return `${pick(['a', 'o'])}[${expr()}] = ${expr()};`;
      return `if (${expr()}) return ${expr()};`;
    };
    const program = () => {
      let s =
        'var x = 1, y = "s", z = 0, o = {p: 2, q: [1]}, a = [1, "b", [2]], k = "p", r = [], g; function f(v) { return typeof v === "number" ? v * 2 : v; } ';
      const n = 2 + Math.floor(rnd() * 5);
      for (let i = 0; i < n; i++) s += `${stmt()} `;
      return `${s}return [x, y, z, o, a, k, r];`;
    };
    const runs = Number(process.env.SCRIPT_FUZZ3_RUNS ?? 300);
    const failed: string[] = [];
    let fast = 0;
    for (let t = 0; t < runs; t++) {
      const body = program();
      try {
        if (both(body).fast) fast++;
      } catch (err) {
        failed.push(`${body}\n    ${(err as Error).message.split('\n')[0]}`);
      }
    }
    assert.deepEqual(failed, []);
    assert.ok(fast > runs / 5, `only ${fast} of ${runs} answered by the interpreter`);
  });
});
