import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { getHeapStatistics } from 'node:v8';
import { pino } from 'pino';
import { type HeapSize, MemoryTrim } from './memory-trim.js';

const log = pino({ level: 'silent' });
const MB = 1024 * 1024;

/** A heap, event loop and clock the test sets; `collect` shrinks the heap to `live`. */
function fake(start: number) {
  const s = { committed: start, used: start, live: start, busy: 0, now: 0, collects: 0 };
  const probe = {
    heap: (): HeapSize => ({ committed: s.committed, used: s.used }),
    utilization: () => s.busy,
    collect: () => {
      s.collects++;
      s.committed = s.live;
      s.used = s.live;
    },
    now: () => s.now,
  };
  return { s, probe };
}

describe('memory trim', () => {
  it('trims only after the heap grew by the threshold, after a quiet period, and not twice within the gap', () => {
    const { s, probe } = fake(40 * MB);
    const trim = new MemoryTrim({
      log,
      probe,
      options: {
        growthBytes: 32 * MB,
        minGapMs: 30_000,
        quietUtilization: 0.05,
        quietMs: 20_000,
        checkMs: 3_600_000,
      },
    });
    trim.start();
    try {
      // Start-up counts as a burst: the first quiet look trims what it grew into.
      s.live = 30 * MB;
      assert.equal(trim.check(), true);
      assert.equal(s.collects, 1);
      s.now = 60_000;
      s.committed = 60 * MB; // grown 30 MiB: below the threshold
      assert.equal(trim.check(), false);

      s.committed = 150 * MB; // a burst: grown 110 MiB
      s.used = 60 * MB;
      s.live = 55 * MB;
      s.busy = 0.4; // still busy: never while loaded
      s.now = 62_000;
      assert.equal(trim.check(), false);
      assert.equal(s.collects, 1);

      // Quiet from here: the trim waits for 20 s of it.
      s.busy = 0.01;
      s.now = 64_000;
      assert.equal(trim.check(), false);
      s.now = 80_000;
      assert.equal(trim.check(), false);
      s.now = 84_000;
      assert.equal(trim.check(), true);
      assert.equal(s.collects, 2);
      assert.deepEqual(trim.stats, { trims: 2, freedBytes: 10 * MB + 95 * MB });

      // Grown again past the threshold above the new baseline (55 MiB), still quiet, but within
      // the gap.
      s.now = 113_000;
      s.committed = 100 * MB;
      assert.equal(trim.check(), false);
      s.now = 115_000;
      assert.equal(trim.check(), true);
      assert.equal(s.collects, 3);
      assert.equal(trim.stats.trims, 3);
    } finally {
      trim.stop();
    }
  });

  it('keeps the heap through a short pause in the load, and trims malloc after the heap', () => {
    const { s, probe } = fake(40 * MB);
    const order: string[] = [];
    const trim = new MemoryTrim({
      log,
      probe: {
        ...probe,
        collect: () => {
          order.push('heap');
          probe.collect();
        },
      },
      mallocTrim: () => {
        order.push('malloc');
        return 1;
      },
      options: { growthBytes: 32 * MB, minGapMs: 0, quietMs: 30_000, checkMs: 3_600_000 },
    });
    trim.start();
    try {
      s.live = 30 * MB;
      assert.equal(trim.check(), true);
      assert.deepEqual(order, ['heap', 'malloc']);
      // Load in bursts with pauses of 10 s: the young generation V8 grew for them stays.
      for (let t = 0; t < 10; t++) {
        s.committed = 160 * MB;
        s.busy = t % 2 === 1 ? 0.3 : 0;
        s.now += 10_000;
        assert.equal(trim.check(), false, `look ${t}`);
      }
      // The load stopped: after 30 s of quiet the heap and malloc are trimmed.
      s.busy = 0;
      s.now += 10_000;
      assert.equal(trim.check(), false);
      s.now += 10_000;
      assert.equal(trim.check(), false);
      s.now += 10_000;
      assert.equal(trim.check(), true);
      assert.deepEqual(order, ['heap', 'malloc', 'heap', 'malloc']);
    } finally {
      trim.stop();
    }
  });

  it('trims after the resident set grew by the threshold when the heap grew less (malloc)', () => {
    const { s, probe } = fake(40 * MB);
    let rss = 100 * MB;
    const trim = new MemoryTrim({
      log,
      probe,
      rss: () => rss,
      mallocTrim: () => {
        rss -= 30 * MB; // what malloc gives back
        return 1;
      },
      options: { growthBytes: 32 * MB, minGapMs: 0, quietMs: 30_000, checkMs: 3_600_000 },
    });
    trim.start();
    try {
      s.live = 30 * MB;
      assert.equal(trim.check(), true); // start-up
      assert.equal(s.collects, 1);
      // A burst: the heap 20 MiB above its trim, the process 90 MiB above (sockets, TLS, SQLite).
      s.committed = 50 * MB;
      s.live = 48 * MB;
      rss = 160 * MB;
      s.busy = 0.5;
      s.now += 2_000;
      assert.equal(trim.check(), false, 'never while busy');
      s.busy = 0;
      s.now += 20_000;
      assert.equal(trim.check(), false, 'quiet for 20 s only');
      s.now += 12_000;
      assert.equal(trim.check(), true, 'quiet for 32 s: trimmed for the resident growth');
      assert.equal(s.collects, 2);
      // Measured from the resident size after the trim: 130 MiB; growth of 20 MiB is not enough.
      rss = 150 * MB;
      s.now += 60_000;
      assert.equal(trim.check(), false);
      rss = 170 * MB; // 40 MiB above it
      s.now += 2_000;
      assert.equal(trim.check(), true);
    } finally {
      trim.stop();
    }
  });

  it('takes a heap that shrank by itself as the new baseline', () => {
    const { s, probe } = fake(100 * MB);
    const trim = new MemoryTrim({
      log,
      probe,
      options: { growthBytes: 32 * MB, minGapMs: 0, quietMs: 0 },
    });
    trim.start();
    try {
      s.live = 100 * MB; // a trim that could give nothing back
      assert.equal(trim.check(), true);
      s.committed = 40 * MB; // V8's own reducer gave memory back later
      assert.equal(trim.check(), false);
      s.committed = 80 * MB; // 40 MiB above the lower baseline: trims
      assert.equal(trim.check(), true);
    } finally {
      trim.stop();
    }
  });

  it('gives the pages of a burst back with the real collector', () => {
    const trim = new MemoryTrim({
      log,
      // quietUtilization above 1: this test's own allocation loop does not count as load.
      options: { growthBytes: 16 * MB, minGapMs: 0, quietUtilization: 2, checkMs: 3_600_000 },
    });
    trim.start();
    try {
      let burst: Array<{ i: number; s: string }> | undefined = [];
      for (let i = 0; i < 1_500_000; i++) burst.push({ i, s: `item ${i}` });
      assert.equal(burst.length, 1_500_000);
      burst = undefined;
      const before = getHeapStatistics().total_heap_size;
      assert.equal(trim.check(), true, `committed ${before / MB} MiB`);
      const after = getHeapStatistics().total_heap_size;
      assert.ok(after < before - 32 * MB, `committed ${before / MB} -> ${after / MB} MiB`);
      assert.equal(trim.stats.trims, 1);
      assert.ok(trim.stats.freedBytes >= 32 * MB);
    } finally {
      trim.stop();
    }
  });

  it('does nothing with a threshold of 0', () => {
    const { s, probe } = fake(10 * MB);
    const trim = new MemoryTrim({ log, probe, options: { growthBytes: 0 } });
    trim.start();
    s.committed = 1000 * MB;
    assert.equal(trim.check(), false);
    trim.stop();
  });
});
