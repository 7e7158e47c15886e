/**
 * The rule engine's fast script path: a ThingsBoard script whose syntax is in a plain subset of
 * JavaScript is parsed once (acorn) and compiled to a tree of closures that evaluate it on the
 * message's own values, with no JSON text crossing a boundary. It is a sandbox by construction:
 * the script reaches only what this file hands it (its arguments, the objects it makes, and an
 * allowlist of built-ins); there is no `eval`, no `node:vm`, no host object, no prototype, no
 * constructor and no global it can name or write.
 *
 * It never guesses. Whatever it does not do exactly as JavaScript does (a construct outside the
 * subset, a property it does not hand out, an exception, a call that would allocate more than the
 * memory limit) is a `Defer`: the script (at compile time) or that one call (at run time) goes to
 * the QuickJS sandbox instead, which runs it as before. A call is pure: it sees copies of its
 * arguments and no state survives it (a script that writes an undeclared global is not compiled
 * here), so running a deferred call again in QuickJS gives the answer QuickJS alone would give.
 * Only the time limit is final here: a script that runs out of CPU time is stopped, as in QuickJS.
 *
 * Why: a script call through QuickJS costs its arguments' JSON parse and its result's JSON
 * stringify inside WebAssembly (7-9 µs for a telemetry message), about four times what the rest of
 * the rule chain costs (docs/benchmarks.md, docs/rules.md). ThingsBoard's own answer to the same
 * cost is TBEL, an interpreted language run in-process in its own sandbox.
 */
import {
  type ArrowFunctionExpression,
  type AssignmentExpression,
  type BlockStatement,
  type CallExpression,
  type Expression,
  type ForInStatement,
  type ForOfStatement,
  type ForStatement,
  type FunctionDeclaration,
  type FunctionExpression,
  type MemberExpression,
  type Node,
  type ObjectExpression,
  type Pattern,
  parse,
  type Statement,
  type SwitchStatement,
  type VariableDeclaration,
} from 'acorn';

/** Hands a script (compile time) or one call (run time) to QuickJS. */
export class Defer {
  constructor(readonly reason: string) {}
}

/**
 * An exception a built-in raised that QuickJS raises for the same input (JSON.parse of bad text,
 * a malformed URI): a script's `catch` may take it; uncaught, the call is QuickJS's to word.
 */
class Thrown {
  constructor(readonly error: unknown) {}
}

/**
 * Runs a built-in on text already converted (no script code runs inside): its SyntaxError or
 * URIError, which QuickJS raises alike, becomes catchable (Thrown); anything else passes as it is.
 */
function raising<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof SyntaxError || err instanceof URIError) throw new Thrown(err);
    throw err;
  }
}

/** The call ran out of its CPU time: final, not deferred. */
export class ScriptTimeout {
  constructor(readonly limitMs: number) {}
}

function defer(reason: string): never {
  throw new Defer(reason);
}

export interface FastLimits {
  /** CPU time of this thread one call may spend. */
  readonly timeoutMs: number;
  /** What one call may allocate, estimated; past it the call is deferred (QuickJS measures exactly). */
  readonly memoryBytes: number;
}

/** CPU time of this thread, in ms. */
function threadCpuMs(): number {
  const u = process.threadCpuUsage();
  return (u.user + u.system) / 1000;
}

/** Operations between two looks at the clock. */
const TICKS = 2048;
/**
 * Stack the script's own nested calls may use before a call is deferred, in QuickJS's measure:
 * a 256 KiB stack held 1,362 calls of a function without locals and 99 with 300 (about
 * 192 + 8 bytes a local); counted here as 384 + 12 bytes a slot against three quarters of the
 * sandbox's 64 KiB (QUICKJS_STACK_BYTES in sandbox.ts), so that the interpreter never answers a
 * call that overflows QuickJS's stack.
 */
const STACK_BYTES = 48 * 1024;
const FRAME_BYTES = 384;
const SLOT_BYTES = 12;
/** Nesting of a result before it is deferred (a cycle, or deeper than a message needs). */
const MAX_RESULT_DEPTH = 500;

/** Counts a call's work and allocations; one per compiled script, reset per call. */
class Meter {
  ticks = TICKS;
  memory = 0;
  /** QuickJS stack bytes the running nested calls would use (see STACK_BYTES). */
  stack = 0;
  #cpuStart = -1;

  constructor(readonly limits: FastLimits) {}

  start(): void {
    this.ticks = TICKS;
    this.memory = this.limits.memoryBytes;
    this.stack = 0;
    this.#cpuStart = -1;
  }

  /**
   * The clock starts at the first look, as QuickJS's interrupt handler: a call that never gets
   * there (2,048 operations) is too short to run away.
   */
  tick(n: number): void {
    this.ticks -= n;
    if (this.ticks >= 0) return;
    this.ticks = TICKS;
    const now = threadCpuMs();
    if (this.#cpuStart < 0) this.#cpuStart = now;
    else if (now - this.#cpuStart > this.limits.timeoutMs)
      throw new ScriptTimeout(this.limits.timeoutMs);
  }

  charge(bytes: number): void {
    this.memory -= bytes;
    if (this.memory < 0) defer('memory');
  }
}

// ---------------------------------------------------------------------------------------------
// Values the script may hold: primitives, plain objects and arrays (its own, its arguments' copies,
// built-ins' results), and functions whose prototype is SANDBOX_FN (its own closures and the
// allowlisted built-ins below). Nothing else is reachable.

/**
 * The prototype of every function the script can hold. A function turned into text (String(f),
 * `'' + f`) would show this file's code, not the script's, so it defers instead.
 */
const SANDBOX_FN: object = Object.create(Function.prototype, {
  toString: {
    value: () => defer('function as text'),
  },
  [Symbol.toPrimitive]: {
    value: () => defer('function as a primitive'),
  },
});

function sandboxFn<F extends (...args: never[]) => unknown>(fn: F): F {
  Object.setPrototypeOf(fn, SANDBOX_FN);
  return fn;
}

function isSandboxFn(v: unknown): v is (...args: unknown[]) => unknown {
  return typeof v === 'function' && Object.getPrototypeOf(v) === SANDBOX_FN;
}

/**
 * A built-in namespace (Math, JSON, Object, ...): a null-prototype table of what the script may
 * read or call on it. Namespaces are only ever the object of a member expression (checked at
 * compile time), so they never reach a value position.
 */
type Namespace = Readonly<Record<string, unknown>>;

/**
 * Namespace members that turn no argument into a primitive (so their arguments are not walked),
 * or that walk their own (JSON.stringify).
 */
const CONVERTS_NOTHING = new Set([
  'isArray',
  'isInteger',
  'isFinite',
  'isNaN',
  'isSafeInteger',
  'keys',
  'values',
  'entries',
  'assign',
  'stringify',
  'now',
]);

function namespace(members: Record<string, unknown>, meter: Meter): Namespace {
  const ns = Object.create(null) as Record<string, unknown>;
  for (const [k, v] of Object.entries(members)) {
    if (typeof v !== 'function' || isSandboxFn(v)) ns[k] = v;
    else {
      // A wrapper: the host's own function keeps its prototype; arguments it converts are
      // walked first (an array argument is joined).
      const f = v as (...a: unknown[]) => unknown;
      ns[k] = CONVERTS_NOTHING.has(k)
        ? sandboxFn((...a: unknown[]) => f(...a))
        : sandboxFn((...a: unknown[]) => {
            guardArgs(meter, a);
            return f(...a);
          });
    }
  }
  return Object.freeze(ns);
}

const isArray = Array.isArray;
const hasOwn = Object.hasOwn;

/** True for what the script may write to: its plain objects and arrays. */
function writable(o: unknown): o is Record<string, unknown> {
  if (o === null || typeof o !== 'object') return false;
  if (isArray(o)) return true;
  const proto = Object.getPrototypeOf(o);
  return proto === Object.prototype;
}

// ---------------------------------------------------------------------------------------------
// Compile-time scopes.

type Kind = 'var' | 'let' | 'const' | 'param' | 'function' | 'self';

interface Binding {
  readonly slot: number;
  readonly kind: Kind;
}

/** Marks a let/const slot before its declaration ran (the temporal dead zone). */
const TDZ: unique symbol = Symbol('tdz');
/** A logical assignment (`a ||= b`) that writes nothing. */
const KEEP: unique symbol = Symbol('keep');
/** A `?.` that met null or undefined: the rest of its chain is skipped. */
const SHORT: unique symbol = Symbol('short');
/** A method call that goes to the type's allowlisted built-in (`Compiler.callBuiltin`). */
const BUILTIN: unique symbol = Symbol('builtin');

class FnScope {
  slots = 0;
  readonly blocks: Map<string, Binding>[] = [new Map()];
  constructor(readonly parent: FnScope | undefined) {}

  declare(name: string, kind: Kind): Binding {
    const top = this.blocks[this.blocks.length - 1] as Map<string, Binding>;
    const existing = top.get(name);
    if (existing) {
      if (kind === 'var' || kind === 'function') {
        if (existing.kind === 'let' || existing.kind === 'const') defer('redeclared');
        return existing;
      }
      defer('redeclared');
    }
    const b: Binding = { slot: this.slots++, kind };
    top.set(name, b);
    return b;
  }
}

interface Resolved {
  readonly depth: number;
  readonly binding: Binding;
}

function resolve(scope: FnScope, name: string): Resolved | undefined {
  let depth = 0;
  for (let s: FnScope | undefined = scope; s; s = s.parent, depth++) {
    for (let i = s.blocks.length - 1; i >= 0; i--) {
      const b = (s.blocks[i] as Map<string, Binding>).get(name);
      if (b) return { depth, binding: b };
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Run-time frames and compiled forms.

interface Frame {
  readonly v: unknown[];
  readonly up: Frame | undefined;
  r: unknown;
}

type Ev = (f: Frame) => unknown;
/** A statement: 0 went on, 1 break, 2 continue, 3 return (value in `f.r`). */
type Ex = (f: Frame) => number;
const NEXT = 0;
const BREAK = 1;
const CONTINUE = 2;
const RETURN = 3;

function frameAt(f: Frame, depth: number): Frame {
  let x = f;
  for (let i = 0; i < depth; i++) x = x.up as Frame;
  return x;
}

/** How deep a function's own syntax nests (not into nested functions): a bound on its operand stack. */
function nesting(node: Node): number {
  let most = 0;
  for (const key of Object.keys(node)) {
    if (key === 'type' || key === 'start' || key === 'end') continue;
    const v = (node as unknown as Record<string, unknown>)[key];
    for (const c of isArray(v) ? v : [v]) {
      if (c === null || typeof c !== 'object' || typeof (c as Node).type !== 'string') continue;
      if (isFunctionNode(c as Node)) continue;
      most = Math.max(most, nesting(c as Node));
    }
  }
  return most + 1;
}

/** Walks a subtree, not into nested functions unless `intoFunctions`. */
function some(node: Node, pred: (n: Node) => boolean, intoFunctions: boolean): boolean {
  if (pred(node)) return true;
  for (const key of Object.keys(node)) {
    if (key === 'type' || key === 'start' || key === 'end' || key === 'loc') continue;
    const v = (node as unknown as Record<string, unknown>)[key];
    const children = isArray(v) ? v : [v];
    for (const c of children) {
      if (c === null || typeof c !== 'object' || typeof (c as Node).type !== 'string') continue;
      const n = c as Node;
      // A nested function is itself looked at, not what is inside it.
      if (!intoFunctions && isFunctionNode(n)) {
        if (pred(n)) return true;
        continue;
      }
      if (some(n, pred, intoFunctions)) return true;
    }
  }
  return false;
}

const isFunctionNode = (n: Node) =>
  n.type === 'FunctionExpression' ||
  n.type === 'FunctionDeclaration' ||
  n.type === 'ArrowFunctionExpression';

const isLexical = (n: Node) =>
  n.type === 'VariableDeclaration' && (n as VariableDeclaration).kind !== 'var';

/** Method names that change their object (a script without them, and without writes, reads only). */
const MUTATING_METHODS = new Set([
  'push',
  'pop',
  'shift',
  'unshift',
  'splice',
  'sort',
  'reverse',
  'fill',
  'copyWithin',
  'assign',
]);

/** True when the script may change some object (an argument or one of its own). */
function writes(root: Node): boolean {
  return some(
    root,
    (n) => {
      if (n.type === 'AssignmentExpression')
        return (n as AssignmentExpression).left.type === 'MemberExpression';
      if (n.type === 'UpdateExpression')
        return (n as unknown as { argument: Node }).argument.type === 'MemberExpression';
      if (n.type === 'UnaryExpression')
        return (n as unknown as { operator: string }).operator === 'delete';
      if (n.type === 'MemberExpression') {
        const name = memberName(n as MemberExpression);
        return name === undefined || MUTATING_METHODS.has(name);
      }
      return false;
    },
    true,
  );
}

/** A member expression's property name when it is known before running. */
function memberName(m: MemberExpression): string | undefined {
  if (!m.computed) return (m.property as { name: string }).name;
  return m.property.type === 'Literal'
    ? String((m.property as { value: unknown }).value)
    : undefined;
}

/** Where a value is only looked at (its result is a primitive, or a branch is chosen by it). */
function looksOnly(parent: Node, child: Node): boolean {
  switch (parent.type) {
    case 'BinaryExpression':
    case 'UnaryExpression':
    case 'TemplateLiteral':
      return (
        parent.type !== 'UnaryExpression' ||
        (parent as unknown as { operator: string }).operator !== 'delete'
      );
    case 'IfStatement':
    case 'ConditionalExpression':
    case 'WhileStatement':
    case 'DoWhileStatement':
    case 'ForStatement':
      return (parent as unknown as { test: Node }).test === child;
    case 'SwitchStatement':
      return (parent as unknown as { discriminant: Node }).discriminant === child;
    case 'SwitchCase':
      return (parent as unknown as { test: Node }).test === child;
    default:
      return false;
  }
}

/**
 * Which arguments the script gets as copies: those it may change. An argument needs none when
 * the script changes nothing at all, or when every use of its name is a look at one of its
 * members (`msg.temperature > 20`) or puts it into the value the script returns
 * (`return {msg: msg}`: nothing runs after that to change it through the result). A name also
 * declared inside the script (a parameter of a nested function, say) is always copied.
 */
function argsToCopy(fn: FunctionExpression, names: readonly string[]): boolean[] {
  if (!writes(fn.body)) return names.map(() => false);
  const declared = new Set<string>();
  some(
    fn.body,
    (n) => {
      if (n.type === 'VariableDeclarator') {
        const id = (n as unknown as { id: Node }).id;
        if (id.type === 'Identifier') declared.add((id as unknown as { name: string }).name);
        else return true;
      }
      if (isFunctionNode(n)) {
        const f = n as FunctionExpression;
        if (f.id) declared.add(f.id.name);
        for (const p of f.params)
          if (p.type === 'Identifier') declared.add(p.name);
          else return true;
      }
      return false;
    },
    true,
  );
  const unsafe = new Set<string>(names.filter((n) => declared.has(n)));
  const visit = (node: Node, ancestors: Node[]): void => {
    if (node.type === 'Identifier') {
      const name = (node as unknown as { name: string }).name;
      if (names.includes(name) && !unsafe.has(name) && !safeUse(node, ancestors)) unsafe.add(name);
      return;
    }
    for (const key of Object.keys(node)) {
      if (key === 'type' || key === 'start' || key === 'end') continue;
      const v = (node as unknown as Record<string, unknown>)[key];
      // Names that are not references: a non-computed member's property, an object key.
      if (
        key === 'property' &&
        node.type === 'MemberExpression' &&
        !(node as MemberExpression).computed
      )
        continue;
      if (
        key === 'key' &&
        node.type === 'Property' &&
        !(node as unknown as { computed: boolean }).computed
      )
        continue;
      ancestors.push(node);
      for (const c of isArray(v) ? v : [v])
        if (c !== null && typeof c === 'object' && typeof (c as Node).type === 'string')
          visit(c as Node, ancestors);
      ancestors.pop();
    }
  };
  visit(fn.body, []);
  return names.map((n) => unsafe.has(n));
}

/** A use of an argument's name that cannot change it (see argsToCopy); `ancestors` end at its parent. */
function safeUse(node: Node, ancestors: readonly Node[]): boolean {
  let child = node;
  let i = ancestors.length - 1;
  // Member reads with known names: `msg.a.b`, looked at or returned.
  let member = false;
  while (i >= 0) {
    const p = ancestors[i] as Node;
    if (p.type !== 'MemberExpression' || (p as MemberExpression).object !== child) break;
    if (memberName(p as MemberExpression) === undefined) return false;
    member = true;
    child = p;
    i--;
  }
  const parent = ancestors[i];
  if (!parent) return false;
  if (member && looksOnly(parent, child)) return true;
  // Into the returned value: object and array literals up to the top function's return.
  while (i >= 0) {
    const p = ancestors[i] as Node;
    if (p.type === 'ReturnStatement') {
      // Only the script's own return: no function between it and the body.
      return !ancestors.slice(0, i).some(isFunctionNode);
    }
    if (p.type === 'Property') {
      if ((p as unknown as { value: Node }).value !== child) return false;
    } else if (p.type !== 'ObjectExpression' && p.type !== 'ArrayExpression') return false;
    child = p;
    i--;
  }
  return false;
}

/** `o[key] = v` where the script may write, charged; Defer where it may not or must not. */
function writeMember(meter: Meter, o: unknown, key: string, v: unknown): void {
  if (!writable(o)) defer('write to a value that is not a script object');
  if (key === '__proto__') defer('write to __proto__');
  if (isArray(o)) {
    if (key === 'length') {
      if (typeof v !== 'number' || v > o.length) defer('array length grown');
    } else if (!hasOwn(o, key)) {
      const i = Number(key);
      if (Number.isInteger(i) && i >= 0) {
        // A sparse array's length would make later built-ins walk billions of holes.
        if (i > o.length + 1024) defer('sparse array');
        meter.charge(8 * (i - o.length + 1));
      } else meter.charge(16);
    }
  } else if (!hasOwn(o, key)) meter.charge(16);
  o[key] = v;
}

/**
 * Nesting a built-in may walk here; deeper is QuickJS's. Measured in QuickJS with its 64 KiB
 * stack: it joins arrays nested 118 deep (`String(a)`) and stringifies or parses JSON about
 * 4,000 deep before its "stack overflow"; the interpreter stays well below both.
 */
const MAX_TEXT_DEPTH = 64;
const MAX_JSON_DEPTH = 1000;

/**
 * What a built-in would walk before it gets it: nested arrays for `String(a)`, `a + ''`, `join`
 * and the like (`deep` false), every object for JSON. The host walks a shared part once per
 * reference and cannot be stopped, so the walk counts every visit, and the text each string
 * adds (six times its length for JSON, at its longest escaping), in bytes against the call's
 * memory budget, and hands cycles, deep nesting and script code the host would run inside the
 * walk (an own toJSON; an element's own toString or valueOf inside a join, whose stack QuickJS
 * would count) to QuickJS. Returns the bytes counted so far.
 */
function walkBudget(
  meter: Meter,
  v: unknown,
  deep: boolean,
  path: object[],
  bytes: number,
  gap = 0,
): number {
  if (typeof v === 'string') {
    const n = bytes + (deep ? 6 : 1) * v.length;
    if (n > meter.memory) defer('text too large');
    return n;
  }
  if (typeof v !== 'object' || v === null) return bytes;
  const array = isArray(v);
  if (!array) {
    const o = v as Record<string, unknown>;
    if (!deep) {
      if (typeof o.toString === 'function' && hasOwn(o, 'toString'))
        defer('own toString in a join');
      if (typeof o.valueOf === 'function' && hasOwn(o, 'valueOf')) defer('own valueOf in a join');
      return bytes;
    }
  }
  if (deep && hasOwn(v, 'toJSON') && typeof (v as { toJSON: unknown }).toJSON === 'function')
    defer('toJSON');
  if (path.includes(v)) defer('a cycle');
  if (path.length >= (deep ? MAX_JSON_DEPTH : MAX_TEXT_DEPTH)) defer('nested too deep');
  // JSON.stringify's indentation: each member's line starts with the gap once per level.
  const indent = gap > 0 ? (path.length + 1) * gap + 1 : 0;
  let n = bytes + 16 + (array ? (8 + indent) * v.length : 0);
  if (n > meter.memory) defer('structure too large');
  path.push(v);
  if (array) for (let i = 0; i < v.length; i++) n = walkBudget(meter, v[i], deep, path, n, gap);
  else
    for (const k in v) {
      const x = (v as Record<string, unknown>)[k];
      n = walkBudget(meter, x, deep, path, n + 6 * k.length + indent, gap);
    }
  path.pop();
  return n;
}

/** JSON.stringify's indentation width for its `space` argument (at most 10). */
function gapOf(space: unknown): number {
  if (typeof space === 'number') return Math.max(0, Math.min(10, Math.trunc(space) || 0));
  if (typeof space === 'string') return Math.min(10, space.length);
  return 0;
}

/** Before a host conversion of `v` (ToPrimitive of an array joins it, recursively). */
function guardText(meter: Meter, v: unknown): void {
  if (isArray(v)) meter.tick(walkBudget(meter, v, false, [], 0) >> 8);
}

/** Before a host conversion of every argument. */
function guardArgs(meter: Meter, args: readonly unknown[]): void {
  for (let i = 0; i < args.length; i++) if (isArray(args[i])) guardText(meter, args[i]);
}

/**
 * Array methods some of whose arguments are elements (stored or compared, never converted): the
 * arguments before this index are converted (walked); -1 for none. Others convert them all.
 */
const ELEMENT_ARGS: Readonly<Record<string, number>> = {
  push: -1,
  unshift: -1,
  concat: -1,
  indexOf: -1,
  lastIndexOf: -1,
  includes: -1,
  fill: -1,
  splice: 2,
};

// ---------------------------------------------------------------------------------------------
// The built-ins a script may use.

/** `fn` called by a built-in: only the script's own functions and the allowlisted ones. */
function callback(fn: unknown): (...args: unknown[]) => unknown {
  if (!isSandboxFn(fn)) defer('callback is not a script function');
  return fn;
}

const NON_ASCII = /[^ -~]/;

/** Creates the built-ins of one compiled script; they charge its meter. */
function builtins(meter: Meter) {
  const ns = (members: Record<string, unknown>) => namespace(members, meter);
  /** A global function: its arguments walked first, as the namespaces' (see namespace). */
  const hostFn = (f: (...a: unknown[]) => unknown) =>
    sandboxFn((...a: unknown[]) => {
      guardArgs(meter, a);
      return f(...a);
    });
  const chargeString = (s: unknown) => {
    if (typeof s === 'string' && s.length > 256) meter.charge(s.length);
    return s;
  };
  /** A built-in's result, charged: strings by length, arrays by elements. */
  const charge = (r: unknown) => (isArray(r) ? chargeArray(r) : chargeString(r));
  const chargeArray = (a: unknown) => {
    if (isArray(a)) {
      meter.charge(16 + 8 * a.length);
      meter.tick(a.length >> 5);
    }
    return a;
  };
  const sp = String.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
  const ap = Array.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;

  const stringMethod = (name: string, s: string, args: unknown[]): unknown => {
    guardArgs(meter, args);
    // Every string method here walks the string at most a few times.
    meter.tick(s.length >> 6);
    switch (name) {
      case 'charAt':
      case 'charCodeAt':
      case 'codePointAt':
      case 'at':
      case 'indexOf':
      case 'lastIndexOf':
      case 'includes':
      case 'startsWith':
      case 'endsWith':
      case 'slice':
      case 'substring':
      case 'substr':
      case 'trim':
      case 'trimStart':
      case 'trimEnd':
      case 'toString':
      case 'valueOf':
      case 'split':
        return charge((sp[name] as (...a: unknown[]) => unknown).apply(s, args));
      case 'concat': {
        let n = s.length;
        for (const x of args) n += typeof x === 'string' ? x.length : 24;
        if (n > 256) meter.charge(n);
        return (sp.concat as (...a: unknown[]) => unknown).apply(s, args);
      }
      case 'toUpperCase':
      case 'toLowerCase':
        // Case tables of other scripts follow each engine's Unicode version.
        if (NON_ASCII.test(s)) defer('case of non-ASCII text');
        return charge((sp[name] as (...a: unknown[]) => unknown).apply(s, args));
      case 'replace':
      case 'replaceAll': {
        // The pattern and a text replacement are converted once, here; the result is charged
        // at its largest before the host builds it. A function replacement is a script
        // function, whose every answer is charged.
        const pattern = String(args[0]);
        const fn = args[1];
        if (typeof fn === 'function') {
          const f = callback(fn);
          const each = (...m: unknown[]) => {
            const answer = f(...m);
            guardText(meter, answer);
            const r = String(answer);
            meter.charge(r.length);
            return r;
          };
          return charge(
            name === 'replace' ? s.replace(pattern, each) : s.replaceAll(pattern, each),
          );
        }
        const replacement = String(fn);
        const matches =
          name === 'replace' ? 1 : Math.floor(s.length / Math.max(1, pattern.length)) + 1;
        // `$&` puts the match in again, and `` $` `` / `$'` the text before or after it.
        const each = replacement.includes('$')
          ? replacement.length *
            Math.max(
              1,
              pattern.length,
              replacement.includes('$`') || replacement.includes("$'") ? s.length : 0,
            )
          : replacement.length;
        const most = s.length + matches * each;
        if (most > 256) meter.charge(most);
        return name === 'replace'
          ? s.replace(pattern, replacement)
          : s.replaceAll(pattern, replacement);
      }
      case 'repeat':
      case 'padStart':
      case 'padEnd': {
        // Each argument is converted once (a valueOf answering twice cannot dodge the charge).
        const n = Math.trunc(Number(args[0]));
        const fill = name !== 'repeat' && args[1] !== undefined ? String(args[1]) : undefined;
        const size = name === 'repeat' ? n * s.length : n;
        if (size > 256) meter.charge(size);
        return name === 'repeat'
          ? s.repeat(n)
          : name === 'padStart'
            ? s.padStart(n, fill)
            : s.padEnd(n, fill);
      }
      default:
        // match, search, matchAll (regular expressions), localeCompare and normalize (each
        // engine's own), and the rest.
        return defer(`string method ${name}`);
    }
  };

  const numberMethod = (name: string, n: number, args: unknown[]): unknown => {
    guardArgs(meter, args);
    // The radix is converted once (a valueOf answering twice would differ).
    if (name === 'toString' && args[0] !== undefined) args = [Number(args[0])];
    // In another base only a safe integer has one exact text; the rest is each engine's own.
    if (
      name === 'toString' &&
      args[0] !== undefined &&
      Number(args[0]) !== 10 &&
      !Number.isSafeInteger(n)
    )
      defer('another base');
    switch (name) {
      case 'toFixed':
      case 'toPrecision':
      case 'toExponential':
      case 'toString':
      case 'valueOf':
        return (Number.prototype as unknown as Record<string, (...a: unknown[]) => unknown>)[
          name
        ]?.apply(n, args);
      default:
        return defer(`number method ${name}`);
    }
  };

  const arrayMethod = (name: string, a: unknown[], args: unknown[]): unknown => {
    // Work in proportion to the array, but for the methods at its end.
    if (name !== 'push' && name !== 'pop' && name !== 'at') meter.tick(a.length >> 5);
    // Only the arguments the method turns into numbers or text are walked, not the elements it
    // stores or compares (push, indexOf's first, splice's items).
    const from = ELEMENT_ARGS[name];
    if (from === undefined) guardArgs(meter, args);
    else if (from >= 0) for (let i = 0; i < args.length && i < from; i++) guardText(meter, args[i]);
    // The index arguments after an element (indexOf's fromIndex, fill's start and end).
    if (name === 'indexOf' || name === 'lastIndexOf' || name === 'includes' || name === 'fill')
      for (let i = 1; i < args.length; i++) guardText(meter, args[i]);
    // These turn the elements into text (nested arrays joined) or walk nested arrays.
    if (name === 'join' || name === 'toString' || name === 'flat' || name === 'sort')
      guardText(meter, a);
    switch (name) {
      case 'push':
      case 'unshift':
        meter.charge(8 * args.length);
        return (ap[name] as (...x: unknown[]) => unknown).apply(a, args);
      case 'pop':
      case 'at':
        return (ap[name] as (...x: unknown[]) => unknown).apply(a, args);
      case 'shift':
      case 'reverse':
      case 'indexOf':
      case 'lastIndexOf':
      case 'includes':
        return (ap[name] as (...x: unknown[]) => unknown).apply(a, args);
      case 'join':
      case 'toString': {
        // The separator converted once, and its copies charged before the host joins.
        // JavaScript takes the length before it converts the separator.
        const len = a.length;
        const sep = name === 'join' && args[0] !== undefined ? String(args[0]) : ',';
        if (a.length !== len) defer('the separator changed the array');
        meter.charge(Math.max(0, a.length - 1) * sep.length);
        return chargeString(a.join(sep));
      }
      case 'concat': {
        // Charged before the host builds it.
        let n = a.length;
        for (const x of args) n += isArray(x) ? x.length : 1;
        meter.charge(16 + 8 * n);
        return ap.concat?.apply(a, args);
      }
      case 'slice':
      case 'splice':
      case 'flat':
        if (name === 'splice') meter.charge(8 * args.length);
        return chargeArray((ap[name] as (...x: unknown[]) => unknown).apply(a, args));
      case 'fill':
        return a.fill(args[0], args[1] as number | undefined, args[2] as number | undefined);
      case 'sort':
        // Engines compare different pairs: with a comparator (or an element's own toString)
        // that is observable, so only primitives without one sort here.
        if (args[0] !== undefined) defer('sort with a comparator');
        for (const x of a) if (typeof x === 'object' && x !== null) defer('sort of objects');
        return a.sort();
      case 'map':
      case 'filter':
        return chargeArray(
          (ap[name] as (...x: unknown[]) => unknown).call(a, callback(args[0]), undefined),
        );
      case 'forEach':
      case 'some':
      case 'every':
      case 'find':
      case 'findIndex':
      case 'findLast':
      case 'findLastIndex':
        return (ap[name] as (...x: unknown[]) => unknown).call(a, callback(args[0]), undefined);
      case 'reduce':
      case 'reduceRight':
        return (ap[name] as (...x: unknown[]) => unknown).apply(a, [
          callback(args[0]),
          ...args.slice(1),
        ]);
      default:
        return defer(`array method ${name}`);
    }
  };

  const objectMethod = (name: string, o: object, args: unknown[]): unknown => {
    guardArgs(meter, args);
    switch (name) {
      case 'hasOwnProperty':
        return hasOwn(o, args[0] as PropertyKey);
      case 'toString':
        return '[object Object]';
      case 'valueOf':
        return o;
      default:
        return defer(`object method ${name}`);
    }
  };

  const assign = (target: unknown, ...sources: unknown[]) => {
    if (!writable(target)) defer('Object.assign target');
    for (const src of sources) {
      if (src === null || src === undefined) continue;
      if (typeof src !== 'object' || !writable(src)) defer('Object.assign source');
      const keys = Object.keys(src);
      meter.tick(keys.length >> 5);
      for (const k of keys) {
        if (isArray(target) && k === 'length') defer('Object.assign length');
        writeMember(meter, target, k, (src as Record<string, unknown>)[k]);
      }
    }
    return target;
  };

  const plain = (o: unknown, what: string): object => {
    if (o === null || typeof o !== 'object' || !writable(o)) defer(what);
    return o;
  };

  const globals: Record<string, Namespace | ((...a: never[]) => unknown) | number | undefined> = {
    undefined: undefined,
    NaN: Number.NaN,
    Infinity: Number.POSITIVE_INFINITY,
    // Only what IEEE 754 makes exact: the rest (sin, log, exp, ...) rounds its last digit as
    // each engine's maths library does, so QuickJS answers those.
    Math: ns({
      ...Object.fromEntries(
        EXACT_MATH.map((k) => [k, (Math as unknown as Record<string, unknown>)[k]]),
      ),
      pow: (a: unknown, b: unknown) => power(a, b),
    }),
    JSON: ns({
      parse: (text: unknown, reviver?: unknown) => {
        if (reviver !== undefined) defer('JSON.parse reviver');
        // Any value is parsed as its text (`JSON.parse(undefined)` is a SyntaxError).
        const t = typeof text === 'string' ? text : String(text);
        meter.charge(2 * t.length);
        meter.tick(t.length >> 6);
        const value: unknown = raising(() => JSON.parse(t));
        // V8 parses any depth; QuickJS overflows its stack past about 4,000.
        if (typeof value === 'object' && value !== null) walkBudget(meter, value, true, [], 0);
        return value;
      },
      stringify: (value: unknown, replacer?: unknown, space?: unknown) => {
        // A replacer can make the text deeper than the value: QuickJS's stack decides.
        if (typeof replacer === 'function') defer('JSON.stringify with a replacer function');
        meter.tick(walkBudget(meter, value, true, [], 0, gapOf(space)) >> 8);
        const r = JSON.stringify(
          value,
          replacer as (string | number)[] | undefined,
          space as string | number | undefined,
        );
        meter.tick((r?.length ?? 0) >> 6);
        return chargeString(r);
      },
    }),
    Object: ns({
      keys: (o: unknown) => chargeArray(Object.keys(plain(o, 'Object.keys'))),
      values: (o: unknown) => chargeArray(Object.values(plain(o, 'Object.values'))),
      entries: (o: unknown) => {
        const e = Object.entries(plain(o, 'Object.entries'));
        meter.charge(48 * e.length);
        return chargeArray(e);
      },
      assign,
      fromEntries: (e: unknown) => {
        if (!isArray(e)) defer('Object.fromEntries');
        meter.charge(16 * e.length);
        return Object.fromEntries(e as [string, unknown][]);
      },
    }),
    Array: ns({ isArray: (v: unknown) => isArray(v) }),
    Number: hostFn((...a: unknown[]) => (a.length === 0 ? 0 : Number(a[0]))),
    String: hostFn((...a: unknown[]) => chargeString(a.length === 0 ? '' : String(a[0]))),
    Boolean: hostFn((v: unknown) => Boolean(v)),
    parseInt: hostFn((s: unknown, radix?: unknown) => parseInt(s as string, radix as number)),
    parseFloat: hostFn((s: unknown) => parseFloat(s as string)),
    isNaN: hostFn((v: unknown) => Number.isNaN(Number(v))),
    isFinite: hostFn((v: unknown) => Number.isFinite(Number(v))),
    // The argument is turned into text first, outside `raising`: a toString it runs, and the
    // time limit or a Defer inside it, are never catchable.
    encodeURIComponent: hostFn((s: unknown) => {
      const t = String(s);
      return chargeString(raising(() => encodeURIComponent(t)));
    }),
    decodeURIComponent: hostFn((s: unknown) => {
      const t = String(s);
      return chargeString(raising(() => decodeURIComponent(t)));
    }),
    encodeURI: hostFn((s: unknown) => {
      const t = String(s);
      return chargeString(raising(() => encodeURI(t)));
    }),
    decodeURI: hostFn((s: unknown) => {
      const t = String(s);
      return chargeString(raising(() => decodeURI(t)));
    }),
    Date: ns({ now: () => Date.now() }),
  };
  /** What a global function offers as members (`Number.isInteger`). */
  const statics = new Map<unknown, Namespace>([
    [
      globals.Number,
      ns({
        isInteger: Number.isInteger,
        isFinite: Number.isFinite,
        isNaN: Number.isNaN,
        isSafeInteger: Number.isSafeInteger,
        // The globals themselves, as in JavaScript (Number.parseInt === parseInt).
        parseFloat: globals.parseFloat,
        parseInt: globals.parseInt,
        MAX_SAFE_INTEGER: Number.MAX_SAFE_INTEGER,
        MIN_SAFE_INTEGER: Number.MIN_SAFE_INTEGER,
        MAX_VALUE: Number.MAX_VALUE,
        MIN_VALUE: Number.MIN_VALUE,
        EPSILON: Number.EPSILON,
        POSITIVE_INFINITY: Number.POSITIVE_INFINITY,
        NEGATIVE_INFINITY: Number.NEGATIVE_INFINITY,
        NaN: Number.NaN,
      }),
    ],
    [
      globals.String,
      ns({
        fromCharCode: (...codes: unknown[]) => {
          meter.charge(codes.length);
          return String.fromCharCode(...(codes as number[]));
        },
      }),
    ],
  ]);
  const namespaces = new Set<unknown>(
    Object.values(globals).filter((v) => typeof v === 'object' && v !== null),
  );

  return {
    globals,
    statics,
    namespaces,
    stringMethod,
    numberMethod,
    arrayMethod,
    objectMethod,
    chargeString,
  };
}

type Builtins = ReturnType<typeof builtins>;

/** Math's members whose answers every engine gives alike (exact by IEEE 754, or constants). */
const EXACT_MATH = [
  'abs',
  'ceil',
  'floor',
  'round',
  'trunc',
  'sign',
  'max',
  'min',
  'sqrt',
  'fround',
  'clz32',
  'imul',
  'random',
  'E',
  'LN10',
  'LN2',
  'LOG10E',
  'LOG2E',
  'PI',
  'SQRT1_2',
  'SQRT2',
];

/**
 * `a ** b` where every engine answers alike: a whole power that is a safe integer (computed
 * exactly). V8 and QuickJS round other powers differently in the last digit (10 ** 2.5).
 */
function power(a: unknown, b: unknown): number {
  const x = +(a as number);
  const y = +(b as number);
  if (y === 0) return 1;
  const r = x ** y;
  if (Number.isInteger(x) && Number.isInteger(y) && y > 0 && Number.isSafeInteger(r)) return r;
  if (Number.isNaN(r)) return r;
  return defer('power rounded by the engine');
}

/** Globals that are functions in JavaScript but namespaces here: they may not be used as values. */
const NAMESPACE_NAMES = new Set(['Math', 'JSON', 'Object', 'Array', 'Date']);

type Num = number;
/** The operators of compound assignment (`x += y`), as functions. */
const BINOPS: Readonly<Record<string, (a: unknown, b: unknown) => unknown>> = {
  '+': (a, b) => (a as Num) + (b as Num),
  '-': (a, b) => (a as Num) - (b as Num),
  '*': (a, b) => (a as Num) * (b as Num),
  '/': (a, b) => (a as Num) / (b as Num),
  '%': (a, b) => (a as Num) % (b as Num),
  '**': (a, b) => power(a, b),
  '<<': (a, b) => (a as Num) << (b as Num),
  '>>': (a, b) => (a as Num) >> (b as Num),
  '>>>': (a, b) => (a as Num) >>> (b as Num),
  '&': (a, b) => (a as Num) & (b as Num),
  '|': (a, b) => (a as Num) | (b as Num),
  '^': (a, b) => (a as Num) ^ (b as Num),
};

// ---------------------------------------------------------------------------------------------
// The compiler.

class Compiler {
  constructor(
    private readonly meter: Meter,
    private readonly b: Builtins,
  ) {}

  // --- property access ---

  /** `o[k]` read, or Defer where the answer would be a prototype's or a host's. */
  get(o: unknown, k: unknown): unknown {
    // An array's element by index: no prototype holds indices, so a hole reads undefined.
    if (typeof k === 'number' && isArray(o) && k >= 0 && Number.isInteger(k)) return o[k];
    if (typeof o === 'object' && o !== null) {
      const key = typeof k === 'string' ? k : this.key(k);
      if (isArray(o)) {
        if (key === 'length') return o.length;
        if (hasOwn(o, key)) return (o as unknown as Record<string, unknown>)[key];
        if (key in o) defer(`array member ${key}`);
        return undefined;
      }
      if (this.b.namespaces.has(o)) {
        if (hasOwn(o, key)) return (o as Namespace)[key];
        return defer(`built-in member ${key}`);
      }
      if (hasOwn(o, key)) return (o as Record<string, unknown>)[key];
      if (key in o) defer(`inherited member ${key}`);
      return undefined;
    }
    if (typeof o === 'string') {
      const key = typeof k === 'string' ? k : this.key(k);
      if (key === 'length') return o.length;
      const i = typeof k === 'number' ? k : Number(key);
      if (Number.isInteger(i) && i >= 0 && String(i) === key) return o[i];
      if (key in String.prototype) defer(`string member ${key}`);
      return undefined;
    }
    if (o === null || o === undefined) defer('member of null or undefined');
    if (typeof o === 'function') {
      const ns = this.b.statics.get(o);
      const key = this.key(k);
      if (ns && hasOwn(ns, key)) return ns[key];
      defer(`function member ${key}`);
    }
    // number, boolean: only inherited members, which are methods.
    const key = this.key(k);
    if (key in Object(o)) defer(`primitive member ${key}`);
    return undefined;
  }

  /** A value about to be turned into a primitive by the host (see guardText). */
  prim(v: unknown): unknown {
    if (typeof v === 'object') guardText(this.meter, v);
    return v;
  }

  /** ToPropertyKey (no symbols exist here). */
  key(k: unknown): string {
    if (typeof k === 'string') return k;
    if (typeof k === 'object') guardText(this.meter, k);
    return String(k);
  }

  set(o: unknown, k: unknown, v: unknown): void {
    writeMember(this.meter, o, this.key(k), v);
  }

  /**
   * What `o[key](...)` calls, looked up before its arguments run (as JavaScript does): an own
   * member's value, or BUILTIN (the type's allowlisted method, `callBuiltin`).
   */
  method(o: unknown, key: string): unknown {
    if (typeof o === 'object' && o !== null) {
      if (this.b.namespaces.has(o)) {
        if (!hasOwn(o, key)) defer(`built-in member ${key}`);
        return (o as Namespace)[key];
      }
      if (hasOwn(o, key)) return (o as Record<string, unknown>)[key];
      return BUILTIN;
    }
    if (typeof o === 'string') {
      const c = key.charCodeAt(0);
      return key === 'length' || (c >= 48 && c <= 57) ? this.get(o, key) : BUILTIN;
    }
    if (typeof o === 'number' || typeof o === 'boolean') return BUILTIN;
    if (typeof o === 'function') {
      const ns = this.b.statics.get(o);
      if (ns && hasOwn(ns, key)) return ns[key];
    }
    return defer(`method ${key}`);
  }

  callBuiltin(o: unknown, key: string, args: unknown[]): unknown {
    if (typeof o === 'string') return this.b.stringMethod(key, o, args);
    if (isArray(o)) return this.b.arrayMethod(key, o, args);
    if (typeof o === 'number') return this.b.numberMethod(key, o, args);
    if (typeof o === 'boolean') {
      if (key === 'toString') return String(o);
      if (key === 'valueOf') return o;
      return defer(`boolean member ${key}`);
    }
    return this.b.objectMethod(key, o as object, args);
  }

  call(fn: unknown, args: unknown[]): unknown {
    if (!isSandboxFn(fn)) defer('call of something that is not a script function');
    return fn(...args);
  }

  // --- expressions ---

  expr(node: Expression | Pattern, scope: FnScope): Ev {
    switch (node.type) {
      case 'Literal': {
        if ('regex' in node && node.regex) defer('regular expression');
        if ('bigint' in node && node.bigint) defer('bigint');
        const v = node.value;
        return () => v;
      }
      case 'Identifier':
        return this.identifier(node.name, scope, false);
      case 'TemplateLiteral': {
        const quasis = node.quasis.map((q) => {
          if (q.value.cooked === null || q.value.cooked === undefined) defer('template escape');
          return q.value.cooked;
        });
        const exprs = node.expressions.map((e) => this.expr(e, scope));
        const charge = this.b.chargeString;
        return (f) => {
          let s = quasis[0] as string;
          for (let i = 0; i < exprs.length; i++) {
            const v = (exprs[i] as Ev)(f);
            s += `${typeof v === 'string' ? v : String(this.prim(v))}${quasis[i + 1]}`;
          }
          return charge(s);
        };
      }
      case 'ArrayExpression': {
        const items = node.elements.map((e) => {
          if (e === null) return undefined;
          if (e.type === 'SpreadElement') defer('spread');
          return this.expr(e, scope);
        });
        const n = items.length;
        const meter = this.meter;
        if (items.every((i) => i !== undefined)) {
          const evs = items as Ev[];
          return (f) => {
            meter.charge(16 + 8 * n);
            const a = new Array<unknown>(n);
            for (let i = 0; i < n; i++) a[i] = (evs[i] as Ev)(f);
            return a;
          };
        }
        return (f) => {
          meter.charge(16 + 8 * n);
          const a = new Array<unknown>(n);
          for (let i = 0; i < n; i++) {
            const ev = items[i];
            if (ev) a[i] = ev(f);
          }
          return a;
        };
      }
      case 'ObjectExpression':
        return this.object(node, scope);
      case 'FunctionExpression':
      case 'ArrowFunctionExpression':
        return this.fn(node, scope);
      case 'UnaryExpression':
        return this.unary(node.operator, node.argument, scope);
      case 'UpdateExpression':
        return this.update(node.operator, node.prefix, node.argument, scope);
      case 'BinaryExpression': {
        if (node.left.type === 'PrivateIdentifier') defer('private name');
        return this.binary(
          node.operator,
          this.expr(node.left, scope),
          this.expr(node.right, scope),
        );
      }
      case 'LogicalExpression': {
        const l = this.expr(node.left, scope);
        const r = this.expr(node.right, scope);
        if (node.operator === '&&') return (f) => l(f) && r(f);
        if (node.operator === '||') return (f) => l(f) || r(f);
        return (f) => l(f) ?? r(f);
      }
      case 'ConditionalExpression': {
        const t = this.expr(node.test, scope);
        const c = this.expr(node.consequent, scope);
        const a = this.expr(node.alternate, scope);
        return (f) => (t(f) ? c(f) : a(f));
      }
      case 'AssignmentExpression':
        return this.assign(node, scope);
      case 'MemberExpression': {
        const read = this.member(node, scope);
        return (f) => {
          const v = read(f);
          return v === SHORT ? defer('optional chain outside a chain') : v;
        };
      }
      case 'ChainExpression': {
        const inner =
          node.expression.type === 'MemberExpression'
            ? this.member(node.expression, scope)
            : this.callExpr(node.expression, scope);
        return (f) => {
          const v = inner(f);
          return v === SHORT ? undefined : v;
        };
      }
      case 'CallExpression': {
        const c = this.callExpr(node, scope);
        return (f) => {
          const v = c(f);
          return v === SHORT ? defer('optional chain outside a chain') : v;
        };
      }
      case 'NewExpression':
        // `throw new Error(...)` and `new Date()` are QuickJS's: deferred when they run.
        return () => defer('new');
      case 'SequenceExpression': {
        const parts = node.expressions.map((e) => this.expr(e, scope));
        return (f) => {
          let v: unknown;
          for (const p of parts) v = p(f);
          return v;
        };
      }
      default:
        return defer(`expression ${node.type}`);
    }
  }

  identifier(name: string, scope: FnScope, forTypeof: boolean): Ev {
    const r = resolve(scope, name);
    if (!r) {
      if (hasOwn(this.b.globals, name)) {
        if (NAMESPACE_NAMES.has(name)) defer(`${name} as a value`);
        const v = this.b.globals[name];
        return () => v;
      }
      // An unknown global: a read throws, and typeof answers as QuickJS's globals are (Symbol,
      // Map, ...): QuickJS says either.
      return () => defer(`unknown global ${name}${forTypeof ? ' (typeof)' : ''}`);
    }
    const { depth, binding } = r;
    const slot = binding.slot;
    const lexical = binding.kind === 'let' || binding.kind === 'const';
    if (depth === 0) {
      if (!lexical) return (f) => f.v[slot];
      return (f) => {
        const v = f.v[slot];
        return v === TDZ ? defer('read before declaration') : v;
      };
    }
    if (depth === 1) {
      if (!lexical) return (f) => (f.up as Frame).v[slot];
    }
    return (f) => {
      const v = frameAt(f, depth).v[slot];
      return v === TDZ ? defer('read before declaration') : v;
    };
  }

  /** Writes a resolved variable; undeclared names never get here (compile-time Defer). */
  assignTo(name: string, scope: FnScope, init = false): (f: Frame, v: unknown) => void {
    const r = resolve(scope, name);
    if (!r) return defer(`assignment to undeclared ${name}`);
    const { depth, binding } = r;
    if (!init && (binding.kind === 'const' || binding.kind === 'self'))
      return () => defer('assignment to a constant');
    const slot = binding.slot;
    const lexical = binding.kind === 'let';
    if (depth === 0) {
      if (!lexical || init)
        return (f, v) => {
          f.v[slot] = v;
        };
      return (f, v) => {
        if (f.v[slot] === TDZ) defer('write before declaration');
        f.v[slot] = v;
      };
    }
    return (f, v) => {
      const fr = frameAt(f, depth);
      if (lexical && fr.v[slot] === TDZ) defer('write before declaration');
      fr.v[slot] = v;
    };
  }

  object(node: ObjectExpression, scope: FnScope): Ev {
    const props = node.properties.map((p) => {
      if (p.type === 'SpreadElement') defer('spread');
      if (p.kind !== 'init') defer('getter or setter');
      let key: Ev;
      if (p.computed) key = this.expr(p.key, scope);
      else if (p.key.type === 'Identifier') {
        const name = p.key.name;
        if (name === '__proto__') defer('__proto__ in an object literal');
        key = () => name;
      } else if (p.key.type === 'Literal') {
        const name = String(p.key.value);
        if (name === '__proto__') defer('__proto__ in an object literal');
        key = () => name;
      } else return defer('object key');
      const value = this.expr(p.value as Expression, scope);
      return { key, value, computed: p.computed };
    });
    const n = props.length;
    const meter = this.meter;
    return (f) => {
      meter.charge(32 + 16 * n);
      const o: Record<string, unknown> = {};
      for (let i = 0; i < n; i++) {
        const p = props[i] as { key: Ev; value: Ev; computed: boolean };
        let k = p.key(f);
        if (p.computed) {
          k = this.key(k);
          if (k === '__proto__') defer('__proto__ key');
        }
        o[k as string] = p.value(f);
      }
      return o;
    };
  }

  unary(op: string, arg: Expression, scope: FnScope): Ev {
    if (op === 'typeof') {
      const v =
        arg.type === 'Identifier' ? this.identifier(arg.name, scope, true) : this.expr(arg, scope);
      return (f) => typeof v(f);
    }
    if (op === 'delete') {
      if (arg.type !== 'MemberExpression' || arg.optional) return defer('delete of a name');
      if (arg.object.type === 'Super' || arg.property.type === 'PrivateIdentifier')
        return defer('delete');
      const obj = this.expr(arg.object, scope);
      const key = this.memberKey(arg, scope);
      return (f) => {
        const o = obj(f);
        const k = this.key(key(f));
        if (!writable(o) || (isArray(o) && k === 'length')) defer('delete');
        return delete o[k];
      };
    }
    const v = this.expr(arg, scope);
    switch (op) {
      case '-':
        if (arg.type === 'Literal' && typeof arg.value === 'number') {
          const c = -arg.value;
          return () => c;
        }
        return (f) => -(this.prim(v(f)) as number);
      case '+':
        return (f) => +(this.prim(v(f)) as number);
      case '!':
        return (f) => !v(f);
      case '~':
        return (f) => ~(this.prim(v(f)) as number);
      case 'void':
        return (f) => {
          v(f);
          return undefined;
        };
      default:
        return defer(`operator ${op}`);
    }
  }

  binary(op: string, l: Ev, r: Ev): Ev {
    type N = number;
    // An array turned into a primitive is joined, nested arrays too: walked first (walkBudget).
    const meter = this.meter;
    const g = (v: unknown) => {
      if (typeof v === 'object') guardText(meter, v);
      return v;
    };
    switch (op) {
      case '+': {
        const charge = this.b.chargeString;
        return (f) => {
          const x = (g(l(f)) as N) + (g(r(f)) as N);
          return typeof x === 'string' ? charge(x) : x;
        };
      }
      case '-':
        return (f) => (g(l(f)) as N) - (g(r(f)) as N);
      case '*':
        return (f) => (g(l(f)) as N) * (g(r(f)) as N);
      case '/':
        return (f) => (g(l(f)) as N) / (g(r(f)) as N);
      case '%':
        return (f) => (g(l(f)) as N) % (g(r(f)) as N);
      case '**':
        return (f) => power(g(l(f)), g(r(f)));
      case '==':
        // biome-ignore lint/suspicious/noDoubleEquals: the script's own operator
        return (f) => g(l(f)) == g(r(f));
      case '!=':
        // biome-ignore lint/suspicious/noDoubleEquals: the script's own operator
        return (f) => g(l(f)) != g(r(f));
      case '===':
        return (f) => l(f) === r(f);
      case '!==':
        return (f) => l(f) !== r(f);
      case '<':
        return (f) => (g(l(f)) as N) < (g(r(f)) as N);
      case '<=':
        return (f) => (g(l(f)) as N) <= (g(r(f)) as N);
      case '>':
        return (f) => (g(l(f)) as N) > (g(r(f)) as N);
      case '>=':
        return (f) => (g(l(f)) as N) >= (g(r(f)) as N);
      case '<<':
        return (f) => (g(l(f)) as N) << (g(r(f)) as N);
      case '>>':
        return (f) => (g(l(f)) as N) >> (g(r(f)) as N);
      case '>>>':
        return (f) => (g(l(f)) as N) >>> (g(r(f)) as N);
      case '&':
        return (f) => (g(l(f)) as N) & (g(r(f)) as N);
      case '|':
        return (f) => (g(l(f)) as N) | (g(r(f)) as N);
      case '^':
        return (f) => (g(l(f)) as N) ^ (g(r(f)) as N);
      case 'in':
        return (f) => {
          const k = g(l(f));
          const o = r(f);
          if (typeof o !== 'object' || o === null || this.b.namespaces.has(o)) defer('in');
          return this.key(k) in o;
        };
      default:
        return defer(`operator ${op}`);
    }
  }

  memberKey(node: MemberExpression, scope: FnScope): Ev {
    if (node.property.type === 'PrivateIdentifier') return defer('private name');
    if (!node.computed) {
      const name = (node.property as { name: string }).name;
      return () => name;
    }
    return this.expr(node.property, scope);
  }

  /** The object of a member expression: a namespace name is allowed only here. */
  memberObject(node: MemberExpression, scope: FnScope): Ev {
    if (node.object.type === 'Super') return defer('super');
    const o = node.object;
    if (o.type === 'Identifier' && !resolve(scope, o.name) && NAMESPACE_NAMES.has(o.name)) {
      const ns = this.b.globals[o.name];
      return () => ns;
    }
    if (o.type === 'MemberExpression') return this.member(o, scope);
    if (o.type === 'CallExpression') return this.callExpr(o, scope);
    return this.expr(o, scope);
  }

  /** A member read that may be part of an optional chain (SHORT: skipped). */
  member(node: MemberExpression, scope: FnScope): Ev {
    const obj = this.memberObject(node, scope);
    const key = this.memberKey(node, scope);
    const optional = node.optional;
    if (!node.computed && !optional) {
      const name = (node.property as { name: string }).name;
      return (f) => {
        const o = obj(f);
        if (o === SHORT) return SHORT;
        return this.get(o, name);
      };
    }
    return (f) => {
      const o = obj(f);
      if (o === SHORT) return SHORT;
      if (optional && (o === null || o === undefined)) return SHORT;
      return this.get(o, key(f));
    };
  }

  callExpr(node: CallExpression, scope: FnScope): Ev {
    const args = node.arguments.map((a) => {
      if (a.type === 'SpreadElement') defer('spread');
      return this.expr(a, scope);
    });
    const n = args.length;
    const evalArgs = (f: Frame) => {
      const out = new Array<unknown>(n);
      for (let i = 0; i < n; i++) out[i] = (args[i] as Ev)(f);
      return out;
    };
    const optional = node.optional;
    const callee = node.callee;
    if (callee.type === 'MemberExpression') {
      const obj = this.memberObject(callee, scope);
      const key = this.memberKey(callee, scope);
      const optMember = callee.optional;
      return (f) => {
        const o = obj(f);
        if (o === SHORT) return SHORT;
        if (optMember && (o === null || o === undefined)) return SHORT;
        const k = this.key(key(f));
        const m = this.method(o, k);
        if (optional && (m === null || m === undefined)) return SHORT;
        const a = evalArgs(f);
        return m === BUILTIN ? this.callBuiltin(o, k, a) : this.call(m, a);
      };
    }
    if (callee.type === 'Super') return defer('super');
    const fn =
      callee.type === 'CallExpression' ? this.callExpr(callee, scope) : this.expr(callee, scope);
    return (f) => {
      const v = fn(f);
      if (v === SHORT) return SHORT;
      if (optional && (v === null || v === undefined)) return SHORT;
      return this.call(v, evalArgs(f));
    };
  }

  /**
   * Read-modify-write of a variable or member (`x += 1`, `o[k]++`): the object and key are
   * evaluated once, then `compute(current, f)` gives the new value; `result` picks what the
   * expression answers (the new value, or the old one for a postfix update).
   */
  modify(
    node: Pattern | Expression,
    scope: FnScope,
    compute: (cur: unknown, f: Frame) => unknown,
    postfix = false,
  ): Ev {
    if (node.type === 'Identifier') {
      const read = this.identifier(node.name, scope, false);
      const write = this.assignTo(node.name, scope);
      return (f) => {
        const read0 = this.prim(read(f));
        // A postfix update converts the old value once (its valueOf runs once).
        const cur = postfix ? +(read0 as number) : read0;
        const v = compute(cur, f);
        if (v === KEEP) return cur;
        write(f, v);
        return postfix ? cur : v;
      };
    }
    if (node.type === 'MemberExpression') {
      if (node.optional) return defer('optional chain as a target');
      const obj = this.memberObject(node, scope);
      const key = this.memberKey(node, scope);
      return (f) => {
        const o = obj(f);
        // The key is converted once for the read and the write.
        const k = this.key(key(f));
        const read0 = this.prim(this.get(o, k));
        const cur = postfix ? +(read0 as number) : read0;
        const v = compute(cur, f);
        if (v === KEEP) return cur;
        this.set(o, k, v);
        return postfix ? cur : v;
      };
    }
    return defer(`assignment to ${node.type}`);
  }

  assign(node: AssignmentExpression, scope: FnScope): Ev {
    const op = node.operator;
    const value = this.expr(node.right, scope);
    if (op === '=') {
      if (node.left.type === 'Identifier') {
        const write = this.assignTo(node.left.name, scope);
        return (f) => {
          const v = value(f);
          write(f, v);
          return v;
        };
      }
      if (node.left.type === 'MemberExpression') {
        const m = node.left;
        if (m.optional) return defer('optional chain as a target');
        const obj = this.memberObject(m, scope);
        const key = this.memberKey(m, scope);
        return (f) => {
          const o = obj(f);
          const k = key(f);
          const v = value(f);
          this.set(o, k, v);
          return v;
        };
      }
      return defer(`assignment to ${node.left.type}`);
    }
    if (op === '&&=' || op === '||=' || op === '??=') {
      // Short-circuits: the current value decides, and then nothing is written.
      const keep =
        op === '&&='
          ? (cur: unknown) => !cur
          : op === '||='
            ? (cur: unknown) => !!cur
            : (cur: unknown) => cur !== null && cur !== undefined;
      return this.modify(node.left, scope, (cur, f) => (keep(cur) ? KEEP : value(f)));
    }
    const combine = BINOPS[op.slice(0, -1)];
    if (!combine) return defer(`operator ${op}`);
    const charge = this.b.chargeString;
    return this.modify(node.left, scope, (cur, f) => {
      const v = combine(cur, this.prim(value(f)));
      return typeof v === 'string' ? charge(v) : v;
    });
  }

  update(op: string, prefix: boolean, arg: Expression, scope: FnScope): Ev {
    const d = op === '++' ? 1 : -1;
    return this.modify(arg, scope, (cur) => +(cur as number) + d, !prefix);
  }

  // --- functions ---

  fn(node: FunctionExpression | ArrowFunctionExpression | FunctionDeclaration, outer: FnScope): Ev {
    if (node.async || node.generator) return defer('async or generator function');
    if (
      some(node.body, (n) => n.type === 'ThisExpression' || n.type === 'Super', false) ||
      some(
        node.body,
        (n) => n.type === 'Identifier' && (n as unknown as { name: string }).name === 'arguments',
        false,
      )
    )
      return defer('this or arguments');
    const scope = new FnScope(outer);
    // A named function expression sees itself under its name, in a scope of its own above the
    // parameters (a parameter or `var` of that name hides it).
    const selfSlot =
      node.type === 'FunctionExpression' && node.id ? scope.declare(node.id.name, 'self').slot : -1;
    scope.blocks.push(new Map());
    const params = node.params.map((p) => {
      if (p.type !== 'Identifier') defer('parameter pattern');
      return scope.declare(p.name, 'param').slot;
    });
    const body =
      node.body.type === 'BlockStatement'
        ? this.functionBody(node.body.body, scope)
        : (() => {
            const e = this.expr(node.body, scope);
            return (f: Frame) => {
              f.r = e(f);
              return RETURN;
            };
          })();
    const meter = this.meter;
    const n = () => scope.slots;
    const stackDepth = nesting(node.body);
    return (up) => {
      meter.charge(64);
      const size = n();
      // QuickJS's frame: its locals and its operand stack, which the nesting bounds.
      const bytes = FRAME_BYTES + SLOT_BYTES * (size + stackDepth);
      const fn = sandboxFn((...args: unknown[]) => {
        meter.tick(1);
        meter.stack += bytes;
        try {
          if (meter.stack > STACK_BYTES) defer('recursion');
          const f: Frame = { v: new Array<unknown>(size), up, r: undefined };
          for (let i = 0; i < params.length; i++) f.v[params[i] as number] = args[i];
          if (selfSlot >= 0) f.v[selfSlot] = fn;
          return body(f) === RETURN ? f.r : undefined;
        } finally {
          meter.stack -= bytes;
        }
      });
      return fn;
    };
  }

  /**
   * Hoists `var`s, declares the body's let/const and function declarations, makes the functions
   * (they may name any of those), then compiles the statements.
   */
  functionBody(stmts: Statement[], scope: FnScope): Ex {
    for (const st of stmts) this.hoistVars(st, scope);
    const lexicalSlots = this.declareLexical(stmts, scope, false);
    const fns: { slot: number; decl: FunctionDeclaration }[] = [];
    for (const st of stmts) {
      if (st.type === 'FunctionDeclaration') {
        const slot = scope.declare((st.id as { name: string }).name, 'function').slot;
        fns.push({ slot, decl: st });
      }
    }
    const made = fns.map((d) => ({ slot: d.slot, make: this.fn(d.decl, scope) }));
    const block = this.statements(stmts, scope, lexicalSlots);
    if (made.length === 0) return block;
    return (f) => {
      for (const d of made) f.v[d.slot] = d.make(f);
      return block(f);
    };
  }

  hoistVars(node: Node, scope: FnScope): void {
    if (isFunctionNode(node)) return;
    if (node.type === 'VariableDeclaration' && (node as VariableDeclaration).kind === 'var') {
      for (const d of (node as VariableDeclaration).declarations) {
        if (d.id.type !== 'Identifier') defer('destructuring');
        scope.declare(d.id.name, 'var');
      }
    }
    if (node.type === 'FunctionDeclaration') return;
    for (const key of Object.keys(node)) {
      if (key === 'type' || key === 'start' || key === 'end') continue;
      const v = (node as unknown as Record<string, unknown>)[key];
      for (const c of isArray(v) ? v : [v])
        if (c !== null && typeof c === 'object' && typeof (c as Node).type === 'string')
          this.hoistVars(c as Node, scope);
    }
  }

  // --- statements ---

  /** The let/const declared directly in `stmts`: their slots (function declarations: see `scoped`). */
  declareLexical(stmts: Statement[], scope: FnScope, scoped: boolean): number[] {
    const slots: number[] = [];
    for (const st of stmts) {
      if (st.type === 'FunctionDeclaration' && scoped) defer('function declaration in a block');
      if (st.type === 'ClassDeclaration') defer('class');
      if (st.type === 'VariableDeclaration' && st.kind !== 'var') {
        if (st.kind !== 'let' && st.kind !== 'const') defer(st.kind);
        for (const d of st.declarations) {
          if (d.id.type !== 'Identifier') defer('destructuring');
          slots.push(scope.declare(d.id.name, st.kind).slot);
        }
      }
    }
    return slots;
  }

  /** A block of its own: its let/const get slots, reset to the dead zone on each entry. */
  block(stmts: Statement[], scope: FnScope): Ex {
    scope.blocks.push(new Map());
    const lexicalSlots = this.declareLexical(stmts, scope, true);
    const ex = this.statements(stmts, scope, lexicalSlots);
    scope.blocks.pop();
    return ex;
  }

  /** Statements in order; function declarations among them were made at the function's entry. */
  statements(stmts: Statement[], scope: FnScope, lexicalSlots: number[]): Ex {
    const compiled = stmts
      .filter((st) => st.type !== 'FunctionDeclaration')
      .map((st) => this.stmt(st, scope));
    const n = compiled.length;
    if (n === 0 && lexicalSlots.length === 0) return () => NEXT;
    if (lexicalSlots.length === 0) {
      if (n === 1) return compiled[0] as Ex;
      return (f) => {
        for (let i = 0; i < n; i++) {
          const c = (compiled[i] as Ex)(f);
          if (c !== NEXT) return c;
        }
        return NEXT;
      };
    }
    return (f) => {
      for (const slot of lexicalSlots) f.v[slot] = TDZ;
      for (let i = 0; i < n; i++) {
        const c = (compiled[i] as Ex)(f);
        if (c !== NEXT) return c;
      }
      return NEXT;
    };
  }

  stmt(node: Statement, scope: FnScope): Ex {
    switch (node.type) {
      case 'ExpressionStatement': {
        const e = this.expr(node.expression, scope);
        return (f) => {
          e(f);
          return NEXT;
        };
      }
      case 'VariableDeclaration':
        return this.declaration(node, scope);
      case 'FunctionDeclaration':
        // Only at a function body's top level (made at entry); as the body of an `if` or a loop
        // its meaning is the web-compatibility rules': QuickJS's.
        return defer('function declaration as a statement');
      case 'ReturnStatement': {
        if (!node.argument)
          return (f) => {
            f.r = undefined;
            return RETURN;
          };
        const e = this.expr(node.argument, scope);
        return (f) => {
          f.r = e(f);
          return RETURN;
        };
      }
      case 'IfStatement': {
        const t = this.expr(node.test, scope);
        const c = this.stmt(node.consequent, scope);
        const a = node.alternate ? this.stmt(node.alternate, scope) : undefined;
        if (!a) return (f) => (t(f) ? c(f) : NEXT);
        return (f) => (t(f) ? c(f) : a(f));
      }
      case 'BlockStatement':
        return this.block((node as BlockStatement).body, scope);
      case 'EmptyStatement':
        return () => NEXT;
      case 'ForStatement':
        return this.forLoop(node, scope);
      case 'ForInStatement':
      case 'ForOfStatement':
        return this.forEachLoop(node, scope);
      case 'WhileStatement':
      case 'DoWhileStatement': {
        this.loopClosures(node);
        const t = this.expr(node.test, scope);
        const body = this.stmt(node.body, scope);
        const meter = this.meter;
        const doFirst = node.type === 'DoWhileStatement';
        return (f) => {
          let first = doFirst;
          while (first || t(f)) {
            first = false;
            meter.tick(1);
            const c = body(f);
            if (c === BREAK) break;
            if (c === RETURN) return c;
          }
          return NEXT;
        };
      }
      case 'BreakStatement':
        if (node.label) return defer('label');
        return () => BREAK;
      case 'ContinueStatement':
        if (node.label) return defer('label');
        return () => CONTINUE;
      case 'SwitchStatement':
        return this.switchStmt(node, scope);
      case 'ThrowStatement':
        // The exception's text and type are QuickJS's to give.
        return () => defer('throw');
      case 'TryStatement': {
        // `try { ... } catch { ... }` whose catch never looks at the exception (the common
        // `try { JSON.parse(text) } catch (e) { fallback }`): only a built-in's exception that
        // QuickJS raises alike is caught (Thrown); any other (a Defer, the time limit) passes.
        if (node.finalizer || !node.handler) return defer('finally');
        const h = node.handler;
        if (h.param) {
          if (h.param.type !== 'Identifier') return defer('catch pattern');
          const name = h.param.name;
          if (
            some(
              h.body,
              (n) => n.type === 'Identifier' && (n as unknown as { name: string }).name === name,
              true,
            )
          )
            return defer('catch looks at the exception');
        }
        const tried = this.block(node.block.body, scope);
        const handler = this.block(h.body.body, scope);
        return (f) => {
          try {
            return tried(f);
          } catch (err) {
            if (err instanceof Thrown) return handler(f);
            throw err;
          }
        };
      }
      default:
        return defer(`statement ${node.type}`);
    }
  }

  declaration(node: VariableDeclaration, scope: FnScope): Ex {
    const parts = node.declarations.map((d) => {
      const name = (d.id as { name: string }).name;
      const write = this.assignTo(name, scope, true);
      const init = d.init ? this.expr(d.init, scope) : undefined;
      return { write, init };
    });
    const lexical = node.kind !== 'var';
    return (f) => {
      for (const p of parts) {
        if (p.init) p.write(f, p.init(f));
        else if (lexical) p.write(f, undefined);
      }
      return NEXT;
    };
  }

  /** A closure made in a loop with let/const would need a binding per iteration: QuickJS's. */
  loopClosures(node: Node): void {
    if (some(node, isLexical, false) && some(node, isFunctionNode, false))
      defer('closure in a loop with let or const');
  }

  forLoop(node: ForStatement, scope: FnScope): Ex {
    this.loopClosures(node);
    scope.blocks.push(new Map());
    let init: Ex | undefined;
    const lexicalSlots: number[] = [];
    if (node.init) {
      if (node.init.type === 'VariableDeclaration') {
        if (node.init.kind !== 'var') {
          if (node.init.kind !== 'let' && node.init.kind !== 'const') defer(node.init.kind);
          for (const d of node.init.declarations) {
            if (d.id.type !== 'Identifier') defer('destructuring');
            lexicalSlots.push(scope.declare(d.id.name, node.init.kind).slot);
          }
        }
        init = this.declaration(node.init, scope);
      } else {
        const e = this.expr(node.init, scope);
        init = (f) => {
          e(f);
          return NEXT;
        };
      }
    }
    const test = node.test ? this.expr(node.test, scope) : undefined;
    const update = node.update ? this.expr(node.update, scope) : undefined;
    const body = this.stmt(node.body, scope);
    scope.blocks.pop();
    const meter = this.meter;
    return (f) => {
      for (const slot of lexicalSlots) f.v[slot] = TDZ;
      if (init) init(f);
      while (!test || test(f)) {
        meter.tick(1);
        const c = body(f);
        if (c === BREAK) break;
        if (c === RETURN) return c;
        if (update) update(f);
      }
      return NEXT;
    };
  }

  forEachLoop(node: ForInStatement | ForOfStatement, scope: FnScope): Ex {
    if (node.type === 'ForOfStatement' && node.await) return defer('for await');
    this.loopClosures(node);
    scope.blocks.push(new Map());
    let write: (f: Frame, v: unknown) => void;
    const left = node.left;
    let lexicalSlot = -1;
    if (left.type === 'VariableDeclaration') {
      const d = left.declarations[0];
      if (!d || left.declarations.length !== 1 || d.id.type !== 'Identifier' || d.init)
        return defer('loop variable');
      if (left.kind !== 'var') {
        if (left.kind !== 'let' && left.kind !== 'const') defer(left.kind);
        lexicalSlot = scope.declare(d.id.name, left.kind).slot;
      }
      write = this.assignTo(d.id.name, scope, true);
    } else if (left.type === 'Identifier') write = this.assignTo(left.name, scope);
    else return defer('loop target');
    const right = this.expr(node.right, scope);
    const body = this.stmt(node.body, scope);
    scope.blocks.pop();
    const meter = this.meter;
    const run = (f: Frame, v: unknown): number => {
      meter.tick(1);
      write(f, v);
      return body(f);
    };
    if (node.type === 'ForInStatement') {
      return (f) => {
        if (lexicalSlot >= 0) f.v[lexicalSlot] = TDZ;
        const o = right(f);
        if (o === null || o === undefined) return NEXT;
        if (typeof o === 'function' || (typeof o === 'object' && this.b.namespaces.has(o)))
          defer('for-in over a built-in');
        // The keys are listed first, as the host's for-in does, but charged and counted; a key
        // deleted before its turn is skipped, one added is not visited (as in both engines).
        const keys = Object.keys(o as object);
        meter.charge(8 * keys.length);
        meter.tick(keys.length >> 5);
        for (const k of keys) {
          if (!hasOwn(o as object, k)) continue;
          const c = run(f, k);
          if (c === BREAK) break;
          if (c === RETURN) return c;
        }
        return NEXT;
      };
    }
    return (f) => {
      if (lexicalSlot >= 0) f.v[lexicalSlot] = TDZ;
      const o = right(f);
      if (!isArray(o) && typeof o !== 'string')
        defer('for-of over something not an array or string');
      for (const v of o as unknown[] | string) {
        const c = run(f, v);
        if (c === BREAK) break;
        if (c === RETURN) return c;
      }
      return NEXT;
    };
  }

  switchStmt(node: SwitchStatement, scope: FnScope): Ex {
    const disc = this.expr(node.discriminant, scope);
    scope.blocks.push(new Map());
    const lexicalSlots: number[] = [];
    for (const c of node.cases)
      for (const s of c.consequent) {
        if (s.type === 'FunctionDeclaration' || s.type === 'ClassDeclaration')
          defer('declaration in a switch');
        if (s.type === 'VariableDeclaration' && s.kind !== 'var') {
          if (s.kind !== 'let' && s.kind !== 'const') defer(s.kind);
          for (const d of s.declarations) {
            if (d.id.type !== 'Identifier') defer('destructuring');
            lexicalSlots.push(scope.declare(d.id.name, s.kind).slot);
          }
        }
      }
    const cases = node.cases.map((c) => ({
      test: c.test ? this.expr(c.test, scope) : undefined,
      body: c.consequent.map((s) => this.stmt(s, scope)),
    }));
    scope.blocks.pop();
    const defaultAt = cases.findIndex((c) => c.test === undefined);
    return (f) => {
      for (const slot of lexicalSlots) f.v[slot] = TDZ;
      const v = disc(f);
      let start = -1;
      for (let i = 0; i < cases.length; i++) {
        const t = (cases[i] as { test: Ev | undefined }).test;
        if (t && t(f) === v) {
          start = i;
          break;
        }
      }
      if (start < 0) start = defaultAt;
      if (start < 0) return NEXT;
      for (let i = start; i < cases.length; i++) {
        for (const s of (cases[i] as { body: Ex[] }).body) {
          const c = s(f);
          if (c === BREAK) return NEXT;
          if (c !== NEXT) return c;
        }
      }
      return NEXT;
    };
  }
}

// ---------------------------------------------------------------------------------------------
// Results, as JSON would carry them.

/**
 * Whether JSON.parse(JSON.stringify(v)) would give `v` back unchanged, estimating its text's
 * size on the way (strings at their longest escaping). Every part is visited, shared parts once
 * per reference as JSON.stringify would: past `limit` the call is QuickJS's (a structure that
 * shares itself exponentially is never walked by the host).
 */
function jsonNormal(v: unknown, depth: number, size: { n: number }, limit: number): boolean {
  switch (typeof v) {
    case 'string':
      size.n += v.length * 6 + 2;
      return true;
    case 'boolean':
      size.n += 5;
      return true;
    case 'number':
      size.n += 24;
      // JSON has no -0: its text is 0.
      return Number.isFinite(v) && (v !== 0 || 1 / v > 0);
    case 'object': {
      if (v === null) {
        size.n += 4;
        return true;
      }
      if (depth > MAX_RESULT_DEPTH) defer('result nested too deep');
      let normal = true;
      if (isArray(v)) {
        size.n += 2 + v.length;
        if (size.n > limit) defer('result too large');
        // Named members of an array are not in its JSON; an own toJSON would run script code.
        if (Object.keys(v).length !== v.length) {
          if (typeof (v as { toJSON?: unknown }).toJSON === 'function' && hasOwn(v, 'toJSON'))
            defer('toJSON');
          normal = false;
        }
        for (let i = 0; i < v.length; i++) {
          if (!hasOwn(v, i)) {
            normal = false;
            continue;
          }
          const x = v[i];
          if (x === undefined || typeof x === 'function') normal = false;
          else if (!jsonNormal(x, depth + 1, size, limit)) normal = false;
          if (size.n > limit) defer('result too large');
        }
        return normal;
      }
      if (Object.getPrototypeOf(v) !== Object.prototype) defer('result holds a non-plain object');
      size.n += 2;
      for (const k in v) {
        const x = (v as Record<string, unknown>)[k];
        if (k === 'toJSON' && typeof x === 'function') defer('toJSON');
        size.n += k.length * 6 + 4;
        if (x === undefined || typeof x === 'function') normal = false;
        else if (!jsonNormal(x, depth + 1, size, limit)) normal = false;
        if (size.n > limit) defer('result too large');
      }
      return normal;
    }
    default:
      return false;
  }
}

/**
 * An upper bound of the characters of `JSON.stringify(v)` when JSON would give `v` back as it is
 * (the interpreter may then see it as QuickJS would); Infinity when it would not (-0, NaN, a
 * hole, undefined, a Date) or past `limit`. The script's arguments are checked so.
 */
export function jsonArgSize(v: unknown, limit: number): number {
  const size = { n: 0 };
  try {
    return jsonNormal(v, 0, size, limit) ? size.n : Number.POSITIVE_INFINITY;
  } catch (err) {
    if (err instanceof Defer) return Number.POSITIVE_INFINITY;
    throw err;
  }
}

/**
 * The result as the QuickJS path gives it (`JSON.parse(JSON.stringify(r))`): the value itself
 * when it is already what JSON would give back (the common case: nothing copied), else its JSON
 * round trip. `maxChars` is the limit on the result's JSON text.
 */
export function toJsonResult(v: unknown, maxChars: number): { value: unknown; chars?: number } {
  if (v === undefined || typeof v === 'function') return { value: undefined };
  const size = { n: 0 };
  if (jsonNormal(v, 0, size, 6 * maxChars + 64) && size.n <= maxChars) return { value: v };
  const text = JSON.stringify(v) as string | undefined;
  if (text === undefined) return { value: undefined };
  if (text.length > maxChars) return { value: undefined, chars: text.length };
  return { value: JSON.parse(text) };
}

/** A JSON value's copy (the script's arguments, when the script may change them). */
export function copyJson(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (isArray(v)) {
    const a = new Array<unknown>(v.length);
    for (let i = 0; i < v.length; i++) a[i] = copyJson(v[i]);
    return a;
  }
  const o: Record<string, unknown> = {};
  for (const k in v) {
    const x = copyJson((v as Record<string, unknown>)[k]);
    if (k === '__proto__')
      Object.defineProperty(o, k, {
        value: x,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    else o[k] = x;
  }
  return o;
}

/**
 * Whether two values have the same JSON text (`JSON.stringify(a) === JSON.stringify(b)`), without
 * making it: keys in the same order, properties JSON leaves out (undefined, functions) skipped.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'number' && typeof b === 'number')
    return !Number.isFinite(a) && !Number.isFinite(b);
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    const na = typeof a === 'number' && !Number.isFinite(a) ? null : a;
    const nb = typeof b === 'number' && !Number.isFinite(b) ? null : b;
    return na === nb;
  }
  if (isArray(a) !== isArray(b)) return false;
  if (isArray(a)) {
    const bb = b as unknown[];
    if (a.length !== bb.length) return false;
    for (let i = 0; i < a.length; i++) {
      const x = a[i] === undefined || typeof a[i] === 'function' ? null : a[i];
      const y = bb[i] === undefined || typeof bb[i] === 'function' ? null : bb[i];
      if (!sameJson(x, y)) return false;
    }
    return true;
  }
  const ka = Object.keys(a).filter((k) => kept((a as Record<string, unknown>)[k]));
  const kb = Object.keys(b).filter((k) => kept((b as Record<string, unknown>)[k]));
  if (ka.length !== kb.length) return false;
  for (let i = 0; i < ka.length; i++) {
    const k = ka[i] as string;
    if (k !== kb[i]) return false;
    if (!sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
      return false;
  }
  return true;
}

function kept(v: unknown): boolean {
  return v !== undefined && typeof v !== 'function';
}

// ---------------------------------------------------------------------------------------------

/** A script compiled to closures: `call` runs it, or throws Defer / ScriptTimeout. */
export class FastScript {
  private constructor(
    private readonly run: (args: readonly unknown[]) => unknown,
    /** Per argument: true when the script may change it, so it gets a copy (else the object itself). */
    readonly copies: readonly boolean[],
    private readonly meter: Meter,
  ) {}

  /**
   * The script compiled, or the reason it is QuickJS's (`{ deferred }`): a syntax error, or a
   * construct outside the subset. The body is wrapped as QuickJS's is, so that a body that closes
   * its function early is not this path's either.
   */
  static compile(
    body: string,
    argNames: readonly string[],
    limits: FastLimits,
  ): FastScript | { deferred: string } {
    let program: ReturnType<typeof parse>;
    try {
      program = parse(`(function(${argNames.join(', ')}){${body}\n})`, {
        ecmaVersion: 2022,
        sourceType: 'script',
      });
    } catch (err) {
      return { deferred: `does not parse: ${(err as Error).message}` };
    }
    const first = program.body[0];
    if (
      program.body.length !== 1 ||
      first?.type !== 'ExpressionStatement' ||
      first.expression.type !== 'FunctionExpression'
    )
      return { deferred: 'the body closes its function' };
    const fnNode = first.expression;
    const meter = new Meter(limits);
    try {
      // Strict-mode-only differences (`with`, octal literals) never parse in a function we run:
      // acorn rejects neither, but `with` is not in the subset and legacy octals are deferred.
      if (
        some(
          fnNode,
          (n) =>
            n.type === 'Literal' && /^0\d/.test(String((n as unknown as { raw?: string }).raw)),
          true,
        )
      )
        defer('legacy octal literal');
      const compiler = new Compiler(meter, builtins(meter));
      const make = compiler.fn(fnNode, new FnScope(undefined));
      const root: Frame = { v: [], up: undefined, r: undefined };
      meter.start();
      const fn = make(root) as (...args: unknown[]) => unknown;
      return new FastScript((args) => fn(...args), argsToCopy(fnNode, argNames), meter);
    } catch (err) {
      if (err instanceof Defer) return { deferred: err.reason };
      throw err;
    }
  }

  /**
   * One call. Throws Defer when QuickJS must answer this call (any exception the script raised
   * included) and ScriptTimeout when it ran out of CPU time.
   */
  call(args: readonly unknown[]): unknown {
    this.meter.start();
    try {
      return this.run(args);
    } catch (err) {
      if (err instanceof Defer || err instanceof ScriptTimeout) throw err;
      if (err instanceof Thrown) throw new Defer('exception from a built-in');
      // The script's own exceptions (a TypeError, a stack overflow): QuickJS says them its way.
      throw new Defer(`exception: ${err instanceof Error ? err.name : typeof err}`);
    }
  }
}
