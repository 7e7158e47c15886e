/**
 * The rule engine: the gateway's one processing entry point once it is wired (MessageProcessor).
 * Every message goes to the root chain, or to its device profile's default chain; nodes route by
 * relation labels (rule-engine reference §2). A node that throws sends the message to `Failure`;
 * nothing a node does escapes the engine. Each chain has a bounded queue: past the bound the
 * oldest waiting message is dropped, counted and logged (STYLE §12).
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { ChainCaller, GatewayMsg, MessageProcessor } from '../messages/types.js';
import { derive } from './msg.js';
import { failureMetadata } from './nodes/external.js';
import { TYPE_LABELS } from './nodes/filter.js';
import { RULE_CHAIN_INPUT } from './nodes/flow.js';
import { NODE_SPECS } from './nodes/index.js';
import type { ChainDefinition, RuleChainService } from './rule-chain-service.js';
import {
  FAILURE,
  type NodeOutput,
  type NodeResult,
  type RuleNode,
  type RuleServices,
} from './types.js';

export interface RuleEngineOptions {
  /** Messages waiting per chain before the oldest are dropped (default 10 000). */
  readonly queueSize?: number;
  /** Messages of one chain being processed at once, e.g. waiting on a REST call (default 64). */
  readonly maxInFlight?: number;
}

export interface RuleEngineDeps extends RuleEngineOptions {
  readonly chains: RuleChainService;
  /** What nodes use of the gateway, except what moves messages between chains (the engine's). */
  readonly services: Omit<RuleServices, 'enqueue' | 'callChain' | 'returnToCaller'>;
  readonly log: Logger;
  /** The device profile's `defaultRuleChainId` of a device, when it has one. */
  readonly profileChainOf?: (deviceId: string, msg?: GatewayMsg) => string | null | undefined;
}

/** Counters of one chain, as `GET /api/ruleChains/stats` shows them. */
export interface ChainStats {
  readonly id: string;
  readonly name: string;
  readonly queued: number;
  readonly inFlight: number;
  readonly processed: number;
  /** Messages that ended on an unconnected `Failure` (node error, script error, ...). */
  readonly failed: number;
  /** Messages dropped because the chain's queue was full. */
  readonly dropped: number;
  /**
   * Messages its rule chain nodes sent to `Failure` because calls between chains were nested
   * deeper than MAX_CHAIN_DEPTH (chains calling each other in a loop).
   */
  readonly looped: number;
}

/** Longest path of one message through nodes (cycles are refused on save; this is a backstop). */
const MAX_HOPS = 64;
/** Rule chain calls one message may be inside at once (chains calling each other in a loop). */
export const MAX_CHAIN_DEPTH = 16;
const DROP_LOG_INTERVAL_MS = 10_000;

/** A node of a loaded chain, or why it could not be built (every message to it then fails). */
type Slot = { node: RuleNode; name: string } | { error: string; name: string };

/** A step of one message's walk: the node to run it on, and how many hops it has made. */
interface Work {
  readonly node: number;
  readonly msg: GatewayMsg;
  readonly hops: number;
}

/** Longest a pump holds the event loop before the rest of its queue waits for a later turn. */
const PUMP_BUDGET_MS = 20;
/** Messages that walk a chain together, so that a script node runs them in one sandbox call. */
const BATCH = 32;

/** One unit of queued work: run a node, or route a node's output by labels. */
interface Item {
  readonly msg: GatewayMsg;
  readonly node: number;
  readonly labels?: readonly string[];
}

class LoadedChain {
  readonly queue: Item[] = [];
  head = 0;
  inFlight = 0;
  processed = 0;
  failed = 0;
  dropped = 0;
  looped = 0;
  droppedSinceLog = 0;
  lastDropLog = 0;
  scheduled = false;
  closed = false;
  /**
   * `reaches` answers of this chain (it is rebuilt on every change), by mode, node type and
   * message type: nested maps, so that a lookup (on every device uplink) builds no key.
   */
  readonly reach = new Map<ReachMode, Map<string, Map<string, boolean>>>();

  constructor(
    readonly def: ChainDefinition,
    readonly slots: Slot[],
    readonly routes: ReadonlyArray<ReadonlyMap<string, readonly number[]>>,
  ) {}

  get size(): number {
    return this.queue.length - this.head;
  }

  take(): Item | undefined {
    if (this.head >= this.queue.length) return undefined;
    const item = this.queue[this.head];
    this.queue[this.head] = undefined as unknown as Item;
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    return item;
  }
}

const SWITCH = 'org.thingsboard.rule.engine.filter.TbMsgTypeSwitchNode';
const TYPE_FILTER = 'org.thingsboard.rule.engine.filter.TbMsgTypeFilterNode';
/**
 * Nodes that hand a message on as they got it: the filters and switches (they only route), the
 * save nodes (a committed uplink passes unchanged) and the device profile node.
 */
const KEEPS_MSG = new Set([
  'org.thingsboard.rule.engine.telemetry.TbMsgTimeseriesNode',
  'org.thingsboard.rule.engine.telemetry.TbMsgAttributesNode',
  'org.thingsboard.rule.engine.profile.TbDeviceProfileNode',
]);
const keepsMsg = (type: string) =>
  type.startsWith('org.thingsboard.rule.engine.filter.') || KEEPS_MSG.has(type);

/**
 * How a walk goes through nodes: `any` by every relation; `unchanged` only through nodes that
 * keep the message (`keepsMsg`); `direct` only through message type switches and filters.
 */
export type ReachMode = 'any' | 'unchanged' | 'direct';

/**
 * Breadth-first from the first node: is a node of `nodeType` reachable by a `msgType` message?
 * `direct`: only through message type switches and filters, so that the message arrives there
 * surely and unchanged; `unchanged`: through nodes that keep it, whatever their conditions.
 */
function reachable(
  chain: LoadedChain,
  msgType: string,
  nodeType: string,
  mode: ReachMode = 'any',
): boolean {
  const { nodes } = chain.def;
  const first = chain.def.firstNodeIndex;
  if (first === null || !nodes[first]) return false;
  const seen = new Set<number>([first]);
  const todo = [first];
  while (todo.length > 0) {
    const i = todo.pop() as number;
    const node = nodes[i];
    if (node.type === nodeType) return true;
    if (mode === 'direct' && node.type !== SWITCH && node.type !== TYPE_FILTER) continue;
    if (mode === 'unchanged' && !keepsMsg(node.type)) continue;
    let labels: Iterable<string> = chain.routes[i].keys();
    if (node.type === SWITCH) labels = [TYPE_LABELS[msgType] ?? 'Other'];
    else if (node.type === TYPE_FILTER) {
      const types = (node.configuration as { messageTypes?: unknown }).messageTypes;
      labels = [Array.isArray(types) && types.includes(msgType) ? 'True' : 'False'];
    }
    for (const label of labels) {
      for (const next of chain.routes[i].get(label) ?? []) {
        if (!seen.has(next)) {
          seen.add(next);
          todo.push(next);
        }
      }
    }
  }
  return false;
}

export class RuleEngine implements MessageProcessor {
  readonly #chains = new Map<string, LoadedChain>();
  readonly #queueSize: number;
  readonly #maxInFlight: number;
  readonly #services: RuleServices;
  #rootId: string | undefined;
  #started = false;
  #unrouted = 0;
  #generation = 0;

  constructor(private readonly deps: RuleEngineDeps) {
    this.#queueSize = deps.queueSize ?? 10_000;
    this.#maxInFlight = deps.maxInFlight ?? 64;
    this.#services = {
      ...deps.services,
      enqueue: (msg, chainId) => this.#enqueueTo(chainId ?? this.#rootId, { msg, node: -1 }),
      callChain: (msg, to, from) => this.#callChain(msg, to, from),
      returnToCaller: (msg, label) => this.#returnToCaller(msg, label),
    };
  }

  /** Changes with every chain loaded or unloaded: answers of `reaches` cached by others expire. */
  get generation(): number {
    return this.#generation;
  }

  /** Loads every chain (builds nodes, starts generators). */
  start(): void {
    this.#started = true;
    for (const def of this.deps.chains.definitions()) this.#load(def);
  }

  /** Destroys every node; queued messages are dropped (their data is already committed). */
  stop(): void {
    this.#started = false;
    this.#generation++;
    for (const chain of this.#chains.values()) this.#unload(chain);
    this.#chains.clear();
    this.#rootId = undefined;
  }

  /** Reloads one chain after it was saved, or unloads it after it was deleted. */
  reload(chainId: string): void {
    if (!this.#started) return;
    this.#generation++;
    const old = this.#chains.get(chainId);
    if (old) this.#unload(old);
    this.#chains.delete(chainId);
    if (this.#rootId === chainId) this.#rootId = undefined;
    const def = this.deps.chains.definition(chainId);
    if (def) this.#load(def);
  }

  /** MessageProcessor: queues the message on its chain and returns at once; never throws. */
  process(msg: GatewayMsg): void {
    try {
      const chainId =
        msg.originator.entityType === 'DEVICE'
          ? this.#chainOf(msg.originator.id, msg)
          : this.#rootId;
      this.#enqueueTo(chainId, { msg, node: -1 });
    } catch (err) {
      this.deps.log.error({ err, msgId: msg.id }, 'rule engine could not take a message');
    }
  }

  /**
   * The message queue's turn ended: the chains run what it handed over now (within their
   * budget), in the same turn, rather than after another turn of the event loop.
   */
  endBatch(): void {
    for (const chain of this.#chains.values()) if (chain.size > 0) this.#pump(chain);
  }

  /**
   * Whether a message of this type from this device can reach a node of `nodeType` in the chain
   * that handles it: message type switches and filters are followed by the type, other nodes by
   * every relation (their conditions are not evaluated). `unchanged`: only through nodes that
   * keep the message (filters, switches, save nodes, the device profile node): the upstream
   * outbox decides with it at commit time what the chain will push as committed
   * (docs/upstream.md). `direct`: only through message type switches and filters, the message
   * unchanged on its way (the alarm engine evaluates device uplinks in their commit for such
   * chains, docs/alarms.md).
   */
  reaches(deviceId: string, msgType: string, nodeType: string, mode: ReachMode = 'any'): boolean {
    const chain = this.#chains.get(this.#chainOf(deviceId) ?? '');
    if (!chain) return false;
    let byNode = chain.reach.get(mode);
    if (!byNode) {
      byNode = new Map();
      chain.reach.set(mode, byNode);
    }
    let byType = byNode.get(nodeType);
    if (!byType) {
      byType = new Map();
      byNode.set(nodeType, byType);
    }
    let answer = byType.get(msgType);
    if (answer === undefined) {
      answer = reachable(chain, msgType, nodeType, mode);
      byType.set(msgType, answer);
    }
    return answer;
  }

  #chainOf(deviceId: string, msg?: GatewayMsg): string | undefined {
    const own = this.deps.profileChainOf?.(deviceId, msg);
    return own && this.#chains.has(own) ? own : this.#rootId;
  }

  stats(): { chains: ChainStats[]; unrouted: number } {
    return {
      unrouted: this.#unrouted,
      chains: [...this.#chains.values()].map((c) => ({
        id: c.def.id,
        name: c.def.name,
        queued: c.size,
        inFlight: c.inFlight,
        processed: c.processed,
        failed: c.failed,
        dropped: c.dropped,
        looped: c.looped,
      })),
    };
  }

  /** Resolves when every queue is empty and nothing is in flight (tests, benchmarks). */
  async idle(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const busy = [...this.#chains.values()].some((c) => c.size > 0 || c.inFlight > 0);
      if (!busy) return;
      if (Date.now() > deadline) throw new Error('rule engine did not become idle');
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  #load(def: ChainDefinition): void {
    if (def.type !== 'CORE') return;
    const routes = def.nodes.map(() => new Map<string, number[]>());
    for (const c of def.connections) {
      const from = routes[c.fromIndex];
      if (!from) continue;
      const list = from.get(c.type) ?? [];
      list.push(c.toIndex);
      from.set(c.type, list);
    }
    const slots: Slot[] = [];
    const chain = new LoadedChain(def, slots, routes);
    def.nodes.forEach((n, index) => {
      const spec = NODE_SPECS.get(n.type);
      try {
        if (!spec) throw new Error(`unsupported node type ${n.type}`);
        const node = spec.create({
          id: n.id,
          name: n.name,
          chainId: def.id,
          index,
          config: { ...spec.defaults, ...n.configuration },
          services: this.#services,
          emit: (result) => this.#emit(chain, index, result),
        });
        slots.push({ node, name: n.name });
      } catch (err) {
        const error = err instanceof Error ? err.message : String(err);
        this.deps.log.error({ err, chainId: def.id, node: n.name }, 'rule node failed to start');
        slots.push({ error, name: n.name });
      }
    });
    this.#chains.set(def.id, chain);
    if (def.root) this.#rootId = def.id;
    this.deps.log.info(
      { chainId: def.id, name: def.name, nodes: slots.length, root: def.root },
      'rule chain loaded',
    );
  }

  #unload(chain: LoadedChain): void {
    chain.closed = true;
    for (const slot of chain.slots) {
      if (!('node' in slot)) continue;
      try {
        slot.node.destroy?.();
      } catch (err) {
        this.deps.log.error(
          { err, chainId: chain.def.id, node: slot.name },
          'rule node destroy failed',
        );
      }
    }
  }

  /** Output of a node after `onMsg` returned (delay, generator, RPC reply): routed from it. */
  #emit(chain: LoadedChain, index: number, result: NodeResult): void {
    if (chain.closed || !result) return;
    const outputs = Array.isArray(result)
      ? (result as readonly NodeOutput[])
      : [result as NodeOutput];
    for (const out of outputs) {
      const labels = typeof out.labels === 'string' ? [out.labels] : out.labels;
      this.#push(chain, { msg: out.msg, node: index, labels });
    }
  }

  /** A rule chain node: into the called chain's queue, with the caller on the message's stack. */
  #callChain(
    msg: GatewayMsg,
    to: { readonly chainId: string; readonly toProfileChain: boolean },
    from: ChainCaller,
  ): void {
    const callers = msg.callers ?? [];
    if (callers.length >= MAX_CHAIN_DEPTH) {
      const caller = this.#chains.get(from.chainId);
      if (caller) caller.looped++;
      throw new Error(
        `rule chain calls nested deeper than ${MAX_CHAIN_DEPTH} (do chains call each other in a loop?)`,
      );
    }
    let chainId = to.chainId;
    if (to.toProfileChain && msg.originator.entityType === 'DEVICE') {
      const own = this.deps.profileChainOf?.(msg.originator.id, msg);
      if (own && this.#chains.has(own)) chainId = own;
    }
    const chain = this.#chains.get(chainId);
    if (!chain || chain.def.firstNodeIndex === null)
      throw new Error(`Rule chain [${chainId}] is not there or has no first node`);
    this.#push(chain, {
      msg: { ...msg, callers: [...callers, from] },
      node: chain.def.firstNodeIndex,
    });
  }

  /**
   * An output node: the message goes back to the chain that called, on from its rule chain node
   * by `label`. Without a caller it ends; a caller changed since (reloaded) counts as unrouted.
   */
  #returnToCaller(msg: GatewayMsg, label: string): void {
    const callers = msg.callers;
    const top = callers?.[callers.length - 1];
    if (!callers || !top) return;
    const chain = this.#chains.get(top.chainId);
    if (chain?.def.nodes[top.nodeIndex]?.type !== RULE_CHAIN_INPUT) {
      this.#unrouted++;
      return;
    }
    const { callers: _, ...rest } = msg;
    const back: GatewayMsg = callers.length > 1 ? { ...rest, callers: callers.slice(0, -1) } : rest;
    this.#push(chain, { msg: back, node: top.nodeIndex, labels: [label] });
  }

  #enqueueTo(chainId: string | undefined, item: Item): void {
    const chain = chainId === undefined ? undefined : this.#chains.get(chainId);
    if (!chain || chain.def.firstNodeIndex === null) {
      this.#unrouted++;
      return;
    }
    this.#push(chain, item.node === -1 ? { ...item, node: chain.def.firstNodeIndex } : item);
  }

  #push(chain: LoadedChain, item: Item): void {
    if (chain.size >= this.#queueSize) {
      chain.take();
      chain.dropped++;
      chain.droppedSinceLog++;
      const now = Date.now();
      if (now - chain.lastDropLog >= DROP_LOG_INTERVAL_MS) {
        this.deps.log.warn(
          {
            chainId: chain.def.id,
            dropped: chain.droppedSinceLog,
            total: chain.dropped,
            queueSize: this.#queueSize,
          },
          'rule chain queue full: oldest messages dropped',
        );
        chain.lastDropLog = now;
        chain.droppedSinceLog = 0;
      }
    }
    chain.queue.push(item);
    this.#schedule(chain);
  }

  /** Drains on a later turn, never inside `process` (which runs on the acknowledgement path). */
  #schedule(chain: LoadedChain): void {
    if (chain.scheduled) return;
    chain.scheduled = true;
    setImmediate(() => {
      chain.scheduled = false;
      this.#pump(chain);
    });
  }

  /**
   * Runs queued messages until the queue is empty, `maxInFlight` messages wait on a promise, or
   * the turn's budget is spent (then the rest waits for a later turn, so I/O interleaves). Up to
   * BATCH messages walk the chain together (#lockstep). A message whose nodes all answer
   * synchronously is finished within this call: only messages waiting on a node's promise hold
   * an in-flight slot.
   */
  #pump(chain: LoadedChain): void {
    const deadline = performance.now() + PUMP_BUDGET_MS;
    while (!chain.closed && chain.inFlight < this.#maxInFlight) {
      const walks: Work[][] = [];
      const room = Math.min(BATCH, this.#maxInFlight - chain.inFlight);
      while (walks.length < room) {
        const item = chain.take();
        if (!item) break;
        const work: Work[] = [];
        if (item.labels) this.#route(chain, item.node, item.labels, item.msg, 0, work);
        else work.push({ node: item.node, msg: item.msg, hops: 0 });
        walks.push(work);
      }
      if (walks.length === 0) return;
      this.#lockstep(chain, walks);
      if (performance.now() >= deadline) {
        if (chain.size > 0) this.#schedule(chain);
        return;
      }
    }
  }

  /**
   * Walks several messages through the chain together, so that a node that takes a batch
   * (`onBatch`: the script nodes, one sandbox call for many messages) gets them at once. Each
   * turn runs the next step of the first unfinished walk, together with the walks right after
   * it whose only next step is the same node (any node, so that the walks stay together on the
   * way to a script node): every node still sees the messages in queue order, and a message's
   * own steps keep their order. A walk that reaches a node answering
   * with a promise leaves the lockstep and goes on alone when it settles (as in #run).
   */
  #lockstep(chain: LoadedChain, walks: Work[][]): void {
    let first = 0;
    while (!chain.closed) {
      while (first < walks.length && (walks[first] as Work[]).length === 0) first++;
      if (first >= walks.length) return;
      const lead = walks[first] as Work[];
      const step = lead[lead.length - 1] as Work;
      const slot = chain.slots[step.node];
      const group = [first];
      if (lead.length === 1) {
        for (let j = first + 1; j < walks.length; j++) {
          const w = walks[j] as Work[];
          if (w.length === 0) continue;
          if (w.length !== 1 || (w[0] as Work).node !== step.node) break;
          group.push(j);
        }
      }
      const results =
        group.length > 1 && slot && 'node' in slot && slot.node.onBatch
          ? this.#batch(
              slot.node,
              group.map((j) => (walks[j] as Work[])[0] as Work),
            )
          : undefined;
      for (let k = 0; k < group.length; k++) {
        const j = group[k] as number;
        const work = walks[j] as Work[];
        const at = work.pop() as Work;
        if (results) {
          const r = results[k];
          if (r instanceof Error) this.#nodeFailed(chain, at, r, work);
          else this.#outputs(chain, at, r, work);
        } else {
          const pending = this.#step(chain, at, work);
          if (pending !== undefined) {
            walks[j] = [];
            this.#await(
              chain,
              pending.then(() => this.#run(chain, work)),
            );
            continue;
          }
        }
        if (work.length === 0) chain.processed++;
      }
    }
  }

  /** A node's answers for several messages at once, or undefined when it cannot (or threw). */
  #batch(node: RuleNode, steps: readonly Work[]): ReadonlyArray<NodeResult | Error> | undefined {
    try {
      const results = node.onBatch?.(steps.map((s) => s.msg));
      return results && results.length === steps.length ? results : undefined;
    } catch {
      return undefined;
    }
  }

  /** A walk waiting on a node's promise holds an in-flight slot until the rest of it is done. */
  #await(chain: LoadedChain, pending: Promise<void>): void {
    chain.inFlight++;
    pending.then(
      () => {
        chain.inFlight--;
        chain.processed++;
        if (chain.size > 0) this.#schedule(chain);
      },
      (err: unknown) => {
        // @NOTE: #run catches node errors itself; this is a bug in the engine, logged loudly.
        chain.inFlight--;
        this.deps.log.error({ err, chainId: chain.def.id }, 'rule engine error');
      },
    );
  }

  /**
   * Walks one message through the chain's nodes. Returns undefined when every node answered
   * synchronously, else a promise of the rest of the walk after the first node that did not.
   */
  #run(chain: LoadedChain, work: Work[]): Promise<void> | undefined {
    for (let step = work.pop(); step; step = work.pop()) {
      if (chain.closed) return undefined;
      const pending = this.#step(chain, step, work);
      if (pending !== undefined) return pending.then(() => this.#run(chain, work));
    }
    return undefined;
  }

  /**
   * Runs one node on one message and routes its outputs into `work`. Returns a promise when the
   * node answered with one (its outputs are routed when it settles).
   */
  #step(chain: LoadedChain, step: Work, work: Work[]): Promise<void> | undefined {
    const slot = chain.slots[step.node];
    if (!slot) return undefined;
    if ('error' in slot) {
      const error = `Rule Node is not active! Failed to initialize: ${slot.error}`;
      this.#outputs(chain, step, { labels: FAILURE, msg: step.msg }, work, error);
      return undefined;
    }
    let r: NodeResult | Promise<NodeResult>;
    try {
      r = slot.node.onMsg(step.msg);
    } catch (err) {
      this.#nodeFailed(chain, step, err, work);
      return undefined;
    }
    if (isPromise(r)) {
      return r.then(
        (result) => this.#outputs(chain, step, result, work),
        (err: unknown) => this.#nodeFailed(chain, step, err, work),
      );
    }
    this.#outputs(chain, step, r, work);
    return undefined;
  }

  /** A node threw or rejected: the message goes on `Failure` with the error in its metadata. */
  #nodeFailed(chain: LoadedChain, step: Work, err: unknown, work: Work[]): void {
    const error = err instanceof Error ? err.message : String(err);
    const metadata = failureMetadata(err);
    const msg = metadata
      ? derive(step.msg, { metadata: { ...step.msg.metadata, ...metadata } })
      : step.msg;
    this.#outputs(chain, step, { labels: FAILURE, msg }, work, error);
  }

  #outputs(chain: LoadedChain, step: Work, result: NodeResult, work: Work[], error?: string): void {
    if (!result) return;
    // One output with one label is most messages' every step: no arrays made for it.
    if (!Array.isArray(result)) {
      const out = result as NodeOutput;
      this.#route(chain, step.node, out.labels, out.msg, step.hops + 1, work, error);
      return;
    }
    for (const out of result as readonly NodeOutput[])
      this.#route(chain, step.node, out.labels, out.msg, step.hops + 1, work, error);
  }

  #route(
    chain: LoadedChain,
    from: number,
    labels: string | readonly string[],
    msg: GatewayMsg,
    hops: number,
    work: Work[],
    error?: string,
  ): void {
    if (typeof labels === 'string') {
      this.#routeOne(chain, from, labels, msg, hops, work, error);
      return;
    }
    for (const label of labels)
      if (!this.#routeOne(chain, from, label, msg, hops, work, error)) return;
  }

  /** Routes one label; false when the message went over the hop limit (it goes no further). */
  #routeOne(
    chain: LoadedChain,
    from: number,
    label: string,
    msg: GatewayMsg,
    hops: number,
    work: Work[],
    error?: string,
  ): boolean {
    const targets = chain.routes[from]?.get(label);
    if (!targets) {
      // An unconnected label ends the message; an unconnected Failure fails it (reference §2).
      if (label === FAILURE)
        this.#failed(chain, chain.slots[from]?.name ?? '?', msg, error ?? 'Failure');
      return true;
    }
    if (hops >= MAX_HOPS) {
      this.#failed(chain, chain.slots[from]?.name ?? '?', msg, `more than ${MAX_HOPS} hops`);
      return false;
    }
    for (const to of targets) work.push({ node: to, msg, hops });
    return true;
  }

  /** A message that ended on an unconnected `Failure`: counted, logged at info. */
  #failed(chain: LoadedChain, node: string, msg: GatewayMsg, error: string): void {
    chain.failed++;
    this.deps.log.info(
      { chainId: chain.def.id, node, msgId: msg.id, msgType: msg.type, error },
      'rule chain message failed',
    );
  }
}

function isPromise<T>(v: T | Promise<T>): v is Promise<T> {
  return typeof (v as { then?: unknown } | undefined)?.then === 'function';
}
