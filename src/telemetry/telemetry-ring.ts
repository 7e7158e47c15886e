import type { Db } from '../db/open.js';
import { BitReader, BitWriter } from './telemetry-block.js';

/**
 * The durable log's ring (issue 19, docs/telemetry.md "The log ring"): a fixed set of slots
 * (`ts_ring`, rows preallocated once) rewritten in place with blobs of the same size, so that a
 * commit writes only the pages its bytes fall on and never allocates one. A slot holds whole log
 * records of one commit:
 *
 *   u48 seq (little-endian) · u16 bytes used · entries: varint device rid, varint length, record
 *
 * `seq` counts slots and spill rows (`ts_log_spill`, for a commit that does not fit the free
 * ring) alike, in commit order. `ts_ring_tail.seq` is the oldest seq a seal still needs: slots
 * below it (and slots never written, seq 0) are free.
 */

/** Bytes of a slot's blob (always this size): 8 slots fill a 4 KiB page. */
export const SLOT_BYTES = 496;
const HEADER = 8;
/** Bytes of entries a slot holds. */
export const SLOT_PAYLOAD = SLOT_BYTES - HEADER;

/** One message of the log: a device's points of one commit (`encodeLogRecord`). */
export interface LogEntry {
  readonly seq: number;
  readonly rid: number;
  readonly data: Uint8Array;
}

/** A ring slot as read: its row, its seq and its entries (none for a free slot). */
export interface RingSlot {
  readonly slot: number;
  readonly seq: number;
  readonly entries: LogEntry[];
}

function varintSize(v: number): number {
  let n = 1;
  for (let x = v; x >= 0x80; x = Math.floor(x / 0x80)) n++;
  return n;
}

/** Bytes one record takes in a slot. */
export function entryBytes(rid: number, record: Uint8Array): number {
  return varintSize(rid) + varintSize(record.length) + record.length;
}

/** A slot's blob: `entries` (at most SLOT_PAYLOAD bytes, see `entryBytes`) under `seq`. */
export function encodeSlot(
  seq: number,
  entries: ReadonlyArray<{ rid: number; data: Uint8Array }>,
): Buffer {
  const w = new BitWriter();
  for (const e of entries) {
    w.varint(e.rid);
    w.varint(e.data.length);
    w.bytes(e.data);
  }
  const body = w.done();
  if (body.length > SLOT_PAYLOAD) throw new Error(`ring slot overfull (${body.length} bytes)`);
  const buf = Buffer.alloc(SLOT_BYTES);
  buf.writeUIntLE(seq, 0, 6);
  buf.writeUInt16LE(body.length, 6);
  buf.set(body, HEADER);
  return buf;
}

/** The seq of a slot's blob (0: never written). */
export function slotSeq(data: Uint8Array): number {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength).readUIntLE(0, 6);
}

export function decodeSlot(data: Uint8Array): LogEntry[] {
  const b = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const seq = b.readUIntLE(0, 6);
  const used = b.readUInt16LE(6);
  const r = new BitReader(b.subarray(HEADER, HEADER + used));
  const out: LogEntry[] = [];
  while (r.pos >>> 3 < used) {
    const rid = r.varint();
    out.push({ seq, rid, data: r.bytes(r.varint()) });
  }
  return out;
}

/**
 * The ring as stored: the tail, every slot (by slot number; `entries` only for live ones) and
 * the spill rows, with every live log entry (ring and spill) in commit order.
 */
export function readRing(db: Db): {
  tail: number;
  slots: RingSlot[];
  spillMax: number;
  entries: LogEntry[];
} {
  const tail =
    (db.prepare('SELECT seq FROM ts_ring_tail').pluck().get() as number | undefined) ?? 0;
  const slots: RingSlot[] = [];
  const entries: LogEntry[] = [];
  for (const r of db.prepare('SELECT slot, data FROM ts_ring ORDER BY slot').iterate() as Iterable<{
    slot: number;
    data: Buffer;
  }>) {
    const seq = slotSeq(r.data);
    const live = seq !== 0 && seq >= tail;
    const slot = { slot: r.slot, seq, entries: live ? decodeSlot(r.data) : [] };
    slots.push(slot);
    for (const e of slot.entries) entries.push(e);
  }
  let spillMax = 0;
  for (const r of db
    .prepare('SELECT seq, device_rid AS rid, data FROM ts_log_spill ORDER BY seq')
    .iterate() as Iterable<LogEntry>) {
    entries.push(r);
    spillMax = r.seq;
  }
  // Stable: the entries of one slot keep their order.
  entries.sort((a, b) => a.seq - b.seq);
  return { tail, slots, spillMax, entries };
}

/** Every live record of the durable log (ring and spill rows), in commit order. */
export function readLog(db: Db): LogEntry[] {
  return readRing(db).entries;
}
