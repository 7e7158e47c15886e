import type { RetentionValues } from '../../src/settings/retention-settings.js';
import { Field } from '../components/list.js';
import { ErrorText, useLoad } from '../components/ui.js';
import { api } from '../lib/api.js';
import { SettingsForm } from './settings-form.js';

/**
 * The Retention tab of the settings page (docs/telemetry.md "Retention settings"): what the
 * gateway keeps on its SD card. Saved values apply at once; each field shows its default (the
 * config file's value).
 */

interface Retention {
  jsonValue: RetentionValues;
  defaults: RetentionValues;
}

type Key = keyof RetentionValues;

/** Field, label, bounds (the core's), and what 0 means where it means something. */
const FIELDS: ReadonlyArray<{ key: Key; label: string; min: number; max: number; zero?: string }> =
  [
    {
      key: 'telemetryMaxPoints',
      label: 'Telemetry: points kept (ring buffer)',
      min: 1000,
      max: 1e12,
    },
    {
      key: 'telemetryMaxPointsPerDevice',
      label: 'Telemetry: points kept per device',
      min: 0,
      max: 1e12,
      zero: 'no limit',
    },
    {
      key: 'telemetryTtlDays',
      label: 'Telemetry: days kept',
      min: 0,
      max: 36_500,
      zero: 'no age limit',
    },
    { key: 'alarmRetentionDays', label: 'Cleared alarms: days kept', min: 1, max: 36_500 },
    { key: 'alarmMaxCount', label: 'Alarms: most kept', min: 100, max: 10_000_000 },
    { key: 'auditMaxRows', label: 'Audit log: newest entries kept', min: 1000, max: 10_000_000 },
  ];

export function RetentionSettingsForm() {
  const s = useLoad(() => api<Retention>('/api/admin/settings/retention'), []);
  if (!s.data) return <ErrorText error={s.error} />;
  const { jsonValue, defaults } = s.data;
  return (
    <SettingsForm
      title="Retention"
      settingsKey="retention"
      toJson={(f) => Object.fromEntries(FIELDS.map((d) => [d.key, Number(f.get(d.key))]))}
      onSaved={s.reload}
    >
      <p>
        What the gateway keeps on its storage. A new value applies at once: lower bounds remove the
        oldest data.
      </p>
      {FIELDS.map((d) => (
        <Field
          key={`${d.key}-${jsonValue[d.key]}`}
          label={`${d.label} (default ${defaults[d.key].toLocaleString('en')}${d.zero ? `; 0 = ${d.zero}` : ''})`}
          name={d.key}
          type="number"
          min={d.min}
          max={d.max}
          step={1}
          required
          defaultValue={String(jsonValue[d.key])}
        />
      ))}
    </SettingsForm>
  );
}
