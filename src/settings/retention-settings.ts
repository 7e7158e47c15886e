/**
 * Retention settings (issue 15 item 4: "settings (... retention ...)"): how much the gateway
 * keeps on its SD card, changed over REST (`/api/admin/settings/retention`) without a restart.
 * The config file's values are the defaults; a saved value overrides them and is kept in the
 * `admin_settings` row `retention` (runtime settings live in SQLite, STYLE §7).
 */
import { z } from 'zod';
import { validate } from '../common/validate.js';
import type { AdminSettingsStore } from './admin-settings-store.js';

/** Every value the page shows and edits; bounds are the config options' bounds. */
export interface RetentionValues {
  /** Telemetry ring buffer: stored points beyond it evict the oldest. */
  readonly telemetryMaxPoints: number;
  /** Per-device bound on stored points; 0 = none. */
  readonly telemetryMaxPointsPerDevice: number;
  /** Age limit of stored points in days; 0 = none. */
  readonly telemetryTtlDays: number;
  /** Cleared alarms older than this many days are removed. */
  readonly alarmRetentionDays: number;
  /** Most alarms kept; beyond it the oldest cleared ones go first. */
  readonly alarmMaxCount: number;
  /** Audit log (the event log of the page's audit tab): newest rows kept. */
  readonly auditMaxRows: number;
}

const int = (min: number, max: number) => z.number().int().min(min).max(max);

/** Partial: a field left out keeps its current value. Unknown fields are refused by name. */
const retentionBody = z.strictObject({
  telemetryMaxPoints: int(1000, 1e12).optional(),
  telemetryMaxPointsPerDevice: int(0, 1e12).optional(),
  telemetryTtlDays: int(0, 36_500).optional(),
  alarmRetentionDays: int(1, 36_500).optional(),
  alarmMaxCount: int(100, 10_000_000).optional(),
  auditMaxRows: int(1000, 10_000_000).optional(),
});

const KEY = 'retention';

export interface RetentionSettingsDeps {
  readonly store: AdminSettingsStore;
  /** The config file's values. */
  readonly defaults: RetentionValues;
  /** Pushes effective values into the bounded parts (telemetry, alarms, audit). */
  readonly apply: (values: RetentionValues) => void;
}

export class RetentionSettings {
  #current: RetentionValues;

  constructor(private readonly deps: RetentionSettingsDeps) {
    this.#current = deps.defaults;
  }

  /** Reads the saved overrides and applies them (at start). */
  init(): void {
    const saved = this.deps.store.get(KEY);
    if (saved === undefined) return;
    // A saved value outside today's bounds (an older build) falls back to the default.
    const parsed = retentionBody.partial().safeParse(saved);
    this.#current = { ...this.deps.defaults, ...(parsed.success ? parsed.data : {}) };
    this.deps.apply(this.#current);
  }

  get values(): RetentionValues {
    return this.#current;
  }

  /** `GET /api/admin/settings/retention`, in ThingsBoard's AdminSettings shape. */
  get(): { key: typeof KEY; jsonValue: RetentionValues; defaults: RetentionValues } {
    return { key: KEY, jsonValue: this.#current, defaults: this.deps.defaults };
  }

  /** `POST /api/admin/settings` with key `retention`: validates, stores, applies at once. */
  save(jsonValue: unknown): ReturnType<RetentionSettings['get']> {
    const input = validate(retentionBody, jsonValue ?? {}, 'retention settings');
    const next: RetentionValues = { ...this.#current, ...input };
    this.deps.store.put(KEY, next);
    this.#current = next;
    this.deps.apply(next);
    return this.get();
  }
}
