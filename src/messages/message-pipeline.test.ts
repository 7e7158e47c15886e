import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { MessagePipeline } from './message-pipeline.js';
import type { GatewayMsg } from './types.js';

const log = pino({ level: 'silent' });

function msg(i: number): GatewayMsg {
  return {
    id: `m${i}`,
    type: 'POST_TELEMETRY_REQUEST',
    originator: { entityType: 'DEVICE', id: 'd1' },
    metadata: { ts: String(i) },
    data: { i },
    ts: i,
  };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('MessagePipeline', () => {
  it('hands messages over on a later turn, in order, never inside submit', async () => {
    const seen: string[] = [];
    const p = new MessagePipeline({
      log,
      capacity: 8,
      processor: { process: (m) => seen.push(m.id) },
    });
    p.submit(msg(1));
    p.submit(() => [msg(2), msg(3)]);
    assert.deepEqual(seen, [], 'nothing processed synchronously');
    await turn();
    assert.deepEqual(seen, ['m1', 'm2', 'm3']);
    assert.deepEqual(p.stats(), {
      queued: 0,
      capacity: 8,
      submitted: 2,
      processed: 3,
      dropped: 0,
      failed: 0,
    });
  });

  it('ends each turn with endBatch, after the messages of that turn; a throwing one is counted', async () => {
    const seen: string[] = [];
    const p = new MessagePipeline({
      log,
      capacity: 8,
      processor: {
        process: (m) => seen.push(m.id),
        endBatch: () => {
          seen.push('end');
          if (seen.length > 3) throw new Error('end failed');
        },
      },
    });
    p.submit(msg(1));
    p.submit(msg(2));
    await turn();
    assert.deepEqual(seen, ['m1', 'm2', 'end']);
    p.submit(msg(3));
    await turn();
    assert.deepEqual(seen, ['m1', 'm2', 'end', 'm3', 'end']);
    assert.equal(p.stats().failed, 1);
  });

  it('drops the oldest at the bound and counts it', () => {
    const seen: string[] = [];
    const p = new MessagePipeline({
      log,
      capacity: 3,
      processor: { process: (m) => seen.push(m.id) },
    });
    const room = [1, 2, 3, 4, 5].map((i) => p.submit(msg(i)));
    assert.deepEqual(room, [true, true, true, false, false]);
    p.flush();
    assert.deepEqual(seen, ['m3', 'm4', 'm5']);
    assert.equal(p.stats().dropped, 2);
  });

  it('a throwing processor or builder is counted; the next messages still go through', () => {
    const seen: string[] = [];
    const p = new MessagePipeline({
      log,
      capacity: 8,
      processor: {
        process(m) {
          if (m.id === 'm1') throw new Error('boom');
          seen.push(m.id);
        },
      },
    });
    p.submit(msg(1));
    p.submit(() => {
      throw new Error('bad builder');
    });
    p.submit(msg(2));
    p.flush();
    assert.deepEqual(seen, ['m2']);
    assert.equal(p.stats().failed, 2);
  });

  it('a turn hands over what was queued before it, within its time budget; stop processes the rest', async () => {
    let n = 0;
    const p = new MessagePipeline({ log, capacity: 1000, processor: { process: () => n++ } });
    for (let i = 0; i < 500; i++) p.submit(msg(i));
    await turn();
    assert.equal(n, 500, 'a burst is handed over in one turn');
    let slow = 0;
    const q = new MessagePipeline({
      log,
      capacity: 1000,
      turnBudgetMs: 0,
      processor: { process: () => slow++ },
    });
    for (let i = 0; i < 200; i++) q.submit(msg(i));
    await turn();
    assert.equal(slow, 64, 'a spent budget ends the turn after one slice');
    q.stop();
    assert.equal(slow, 200);
    assert.equal(q.submit(msg(999)), false, 'stopped');
    await turn();
    assert.equal(slow, 200);
  });

  it('logs drops once per interval with the count', () => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = pino({ level: 'warn' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    let now = 0;
    const p = new MessagePipeline({ log: sink, capacity: 1, logIntervalMs: 1000, now: () => now });
    for (let i = 0; i < 5; i++) p.submit(msg(i));
    assert.equal(lines.length, 1);
    now = 1000;
    p.submit(msg(9));
    assert.equal(lines.length, 2);
    assert.equal(lines[1].dropped, 4, 'the three held back and this one');
    p.stop();
  });
});
