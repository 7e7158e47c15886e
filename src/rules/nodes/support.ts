/** Shared by the node files: reading configuration fields and running node scripts. */
import type { GatewayMsg } from '../../messages/types.js';
import {
  type CallOutcome,
  type CompiledScript,
  ScriptCompileError,
  type ScriptEngine,
  ScriptRuntimeError,
} from '../script/sandbox.js';
import type { NodeInit, NodeResult, NodeSpec } from '../types.js';

export const PREFIX = 'org.thingsboard.rule.engine.';

type Config = Readonly<Record<string, unknown>>;

export function str(config: Config, key: string, fallback = ''): string {
  const v = config[key];
  return typeof v === 'string' ? v : fallback;
}

export function num(config: Config, key: string, fallback: number): number {
  const v = config[key];
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return Number(v);
  return fallback;
}

export function bool(config: Config, key: string, fallback = false): boolean {
  const v = config[key];
  if (typeof v === 'boolean') return v;
  if (v === 'true') return true;
  if (v === 'false') return false;
  return fallback;
}

export function strings(config: Config, key: string): string[] {
  const v = config[key];
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

export function record(config: Config, key: string): Record<string, string> {
  const v = config[key];
  const out: Record<string, string> = {};
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return out;
  for (const [k, x] of Object.entries(v)) if (typeof x === 'string') out[k] = x;
  return out;
}

/** Problems for required fields that must be one of the given values. */
export function oneOf(config: Config, key: string, allowed: readonly string[]): string[] {
  const v = config[key];
  return typeof v === 'string' && allowed.includes(v)
    ? []
    : [`${key} must be one of ${allowed.join(', ')}`];
}

/** Which script field a node runs: `scriptLang` missing or null means JS (reference §4). */
export function scriptField(config: Config, jsField: string, tbelField: string): string {
  return config.scriptLang === 'TBEL' ? tbelField : jsField;
}

export const MSG_ARGS = ['msg', 'metadata', 'msgType'] as const;

/** Save-time check of a node script: compiles it once and names the line that does not parse. */
export function checkScript(
  config: Config,
  scripts: ScriptEngine,
  jsField: string,
  tbelField: string,
  argNames: readonly string[] = MSG_ARGS,
): string[] {
  const field = scriptField(config, jsField, tbelField);
  const body = str(config, field);
  try {
    scripts.compile(body, argNames).dispose();
    return [];
  } catch (err) {
    if (err instanceof ScriptCompileError) {
      const lang =
        config.scriptLang === 'TBEL'
          ? 'TBEL (only TBEL that is also JavaScript runs here)'
          : 'JavaScript';
      return [`${field}: ${lang} does not compile: ${err.message}`];
    }
    throw err;
  }
}

/**
 * Which of the message arguments a script body cannot see: its name appears nowhere in the text
 * (not even in a string or comment), and the body does not use `arguments` or `eval`, the only
 * ways to reach a parameter without naming it. Only for the message contract (`MSG_ARGS`).
 */
export function unseenArgs(body: string, argNames: readonly string[]): readonly boolean[] {
  if (argNames !== MSG_ARGS || /arguments|eval/.test(body)) return [false, false, false];
  return MSG_ARGS.map((name) => !body.includes(name));
}

/**
 * A node's script, called with a message's `msg`, `metadata` and `msgType`. It is compiled when
 * it first runs, not when the chain loads: the sandbox (ScriptEngine) is loaded only once a
 * script is needed. Before a run, `prepare()` gives the promise to wait for when it is not loaded
 * yet (`withScript` does both).
 */
export class NodeScript {
  #script: CompiledScript | undefined;
  #disposed = false;
  readonly #body: string;
  #unseenArgs: readonly boolean[] | undefined;

  constructor(
    private readonly scripts: ScriptEngine,
    config: Config,
    jsField: string,
    tbelField: string,
    private readonly argNames: readonly string[] = MSG_ARGS,
  ) {
    this.#body = str(config, scriptField(config, jsField, tbelField));
  }

  /** Undefined when the script can run now; else a promise that settles once it can. */
  prepare(): Promise<void> | undefined {
    return this.#script || this.scripts.loaded ? undefined : this.scripts.ready();
  }

  get #compiled(): CompiledScript {
    if (this.#disposed) throw new ScriptRuntimeError('script is disposed');
    this.#script ??= this.scripts.compile(this.#body, this.argNames, { fast: true });
    return this.#script;
  }

  /** The script on many messages in one go (one sandbox call for those QuickJS answers). */
  runMany(msgs: readonly GatewayMsg[]): CallOutcome[] {
    return this.#compiled.callMany(msgs.map((m) => this.#args(m)));
  }

  /**
   * `msg`, `metadata`, `msgType` as values (the sandbox copies them when the script may change
   * them). An argument the body never names (and that it cannot reach through `arguments` or
   * `eval`) is passed as `null`: QuickJS then does not parse what the script cannot see.
   */
  #args(msg: GatewayMsg): unknown[] {
    const [data, metadata, type] = this.#unseen;
    return [data ? null : (msg.data ?? {}), metadata ? null : msg.metadata, type ? null : msg.type];
  }

  /** For `msg`, `metadata`, `msgType`: true when the body cannot see it. */
  get #unseen(): readonly boolean[] {
    this.#unseenArgs ??= unseenArgs(this.#body, this.argNames);
    return this.#unseenArgs;
  }

  /** The script on one message: its parsed result; throws its error. */
  run(msg: GatewayMsg): unknown {
    const o = this.#compiled.call(this.#args(msg));
    if (!o.ok) throw o.error;
    return o.value;
  }

  /** Runs with arbitrary JSON texts (generator: previous message parts). */
  invoke(args: readonly string[]): unknown {
    const text = this.#compiled.invoke(args);
    return text === undefined ? undefined : JSON.parse(text);
  }

  dispose(): void {
    this.#disposed = true;
    this.#script?.dispose();
  }
}

/** Runs `fn` once `script` can run: at once, or after the sandbox has loaded. */
export function withScript<T>(script: NodeScript, fn: () => T): T | Promise<T> {
  const loading = script.prepare();
  return loading !== undefined ? loading.then(fn) : fn();
}

export function wrongResult(what: string, got: unknown): ScriptRuntimeError {
  return new ScriptRuntimeError(
    `Wrong result type: ${what} expected, got ${JSON.stringify(got) ?? 'undefined'}`,
  );
}

/** The device id of a DEVICE originator, or an error naming what the node needs. */
export function deviceOf(msg: GatewayMsg, node: string): string {
  if (msg.originator.entityType !== 'DEVICE')
    throw new Error(`${node}: originator is ${msg.originator.entityType}, a DEVICE is required`);
  return msg.originator.id;
}

/**
 * A node that runs one script per message with `msg`, `metadata`, `msgType` (filter, switch,
 * transform, log): TBEL by default as ThingsBoard's new nodes; `onResult` turns the script's
 * parsed result into outputs.
 */
export function scriptNodeSpec(
  type: string,
  defaultScript: string,
  onResult: (result: unknown, msg: GatewayMsg, init: NodeInit) => NodeResult,
): NodeSpec {
  return {
    type: `${PREFIX}${type}`,
    defaults: { scriptLang: 'TBEL', jsScript: defaultScript, tbelScript: defaultScript },
    check: (c, scripts) => checkScript(c, scripts, 'jsScript', 'tbelScript'),
    create: (init) => {
      const script = new NodeScript(init.services.scripts, init.config, 'jsScript', 'tbelScript');
      return {
        onMsg: (msg) => withScript(script, () => onResult(script.run(msg), msg, init)),
        // Many messages in one go; each keeps its own result or error.
        onBatch: (msgs) => {
          if (script.prepare() !== undefined) return undefined;
          return script.runMany(msgs).map((o, i) => {
            if (!o.ok) return o.error;
            const msg = msgs[i] as GatewayMsg;
            try {
              return onResult(o.value, msg, init);
            } catch (err) {
              return err instanceof Error ? err : new Error(String(err));
            }
          });
        },
        destroy: () => script.dispose(),
      };
    },
  };
}
