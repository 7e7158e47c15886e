import { type TestGateway, waitFor } from './gateway.js';

/** A NUMERIC key filter: `key op value`, optionally with a dynamic value. */
export function numeric(
  key: string,
  operation: string,
  defaultValue: number | null,
  opts: { type?: string; dynamicValue?: unknown } = {},
) {
  return {
    key: { type: opts.type ?? 'TIME_SERIES', key },
    valueType: 'NUMERIC',
    value: null,
    predicate: {
      type: 'NUMERIC',
      operation,
      value: { defaultValue, userValue: null, dynamicValue: opts.dynamicValue ?? null },
    },
  };
}

export function rule(filters: unknown[], spec: unknown = { type: 'SIMPLE' }, extra = {}) {
  return { condition: { condition: filters, spec }, schedule: null, alarmDetails: null, ...extra };
}

/** Creates a device profile with these alarms; returns its id. */
export async function createProfile(
  t: TestGateway,
  name: string,
  alarms: unknown[],
): Promise<string> {
  const res = await t.api('/api/deviceProfile', {
    token: await t.adminToken(),
    body: { name, type: 'DEFAULT', profileData: { alarms } },
  });
  if (res.status !== 200) throw new Error(`profile: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { id: { id: string } }).id.id;
}

/** A saved device profile as REST returns it. */
export type SavedProfile = { id: { id: string } } & Record<string, unknown>;

/** Creates a profile with plain MQTT transport (JSON payloads); returns it as saved. */
export async function createPlainMqttProfile(t: TestGateway, name: string): Promise<SavedProfile> {
  const res = await t.api('/api/deviceProfile', {
    token: await t.adminToken(),
    body: {
      name,
      transportType: 'MQTT',
      profileData: { transportConfiguration: { type: 'MQTT' } },
    },
  });
  if (res.status !== 200) throw new Error(`profile: ${res.status} ${await res.text()}`);
  return (await res.json()) as SavedProfile;
}

/** Saves a profile again with another transport configuration (asserts a 200). */
export async function setProfileTransport(
  t: TestGateway,
  profile: SavedProfile,
  transportConfiguration: unknown,
): Promise<void> {
  const res = await t.api('/api/deviceProfile', {
    token: await t.adminToken(),
    body: {
      ...profile,
      profileData: { ...(profile.profileData as Record<string, unknown>), transportConfiguration },
    },
  });
  if (res.status !== 200) throw new Error(`profile: ${res.status} ${await res.text()}`);
}

/** Creates a device of a profile; returns its id and access token. */
export async function createProfiledDevice(
  t: TestGateway,
  name: string,
  profileId: string,
): Promise<{ id: string; token: string }> {
  const token = await t.adminToken();
  const res = await t.api('/api/device', {
    token,
    body: { name, deviceProfileId: { entityType: 'DEVICE_PROFILE', id: profileId } },
  });
  if (res.status !== 200) throw new Error(`device: ${res.status} ${await res.text()}`);
  const id = ((await res.json()) as { id: { id: string } }).id.id;
  const creds = await t.api(`/api/device/${id}/credentials`, { token });
  return { id, token: ((await creds.json()) as { credentialsId: string }).credentialsId };
}

export interface AlarmJson {
  id: { id: string };
  type: string;
  severity: string;
  status: string;
  acknowledged: boolean;
  cleared: boolean;
  startTs: number;
  endTs: number;
  details: { data?: string } | null;
  originatorName?: string;
}

/** The device's alarms over REST (newest first). */
export async function alarmsOf(t: TestGateway, deviceId: string, query = ''): Promise<AlarmJson[]> {
  const res = await t.api(
    `/api/alarm/DEVICE/${deviceId}?pageSize=100&page=0&sortProperty=createdTime&sortOrder=DESC${query}`,
    { token: await t.adminToken() },
  );
  if (res.status !== 200) throw new Error(`alarms: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { data: AlarmJson[] }).data;
}

/**
 * Resolves once every committed message went through the processing entry point: the message
 * queue is empty and the rule engine (whose device-profile node runs the alarm engine) is idle.
 */
export async function settled(t: TestGateway): Promise<void> {
  const { messages, rules } = t.gw.services;
  await waitFor(() => messages.stats().queued === 0, 10_000, 'an empty message queue');
  await rules.engine.idle();
}

/**
 * The latest value of a telemetry key over REST, read once every committed message was
 * evaluated (so a missing alarm after it is really missing).
 */
export async function latest(t: TestGateway, deviceId: string, key: string): Promise<unknown> {
  await settled(t);
  const res = await t.api(
    `/api/plugins/telemetry/DEVICE/${deviceId}/values/timeseries?keys=${key}&useStrictDataTypes=true`,
    { token: await t.adminToken() },
  );
  const body = (await res.json()) as Record<string, Array<{ value: unknown }>>;
  return body[key]?.[0]?.value;
}

/** The full example of platform.md §1.8, with the elided filters written out. */
export function highTempAlarm(): Record<string, unknown> {
  const temperature = (operation: string, defaultValue: number) => ({
    key: { type: 'TIME_SERIES', key: 'temperature' },
    valueType: 'NUMERIC',
    value: null,
    predicate: {
      type: 'NUMERIC',
      operation,
      value: { defaultValue, userValue: null, dynamicValue: null },
    },
  });
  return {
    id: 'highTemp',
    alarmType: 'High Temperature',
    createRules: {
      CRITICAL: {
        condition: {
          condition: [
            {
              key: { type: 'TIME_SERIES', key: 'temperature' },
              valueType: 'NUMERIC',
              value: null,
              predicate: {
                type: 'NUMERIC',
                operation: 'GREATER',
                value: {
                  defaultValue: 50,
                  userValue: null,
                  dynamicValue: {
                    sourceType: 'CURRENT_DEVICE',
                    sourceAttribute: 'tempThreshold',
                    inherit: true,
                  },
                },
              },
            },
          ],
          spec: {
            type: 'DURATION',
            unit: 'MINUTES',
            predicate: { defaultValue: 5, userValue: null, dynamicValue: null },
          },
        },
        schedule: null,
        alarmDetails: 'Temperature is ${temperature}',
      },
      MAJOR: {
        condition: { condition: [temperature('GREATER', 40)], spec: { type: 'SIMPLE' } },
      },
    },
    clearRule: {
      condition: {
        condition: [temperature('LESS_OR_EQUAL', 40)],
        spec: { type: 'REPEATING', predicate: { defaultValue: 3 } },
      },
    },
    propagate: false,
    propagateToOwner: false,
    propagateToTenant: false,
    propagateRelationTypes: null,
  };
}
