/** Enrichment nodes (rule-engine reference §3.3): originator attributes and telemetry. */
import type { AttributeScope } from '../../attributes/types.js';
import type { GatewayMsg } from '../../messages/types.js';
import { derive, processPattern } from '../msg.js';
import { FAILURE, type NodeSpec, SUCCESS } from '../types.js';
import { bool, deviceOf, num, PREFIX, str, strings } from './support.js';

type Target = 'METADATA' | 'DATA';

function fetchTo(config: Readonly<Record<string, unknown>>): Target {
  const v = config.fetchTo;
  if (v === 'DATA' || v === 'METADATA') return v;
  return bool(config, 'fetchToData') ? 'DATA' : 'METADATA';
}

/** Adds found values to metadata (as text) or data (typed), as the node's `fetchTo` says. */
function enrich(msg: GatewayMsg, target: Target, found: Map<string, unknown>): GatewayMsg {
  if (found.size === 0) return msg;
  if (target === 'METADATA') {
    const metadata = { ...msg.metadata };
    for (const [k, v] of found) metadata[k] = typeof v === 'string' ? v : JSON.stringify(v);
    return derive(msg, { metadata });
  }
  const base =
    msg.data !== null && typeof msg.data === 'object' && !Array.isArray(msg.data)
      ? (msg.data as Record<string, unknown>)
      : {};
  return derive(msg, { data: { ...base, ...Object.fromEntries(found) } });
}

const SCOPES: ReadonlyArray<[string, AttributeScope, string]> = [
  ['clientAttributeNames', 'CLIENT_SCOPE', 'cs_'],
  ['sharedAttributeNames', 'SHARED_SCOPE', 'shared_'],
  ['serverAttributeNames', 'SERVER_SCOPE', 'ss_'],
];

export const originatorAttributes: NodeSpec = {
  type: `${PREFIX}metadata.TbGetAttributesNode`,
  defaults: {
    clientAttributeNames: [],
    sharedAttributeNames: [],
    serverAttributeNames: [],
    latestTsKeyNames: [],
    tellFailureIfAbsent: true,
    getLatestValueWithTs: false,
    fetchTo: 'METADATA',
  },
  create: ({ config, services }) => {
    const target = fetchTo(config);
    const failIfAbsent = bool(config, 'tellFailureIfAbsent', true);
    const withTs = bool(config, 'getLatestValueWithTs');
    const tsKeys = strings(config, 'latestTsKeyNames');
    return {
      onMsg: (msg) => {
        const deviceId = deviceOf(msg, 'originator attributes');
        const found = new Map<string, unknown>();
        let missing = false;
        for (const [field, scope, prefix] of SCOPES) {
          const keys = strings(config, field).map((k) => processPattern(k, msg));
          if (keys.length === 0) continue;
          const values = services.attributes(deviceId, scope, keys);
          for (const kv of values) found.set(`${prefix}${kv.key}`, kv.value);
          if (values.length < keys.length) missing = true;
        }
        const keys = tsKeys.map((k) => processPattern(k, msg));
        if (keys.length > 0) {
          const latest = services.queryTelemetry(deviceId, { mode: 'latest', keys, strict: true });
          for (const key of keys) {
            const point = latest[key]?.[0];
            if (!point || point.value === null) {
              missing = true;
              continue;
            }
            found.set(key, withTs ? { ts: point.ts, value: point.value } : point.value);
          }
        }
        const next = enrich(msg, target, found);
        return { labels: missing && failIfAbsent ? FAILURE : SUCCESS, msg: next };
      },
    };
  },
};

const UNIT_MS: Readonly<Record<string, number>> = {
  MILLISECONDS: 1,
  SECONDS: 1000,
  MINUTES: 60_000,
  HOURS: 3_600_000,
  DAYS: 86_400_000,
};

export const originatorTelemetry: NodeSpec = {
  type: `${PREFIX}metadata.TbGetTelemetryNode`,
  defaults: {
    latestTsKeyNames: [],
    fetchMode: 'FIRST',
    startInterval: 2,
    startIntervalTimeUnit: 'MINUTES',
    endInterval: 1,
    endIntervalTimeUnit: 'MINUTES',
    useMetadataIntervalPatterns: false,
    startIntervalPattern: '',
    endIntervalPattern: '',
    orderBy: 'ASC',
    aggregation: 'NONE',
    limit: 1000,
  },
  check: (c) => {
    const problems: string[] = [];
    if (!['FIRST', 'LAST', 'ALL'].includes(str(c, 'fetchMode')))
      problems.push('fetchMode must be FIRST, LAST or ALL');
    if (str(c, 'aggregation', 'NONE') !== 'NONE')
      problems.push('aggregation: only NONE is supported');
    return problems;
  },
  create: ({ config, services }) => {
    const mode = str(config, 'fetchMode', 'FIRST');
    const limit = Math.min(Math.max(num(config, 'limit', 1000), 2), 1000);
    const interval = (msg: GatewayMsg): [number, number] => {
      if (bool(config, 'useMetadataIntervalPatterns')) {
        return [
          Number(processPattern(str(config, 'startIntervalPattern'), msg)),
          Number(processPattern(str(config, 'endIntervalPattern'), msg)),
        ];
      }
      const now = Date.now();
      const unit = (k: string) => UNIT_MS[str(config, k, 'MINUTES')] ?? 60_000;
      return [
        now - num(config, 'startInterval', 2) * unit('startIntervalTimeUnit'),
        now - num(config, 'endInterval', 1) * unit('endIntervalTimeUnit'),
      ];
    };
    return {
      onMsg: (msg) => {
        const deviceId = deviceOf(msg, 'originator telemetry');
        const keys = strings(config, 'latestTsKeyNames').map((k) => processPattern(k, msg));
        const [startTs, endTs] = interval(msg);
        if (!Number.isFinite(startTs) || !Number.isFinite(endTs))
          throw new Error('Interval patterns did not give numbers');
        const result = services.queryTelemetry(deviceId, {
          mode: 'history',
          keys,
          startTs,
          endTs,
          agg: 'NONE',
          interval: 0,
          limit: mode === 'ALL' ? limit : 1,
          orderBy:
            mode === 'LAST'
              ? 'DESC'
              : mode === 'ALL'
                ? str(config, 'orderBy') === 'DESC'
                  ? 'DESC'
                  : 'ASC'
                : 'ASC',
          strict: true,
        });
        const metadata = { ...msg.metadata };
        for (const key of keys) {
          const points = result[key];
          if (!points || points.length === 0) continue;
          // FIRST/LAST: a JSON string literal even for numbers (reference §3.3).
          metadata[key] =
            mode === 'ALL' ? JSON.stringify(points) : JSON.stringify(String(points[0]?.value));
        }
        return { labels: SUCCESS, msg: derive(msg, { metadata }) };
      },
    };
  },
};
