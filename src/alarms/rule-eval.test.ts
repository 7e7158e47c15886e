import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type {
  AlarmConditionFilter,
  AlarmRule,
  AlarmSchedule,
  KeyFilterPredicate,
} from '../devices/alarm-rule-schema.js';
import {
  type DataSource,
  emptyState,
  evalFilter,
  evalRule,
  evalRuleAt,
  localTime,
  renderDetails,
  scheduleActive,
  splitList,
  stateMoved,
} from './rule-eval.js';

function source(
  ts: Record<string, unknown>,
  dyn: Record<string, unknown> = {},
  attrs: Record<string, unknown> = {},
): DataSource {
  return {
    get: (kind, key) => {
      const from = kind === 'TIME_SERIES' ? ts : attrs;
      return key in from ? { value: from[key], ts: 1 } : undefined;
    },
    dynamic: (d) => dyn[d.sourceAttribute ?? ''],
  };
}

const value = (v: unknown, dynamicValue: unknown = null) => ({
  defaultValue: v,
  userValue: null,
  dynamicValue,
});

function filter(key: string, valueType: string, predicate: unknown, type = 'TIME_SERIES') {
  return {
    key: { type, key },
    valueType,
    value: null,
    predicate: predicate as KeyFilterPredicate,
  } as AlarmConditionFilter;
}

describe('alarm rule evaluation (platform.md §1.4–§1.7)', () => {
  it('STRING operations, IN/NOT_IN lists and ignoreCase', () => {
    const s = (operation: string, v: string, ignoreCase = false) =>
      evalFilter(
        filter('mode', 'STRING', { type: 'STRING', operation, value: value(v), ignoreCase }),
        source({ mode: 'Heating' }),
      );
    assert.equal(s('EQUAL', 'Heating'), true);
    assert.equal(s('EQUAL', 'heating'), false);
    assert.equal(s('EQUAL', 'heating', true), true);
    assert.equal(s('NOT_EQUAL', 'Cooling'), true);
    assert.equal(s('STARTS_WITH', 'Heat'), true);
    assert.equal(s('ENDS_WITH', 'ING', true), true);
    assert.equal(s('CONTAINS', 'eat'), true);
    assert.equal(s('NOT_CONTAINS', 'eat'), false);
    assert.equal(s('IN', 'Off, Heating ,Cooling'), true);
    assert.equal(s('IN', '"off","heating"', true), true);
    assert.equal(s('NOT_IN', 'Off,Cooling'), true);
    assert.deepEqual(splitList("'a', 'b'"), ['a', 'b']);
    assert.deepEqual(splitList('"a", b'), ['"a"', 'b']);
  });

  it('NUMERIC coercion, BOOLEAN, nested COMPLEX, missing keys', () => {
    const num = (operation: string, v: number, left: unknown) =>
      evalFilter(
        filter('t', 'NUMERIC', { type: 'NUMERIC', operation, value: value(v) }),
        source({ t: left }),
      );
    assert.equal(num('GREATER', 30, 31), true);
    assert.equal(num('GREATER', 30, '31.5'), true, 'numeric text is parsed');
    assert.equal(num('GREATER', 30, 'hot'), false, 'not a number: false');
    assert.equal(num('LESS_OR_EQUAL', 1, true), true, 'true is 1');
    assert.equal(num('EQUAL', 5, 5), true);
    assert.equal(num('NOT_EQUAL', 5, 5), false);
    assert.equal(
      evalFilter(
        filter('t', 'NUMERIC', { type: 'NUMERIC', operation: 'GREATER', value: value(1) }),
        source({}),
      ),
      false,
      'a missing key is false',
    );
    const bool = evalFilter(
      filter('on', 'BOOLEAN', { type: 'BOOLEAN', operation: 'EQUAL', value: value(true) }),
      source({ on: 'TRUE' }),
    );
    assert.equal(bool, true);
    const complex = {
      type: 'COMPLEX',
      operation: 'OR',
      predicates: [
        { type: 'NUMERIC', operation: 'LESS', value: value(0) },
        {
          type: 'COMPLEX',
          operation: 'AND',
          predicates: [
            { type: 'NUMERIC', operation: 'GREATER', value: value(10) },
            { type: 'NUMERIC', operation: 'LESS', value: value(20) },
          ],
        },
      ],
    };
    assert.equal(evalFilter(filter('t', 'NUMERIC', complex), source({ t: 15 })), true);
    assert.equal(evalFilter(filter('t', 'NUMERIC', complex), source({ t: 25 })), false);
    assert.equal(evalFilter(filter('t', 'NUMERIC', complex), source({ t: -1 })), true);
  });

  it('dynamic values win over the default; CONSTANT needs its dynamic value', () => {
    const dynamicValue = { sourceType: 'CURRENT_TENANT', sourceAttribute: 'limit', inherit: false };
    const f = filter('t', 'NUMERIC', {
      type: 'NUMERIC',
      operation: 'GREATER',
      value: value(100, dynamicValue),
    });
    assert.equal(evalFilter(f, source({ t: 50 }, { limit: 40 })), true);
    assert.equal(evalFilter(f, source({ t: 50 })), false, 'default 100 without the attribute');
    const constant = {
      key: { type: 'CONSTANT', key: 'enabled' },
      valueType: 'BOOLEAN',
      value: true,
      predicate: {
        type: 'BOOLEAN',
        operation: 'EQUAL',
        value: value(true, { sourceType: 'CURRENT_TENANT', sourceAttribute: 'alarmsOn' }),
      },
    } as unknown as AlarmConditionFilter;
    assert.equal(evalFilter(constant, source({}, { alarmsOn: true })), true);
    assert.equal(evalFilter(constant, source({}, { alarmsOn: false })), false);
    assert.equal(evalFilter(constant, source({})), false, 'unresolved: the default is not used');
  });

  it('DURATION is strictly longer than N units; the timer re-checks without data', () => {
    const r = {
      condition: {
        condition: [
          filter('t', 'NUMERIC', { type: 'NUMERIC', operation: 'GREATER', value: value(1) }),
        ],
        spec: { type: 'DURATION', unit: 'SECONDS', predicate: value(10) },
      },
    } as unknown as AlarmRule;
    const st = emptyState();
    const hot = source({ t: 5 });
    assert.equal(evalRule(r, st, 1000, hot), 'NOT_YET_TRUE');
    assert.equal(evalRule(r, st, 11_000, hot), 'NOT_YET_TRUE', 'exactly 10 s is not more');
    assert.equal(evalRuleAt(r, st, 11_001, hot), 'TRUE', 'the timer sees 10.001 s');
    assert.equal(evalRule(r, st, 11_001, hot), 'TRUE');
    assert.equal(evalRule(r, st, 12_000, source({ t: 0 })), 'FALSE');
    assert.deepEqual(st, emptyState(), 'FALSE resets the state');
  });

  it('a DURATION that goes on keeps its start, so only its start and reset are written', () => {
    const r = {
      condition: {
        condition: [
          filter('t', 'NUMERIC', { type: 'NUMERIC', operation: 'GREATER', value: value(1) }),
        ],
        spec: { type: 'DURATION', unit: 'SECONDS', predicate: value(60) },
      },
    } as unknown as AlarmRule;
    const st = emptyState();
    const step = (ts: number, t: number) => {
      const { eventCount, lastEventTs, duration } = st;
      evalRule(r, st, ts, source({ t }));
      return stateMoved(eventCount, lastEventTs, duration, st);
    };
    assert.equal(step(1000, 5), true, 'started');
    assert.equal(step(2000, 5), false, 'goes on');
    assert.equal(step(9000, 5), false, 'goes on');
    // What was stored at the start gives the same elapsed time as the state in memory.
    const stored = { eventCount: 0, lastEventTs: 1000, duration: 0 };
    assert.equal(evalRuleAt(r, stored, 61_001, source({ t: 5 })), 'TRUE');
    assert.equal(evalRuleAt(r, st, 61_001, source({ t: 5 })), 'TRUE');
    assert.equal(evalRuleAt(r, stored, 61_000, source({ t: 5 })), 'NOT_YET_TRUE');
    assert.equal(step(10_000, 0), true, 'reset');
    assert.equal(step(11_000, 0), false, 'stays reset');
    assert.equal(stateMoved(1, 0, 0, { eventCount: 2, lastEventTs: 0, duration: 0 }), true);
  });

  it('REPEATING counts consecutive matches', () => {
    const r = {
      condition: {
        condition: [
          filter('t', 'NUMERIC', { type: 'NUMERIC', operation: 'GREATER', value: value(1) }),
        ],
        spec: {
          type: 'REPEATING',
          predicate: value(5, { sourceType: 'CURRENT_DEVICE', sourceAttribute: 'n' }),
        },
      },
    } as unknown as AlarmRule;
    const st = emptyState();
    const hot = source({ t: 5 }, { n: 2 });
    assert.equal(evalRule(r, st, 1, hot), 'NOT_YET_TRUE');
    assert.equal(evalRule(r, st, 2, hot), 'TRUE', 'the dynamic count 2 wins over 5');
    assert.throws(
      () => evalRule(r, emptyState(), 3, source({ t: 5 }, { n: 'many' })),
      /not a number/,
    );
  });

  it('schedules: SPECIFIC_TIME and CUSTOM in IANA zones, wrapping midnight', () => {
    // 2026-11-23 (a Monday) 23:30 UTC is Tuesday 08:30 in Tokyo.
    const ts = Date.UTC(2026, 10, 23, 23, 30);
    assert.deepEqual(localTime(ts, 'Asia/Tokyo'), { day: 2, msOfDay: 8.5 * 3_600_000 });
    const h = 3_600_000;
    const at = (s: unknown) => scheduleActive(s as AlarmSchedule, ts, source({}));
    const specific = {
      type: 'SPECIFIC_TIME',
      timezone: 'Asia/Tokyo',
      daysOfWeek: [2],
      startsOn: 8 * h,
      endsOn: 9 * h,
    };
    assert.equal(at(specific), true);
    assert.equal(at({ ...specific, timezone: 'UTC' }), false);
    assert.equal(at({ ...specific, daysOfWeek: [1] }), false);
    assert.equal(at({ ...specific, startsOn: 22 * h, endsOn: 9 * h }), true, 'wraps midnight');
    assert.equal(
      at({ ...specific, startsOn: 8 * h, endsOn: 0 }),
      true,
      'endsOn 0 is the end of day',
    );
    const custom = {
      type: 'CUSTOM',
      timezone: 'UTC',
      items: [
        { enabled: true, dayOfWeek: 1, startsOn: 23 * h, endsOn: 0 },
        { enabled: false, dayOfWeek: 2, startsOn: 0, endsOn: 0 },
      ],
    };
    assert.equal(at(custom), true);
    assert.equal(at({ ...custom, timezone: 'Asia/Tokyo' }), false, 'Tuesday is disabled');
    assert.equal(at(null), true);
    // A dynamic schedule from an attribute overrides the static one.
    const dyn = {
      ...specific,
      daysOfWeek: [1],
      dynamicValue: { sourceType: 'CURRENT_DEVICE', sourceAttribute: 's' },
    };
    assert.equal(
      scheduleActive(
        dyn as unknown as AlarmSchedule,
        ts,
        source({}, { s: JSON.stringify({ type: 'SPECIFIC_TIME', daysOfWeek: [2] }) }),
      ),
      true,
    );
  });

  it('alarmDetails templates', () => {
    // ThingsBoard's `${key}` placeholders, not JavaScript template literals.
    const template = ['T=$', '{t} at $', '{where} $', '{missing}'].join('');
    const text = renderDetails(template, source({ t: 21.5 }, {}, { where: 'hall' }), [
      ['TIME_SERIES', 't'],
      ['ATTRIBUTE', 'where'],
    ]);
    assert.equal(text, `T=21.5 at hall $${'{missing}'}`);
  });
});
