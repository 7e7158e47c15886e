import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validate } from '../common/validate.js';
import { ValidationError } from '../errors.js';
import {
  ALARM_SEVERITIES,
  alarmRuleSchema,
  type DeviceProfileAlarm,
  deviceProfileAlarmsSchema,
  keyFilterPredicateSchema,
  MAX_PREDICATE_DEPTH,
} from './alarm-rule-schema.js';

const numeric = (operation: string, defaultValue: unknown, extra: object = {}) => ({
  type: 'NUMERIC',
  operation,
  value: { defaultValue, userValue: null, dynamicValue: null, ...extra },
});
const filter = (predicate: unknown, over: Record<string, unknown> = {}) => ({
  key: { type: 'TIME_SERIES', key: 'temperature' },
  valueType: 'NUMERIC',
  value: null,
  predicate,
  ...over,
});
const rule = (over: Record<string, unknown> = {}) => ({
  condition: { condition: [filter(numeric('GREATER', 40))], spec: { type: 'SIMPLE' } },
  ...over,
});
const alarm = (over: Record<string, unknown> = {}) => ({
  id: 'highTemp',
  alarmType: 'High Temperature',
  createRules: { MAJOR: rule() },
  ...over,
});

/** The ValidationError message for `alarms`, or fails when they are accepted. */
function problem(alarms: unknown): string {
  try {
    validate(deviceProfileAlarmsSchema, alarms, 'alarms');
  } catch (err) {
    assert.ok(err instanceof ValidationError);
    return err.message;
  }
  assert.fail('expected the alarms to be refused');
}

describe('alarm rule schema', () => {
  it('orders severities from highest to lowest', () => {
    assert.deepEqual(ALARM_SEVERITIES, ['CRITICAL', 'MAJOR', 'MINOR', 'WARNING', 'INDETERMINATE']);
  });

  it('accepts null, an empty list and a minimal rule (missing spec = SIMPLE)', () => {
    assert.equal(validate(deviceProfileAlarmsSchema, null, 'alarms'), null);
    assert.deepEqual(validate(deviceProfileAlarmsSchema, [], 'alarms'), []);
    const minimal = alarm({
      createRules: { WARNING: { condition: { condition: [filter(numeric('LESS', 0))] } } },
    });
    assert.deepEqual(validate(deviceProfileAlarmsSchema, [minimal], 'alarms'), [minimal]);
  });

  it('keeps unknown fields at every level', () => {
    const input = [
      alarm({
        uiColor: 'red',
        createRules: {
          MAJOR: {
            ...rule(),
            extraRuleField: 1,
            condition: {
              condition: [{ ...filter(numeric('GREATER', 40, { note: 'x' })), extraFilter: true }],
              spec: { type: 'SIMPLE', extraSpec: [] },
            },
          },
        },
      }),
    ];
    const out = validate(deviceProfileAlarmsSchema, input, 'alarms') as DeviceProfileAlarm[];
    assert.deepEqual(out, input);
  });

  it('accepts every predicate type, COMPLEX nesting and STRING options', () => {
    const p = {
      type: 'COMPLEX',
      operation: 'OR',
      predicates: [
        numeric('LESS', -10),
        { type: 'COMPLEX', operation: 'AND', predicates: [numeric('GREATER', 0)] },
      ],
    };
    assert.deepEqual(validate(keyFilterPredicateSchema, p, 'predicate'), p);
    const s = filter(
      {
        type: 'STRING',
        operation: 'IN',
        value: { defaultValue: 'a, b' },
        ignoreCase: true,
      },
      { valueType: 'STRING', key: { type: 'ATTRIBUTE', key: 'mode' } },
    );
    const b = filter(
      { type: 'BOOLEAN', operation: 'EQUAL', value: { defaultValue: true } },
      { valueType: 'BOOLEAN', key: { type: 'ATTRIBUTE', key: 'enabled' } },
    );
    const d = filter(numeric('GREATER', 0), {
      valueType: 'DATE_TIME',
      key: { type: 'ENTITY_FIELD', key: 'createdTime' },
    });
    const all = [alarm({ createRules: { MAJOR: { condition: { condition: [s, b, d] } } } })];
    assert.deepEqual(validate(deviceProfileAlarmsSchema, all, 'alarms'), all);
  });

  it('allows a null default value only with a dynamic source', () => {
    const dyn = numeric('GREATER', null, {
      dynamicValue: { sourceType: 'CURRENT_TENANT', sourceAttribute: 'limit', inherit: false },
    });
    assert.ok(validate(keyFilterPredicateSchema, dyn, 'predicate'));
    assert.match(
      problem([
        alarm({
          createRules: {
            MAJOR: rule({ condition: { condition: [filter(numeric('GREATER', null))] } }),
          },
        }),
      ]),
      /predicate\.value\.defaultValue: must be a number \(it may only be null when dynamicValue\.sourceType is set\)/,
    );
    // The UI's "no dynamic value" form: sourceType null.
    const none = numeric('GREATER', 5, {
      dynamicValue: { sourceType: null, sourceAttribute: null },
    });
    assert.ok(validate(keyFilterPredicateSchema, none, 'predicate'));
    assert.match(
      problem([
        alarm({
          createRules: {
            MAJOR: rule({
              condition: {
                condition: [
                  filter(numeric('GREATER', 5, { dynamicValue: { sourceType: 'CURRENT_DEVICE' } })),
                ],
              },
            }),
          },
        }),
      ]),
      /dynamicValue\.sourceAttribute: sourceAttribute is required when sourceType is set/,
    );
    assert.match(
      problem([
        alarm({
          createRules: {
            MAJOR: rule({
              condition: {
                condition: [
                  filter(
                    numeric('GREATER', 5, {
                      dynamicValue: { sourceType: 'CURRENT_USER', sourceAttribute: 'x' },
                    }),
                  ),
                ],
              },
            }),
          },
        }),
      ]),
      /dynamicValue\.sourceType: Invalid option/,
    );
  });

  it('refuses predicates deeper than the limit', () => {
    let p: unknown = numeric('GREATER', 1);
    for (let i = 0; i < MAX_PREDICATE_DEPTH; i++)
      p = { type: 'COMPLEX', operation: 'AND', predicates: [p] };
    assert.match(
      problem([alarm({ createRules: { MAJOR: { condition: { condition: [filter(p)] } } } })]),
      /predicate: COMPLEX predicates nest at most 8 levels deep/,
    );
    assert.match(
      problem([
        alarm({
          createRules: {
            MAJOR: {
              condition: {
                condition: [filter({ type: 'COMPLEX', operation: 'AND', predicates: [] })],
              },
            },
          },
        }),
      ]),
      /a COMPLEX predicate needs at least one nested predicate/,
    );
  });

  it('checks keys: entity fields a device has, constants of the right type', () => {
    assert.match(
      problem([
        alarm({
          createRules: {
            MAJOR: {
              condition: {
                condition: [
                  filter(numeric('GREATER', 1), { key: { type: 'ENTITY_FIELD', key: 'zip' } }),
                ],
              },
            },
          },
        }),
      ]),
      /key\.key: a device has no entity field "zip"/,
    );
    const constant = (value: unknown) => [
      alarm({
        createRules: {
          MAJOR: {
            condition: {
              condition: [
                filter(
                  {
                    type: 'BOOLEAN',
                    operation: 'EQUAL',
                    value: {
                      defaultValue: false,
                      dynamicValue: { sourceType: 'CURRENT_TENANT', sourceAttribute: 'alarmsOn' },
                    },
                  },
                  { key: { type: 'CONSTANT', key: 'on' }, valueType: 'BOOLEAN', value },
                ),
              ],
            },
          },
        },
      }),
    ];
    assert.ok(validate(deviceProfileAlarmsSchema, constant(true), 'alarms'));
    assert.match(problem(constant(null)), /\.value: a CONSTANT key needs a boolean value/);
    assert.match(problem(constant('true')), /a CONSTANT key needs a boolean value/);
    assert.match(
      problem([
        alarm({
          createRules: {
            MAJOR: {
              condition: {
                condition: [
                  filter(numeric('GREATER', 1), { key: { type: 'TELEMETRY', key: 't' } }),
                ],
              },
            },
          },
        }),
      ]),
      /key\.type: Invalid option/,
    );
  });

  it('checks specs', () => {
    const withSpec = (spec: unknown) => [
      alarm({
        createRules: { MAJOR: { condition: { condition: [filter(numeric('GREATER', 1))], spec } } },
      }),
    ];
    assert.ok(
      validate(
        deviceProfileAlarmsSchema,
        withSpec({ type: 'DURATION', unit: 'SECONDS', predicate: { defaultValue: 30 } }),
        'alarms',
      ),
    );
    assert.match(
      problem(withSpec({ type: 'DURATION', unit: 'SECONDS', predicate: { defaultValue: 1.5 } })),
      /spec\.predicate\.defaultValue: must be an integer/,
    );
    assert.match(
      problem(withSpec({ type: 'DURATION', predicate: { defaultValue: 1 } })),
      /spec\.unit/,
    );
    assert.match(problem(withSpec({ type: 'EVENTUALLY' })), /spec\.type: Invalid discriminator/);
    assert.match(problem(withSpec({ type: 'REPEATING' })), /spec\.predicate/);
  });

  it('checks schedules', () => {
    const withSchedule = (schedule: unknown) => [
      alarm({ createRules: { MAJOR: rule({ schedule }) } }),
    ];
    for (const ok of [
      null,
      { type: 'ANY_TIME' },
      {
        type: 'SPECIFIC_TIME',
        timezone: 'Europe/Berlin',
        daysOfWeek: [1, 2, 3, 4, 5],
        startsOn: 8 * 3_600_000,
        endsOn: 0,
        dynamicValue: null,
      },
      {
        type: 'CUSTOM',
        timezone: 'UTC',
        items: [
          { enabled: true, dayOfWeek: 1, startsOn: 0, endsOn: 0 },
          { enabled: false, dayOfWeek: 7, startsOn: 0, endsOn: 0 },
        ],
        dynamicValue: { sourceType: 'CURRENT_DEVICE', sourceAttribute: 'schedule' },
      },
    ]) {
      assert.ok(
        validate(deviceProfileAlarmsSchema, withSchedule(ok), 'alarms'),
        JSON.stringify(ok),
      );
    }
    const specific = {
      type: 'SPECIFIC_TIME',
      timezone: 'UTC',
      daysOfWeek: [1],
      startsOn: 0,
      endsOn: 0,
    };
    assert.match(problem(withSchedule({ ...specific, daysOfWeek: [] })), /select at least one day/);
    assert.match(
      problem(withSchedule({ ...specific, daysOfWeek: [1, 1] })),
      /days must not repeat/,
    );
    assert.match(
      problem(withSchedule({ ...specific, startsOn: -1 })),
      /schedule\.startsOn: must be 0 to 86400000 ms since midnight/,
    );
    assert.match(
      problem(withSchedule({ ...specific, timezone: 'Nowhere/City' })),
      /IANA time zone/,
    );
    assert.match(
      problem(
        withSchedule({
          type: 'CUSTOM',
          timezone: 'UTC',
          items: [
            { enabled: true, dayOfWeek: 2, startsOn: 0, endsOn: 0 },
            { enabled: true, dayOfWeek: 2, startsOn: 0, endsOn: 0 },
          ],
        }),
      ),
      /each dayOfWeek may appear once/,
    );
    assert.match(problem(withSchedule({ type: 'SOMETIMES' })), /schedule\.type/);
  });

  it('checks alarm-level fields and uniqueness', () => {
    assert.match(problem([alarm({ id: '' })]), /0\.id: an alarm rule needs an id/);
    assert.match(problem([alarm({ propagate: 'yes' })]), /0\.propagate/);
    assert.match(
      problem([alarm({ propagateRelationTypes: 'Contains' })]),
      /propagateRelationTypes/,
    );
    assert.match(
      problem([alarm(), alarm({ alarmType: 'Other' })]),
      /1\.id: alarm rule id "highTemp" is used twice/,
    );
    assert.match(problem({ id: 'x' }), /expected array/);
  });

  it('checks a rule on its own (for the alarm engine) including dashboardId', () => {
    const r = rule({
      alarmDetails: 'T=${temperature}',
      dashboardId: { entityType: 'DASHBOARD', id: '5b7f1d3a-1111-4c3b-8a5e-0c1d2e3f4a5b' },
    });
    assert.deepEqual(validate(alarmRuleSchema, r, 'rule'), r);
    assert.throws(
      () => validate(alarmRuleSchema, rule({ dashboardId: { id: 'nope' } }), 'rule'),
      /dashboardId\.id: must be a UUID/,
    );
  });
});
