/** ThingsBoard rule-chain export JSON for tests, built from compact node and link lists. */

const P = 'org.thingsboard.rule.engine.';
/** A node: its class name relative to `org.thingsboard.rule.engine.`, name, configuration. */
export type NodeDef = [type: string, name: string, configuration: Record<string, unknown>];
/** A connection: from index, to index, relation label. */
export type Link = [from: number, to: number, label: string];

/** A rule-chain export (`{ruleChain, metadata}`) whose first node is the first of `nodes`. */
export function chainFile(name: string, nodes: NodeDef[], connections: Link[]) {
  return {
    ruleChain: { name, type: 'CORE', root: false, debugMode: false, configuration: null },
    metadata: {
      firstNodeIndex: 0,
      nodes: nodes.map(([type, nodeName, configuration]) => ({
        type: `${P}${type}`,
        name: nodeName,
        configuration,
      })),
      connections: connections.map(([fromIndex, toIndex, type]) => ({ fromIndex, toIndex, type })),
      ruleChainConnections: null,
    },
  };
}
