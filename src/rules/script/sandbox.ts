/**
 * The script sandbox of the rule engine (rule-engine reference §4): ThingsBoard's JavaScript
 * contract run in QuickJS compiled to WebAssembly (`quickjs-emscripten-core` with the
 * single-file release variant). A script sees only its arguments and the language's built-ins:
 * no `require`, no process, no file system, no network, no timers. Each compiled script has its
 * own QuickJS runtime, so that a memory limit and a time limit hold per node, and one runaway
 * script cannot exhaust another's memory.
 */
import type {
  QuickJSContext,
  QuickJSHandle,
  QuickJSRuntime,
  QuickJSWASMModule,
} from 'quickjs-emscripten-core';
import { copyJson, FastScript, jsonArgSize, ScriptTimeout, toJsonResult } from './interpreter.js';

/** ThingsBoard's script limits (reference §4): body 50 000 chars, args 100 000, result 300 000. */
export const MAX_SCRIPT_CHARS = 50_000;
export const MAX_ARGS_CHARS = 100_000;
export const MAX_RESULT_CHARS = 300_000;

export interface ScriptLimits {
  /**
   * CPU time one call may spend before it is interrupted (TB's TBEL default: 500 ms). It is the
   * gateway thread's CPU time, not wall time: a loaded machine that keeps the process waiting
   * does not use it up, a script that loops does.
   */
  readonly timeoutMs: number;
  /** Heap of one script's runtime (TB's TBEL default: 8 MiB). */
  readonly memoryBytes: number;
  /** CPU time a compile may spend (see COMPILE_TIMEOUT_MS). */
  readonly compileTimeoutMs: number;
}

/**
 * CPU time a compile may spend. A compile runs no script code, only the wrapper that defines
 * the function, so it is not held to the call limit: on a starved machine (or arm64 under
 * qemu) compiling the default root chain's script took over 500 ms of wall time and the
 * gateway did not start. It still has a bound, for a body that closes its function and runs
 * code at top level.
 */
export const COMPILE_TIMEOUT_MS = 5_000;

export const DEFAULT_SCRIPT_LIMITS: ScriptLimits = {
  timeoutMs: 500,
  memoryBytes: 8 * 1024 * 1024,
  compileTimeoutMs: COMPILE_TIMEOUT_MS,
};

/** CPU time of this thread, in ms (user and system). */
function threadCpuMs(): number {
  const u = process.threadCpuUsage();
  return (u.user + u.system) / 1000;
}

/** A script that does not compile; `line` is 1-based within the script body. */
export class ScriptCompileError extends Error {
  override name = 'ScriptCompileError';
  constructor(
    message: string,
    readonly line: number | undefined,
  ) {
    super(line === undefined ? message : `line ${line}: ${message}`);
  }
}

/** A call that threw, ran out of time or memory, or returned something too large. */
export class ScriptRuntimeError extends Error {
  override name = 'ScriptRuntimeError';
}

/**
 * Loads the WebAssembly module once; every compiled script shares it (not its memory). The
 * module is about 13 MB of a process's memory (its code and heap) and each compiled script's
 * runtime another 2 MB, so a gateway loads it when a script is first needed (`lazy`), not at
 * start: an idle gateway whose scripts have not run holds none of it (docs/benchmarks.md).
 */
export class ScriptEngine {
  #module: QuickJSWASMModule | undefined;
  #loading: Promise<void> | undefined;

  private constructor(readonly limits: ScriptLimits) {}

  /** An engine that loads QuickJS on `ready()`; `compile` needs it loaded. */
  static lazy(limits: Partial<ScriptLimits> = {}): ScriptEngine {
    return new ScriptEngine({ ...DEFAULT_SCRIPT_LIMITS, ...limits });
  }

  /** An engine with QuickJS loaded. */
  static async load(limits: Partial<ScriptLimits> = {}): Promise<ScriptEngine> {
    const engine = ScriptEngine.lazy(limits);
    await engine.ready();
    return engine;
  }

  /** True once QuickJS is loaded: `compile` works. */
  get loaded(): boolean {
    return this.#module !== undefined;
  }

  /**
   * Loads QuickJS (once; later calls share the first load). Its modules are imported here, not
   * at the top: the bundle evaluates them (0.8 MB of WebAssembly as text) only now.
   */
  ready(): Promise<void> {
    this.#loading ??= (async () => {
      const [{ default: variant }, { newQuickJSWASMModuleFromVariant }] = await Promise.all([
        import('@jitl/quickjs-singlefile-mjs-release-sync'),
        import('quickjs-emscripten-core'),
      ]);
      this.#module = await newQuickJSWASMModuleFromVariant(variant);
    })().catch((err: unknown) => {
      this.#loading = undefined;
      throw err;
    });
    return this.#loading;
  }

  /**
   * Compiles a ThingsBoard script body (the text inside `function(<argNames>) { ... }`) once.
   * Throws ScriptCompileError with the line it could not parse. With `fast`, a script in the
   * interpreter's subset (interpreter.ts) runs there, and its QuickJS runtime is built only
   * when a call is first deferred to it; without, QuickJS compiles it now (the save-time check,
   * whose errors are QuickJS's).
   */
  compile(
    body: string,
    argNames: readonly string[],
    options: { fast?: boolean } = {},
  ): CompiledScript {
    if (body.trim() === '') throw new ScriptCompileError('script is empty', undefined);
    if (body.length > MAX_SCRIPT_CHARS)
      throw new ScriptCompileError(
        `script is ${body.length} characters, at most ${MAX_SCRIPT_CHARS}`,
        undefined,
      );
    if (!this.#module) throw new Error('the script engine is not loaded: await ready() first');
    return new CompiledScript(this.#module, body, argNames, this.limits, options.fast === true);
  }
}

/**
 * The wrapper keeps the body's first line on line 1, so that QuickJS's line numbers are the
 * body's. Arguments arrive as JSON text and the result leaves as JSON text: no object crosses
 * the boundary, so the script cannot reach a host object. It gives two functions: one call
 * (`invoke`), and many calls in one crossing (`invokeMany`): one JSON array of argument arrays
 * in, one JSON array of outcomes out (`[0]` nothing returned, `[0, result]`, `[1, "Name:
 * message"]` the call threw, `[2, length]` the result is too large), each call in its own
 * try/catch so that one call's exception is only that call's.
 */
function wrap(body: string, argNames: readonly string[]): string {
  const params = argNames.join(', ');
  const parsed = argNames.map((_, i) => `JSON.parse(a[${i}])`).join(', ');
  const spread = argNames.map((_, i) => `x[${i}]`).join(', ');
  return `(function(){var __f=function(${params}){${body}
};return [function(){var a=arguments;var r=__f(${parsed});return r===undefined?undefined:JSON.stringify(r);},
function(t){var xs=JSON.parse(t);var out=new Array(xs.length);for(var i=0;i<xs.length;i++){var x=xs[i];try{var r=__f(${spread});var s=r===undefined?undefined:JSON.stringify(r);out[i]=s===undefined?'[0]':s.length>${MAX_RESULT_CHARS}?'[2,'+s.length+']':'[0,'+s+']';}catch(e){out[i]='[1,'+JSON.stringify(typeof e==='object'&&e!==null?(e.name===undefined?'Error':String(e.name))+': '+(e.message===undefined?'':String(e.message)):String(e))+']';}}return '['+out.join(',')+']';}];})()`;
}

/** One call of `invokeMany`: its result (parsed JSON; undefined when it returned nothing) or its error. */
export type CallOutcome =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly error: ScriptRuntimeError };

/**
 * What `newString` reaches of quickjs-emscripten-core's context (the pinned 0.32.0): its
 * Emscripten module's heap and allocator, and the FFI call that makes a string of UTF-8 bytes.
 */
interface ContextInternals {
  readonly memory?: {
    readonly module?: {
      readonly HEAPU8?: Uint8Array;
      _malloc?(size: number): number;
      _free?(ptr: number): void;
    };
    heapValueHandle?(ptr: number): QuickJSHandle;
  };
  readonly ffi?: { QTS_NewString?(ctx: number, ptr: number): number };
  readonly ctx?: { readonly value: number };
}

const utf8 = new TextEncoder();

/**
 * A string handle for `text`, as `ctx.newString` makes it, with the text encoded by
 * TextEncoder instead of Emscripten's JavaScript UTF-8 loop: for a batch of 32 telemetry
 * messages' arguments (about 5 KB) 0.09 against 0.8 µs per message (docs/benchmarks.md).
 * @NOTE: reaches into the context's private fields (pinned version); where they are not there
 * it falls back to `ctx.newString`. JSON texts hold no lone surrogates (JSON.stringify escapes
 * them), so both encode the same bytes.
 */
function newString(ctx: QuickJSContext, text: string): QuickJSHandle {
  const { memory, ffi, ctx: raw } = ctx as unknown as ContextInternals;
  const mod = memory?.module;
  if (
    !mod?._malloc ||
    !mod._free ||
    !mod.HEAPU8 ||
    !memory?.heapValueHandle ||
    !ffi?.QTS_NewString ||
    raw === undefined
  )
    return ctx.newString(text);
  const max = text.length * 3 + 1;
  const ptr = mod._malloc(max);
  if (ptr === 0) return ctx.newString(text);
  try {
    // The heap's view is read after malloc: a malloc that grows the memory replaces it.
    const heap = mod.HEAPU8 as Uint8Array;
    const { written } = utf8.encodeInto(text, heap.subarray(ptr, ptr + max - 1));
    heap[ptr + written] = 0;
    return memory.heapValueHandle(ffi.QTS_NewString(raw.value, ptr));
  } finally {
    mod._free(ptr);
  }
}

/** An argument's JSON text for QuickJS (`null` for undefined, as an unseen argument). */
function jsonText(v: unknown): string {
  return JSON.stringify(v) ?? 'null';
}

function argsSize(args: readonly string[]): number {
  let size = 0;
  for (const a of args) size += a.length;
  return size;
}

function tooLarge(size: number): ScriptRuntimeError {
  return new ScriptRuntimeError(
    `script arguments are ${size} characters, at most ${MAX_ARGS_CHARS}`,
  );
}

/**
 * QuickJS's stack limit. WebAssembly runs on the host thread's own stack, which a deep native
 * recursion in QuickJS (joining a nested array, JSON of a deep value) overflowed before a 256 KiB
 * limit tripped, leaving the runtime broken; at 64 KiB QuickJS stops every such case itself with
 * its "stack overflow" error (src/rules/script/interpreter-adversarial.test.ts). Script functions
 * may nest about 340 calls deep.
 */
const QUICKJS_STACK_BYTES = 64 * 1024;
/** Runtimes a script may leave broken before it is disabled (each holds up to its memory limit). */
const MAX_BROKEN_RUNTIMES = 3;

/** Consecutive deferred calls after which a script stops trying the interpreter first. */
const GIVE_UP_AFTER = 64;

function resultTooLarge(size: number): ScriptRuntimeError {
  return new ScriptRuntimeError(`script result is ${size} characters, at most ${MAX_RESULT_CHARS}`);
}

export class CompiledScript {
  #runtime!: QuickJSRuntime;
  #context!: QuickJSContext;
  #fn!: QuickJSHandle;
  #many!: QuickJSHandle;
  /** CPU time the running call or compile may spend; 0 when none runs. */
  #limitMs = 0;
  /** Thread CPU time at the first interrupt poll of the running call; -1 before it. */
  #cpuStart = -1;
  #disposed = false;
  /** The QuickJS runtime exists (it is built lazily behind a fast script). */
  #built = false;
  /** The interpreter's compiled form; undefined when the script is QuickJS's alone. */
  #fast: FastScript | undefined;
  #deferredInARow = 0;
  /** Runtimes abandoned after the host's stack ran out inside them (see #abandon). */
  #brokenRuntimes = 0;
  /** Calls answered by the interpreter, and calls QuickJS answered (deferred or QuickJS-only). */
  readonly calls = { fast: 0, quickjs: 0 };
  /** Why the interpreter does not run this script (compile time), when it does not. */
  readonly deferredReason: string | undefined;

  constructor(
    private readonly module: QuickJSWASMModule,
    private readonly body: string,
    private readonly argNames: readonly string[],
    private readonly limits: ScriptLimits,
    fast = false,
  ) {
    let reason: string | undefined = 'not asked for';
    if (fast) {
      try {
        const f = FastScript.compile(body, argNames, limits);
        if (f instanceof FastScript) {
          this.#fast = f;
          reason = undefined;
        } else reason = f.deferred;
      } catch (err) {
        // A construct the interpreter mishandles is QuickJS's, never a failed compile.
        reason = `interpreter: ${(err as Error).message}`;
      }
    }
    this.deferredReason = reason;
    if (!this.#fast) this.#build();
  }

  /** True when the interpreter runs this script's calls (QuickJS only those it defers). */
  get fast(): boolean {
    return this.#fast !== undefined;
  }

  #quick(): void {
    if (!this.#built) this.#build();
  }

  /**
   * QuickJS polls this every few thousand operations of a running script (a short call is
   * never polled, so it costs nothing). The clock starts at the first poll: what ran before it
   * is a few thousand operations, and a call that is never polled cannot run away.
   */
  #interrupt(): boolean {
    if (this.#limitMs === 0) return false;
    const now = threadCpuMs();
    if (this.#cpuStart < 0) {
      this.#cpuStart = now;
      return false;
    }
    return now - this.#cpuStart > this.#limitMs;
  }

  #limit(ms: number): void {
    this.#limitMs = ms;
    this.#cpuStart = -1;
  }

  #build(): void {
    if (this.#brokenRuntimes >= MAX_BROKEN_RUNTIMES)
      throw new ScriptRuntimeError(
        `script disabled: it overflowed the sandbox's stack ${MAX_BROKEN_RUNTIMES} times`,
      );
    const runtime = this.module.newRuntime();
    runtime.setMemoryLimit(this.limits.memoryBytes);
    runtime.setMaxStackSize(QUICKJS_STACK_BYTES);
    runtime.setInterruptHandler(() => this.#interrupt());
    const context = runtime.newContext();
    this.#limit(Math.max(this.limits.timeoutMs, this.limits.compileTimeoutMs));
    let result: ReturnType<QuickJSContext['evalCode']>;
    try {
      result = context.evalCode(wrap(this.body, this.argNames), 'script.js');
    } catch (err) {
      // The host's stack ran out inside WebAssembly (a body nested thousands deep): the runtime
      // is left as it is (freeing it would trip QuickJS's own assertions).
      this.#brokenRuntimes++;
      throw new ScriptCompileError(`script too deeply nested (${(err as Error).name})`, undefined);
    } finally {
      this.#limit(0);
    }
    if (result.error) {
      const err = context.dump(result.error) as {
        name?: string;
        message?: string;
        lineNumber?: number;
      };
      result.error.dispose();
      context.dispose();
      runtime.dispose();
      throw new ScriptCompileError(
        `${err?.name ?? 'Error'}: ${err?.message ?? String(err)}`,
        typeof err?.lineNumber === 'number' ? err.lineNumber : undefined,
      );
    }
    this.#runtime = runtime;
    this.#context = context;
    this.#fn = context.getProp(result.value, 0);
    this.#many = context.getProp(result.value, 1);
    result.value.dispose();
    this.#built = true;
  }

  /**
   * One call with its arguments as values (the caller's, never changed: a script that may change
   * them gets copies): in the interpreter when it can answer exactly, else in QuickJS with their
   * JSON texts.
   */
  call(args: readonly unknown[]): CallOutcome {
    if (this.#disposed) throw new ScriptRuntimeError('script is disposed');
    const fast = this.#fastCall(args);
    if (fast) return fast;
    this.calls.quickjs++;
    return this.#one(args.map(jsonText));
  }

  /** Many calls (the rule engine's script nodes); deferred ones go to QuickJS in one batch. */
  callMany(calls: ReadonlyArray<readonly unknown[]>): CallOutcome[] {
    if (this.#disposed) throw new ScriptRuntimeError('script is disposed');
    const out = new Array<CallOutcome>(calls.length);
    const rest: number[] = [];
    for (let i = 0; i < calls.length; i++) {
      const o = this.#fastCall(calls[i] as readonly unknown[]);
      if (o) out[i] = o;
      else rest.push(i);
    }
    if (rest.length === 0) return out;
    this.calls.quickjs += rest.length;
    const quick = this.invokeMany(rest.map((i) => (calls[i] as readonly unknown[]).map(jsonText)));
    for (let k = 0; k < rest.length; k++) out[rest[k] as number] = quick[k] as CallOutcome;
    return out;
  }

  /** The interpreter's answer, or undefined when QuickJS must give it. */
  #fastCall(args: readonly unknown[]): CallOutcome | undefined {
    const fast = this.#fast;
    if (!fast) return undefined;
    let size = 0;
    for (const a of args) size += jsonArgSize(a, MAX_ARGS_CHARS);
    // Near the limit the exact text decides (QuickJS's path measures it so); an argument that
    // is not what JSON would give back is QuickJS's too (jsonArgSize).
    if (size > MAX_ARGS_CHARS) return undefined;
    try {
      const copies = fast.copies;
      let input = args;
      if (copies.includes(true)) input = args.map((a, i) => (copies[i] ? copyJson(a) : a));
      const r = fast.call(input);
      const { value, chars } = toJsonResult(r, MAX_RESULT_CHARS);
      this.#deferredInARow = 0;
      this.calls.fast++;
      if (chars !== undefined) return { ok: false, error: resultTooLarge(chars) };
      return { ok: true, value };
    } catch (err) {
      if (err instanceof ScriptTimeout) {
        this.calls.fast++;
        return {
          ok: false,
          error: new ScriptRuntimeError(`script stopped after ${err.limitMs} ms of CPU time`),
        };
      }
      // @NOTE: a Defer (or anything else the interpreter raised): QuickJS answers the call. A
      // script that keeps deferring (it throws on every message, it builds a Date) stops trying
      // the interpreter first.
      if (++this.#deferredInARow >= GIVE_UP_AFTER) this.#fast = undefined;
      this.#quick();
      return undefined;
    }
  }

  /**
   * Calls the script with arguments given as JSON texts and returns the result as JSON text
   * (undefined when the script returned nothing). Throws ScriptRuntimeError on an exception,
   * the time limit, the memory limit, or a result over the size limit.
   */
  invoke(jsonArgs: readonly string[]): string | undefined {
    if (this.#disposed) throw new ScriptRuntimeError('script is disposed');
    this.#quick();
    const size = argsSize(jsonArgs);
    if (size > MAX_ARGS_CHARS) throw tooLarge(size);
    const ctx = this.#context;
    const handles = jsonArgs.map((a) => newString(ctx, a));
    const text = this.#call(this.#fn, handles);
    if (text !== undefined && text.length > MAX_RESULT_CHARS) throw resultTooLarge(text.length);
    return text;
  }

  /**
   * Many calls in one crossing of the sandbox's boundary (the rule engine's script nodes, one
   * call per message), with the outcome of each: a call that throws or returns too much fails
   * alone, as `invoke` would. The calls share one time limit; when the batch as a whole is
   * stopped (time or memory), every call runs again on its own, with its own limit, so a call
   * fails only for what it spends itself (the calls before it have then run twice: state a
   * script keeps in globals sees both).
   */
  invokeMany(calls: ReadonlyArray<readonly string[]>): CallOutcome[] {
    if (this.#disposed) throw new ScriptRuntimeError('script is disposed');
    this.#quick();
    const out = new Array<CallOutcome>(calls.length);
    const parts: string[] = [];
    const at: number[] = [];
    for (let i = 0; i < calls.length; i++) {
      const args = calls[i] as readonly string[];
      const size = argsSize(args);
      if (size > MAX_ARGS_CHARS) out[i] = { ok: false, error: tooLarge(size) };
      else {
        parts.push(`[${args.join(',')}]`);
        at.push(i);
      }
    }
    if (parts.length === 0) return out;
    let entries: unknown[];
    try {
      const text = this.#call(this.#many, [newString(this.#context, `[${parts.join(',')}]`)]);
      entries = JSON.parse(text ?? '[]') as unknown[];
    } catch (err) {
      if (!(err instanceof ScriptRuntimeError)) throw err;
      entries = [];
    }
    // A batch stopped as a whole, or a call that ran out of memory (caught by the wrapper, but
    // the runtime must start again): every call on its own.
    const whole =
      entries.length !== at.length ||
      entries.some(
        (e) => (e as unknown[])[0] === 1 && /out of memory/.test(String((e as unknown[])[1])),
      );
    for (let k = 0; k < at.length; k++) {
      const i = at[k] as number;
      if (whole) {
        out[i] = this.#one(calls[i] as readonly string[]);
        continue;
      }
      const e = entries[k] as [number, unknown?];
      if (e[0] === 0) out[i] = { ok: true, value: e[1] };
      else if (e[0] === 2) out[i] = { ok: false, error: resultTooLarge(e[1] as number) };
      else out[i] = { ok: false, error: new ScriptRuntimeError(String(e[1])) };
    }
    return out;
  }

  #one(args: readonly string[]): CallOutcome {
    try {
      const text = this.invoke(args);
      return { ok: true, value: text === undefined ? undefined : JSON.parse(text) };
    } catch (err) {
      if (err instanceof ScriptRuntimeError) return { ok: false, error: err };
      throw err;
    }
  }

  /**
   * Calls `fn` with `handles` (disposed here) under the call limit: its string result, or
   * ScriptRuntimeError on an exception, the time limit or the memory limit.
   */
  #call(fn: QuickJSHandle, handles: QuickJSHandle[]): string | undefined {
    const ctx = this.#context;
    this.#limit(this.limits.timeoutMs);
    let result: ReturnType<QuickJSContext['callFunction']>;
    try {
      result = ctx.callFunction(fn, ctx.undefined, ...handles);
    } catch (err) {
      // @NOTE: the host's stack ran out inside WebAssembly before QuickJS's own stack check (it
      // is set low so that this should not happen: QUICKJS_STACK_BYTES). The runtime is
      // abandoned, not freed (freeing it aborts the module), and the next call builds another;
      // after MAX_BROKEN_RUNTIMES the script is disabled, so the leak stays bounded.
      this.#abandon();
      throw new ScriptRuntimeError(
        `script stopped: the sandbox's stack overflowed (${(err as Error).name})`,
      );
    } finally {
      this.#limit(0);
      if (this.#built) for (const h of handles) h.dispose();
    }
    if (result.error) {
      const err = ctx.dump(result.error) as { name?: string; message?: string } | string;
      result.error.dispose();
      const message =
        typeof err === 'object' && err !== null
          ? `${err.name ?? 'Error'}: ${err.message ?? ''}`
          : String(err);
      if (/interrupted/.test(message)) {
        throw new ScriptRuntimeError(
          `script stopped after ${this.limits.timeoutMs} ms of CPU time`,
        );
      }
      if (/out of memory/.test(message)) {
        // @NOTE: a runtime that hit its memory limit may hold garbage the script left in globals;
        // start it again from the compiled body.
        this.#rebuild();
        throw new ScriptRuntimeError(`script ran out of memory (${this.limits.memoryBytes} bytes)`);
      }
      throw new ScriptRuntimeError(message);
    }
    const type = ctx.typeof(result.value);
    const text = type === 'string' ? ctx.getString(result.value) : undefined;
    result.value.dispose();
    return text;
  }

  /** Drops a runtime left broken by a host stack overflow, without freeing it. */
  #abandon(): void {
    this.#brokenRuntimes++;
    this.#built = false;
  }

  #rebuild(): void {
    this.#release();
    this.#build();
  }

  #release(): void {
    if (!this.#built) return;
    this.#built = false;
    this.#fn.dispose();
    this.#many.dispose();
    this.#context.dispose();
    this.#runtime.dispose();
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#release();
  }
}
