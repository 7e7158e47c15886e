import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { entityId, type PageData, type PageQuery, pageData } from '../common/entity.js';
import { exceedsJsonDepth, validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { defaultRootChain } from './default-root-chain.js';
import { RULE_CHAIN_INPUT, RULE_CHAIN_OUTPUT } from './nodes/flow.js';
import { NODE_SPECS } from './nodes/index.js';
import { type RuleChainRow, type RuleChainSort, RuleChainStore } from './rule-chain-store.js';
import type { ScriptEngine } from './script/sandbox.js';

/** Bounds of what is stored: chains per gateway, nodes per chain, document nesting. */
export const MAX_RULE_CHAINS = 500;
export const MAX_NODES_PER_CHAIN = 500;
const MAX_DEPTH = 32;

/** Server-set node fields: stripped from stored nodes and from exports. */
const NODE_SERVER_FIELDS = ['id', 'createdTime', 'ruleChainId', 'externalId'] as const;

/** A node as stored: ThingsBoard's node JSON without server fields, plus our id and time. */
export interface StoredNode {
  readonly id: string;
  readonly createdTime: number;
  readonly type: string;
  readonly name: string;
  readonly configuration: Record<string, unknown>;
  readonly [field: string]: unknown;
}

export interface Connection {
  readonly fromIndex: number;
  readonly toIndex: number;
  readonly type: string;
}

/** A chain as the engine loads it. */
export interface ChainDefinition {
  readonly id: string;
  readonly name: string;
  readonly type: 'CORE' | 'EDGE';
  readonly root: boolean;
  readonly firstNodeIndex: number | null;
  readonly nodes: readonly StoredNode[];
  readonly connections: readonly Connection[];
}

const idRef = z.object({ id: z.uuid('must be a UUID') });

const chainBody = z.looseObject({
  id: idRef.nullable().optional(),
  name: z.string().trim().min(1, 'Rule chain name should be specified!').max(255),
  type: z.enum(['CORE', 'EDGE']).nullable().optional(),
  root: z.boolean().nullable().optional(),
  debugMode: z.boolean().nullable().optional(),
  configuration: z.unknown().optional(),
  additionalInfo: z.unknown().optional(),
  version: z.number().int().nullable().optional(),
});

const nodeBody = z.looseObject({
  id: idRef.nullable().optional(),
  type: z.string().trim().min(1, 'node type is required'),
  name: z.string().max(255),
  configuration: z.record(z.string(), z.unknown()).nullable().optional(),
});

const connectionBody = z.object({
  fromIndex: z.number().int().min(0),
  toIndex: z.number().int().min(0),
  type: z.string().trim().min(1, 'relation type is required'),
});

/** A link to another chain in the format before ThingsBoard 3.3 (`RuleChainConnectionInfo`). */
const legacyChainLink = z.looseObject({
  fromIndex: z.number().int().min(0),
  targetRuleChainId: idRef,
  additionalInfo: z.record(z.string(), z.unknown()).nullable().optional(),
  type: z.string().trim().min(1, 'relation type is required'),
});

const metadataBody = z.looseObject({
  ruleChainId: idRef.nullable().optional(),
  version: z.number().int().nullable().optional(),
  firstNodeIndex: z.number().int().min(0).nullable().optional(),
  nodes: z.array(nodeBody).max(MAX_NODES_PER_CHAIN).nullable().optional(),
  connections: z.array(connectionBody).nullable().optional(),
  ruleChainConnections: z.array(legacyChainLink).nullable().optional(),
});

const importBody = z.object({
  ruleChain: z.looseObject({}),
  metadata: z.looseObject({}),
});

/** ThingsBoard's `RuleChainData`: several chains, their metadata linked by `ruleChainId`. */
const bulkBody = z.object({
  ruleChains: z.array(z.looseObject({ id: idRef })).max(MAX_RULE_CHAINS),
  metadata: z.array(z.looseObject({ ruleChainId: idRef })).max(MAX_RULE_CHAINS),
});

/** One chain of a bulk import (ThingsBoard's `RuleChainImportResult`). */
export interface ChainImportResult {
  readonly ruleChainId: ReturnType<typeof entityId<'RULE_CHAIN'>>;
  readonly ruleChainName: string;
  readonly updated: boolean;
}

export type MetadataInput = z.infer<typeof metadataBody>;

export interface RuleChainServiceDeps {
  readonly db: Db;
  readonly tenants: TenantService;
  readonly scripts: ScriptEngine;
  /** Called after a chain was created, changed or deleted (the engine reloads it). */
  readonly onChange?: (chainId: string) => void;
}

function parseJson(text: string | null): unknown {
  return text === null ? null : JSON.parse(text);
}

/**
 * Rule chains in ThingsBoard's JSON (rule-engine reference §1): the chain entity, its metadata
 * (nodes and connections), the root flag, export and import. Every node type must be one this
 * gateway runs, and every configuration must pass its node's check (scripts compile), so that a
 * stored chain always loads.
 */
export class RuleChainService {
  readonly #store: RuleChainStore;
  #refused = 0;

  constructor(private readonly deps: RuleChainServiceDeps) {
    this.#store = new RuleChainStore(deps.db);
  }

  /** New chains refused at MAX_RULE_CHAINS since start (`/metrics`). */
  get refused(): number {
    return this.#refused;
  }

  /**
   * Creates the default root chain on first start (issue 14 §6). It is ours and not checked
   * here: checking compiles its scripts, which would load the script sandbox at start
   * (test/rule-chains.test.ts saves it through the API, checked).
   */
  init(now = Date.now()): void {
    if (this.#store.root(this.deps.tenants.id, 'CORE')) return;
    const chain = this.#create(defaultRootChain.ruleChain, now);
    this.#saveMetadata(chain.id, defaultRootChain.metadata, now, false);
    this.#store.makeRoot(chain.id, this.deps.tenants.id, 'CORE');
  }

  /** Every chain, for the engine to load. */
  definitions(): ChainDefinition[] {
    return this.#store.all().map(toDefinition);
  }

  definition(id: string): ChainDefinition | undefined {
    const row = this.#store.byId(id);
    return row ? toDefinition(row) : undefined;
  }

  /** `POST /api/ruleChain`: create (no id) or update name, debug mode, configuration, info. */
  save(body: unknown): ReturnType<typeof toRuleChain> {
    checkDepth(body, 'rule chain');
    const input = validate(chainBody, body, 'rule chain');
    if (!input.id) {
      const row = this.#create(input, Date.now());
      this.deps.onChange?.(row.id);
      return toRuleChain(row);
    }
    const id = input.id.id.toLowerCase();
    const existing = this.#row(id);
    checkVersion(existing, input.version);
    this.#store.update({
      id,
      name: input.name,
      debug_mode: input.debugMode ? 1 : 0,
      configuration: json(input.configuration),
      additional_info: json(input.additionalInfo),
    });
    this.deps.onChange?.(id);
    return toRuleChain(this.#row(id));
  }

  get(id: string): ReturnType<typeof toRuleChain> {
    return toRuleChain(this.#row(id));
  }

  list(type: string, q: PageQuery<RuleChainSort>): PageData<ReturnType<typeof toRuleChain>> {
    if (type !== 'CORE' && type !== 'EDGE') throw new ValidationError('type must be CORE or EDGE');
    const { rows, total } = this.#store.page(this.deps.tenants.id, type, q);
    return pageData(rows.map(toRuleChain), total, q);
  }

  metadata(id: string): ReturnType<typeof toMetadata> {
    return toMetadata(this.#row(id));
  }

  /** `POST /api/ruleChain/metadata`: replaces the nodes and connections of a chain. */
  async saveMetadata(body: unknown): Promise<ReturnType<typeof toMetadata>> {
    // The check compiles the nodes' scripts: the sandbox loads on the first save.
    await this.deps.scripts.ready();
    checkDepth(body, 'rule chain metadata');
    const input = validate(metadataBody, body, 'rule chain metadata');
    if (!input.ruleChainId)
      throw new ValidationError('Invalid rule chain metadata: ruleChainId is required');
    const id = input.ruleChainId.id.toLowerCase();
    checkVersion(this.#row(id), input.version);
    this.#saveMetadata(id, this.#withoutLegacyLinks(input), Date.now());
    this.deps.onChange?.(id);
    return toMetadata(this.#row(id));
  }

  /** `POST /api/ruleChain/{id}/root`: the old root loses the flag. */
  makeRoot(id: string): ReturnType<typeof toRuleChain> {
    const row = this.#row(id);
    const old = this.#store.root(row.tenant_id, row.type);
    this.#store.makeRoot(id, row.tenant_id, row.type);
    if (old && old.id !== id) this.deps.onChange?.(old.id);
    this.deps.onChange?.(id);
    return toRuleChain(this.#row(id));
  }

  delete(id: string): void {
    const row = this.#row(id);
    if (row.root) throw new ValidationError('Deletion of Root Tenant Rule Chain is prohibited!');
    this.#store.delete(id);
    this.deps.onChange?.(id);
  }

  /** The chain as ThingsBoard's UI exports it: `{ruleChain, metadata}` without server fields. */
  export(id: string): { ruleChain: Record<string, unknown>; metadata: Record<string, unknown> } {
    const row = this.#row(id);
    return {
      ruleChain: {
        name: row.name,
        type: row.type,
        firstRuleNodeId: null,
        root: false,
        debugMode: row.debug_mode === 1,
        configuration: parseJson(row.configuration),
        additionalInfo: parseJson(row.additional_info),
      },
      metadata: {
        firstNodeIndex: row.first_node_index,
        nodes: (JSON.parse(row.nodes) as StoredNode[]).map((n) => {
          const { id: _i, createdTime: _c, ...rest } = n;
          return rest;
        }),
        connections: JSON.parse(row.connections) as Connection[],
        ruleChainConnections: null,
      },
    };
  }

  /**
   * `POST /api/ruleChain/import`: a new, non-root chain from an export. Checks the metadata
   * before anything is stored, so a refused import leaves nothing behind.
   */
  async import(body: unknown): Promise<ReturnType<typeof toRuleChain>> {
    await this.deps.scripts.ready();
    checkDepth(body, 'rule chain export');
    const file = validate(importBody, body, 'rule chain export');
    const chainInput = validate(chainBody, { ...file.ruleChain, id: null }, 'rule chain');
    const metadataInput = this.#withoutLegacyLinks(
      validate(metadataBody, file.metadata, 'rule chain metadata'),
    );
    this.#checkMetadata(metadataInput);
    const now = Date.now();
    let id = '';
    this.deps.db.transaction(() => {
      id = this.#create(chainInput, now).id;
      this.#saveMetadata(id, metadataInput, now);
    })();
    this.deps.onChange?.(id);
    return toRuleChain(this.#row(id));
  }

  /**
   * `GET /api/ruleChain/{id}/output/labels`: the names of the chain's output nodes, the labels a
   * rule chain node calling it can go on by (sorted, each once).
   */
  outputLabels(id: string): string[] {
    const nodes = JSON.parse(this.#row(id).nodes) as StoredNode[];
    const labels = nodes.filter((n) => n.type === RULE_CHAIN_OUTPUT).map((n) => n.name);
    return [...new Set(labels)].sort();
  }

  /**
   * `GET /api/ruleChain/{id}/output/labels/usage`: the rule chain nodes that call this chain and
   * the labels they go on by (those with at least one), by chain name then node name.
   */
  outputLabelsUsage(id: string) {
    const target = this.#row(id).id;
    const usage = [];
    for (const row of this.#store.all()) {
      const nodes = JSON.parse(row.nodes) as StoredNode[];
      const connections = JSON.parse(row.connections) as Connection[];
      for (const [index, n] of nodes.entries()) {
        if (n.type !== RULE_CHAIN_INPUT || inputTarget(n) !== target) continue;
        const labels = [
          ...new Set(connections.filter((c) => c.fromIndex === index).map((c) => c.type)),
        ];
        if (labels.length === 0) continue;
        usage.push({
          ruleChainId: entityId('RULE_CHAIN', row.id),
          ruleNodeId: entityId('RULE_NODE', n.id),
          ruleChainName: row.name,
          ruleNodeName: n.name,
          labels: labels.sort(),
        });
      }
    }
    return usage.sort(
      (a, b) =>
        a.ruleChainName.localeCompare(b.ruleChainName) ||
        a.ruleNodeName.localeCompare(b.ruleNodeName),
    );
  }

  /**
   * `GET /api/ruleChains/export?limit=N`: ThingsBoard's `RuleChainData` of the first `limit`
   * CORE chains. Every chain gets a fresh id in the file, and rule chain nodes that call a chain
   * of the file name its new id, so that the file imports as a whole (reference §1.2).
   */
  exportAll(limit: number): { ruleChains: unknown[]; metadata: unknown[] } {
    const rows = this.#store
      .all()
      .filter((r) => r.type === 'CORE')
      .slice(0, Math.max(0, limit));
    const ids = new Map(rows.map((r) => [r.id, randomUUID()] as const));
    const files = rows.map((r) => {
      const id = entityId('RULE_CHAIN', ids.get(r.id) as string);
      const { ruleChain, metadata } = this.export(r.id);
      const nodes = (metadata.nodes as StoredNode[]).map((n) => retarget(n, ids));
      return { ruleChain: { ...ruleChain, id }, metadata: { ...metadata, ruleChainId: id, nodes } };
    });
    return { ruleChains: files.map((f) => f.ruleChain), metadata: files.map((f) => f.metadata) };
  }

  /**
   * `POST /api/ruleChains/import?overwrite=`: every chain of a `RuleChainData` file, as new
   * non-root chains (with `overwrite`, a CORE chain of the same name is replaced in place). The
   * file's ids are rewritten: rule chain nodes and legacy links that name a chain of the file
   * call its new chain. All or nothing: a 400 names the chain whose metadata is refused.
   */
  async importAll(body: unknown, overwrite: boolean): Promise<ChainImportResult[]> {
    await this.deps.scripts.ready();
    checkDepth(body, 'rule chains file');
    const file = validate(bulkBody, body, 'rule chains file');
    const byName = new Map(
      this.#store
        .all()
        .filter((r) => r.type === 'CORE' && !r.root)
        .map((r) => [r.name, r.id] as const),
    );
    const plan = file.ruleChains.map((raw) => {
      const chain = validate(chainBody, { ...raw, id: null }, 'rule chain');
      const fileId = raw.id.id.toLowerCase();
      const existing =
        overwrite && (chain.type ?? 'CORE') === 'CORE' ? byName.get(chain.name) : undefined;
      return { chain, fileId, id: existing ?? randomUUID(), updated: existing !== undefined };
    });
    const ids = new Map(plan.map((p) => [p.fileId, p.id] as const));
    const metadata = new Map(
      file.metadata.map((m) => [m.ruleChainId.id.toLowerCase(), m as Record<string, unknown>]),
    );
    const inputs = plan.map((p) => {
      const raw = metadata.get(p.fileId) ?? {};
      const links = Array.isArray(raw.ruleChainConnections) ? raw.ruleChainConnections : [];
      const rewritten = {
        ...raw,
        ruleChainId: null,
        version: null,
        nodes: Array.isArray(raw.nodes)
          ? raw.nodes.map((n) => retarget(n as StoredNode, ids))
          : raw.nodes,
        ruleChainConnections: links.map((l) => retargetLink(l, ids)),
      };
      try {
        const input = this.#withoutLegacyLinks(
          validate(metadataBody, rewritten, 'rule chain metadata'),
        );
        this.#checkMetadata(input);
        return input;
      } catch (err) {
        if (err instanceof ValidationError)
          throw new ValidationError(`Rule chain '${p.chain.name}': ${err.message}`);
        throw err;
      }
    });
    const now = Date.now();
    this.deps.db.transaction(() => {
      plan.forEach((p, i) => {
        if (!p.updated) this.#create(p.chain, now, p.id);
        this.#saveMetadata(p.id, inputs[i] as MetadataInput, now, false);
      });
    })();
    for (const p of plan) this.deps.onChange?.(p.id);
    return plan.map((p) => ({
      ruleChainId: entityId('RULE_CHAIN', p.id),
      ruleChainName: p.chain.name,
      updated: p.updated,
    }));
  }

  /**
   * Legacy links to other chains become rule chain nodes (as ThingsBoard converts them on save
   * and import): one node per link, named after the chain it calls, connected by the link's type.
   */
  #withoutLegacyLinks(input: MetadataInput): MetadataInput {
    const links = input.ruleChainConnections ?? [];
    if (links.length === 0) return input;
    const nodes: MetadataInput['nodes'] & object = [...(input.nodes ?? [])];
    const connections = [...(input.connections ?? [])];
    for (const link of links) {
      const target = link.targetRuleChainId.id.toLowerCase();
      const { description: _d, ruleChainNodeId: _n, ...layout } = link.additionalInfo ?? {};
      connections.push({ fromIndex: link.fromIndex, toIndex: nodes.length, type: link.type });
      nodes.push({
        type: RULE_CHAIN_INPUT,
        name: this.#store.byId(target)?.name ?? 'Rule Chain Input',
        configuration: { ruleChainId: target, forwardMsgToDefaultRuleChain: false },
        additionalInfo: layout,
      });
    }
    return { ...input, nodes, connections, ruleChainConnections: null };
  }

  #create(input: z.infer<typeof chainBody>, now: number, id: string = randomUUID()): RuleChainRow {
    if (this.#store.count() >= MAX_RULE_CHAINS) {
      this.#refused++;
      throw new ConflictError(`At most ${MAX_RULE_CHAINS} rule chains can be stored`);
    }
    const row: RuleChainRow = {
      id,
      tenant_id: this.deps.tenants.id,
      name: input.name,
      type: input.type ?? 'CORE',
      root: 0,
      debug_mode: input.debugMode ? 1 : 0,
      configuration: json(input.configuration),
      additional_info: json(input.additionalInfo),
      first_node_index: null,
      nodes: '[]',
      connections: '[]',
      created_time: now,
      version: 1,
    };
    this.#store.insert(row);
    return row;
  }

  /** Every problem of a metadata document, in one 400. */
  #checkMetadata(input: MetadataInput): void {
    const nodes = input.nodes ?? [];
    const unsupported = [...new Set(nodes.map((n) => n.type).filter((t) => !NODE_SPECS.has(t)))];
    if (unsupported.length > 0) {
      throw new ValidationError(
        `Unsupported rule node type${unsupported.length > 1 ? 's' : ''}: ${unsupported.join(', ')}`,
      );
    }
    const problems: string[] = [];
    const count = nodes.length;
    if (input.firstNodeIndex != null && input.firstNodeIndex >= count)
      problems.push(`firstNodeIndex ${input.firstNodeIndex} is not a node index (${count} nodes)`);
    const edges: Array<number[]> = nodes.map(() => []);
    for (const c of input.connections ?? []) {
      if (c.fromIndex >= count || c.toIndex >= count) {
        problems.push(
          `connection ${c.fromIndex} -> ${c.toIndex} (${c.type}) names a node that does not exist`,
        );
        continue;
      }
      if (c.fromIndex === c.toIndex) {
        problems.push(
          `connection ${c.fromIndex} -> ${c.toIndex} (${c.type}) connects a node to itself`,
        );
        continue;
      }
      edges[c.fromIndex]?.push(c.toIndex);
    }
    if (hasCycle(edges)) problems.push('connections make a cycle');
    nodes.forEach((n) => {
      const spec = NODE_SPECS.get(n.type);
      if (!spec?.check) return;
      const config = { ...spec.defaults, ...(n.configuration ?? {}) };
      const found = spec.check(config, this.deps.scripts);
      if (found.length > 0)
        problems.push(`'${n.name}' node configuration is invalid: ${found.join('; ')}`);
    });
    if (problems.length > 0) throw new ValidationError(problems.join('; '));
  }

  #saveMetadata(id: string, input: MetadataInput, now: number, check = true): void {
    if (check) this.#checkMetadata(input);
    const existing = new Map(
      (JSON.parse(this.#row(id).nodes) as StoredNode[]).map((n) => [n.id, n] as const),
    );
    const nodes: StoredNode[] = (input.nodes ?? []).map((n) => {
      const rest: Record<string, unknown> = { ...n };
      for (const f of NODE_SERVER_FIELDS) delete rest[f];
      const keep = n.id ? existing.get(n.id.id.toLowerCase()) : undefined;
      return {
        ...rest,
        id: keep?.id ?? randomUUID(),
        createdTime: keep?.createdTime ?? now,
        type: n.type,
        name: n.name,
        configuration: n.configuration ?? {},
      };
    });
    this.#store.updateMetadata({
      id,
      first_node_index: input.firstNodeIndex ?? null,
      nodes: JSON.stringify(nodes),
      connections: JSON.stringify(
        (input.connections ?? []).map((c) => ({
          fromIndex: c.fromIndex,
          toIndex: c.toIndex,
          type: c.type,
        })),
      ),
    });
  }

  #row(id: string): RuleChainRow {
    const row = this.#store.byId(id);
    if (!row) throw new NotFoundError(`Rule chain with id [${id}] is not found`);
    return row;
  }
}

/** The chain a rule chain node calls (lower case), or undefined. */
function inputTarget(node: { readonly configuration?: unknown }): string | undefined {
  const id = (node.configuration as { ruleChainId?: unknown } | null | undefined)?.ruleChainId;
  return typeof id === 'string' ? id.toLowerCase() : undefined;
}

/** A node of a file, calling the chain's new id when it calls a chain of the file. */
function retarget<N extends { readonly type?: unknown; readonly configuration?: unknown }>(
  node: N,
  ids: ReadonlyMap<string, string>,
): N {
  // A file's node that is not even an object is left for the metadata check to refuse.
  if (node === null || typeof node !== 'object') return node;
  const to = node.type === RULE_CHAIN_INPUT ? ids.get(inputTarget(node) ?? '') : undefined;
  if (!to) return node;
  return { ...node, configuration: { ...(node.configuration as object), ruleChainId: to } };
}

/** A legacy link of a file, to the chain's new id when it names a chain of the file. */
function retargetLink(link: unknown, ids: ReadonlyMap<string, string>): unknown {
  const l = link as { targetRuleChainId?: { id?: unknown } } | null;
  const id = l?.targetRuleChainId?.id;
  const to = typeof id === 'string' ? ids.get(id.toLowerCase()) : undefined;
  return to ? { ...l, targetRuleChainId: { entityType: 'RULE_CHAIN', id: to } } : link;
}

function json(value: unknown): string | null {
  return value === undefined || value === null ? null : JSON.stringify(value);
}

function checkDepth(body: unknown, what: string): void {
  if (exceedsJsonDepth(body, MAX_DEPTH))
    throw new ValidationError(`Invalid ${what}: nested deeper than ${MAX_DEPTH} levels`);
}

function checkVersion(row: RuleChainRow, version: number | null | undefined): void {
  if (typeof version === 'number' && version !== row.version) {
    throw new ConflictError(
      `Rule chain was already changed by someone else (version ${row.version}, request has ${version})`,
    );
  }
}

/** Depth-first search with colours: a grey node reached again closes a cycle. */
function hasCycle(edges: ReadonlyArray<readonly number[]>): boolean {
  const colour = new Uint8Array(edges.length);
  for (let start = 0; start < edges.length; start++) {
    if (colour[start] !== 0) continue;
    const stack: Array<[number, number]> = [[start, 0]];
    colour[start] = 1;
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as [number, number];
      const [node, next] = top;
      const targets = edges[node] ?? [];
      if (next >= targets.length) {
        colour[node] = 2;
        stack.pop();
        continue;
      }
      top[1] = next + 1;
      const to = targets[next] as number;
      if (colour[to] === 1) return true;
      if (colour[to] === 0) {
        colour[to] = 1;
        stack.push([to, 0]);
      }
    }
  }
  return false;
}

function toDefinition(row: RuleChainRow): ChainDefinition {
  return {
    id: row.id,
    name: row.name,
    type: row.type,
    root: row.root === 1,
    firstNodeIndex: row.first_node_index,
    nodes: JSON.parse(row.nodes) as StoredNode[],
    connections: JSON.parse(row.connections) as Connection[],
  };
}

/** ThingsBoard's `RuleChain` JSON. */
function toRuleChain(row: RuleChainRow) {
  const nodes = JSON.parse(row.nodes) as StoredNode[];
  const first = row.first_node_index === null ? undefined : nodes[row.first_node_index];
  return {
    id: entityId('RULE_CHAIN', row.id),
    createdTime: row.created_time,
    tenantId: entityId('TENANT', row.tenant_id),
    name: row.name,
    type: row.type,
    firstRuleNodeId: first ? entityId('RULE_NODE', first.id) : null,
    root: row.root === 1,
    debugMode: row.debug_mode === 1,
    configuration: parseJson(row.configuration),
    additionalInfo: parseJson(row.additional_info),
    externalId: null,
    version: row.version,
  };
}

/** ThingsBoard's `RuleChainMetaData` JSON, node ids included. */
function toMetadata(row: RuleChainRow) {
  const ruleChainId = entityId('RULE_CHAIN', row.id);
  return {
    ruleChainId,
    version: row.version,
    firstNodeIndex: row.first_node_index,
    nodes: (JSON.parse(row.nodes) as StoredNode[]).map((n) => ({
      debugSettings: null,
      singletonMode: false,
      queueName: null,
      configurationVersion: 0,
      additionalInfo: null,
      ...n,
      id: entityId('RULE_NODE', n.id),
      ruleChainId,
      externalId: null,
    })),
    connections: JSON.parse(row.connections) as Connection[],
    ruleChainConnections: null,
  };
}
