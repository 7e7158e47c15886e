import type { Db } from '../db/open.js';
import type { RuleState } from './rule-eval.js';
import type { AlarmSeverity } from './types.js';

/** The engine's persisted progress of one profile alarm on one device (§1.9). */
export interface AlarmRuleStates {
  create: Partial<Record<AlarmSeverity, RuleState>>;
  clear: RuleState;
  /** Data ts of the last update evaluated (crash recovery re-evaluates newer data). */
  lastTs: number;
}

/** SQL for `alarm_rule_state`: one JSON row per (device, profile alarm id). */
export class RuleStateStore {
  readonly #upsert;
  readonly #ofDevice;
  readonly #deleteOne;
  readonly #deleteDevice;

  constructor(db: Db) {
    this.#upsert = db.prepare<[string, string, string]>(
      `INSERT INTO alarm_rule_state (device_id, rule_id, state) VALUES (?, ?, ?)
       ON CONFLICT (device_id, rule_id) DO UPDATE SET state = excluded.state`,
    );
    this.#ofDevice = db.prepare<[string], { rule_id: string; state: string }>(
      'SELECT rule_id, state FROM alarm_rule_state WHERE device_id = ?',
    );
    this.#deleteOne = db.prepare<[string, string]>(
      'DELETE FROM alarm_rule_state WHERE device_id = ? AND rule_id = ?',
    );
    this.#deleteDevice = db.prepare<[string]>('DELETE FROM alarm_rule_state WHERE device_id = ?');
  }

  save(deviceId: string, ruleId: string, s: AlarmRuleStates): void {
    this.#upsert.run(deviceId, ruleId, JSON.stringify(s));
  }

  ofDevice(deviceId: string): Map<string, AlarmRuleStates> {
    const out = new Map<string, AlarmRuleStates>();
    for (const r of this.#ofDevice.all(deviceId)) out.set(r.rule_id, JSON.parse(r.state));
    return out;
  }

  delete(deviceId: string, ruleId?: string): void {
    if (ruleId === undefined) this.#deleteDevice.run(deviceId);
    else this.#deleteOne.run(deviceId, ruleId);
  }
}
