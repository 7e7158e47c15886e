import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ReportFilter, type ReportStrategy, reportStrategySchema } from './report-strategy.js';

const strategy = (raw: unknown): ReportStrategy => reportStrategySchema.parse(raw);

describe('reportStrategy (connectors reference §6)', () => {
  it('parses the IoT Gateway shape with its defaults; refuses unknown types', () => {
    assert.deepEqual(strategy({ type: 'on_change' }), {
      type: 'ON_CHANGE',
      periodMs: 10_000,
      ttlMs: 86_400_000,
    });
    assert.equal(strategy({ type: 'ON_REPORT_PERIOD', reportPeriod: 500, ttl: 5 }).ttlMs, 5000);
    assert.equal(reportStrategySchema.safeParse({ type: 'SOMETIMES' }).success, false);
    assert.equal(
      reportStrategySchema.safeParse({ type: 'ON_CHANGE', reportPeriod: 5 }).success,
      false,
    );
  });

  it('ON_CHANGE sends a value that differs from the last; ON_RECEIVED every value', () => {
    const f = new ReportFilter();
    const of = (k: string) => (k === 'temp' ? strategy({ type: 'ON_CHANGE' }) : undefined);
    assert.deepEqual(f.apply('telemetry', { temp: 20, rpm: 5 }, of, 0), { temp: 20, rpm: 5 });
    assert.deepEqual(f.apply('telemetry', { temp: 20, rpm: 5 }, of, 100), { rpm: 5 });
    assert.deepEqual(f.apply('telemetry', { temp: 21, rpm: 5 }, of, 200), { temp: 21, rpm: 5 });
    // Attributes are remembered apart from telemetry of the same name.
    assert.deepEqual(f.apply('attributes', { temp: 21 }, of, 300), { temp: 21 });
    assert.deepEqual(f.apply('telemetry', { temp: [true, false] }, of, 400), {
      temp: [true, false],
    });
    assert.deepEqual(f.apply('telemetry', { temp: [true, false] }, of, 500), {});
  });

  it('ON_REPORT_PERIOD sends the first value, then the newest every period with the time', () => {
    const f = new ReportFilter();
    const s = strategy({ type: 'ON_REPORT_PERIOD', reportPeriod: 1000, ttl: 60 });
    assert.deepEqual(
      f.apply('telemetry', { kw: 1 }, () => s, 0),
      { kw: 1 },
    );
    assert.deepEqual(
      f.apply('telemetry', { kw: 2 }, () => s, 400),
      {},
    );
    assert.deepEqual(f.due(900).telemetry, {});
    assert.deepEqual(f.due(1000).telemetry, { kw: 2 });
    assert.deepEqual(f.due(1500).telemetry, {});
    assert.deepEqual(f.due(2000).telemetry, { kw: 2 }, 'unchanged values are re-sent too');
  });

  it('ON_CHANGE_OR_REPORT_PERIOD does both; a key not updated for ttl is forgotten', () => {
    const f = new ReportFilter();
    const s = strategy({ type: 'ON_CHANGE_OR_REPORT_PERIOD', reportPeriod: 1000, ttl: 2 });
    assert.deepEqual(
      f.apply('attributes', { mode: 'a' }, () => s, 0),
      { mode: 'a' },
    );
    assert.deepEqual(
      f.apply('attributes', { mode: 'b' }, () => s, 100),
      { mode: 'b' },
    );
    assert.deepEqual(
      f.apply('attributes', { mode: 'b' }, () => s, 200),
      {},
    );
    assert.deepEqual(f.due(1100).attributes, { mode: 'b' });
    // Nothing new for more than 2 s: the key is dropped and sent no more.
    assert.deepEqual(f.due(2300).attributes, {});
    assert.deepEqual(f.due(3300).attributes, {});
    assert.deepEqual(
      f.apply('attributes', { mode: 'b' }, () => s, 3400),
      { mode: 'b' },
    );
  });
});
