import type { Metrics } from '../metrics/metrics.js';
import type { AlarmEngine } from './alarm-engine.js';
import type { AlarmRetention } from './alarm-retention.js';
import type { AlarmService } from './alarm-service.js';

/**
 * The alarm subsystem in `/metrics`, read when Prometheus scrapes: alarms per status, the
 * engine's device states and counters, and what the bounds removed (retention, comments).
 */
export function registerAlarmMetrics(
  metrics: Metrics,
  parts: { alarms: AlarmService; engine: AlarmEngine; retention: AlarmRetention },
): void {
  const { alarms, engine, retention } = parts;
  metrics.gauge({
    name: 'edge_alarms',
    help: 'Alarms stored, by status (ACTIVE_UNACK, ACTIVE_ACK, CLEARED_UNACK, CLEARED_ACK)',
    labelNames: ['status'],
    collect: () => Object.entries(alarms.countByStatus()).map(([status, n]) => [{ status }, n]),
  });
  metrics.gauge({
    name: 'edge_alarm_engine_devices',
    help: 'Device rule states the alarm engine holds in memory (bounded, least recently used out)',
    collect: () => engine.stats.devices,
  });
  for (const [key, help] of [
    ['evaluations', 'Profile alarms evaluated on data updates'],
    ['failures', 'Alarm evaluations or rule-state writes that failed'],
    ['evicted', 'Device rule states evicted from memory at the bound'],
    ['stateWrites', 'Alarm rule-state rows written'],
    ['inCommit', 'Device uplinks evaluated inside the commit that stored them'],
  ] as const) {
    const name = { stateWrites: 'state_writes', inCommit: 'in_commit' }[key as string] ?? key;
    metrics.gauge({
      name: `edge_alarm_engine_${name}_total`,
      help,
      type: 'counter',
      collect: () => engine.stats[key],
    });
  }
  metrics.gauge({
    name: 'edge_alarm_retention_removed_total',
    help: 'Cleared alarms removed by retention: older than the retention age, or over the count cap',
    type: 'counter',
    labelNames: ['reason'],
    collect: () => [
      [{ reason: 'age' }, retention.stats.aged],
      [{ reason: 'count' }, retention.stats.capped],
    ],
  });
  metrics.gauge({
    name: 'edge_alarm_comments_trimmed_total',
    help: 'Oldest alarm comments deleted at the per-alarm bound',
    type: 'counter',
    collect: () => alarms.stats.commentsTrimmed,
  });
}
