/**
 * Flow nodes (rule-engine reference §1.1): a rule chain node sends the message to another chain,
 * whose output nodes send it back; the output node's name is the relation label it comes back
 * by, from the rule chain node of the calling chain.
 */
import type { NodeSpec } from '../types.js';
import { bool, PREFIX, str } from './support.js';

export const RULE_CHAIN_INPUT = `${PREFIX}flow.TbRuleChainInputNode`;
export const RULE_CHAIN_OUTPUT = `${PREFIX}flow.TbRuleChainOutputNode`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const ruleChainInput: NodeSpec = {
  type: RULE_CHAIN_INPUT,
  defaults: { ruleChainId: null, forwardMsgToDefaultRuleChain: false },
  check: (c) => (UUID.test(str(c, 'ruleChainId')) ? [] : ['ruleChainId must be a rule chain id']),
  create: ({ config, services, chainId, index }) => {
    const to = {
      chainId: str(config, 'ruleChainId').toLowerCase(),
      toProfileChain: bool(config, 'forwardMsgToDefaultRuleChain'),
    };
    const from = { chainId, nodeIndex: index };
    return {
      onMsg: (msg) => {
        services.callChain(msg, to, from);
        return undefined;
      },
    };
  },
};

export const ruleChainOutput: NodeSpec = {
  type: RULE_CHAIN_OUTPUT,
  defaults: { version: 0 },
  create: ({ services, name }) => ({
    onMsg: (msg) => {
      // Without a caller (a chain run as root or by a profile) the message ends here.
      services.returnToCaller(msg, name);
      return undefined;
    },
  }),
};
