import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseJsonText, parseJsonTextExact } from '../common/json-text.js';
import { ValidationError } from '../errors.js';
import {
  parseTelemetry,
  parseTelemetryText,
  TELEMETRY_LIMITS,
  type TsEntry,
} from './telemetry-parser.js';

const NOW = 1_700_000_000_000;
const parse = (text: string) => parseTelemetryText(text, NOW);
const one = (text: string): Pick<TsEntry, 'kind' | 'value'> => {
  const [p] = parse(text);
  return { kind: p.kind, value: p.value };
};
const rejects = (text: string, message: RegExp) =>
  assert.throws(
    () => parse(text),
    (err: unknown) => err instanceof ValidationError && message.test(err.message),
    text.slice(0, 60),
  );

describe('telemetry payload forms (device-api.md §1.1)', () => {
  it('a plain object gets the server time', () => {
    assert.deepEqual(parse('{"temp":21.5,"on":true}'), [
      { key: 'temp', ts: NOW, kind: 'double', value: 21.5 },
      { key: 'on', ts: NOW, kind: 'bool', value: true },
    ]);
  });

  it('an array of plain objects shares one server ts', () => {
    const points = parse('[{"temp":21.5},{"hum":40}]');
    assert.deepEqual(
      points.map((p) => [p.key, p.ts]),
      [
        ['temp', NOW],
        ['hum', NOW],
      ],
    );
  });

  it('{"ts","values"} uses its ts; other keys beside them are ignored', () => {
    assert.deepEqual(parse('{"ts":1451649600512,"values":{"temp":21.5},"extra":1}'), [
      { key: 'temp', ts: 1451649600512, kind: 'double', value: 21.5 },
    ]);
  });

  it('an array of ts objects mixed with plain objects', () => {
    const points = parse('[{"ts":1,"values":{"a":1}},{"ts":2,"values":{"a":2}},{"b":3}]');
    assert.deepEqual(
      points.map((p) => [p.key, p.ts, p.value]),
      [
        ['a', 1, 1],
        ['a', 2, 2],
        ['b', NOW, 3],
      ],
    );
  });

  it('ts without values is an ordinary key; a numeric string ts is accepted', () => {
    assert.deepEqual(
      parse('{"ts":123,"temp":1}').map((p) => [p.key, p.ts]),
      [
        ['ts', NOW],
        ['temp', NOW],
      ],
    );
    assert.equal(parse('{"ts":"1451649600512","values":{"a":1}}')[0].ts, 1451649600512);
  });

  it('{} and [] are valid and hold no points', () => {
    assert.deepEqual(parse('{}'), []);
    assert.deepEqual(parse('[]'), []);
    assert.deepEqual(parse('{"ts":5,"values":{}}'), []);
  });

  it('accepts already parsed values (numbers typed by their JS value)', () => {
    assert.deepEqual(parseTelemetry({ a: 1, b: 1.5, c: 'x', d: null }, NOW), [
      { key: 'a', ts: NOW, kind: 'long', value: 1 },
      { key: 'b', ts: NOW, kind: 'double', value: 1.5 },
      { key: 'c', ts: NOW, kind: 'string', value: 'x' },
    ]);
  });
});

describe('value typing (device-api.md §1.2)', () => {
  const cases: Array<[string, TsEntry['kind'], TsEntry['value']]> = [
    ['true', 'bool', true],
    ['false', 'bool', false],
    ['42', 'long', 42],
    ['-7', 'long', -7],
    ['0', 'long', 0],
    ['42.0', 'double', 42],
    ['-3.25', 'double', -3.25],
    ['1E2', 'long', 100],
    ['1.5E1', 'long', 15],
    ['1.25E1', 'double', 12.5],
    ['2.5e-3', 'double', 0.0025],
    ['9223372036854775807', 'long', 9223372036854775807n],
    ['-9223372036854775808', 'long', -9223372036854775808n],
    ['9007199254740993', 'long', 9007199254740993n],
    ['9223372036854775808', 'string', '9223372036854775808'],
    ['12345678901234567890', 'string', '12345678901234567890'],
    ['0.12345678901234567', 'string', '0.12345678901234567'],
    ['0.1234567890123456', 'double', 0.1234567890123456],
    // Issue 20: an exponent literal is a DOUBLE, never expanded to its plain digits.
    ['1.2345E-20', 'double', 1.2345e-20],
    ['"42"', 'long', 42],
    ['"-3.5"', 'double', -3.5],
    ['"0123"', 'long', 123],
    ['".5"', 'double', 0.5],
    ['"1e5"', 'string', '1e5'],
    ['"0x10"', 'string', '0x10'],
    ['"true"', 'string', 'true'],
    ['"hello"', 'string', 'hello'],
    ['""', 'string', ''],
    ['"99999999999999999999"', 'string', '99999999999999999999'],
    ['{"a":[1,2.50,{"b":null}]}', 'json', '{"a":[1,2.50,{"b":null}]}'],
    ['[1,"x"]', 'json', '[1,"x"]'],
    ['{}', 'json', '{}'],
  ];
  for (const [literal, kind, value] of cases) {
    it(`${literal} -> ${kind} ${String(value)}`, () => {
      assert.deepEqual(one(`{"k":${literal}}`), { kind, value });
    });
  }

  it('null drops the key, the others of the object are kept', () => {
    assert.deepEqual(
      parse('{"a":null,"b":1}').map((p) => p.key),
      ['b'],
    );
  });

  it('a big integer inside a JSON value keeps all its digits', () => {
    assert.equal(one('{"k":{"n":12345678901234567890}}').value, '{"n":12345678901234567890}');
  });

  it('a "__proto__" key is stored as data', () => {
    const points = parse('{"__proto__":1,"x":{"__proto__":{"y":2}}}');
    assert.deepEqual(
      points.map((p) => [p.key, p.value]),
      [
        ['__proto__', 1],
        ['x', '{"__proto__":{"y":2}}'],
      ],
    );
  });
});

describe('bad payloads are refused with a message naming the problem', () => {
  it('malformed JSON', () => {
    rejects('{"a":', /Invalid JSON/);
    rejects("{'a':1}", /Invalid JSON/);
    rejects('{"a":1} x', /after the JSON value/);
    rejects('', /empty/);
  });

  it('top-level scalar, null or nested array', () => {
    rejects('5', /must be a JSON object or array, got the number 5/);
    rejects('"x"', /must be a JSON object or array/);
    rejects('null', /got null/);
    rejects('[[{"a":1}]]', /element 0 must be a JSON object, got an array/);
    rejects('[{"a":1},3]', /element 1 must be a JSON object/);
  });

  it('empty and too long keys', () => {
    rejects('{"":1}', /key must not be empty/);
    rejects(`{"${'k'.repeat(256)}":1}`, /longer than 255/);
    assert.equal(parse(`{"${'k'.repeat(255)}":1}`).length, 1);
  });

  it('ts that is not a non-negative integer', () => {
    rejects('{"ts":1.5,"values":{"a":1}}', /'ts' must be a non-negative integer/);
    rejects('{"ts":"abc","values":{"a":1}}', /'ts' must be/);
    rejects('{"ts":null,"values":{"a":1}}', /'ts' must be/);
    rejects('{"ts":-1,"values":{"a":1}}', /'ts' must be/);
    rejects('{"ts":1e300,"values":{"a":1}}', /'ts' must be/);
  });

  it('values that is not an object', () => {
    rejects('{"ts":1,"values":5}', /'values' must be a JSON object, got the number 5/);
    rejects('{"ts":1,"values":[1]}', /'values' must be a JSON object, got an array/);
    rejects('{"ts":1,"values":null}', /'values' must be a JSON object, got null/);
  });

  it('nesting over the limit', () => {
    const deep = (n: number) => `{"k":${'['.repeat(n)}${']'.repeat(n)}}`;
    assert.equal(parse(deep(TELEMETRY_LIMITS.maxDepth - 1)).length, 1);
    rejects(deep(TELEMETRY_LIMITS.maxDepth), /nesting deeper than 16/);
    const parsed = JSON.parse(deep(TELEMETRY_LIMITS.maxDepth + 2));
    assert.throws(() => parseTelemetry(parsed, NOW), /nesting is deeper than 16/);
  });

  it('sizes over the limits', () => {
    const limits = { ...TELEMETRY_LIMITS, maxPoints: 3, maxValueLength: 10, maxPayloadBytes: 200 };
    assert.throws(
      () => parseTelemetryText('{"a":1,"b":2,"c":3,"d":4}', NOW, limits),
      /more than 3 data points/,
    );
    assert.throws(
      () => parseTelemetryText('{"a":"abcdefghijk"}', NOW, limits),
      /String value length \[11\] for key \[a\] is greater than maximum allowed \[10\]/,
    );
    assert.throws(
      () => parseTelemetryText('{"a":{"x":"123456789"}}', NOW, limits),
      /String value length/,
    );
    assert.throws(
      () => parseTelemetryText(`{"a":"${'x'.repeat(300)}"}`, NOW, limits),
      /more than the limit of 200/,
    );
  });
});

describe('parseJsonText', () => {
  it('decodes escapes and keeps number literals', () => {
    const v = parseJsonText('{"s":"a\\n\\u00e9\\"","n":[1.50,-0,2e3]}', 8) as {
      s: string;
      n: Array<{ raw: string }>;
    };
    assert.equal(v.s, 'a\né"');
    assert.deepEqual(
      v.n.map((x) => x.raw),
      ['1.50', '-0', '2e3'],
    );
  });

  it('refuses what JSON.parse refuses', () => {
    for (const bad of ['{"a":01}', '{"a":.5}', '{"a":+1}', '[1,]', '{"a":"\t"}', '"\\x"', 'tru']) {
      assert.throws(() => JSON.parse(bad));
      assert.throws(() => parseJsonText(bad, 8), ValidationError, bad);
    }
  });
});

describe('the native and the exact parse give the same points', () => {
  for (const text of [
    '{"temperature":21.5,"humidity":40,"active":true,"label":"A-1"}',
    '{"ts":1763769600000,"values":{"t":23.45,"n":-7,"cfg":{"a":[1,2.5],"b":"x"}}}',
    '[{"ts":1,"values":{"a":1}},{"b":2.75},{"ts":"3","values":{"c":"12.5"}}]',
    '{"zero":-0,"big":123456789012345,"s":"1.0 in a string","off":null}',
  ]) {
    it(text.slice(0, 60), () => {
      assert.deepEqual(parse(text), parseTelemetry(parseJsonTextExact(text, 16), NOW));
    });
  }

  it('refuses a non-object the same way', () => {
    for (const text of ['5', '[1,2]', '{"ts":1,"values":5}', '{"ts":-1,"values":{"a":1}}']) {
      const message = (f: () => unknown) => {
        try {
          f();
        } catch (err) {
          return (err as Error).message;
        }
        return assert.fail(`no error for ${text}`);
      };
      assert.equal(
        message(() => parse(text)),
        message(() => parseTelemetry(parseJsonTextExact(text, 16), NOW)),
      );
    }
  });
});
