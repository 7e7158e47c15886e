import type { Labels, Metrics } from '../metrics/metrics.js';
import type { ConnectorService, ConnectorTotals, DeviceCounters } from './connector-service.js';

const COUNTERS: ReadonlyArray<readonly [keyof DeviceCounters, string]> = [
  ['polls', 'polls'],
  ['timeouts', 'timeouts'],
  ['crcErrors', 'crc_errors'],
  ['exceptions', 'exceptions'],
  ['connectionErrors', 'connection_errors'],
  ['decodeErrors', 'decode_errors'],
  ['dropped', 'dropped'],
  ['writes', 'writes'],
  ['writeErrors', 'write_errors'],
];

/**
 * Running connectors in `/metrics`, one series per connector name (connectors are bounded):
 * devices answering or not, lines open or closed, and the per-device counters of the status
 * endpoint summed (polls, timeouts, CRC errors, ... readings dropped at the bounds).
 */
export function registerConnectorMetrics(metrics: Metrics, connectors: ConnectorService): void {
  type Series = ReadonlyArray<readonly [Labels, number]>;
  const per = (pick: (t: ConnectorTotals) => Series) => (): Series =>
    connectors
      .totals()
      .flatMap((t) => pick(t).map(([l, v]) => [{ connector: t.name, ...l }, v] as const));
  metrics.gauge({
    name: 'edge_connector_devices',
    help: 'Devices of a running connector: answering (active) or not',
    labelNames: ['connector', 'state'],
    collect: per((t) => [
      [{ state: 'active' }, t.devicesActive],
      [{ state: 'inactive' }, t.devicesInactive],
    ]),
  });
  metrics.gauge({
    name: 'edge_connector_lines',
    help: 'Serial ports and TCP/UDP connections of a running connector: open or closed',
    labelNames: ['connector', 'state'],
    collect: per((t) => [
      [{ state: 'open' }, t.linesOpen],
      [{ state: 'closed' }, t.linesClosed],
    ]),
  });
  metrics.gauge({
    name: 'edge_connector_events_total',
    help: 'Connector polls and writes, and their failures, summed over its devices since it started',
    type: 'counter',
    labelNames: ['connector', 'event'],
    collect: per((t) => COUNTERS.map(([k, event]) => [{ event }, t.counters[k]] as const)),
  });
}
