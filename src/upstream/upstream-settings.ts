/**
 * Upstream settings saved over REST or the web page (`POST /api/upstream/settings`), stored as
 * JSON in `admin_settings` under `upstream`. Once saved they take precedence over the config
 * file, the environment and the flags, field by field for the fields saved; `DELETE` forgets
 * them (docs/upstream.md). The token and password are never given back, only whether they are set.
 */
import { accessSync, constants } from 'node:fs';
import { z } from 'zod';
import { validate } from '../common/validate.js';
import { type Config, OPTIONS } from '../config.js';
import { ValidationError } from '../errors.js';
import type { AdminSettingsStore } from '../settings/admin-settings-store.js';

export type UpstreamConfig = Config['upstream'];

const KEY = 'upstream';
const SECRETS = ['token', 'password'] as const;
const FILES = ['caFile', 'certFile', 'keyFile'] as const;

/** One field per `upstream.*` option of the config table, with its type, values and range. */
function fieldSchema(spec: (typeof OPTIONS)[number]): z.ZodType {
  switch (spec.type) {
    case 'int':
      return z
        .number()
        .int()
        .min(spec.min ?? 0)
        .max(spec.max ?? Number.MAX_SAFE_INTEGER);
    case 'enum':
      return z.enum(spec.values as [string, ...string[]]);
    default:
      return z.string().trim().max(4096);
  }
}

const shape: Record<string, z.ZodType> = {};
for (const spec of OPTIONS) {
  if (spec.path.startsWith(`${KEY}.`)) shape[spec.path.slice(KEY.length + 1)] = fieldSchema(spec);
}
/** A partial update; unknown fields are refused (a typo must not pass silently). */
const updateSchema = z.strictObject(
  Object.fromEntries(Object.entries(shape).map(([k, s]) => [k, s.optional()])),
);

/** What `GET /api/upstream/settings` shows: the secrets only as set or not. */
export type PublicSettings = Omit<UpstreamConfig, 'token' | 'password'> & {
  readonly token: boolean;
  readonly password: boolean;
  /** Whether saved settings (over REST or the web page) are in effect. */
  readonly saved: boolean;
};

export function publicSettings(config: UpstreamConfig, saved: boolean): PublicSettings {
  const { token, password, ...rest } = config;
  return { ...rest, token: token !== '', password: password !== '', saved };
}

export class UpstreamSettingsStore {
  constructor(private readonly store: AdminSettingsStore) {}

  /** The saved fields; {} when none were saved. */
  saved(): Partial<UpstreamConfig> {
    const saved = this.store.get(KEY);
    if (saved === undefined) return {};
    const parsed = updateSchema.safeParse(saved);
    // A row this version cannot read (edited by hand) is ignored rather than fatal at start.
    return parsed.success ? (parsed.data as Partial<UpstreamConfig>) : {};
  }

  /**
   * Validates an update against the settings in effect and saves the fields it names (merged
   * with those saved before). A secret sent as null or left out is kept; "" clears it.
   * Returns the settings now in effect.
   */
  save(body: unknown, base: UpstreamConfig): UpstreamConfig {
    const input = { ...((body ?? {}) as Record<string, unknown>) };
    for (const k of SECRETS) if (input[k] === null) delete input[k];
    const update = validate(updateSchema, input, 'upstream settings') as Partial<UpstreamConfig>;
    const next = { ...base, ...this.saved(), ...update } as UpstreamConfig;
    if (next.url !== '' && !/^mqtts?:\/\/[^/]+/.test(next.url)) {
      throw new ValidationError(
        `url must be mqtt://host:port or mqtts://host:port (got ${next.url})`,
      );
    }
    for (const k of FILES) {
      const file = update[k];
      if (!file) continue;
      try {
        accessSync(file, constants.R_OK);
      } catch {
        throw new ValidationError(`${k}: cannot read ${file}`);
      }
    }
    if (Boolean(next.certFile) !== Boolean(next.keyFile)) {
      throw new ValidationError('certFile and keyFile must be set together');
    }
    const stored = { ...this.saved(), ...update };
    this.store.put(KEY, stored);
    return next;
  }

  /** Forgets the saved settings: the config file, environment and flags apply again. */
  clear(): void {
    this.store.delete(KEY);
  }

  /** The settings in effect: `base` (file, environment, flags) with the saved fields over it. */
  effective(base: UpstreamConfig): UpstreamConfig {
    return { ...base, ...this.saved() } as UpstreamConfig;
  }
}
