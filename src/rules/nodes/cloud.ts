/** Edge nodes (rule-engine reference §1.4, §3): push to cloud. */
import { type NodeSpec, SUCCESS } from '../types.js';
import { oneOf, PREFIX } from './support.js';

const SCOPES = ['CLIENT_SCOPE', 'SHARED_SCOPE', 'SERVER_SCOPE'] as const;

/**
 * ThingsBoard Edge's `TbMsgPushToCloudNode`: hands the message to the upstream outbox and goes
 * on by `Success`. A device uplink the telemetry or attribute commit already queued is not
 * queued twice (docs/upstream.md); a type the cloud API cannot carry goes to `Failure`. With
 * upstream off it passes every message on by `Success`, so the default chain can hold it.
 */
export const pushToCloud: NodeSpec = {
  type: `${PREFIX}edge.TbMsgPushToCloudNode`,
  defaults: { scope: 'SERVER_SCOPE' },
  check: (c) => oneOf(c, 'scope', SCOPES),
  create: ({ services }) => ({
    onMsg: (msg) => {
      const push = services.pushToCloud;
      if (push && !push(msg)) throw new Error(`Unsupported msg type ${msg.type}`);
      return { labels: SUCCESS, msg };
    },
  }),
};
