/**
 * Cost of the one way in (issue 13): CPU per telemetry message through `telemetry.ingest` (parse,
 * type, group commit) against `messages.postTelemetry` (the same, plus the message queued after
 * the commit, built and handed to the processing entry point), interleaved in one process so
 * that a loaded machine slows both alike. Usage:
 *   npm run bench:messages [-- --messages 20000 --rounds 6 --inflight 800]
 */

import { parseArgs } from 'node:util';
import { createDevice, startGateway } from '../../test/helpers/gateway.js';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '6' },
    inflight: { type: 'string', default: '800' },
  },
});
const N = Number(values.messages);
const ROUNDS = Number(values.rounds);
const INFLIGHT = Number(values.inflight);

const t = await startGateway({ config: { logLevel: 'warn' } });
try {
  const d = await createDevice(t, 'bench-messages');
  const s = t.gw.services;
  const device = s.devices.identity(d.id);
  if (!device) throw new Error('device not found');
  const payload = (i: number) =>
    Buffer.from(`{"temperature":${(20 + (i % 100) / 10).toFixed(1)},"humidity":55,"ok":true}`);

  /** CPU µs per message of one round, until every message is processed. */
  const round = async (kind: 'ingest' | 'post'): Promise<number> => {
    const c0 = process.cpuUsage();
    const inflight: Array<Promise<unknown>> = [];
    for (let i = 0; i < N; i++) {
      inflight.push(
        kind === 'ingest'
          ? s.telemetry.ingest(device, payload(i))
          : s.messages.postTelemetry(device, payload(i)),
      );
      if (inflight.length >= INFLIGHT) await Promise.all(inflight.splice(0));
    }
    await Promise.all(inflight);
    while (s.messages.stats().queued > 0) await new Promise((r) => setImmediate(r));
    const c = process.cpuUsage(c0);
    return (c.user + c.system) / N;
  };

  console.log(
    `messages bench: ${ROUNDS} × ${N} telemetry messages (3 keys) per path, ${INFLIGHT} in flight, interleaved`,
  );
  const res = { ingest: [] as number[], post: [] as number[] };
  for (let r = 0; r < ROUNDS; r++) {
    res.ingest.push(await round('ingest'));
    res.post.push(await round('post'));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const [k, xs] of Object.entries(res)) {
    console.log(
      `  ${k === 'ingest' ? 'telemetry.ingest       ' : 'messages.postTelemetry '}` +
        `${xs.map((x) => x.toFixed(1)).join(' ')} µs/msg; median ${median(xs).toFixed(1)}`,
    );
  }
  const q = s.messages.stats();
  console.log(
    `  the way in adds ${(median(res.post) - median(res.ingest)).toFixed(1)} µs/msg (medians); ` +
      `queue: ${q.processed} processed, ${q.dropped} dropped, ${q.failed} failed`,
  );
} finally {
  await t.close();
}
