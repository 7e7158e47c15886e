/**
 * Create alarm and clear alarm nodes (rule-engine reference §3.4, `action.TbCreateAlarmNode`,
 * `action.TbClearAlarmNode`) on the alarm service of issue 13. The details script gets the
 * message with `metadata.prevAlarmDetails` (the current details as JSON) and returns the new
 * details. The alarm's own change commits with its notifications; the node's output (type
 * `ALARM`, data = the alarm) is what goes on, not a second ALARM message to the root chain.
 */
import type { AlarmSeverity } from '../../alarms/types.js';
import type { GatewayMsg } from '../../messages/types.js';
import { derive, processPattern } from '../msg.js';
import type { ScriptEngine } from '../script/sandbox.js';
import type { NodeSpec } from '../types.js';
import { FALSE } from '../types.js';
import { bool, checkScript, NodeScript, PREFIX, str, strings, withScript } from './support.js';

const SEVERITIES = ['CRITICAL', 'MAJOR', 'MINOR', 'WARNING', 'INDETERMINATE'];

/** Previous details (or `{}`), as ThingsBoard's default details script does. */
const DETAILS_SCRIPT = [
  'var details = {};',
  'if (metadata.prevAlarmDetails) {',
  '  details = JSON.parse(metadata.prevAlarmDetails);',
  '}',
  'return details;',
].join('\n');

const SCRIPT_DEFAULTS = {
  scriptLang: 'TBEL',
  alarmDetailsBuildJs: DETAILS_SCRIPT,
  alarmDetailsBuildTbel: DETAILS_SCRIPT,
};

function checkDetails(c: Readonly<Record<string, unknown>>, scripts: ScriptEngine): string[] {
  return checkScript(c, scripts, 'alarmDetailsBuildJs', 'alarmDetailsBuildTbel');
}

function detailsScript(scripts: ScriptEngine, config: Readonly<Record<string, unknown>>) {
  return new NodeScript(scripts, config, 'alarmDetailsBuildJs', 'alarmDetailsBuildTbel');
}

/** Runs the details script with the alarm's current details in `metadata.prevAlarmDetails`. */
function details(script: NodeScript, msg: GatewayMsg, prev: unknown): unknown {
  const metadata =
    prev === undefined ? msg.metadata : { ...msg.metadata, prevAlarmDetails: JSON.stringify(prev) };
  const out = script.run({ ...msg, metadata });
  return out === undefined ? {} : out;
}

function alarmMsg(msg: GatewayMsg, alarm: unknown, flag: string): GatewayMsg {
  return derive(msg, { type: 'ALARM', data: alarm, metadata: { ...msg.metadata, [flag]: 'true' } });
}

export const createAlarm: NodeSpec = {
  type: `${PREFIX}action.TbCreateAlarmNode`,
  defaults: {
    ...SCRIPT_DEFAULTS,
    useMessageAlarmData: false,
    overwriteAlarmDetails: false,
    alarmType: 'General Alarm',
    severity: 'CRITICAL',
    propagate: false,
    propagateToOwner: false,
    propagateToTenant: false,
    relationTypes: [],
    dynamicSeverity: false,
  },
  check: (c, scripts) => {
    const problems = checkDetails(c, scripts);
    if (!bool(c, 'dynamicSeverity') && !SEVERITIES.includes(str(c, 'severity')))
      problems.push(`severity must be one of ${SEVERITIES.join(', ')}`);
    if (str(c, 'alarmType') === '' && !bool(c, 'useMessageAlarmData'))
      problems.push('alarmType is required');
    return problems;
  },
  create: ({ config, services }) => {
    const script = detailsScript(services.scripts, config);
    const fromMessage = bool(config, 'useMessageAlarmData');
    const overwrite = bool(config, 'overwriteAlarmDetails');
    const raise = (msg: GatewayMsg) => {
      const alarms = services.alarms;
      if (!alarms) throw new Error('alarms are not available');
      if (msg.originator.entityType !== 'DEVICE')
        throw new Error(
          `create alarm: originator is ${msg.originator.entityType}, a DEVICE is required`,
        );
      const given = fromMessage ? ((msg.data ?? {}) as Record<string, unknown>) : {};
      const type =
        fromMessage && typeof given.type === 'string'
          ? given.type
          : processPattern(str(config, 'alarmType'), msg);
      const severity =
        fromMessage && typeof given.severity === 'string'
          ? given.severity
          : processPattern(str(config, 'severity'), msg);
      if (!SEVERITIES.includes(severity))
        throw new Error(
          `create alarm: severity "${severity}" is not one of ${SEVERITIES.join(', ')}`,
        );
      const existing = alarms.active(msg.originator.id, type);
      const newDetails =
        fromMessage && !overwrite && 'details' in given
          ? given.details
          : details(script, msg, existing?.details);
      const ts = Number(msg.metadata.ts);
      const event = alarms.raise({
        originatorId: msg.originator.id,
        type,
        severity: severity as AlarmSeverity,
        ts: Number.isFinite(ts) && ts > 0 ? ts : msg.ts,
        details: newDetails,
        propagate: bool(config, 'propagate'),
        propagateToOwner: bool(config, 'propagateToOwner'),
        propagateToTenant: bool(config, 'propagateToTenant'),
        propagateRelationTypes: strings(config, 'relationTypes'),
      });
      if (!event) return undefined;
      return event.action === 'CREATED'
        ? { labels: 'Created', msg: alarmMsg(msg, event.alarm, 'isNewAlarm') }
        : { labels: 'Updated', msg: alarmMsg(msg, event.alarm, 'isExistingAlarm') };
    };
    return {
      onMsg: (msg) => withScript(script, () => raise(msg)),
      destroy: () => script.dispose(),
    };
  },
};

export const clearAlarm: NodeSpec = {
  type: `${PREFIX}action.TbClearAlarmNode`,
  defaults: { ...SCRIPT_DEFAULTS, alarmType: 'General Alarm' },
  check: (c, scripts) => checkDetails(c, scripts),
  create: ({ config, services }) => {
    const script = detailsScript(services.scripts, config);
    const clear = (msg: GatewayMsg) => {
      const alarms = services.alarms;
      if (!alarms) throw new Error('alarms are not available');
      // The ALARM itself as originator, else the device's uncleared alarm of that type.
      const target =
        msg.originator.entityType === 'ALARM'
          ? alarms.get(msg.originator.id)
          : msg.originator.entityType === 'DEVICE'
            ? alarms.active(msg.originator.id, processPattern(str(config, 'alarmType'), msg))
            : undefined;
      if (!target || target.cleared) return { labels: FALSE, msg };
      const event = alarms.clear(target.id.id, details(script, msg, target.details));
      if (!event) return { labels: FALSE, msg };
      return { labels: 'Cleared', msg: alarmMsg(msg, event.alarm, 'isClearedAlarm') };
    };
    return {
      onMsg: (msg) => withScript(script, () => clear(msg)),
      destroy: () => script.dispose(),
    };
  },
};
