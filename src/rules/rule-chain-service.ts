import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { entityId, type PageData, type PageQuery, pageData } from '../common/entity.js';
import { exceedsJsonDepth, validate } from '../common/validate.js';
import type { Db } from '../db/open.js';
import { ConflictError, NotFoundError, ValidationError } from '../errors.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { defaultRootChain } from './default-root-chain.js';
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

const metadataBody = z.looseObject({
  ruleChainId: idRef.nullable().optional(),
  version: z.number().int().nullable().optional(),
  firstNodeIndex: z.number().int().min(0).nullable().optional(),
  nodes: z.array(nodeBody).max(MAX_NODES_PER_CHAIN).nullable().optional(),
  connections: z.array(connectionBody).nullable().optional(),
  ruleChainConnections: z.array(z.unknown()).nullable().optional(),
});

const importBody = z.object({
  ruleChain: z.looseObject({}),
  metadata: z.looseObject({}),
});

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
    this.#saveMetadata(id, input, Date.now());
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
    const metadataInput = validate(metadataBody, file.metadata, 'rule chain metadata');
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

  #create(input: z.infer<typeof chainBody>, now: number): RuleChainRow {
    if (this.#store.count() >= MAX_RULE_CHAINS) {
      this.#refused++;
      throw new ConflictError(`At most ${MAX_RULE_CHAINS} rule chains can be stored`);
    }
    const row: RuleChainRow = {
      id: randomUUID(),
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
    if (input.ruleChainConnections && input.ruleChainConnections.length > 0) {
      throw new ValidationError(
        'ruleChainConnections (links to other rule chains) are not supported; connect the nodes of one chain',
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
