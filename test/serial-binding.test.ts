import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { SerialPort } from 'serialport';
import { serialBinding } from '../src/transports/modbus/serial-binding.js';
import { SocatPair } from './helpers/modbus.js';

/**
 * serialport's port layer with reads and writes on the event loop (serial-binding.ts), on a socat
 * virtual serial pair: what Modbus RTU lines open. Both ends use it.
 */
async function open(path: string): Promise<SerialPort> {
  // serialport's options type leaves `binding` out; SerialPort takes it (modbus-serial passes it).
  const options = { path, baudRate: 115_200, autoOpen: false, binding: serialBinding() };
  const port = new SerialPort(options);
  await new Promise<void>((resolve, reject) => port.open((e) => (e ? reject(e) : resolve())));
  return port;
}

/** Collects what `port` reads until `n` bytes are in. */
function receive(port: SerialPort, n: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let got = 0;
  return new Promise((resolve) => {
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      got += chunk.length;
      if (got >= n) {
        port.off('data', onData);
        resolve(Buffer.concat(chunks));
      }
    };
    port.on('data', onData);
  });
}

function write(port: SerialPort, data: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    port.write(data, (e) => (e ? reject(e) : port.drain((d) => (d ? reject(d) : resolve()))));
  });
}

function closed(port: SerialPort): Promise<unknown> {
  return new Promise((resolve) => port.once('close', resolve));
}

describe('serial binding (reads and writes on the event loop)', () => {
  let pair: SocatPair;
  before(async () => {
    pair = await SocatPair.create();
  });
  after(async () => {
    await pair.close();
  });

  it('carries a frame each way, as written', async () => {
    const a = await open(pair.a);
    const b = await open(pair.b);
    try {
      const request = Buffer.from([1, 3, 0, 0, 0, 10, 0xc5, 0xcd]);
      const atB = receive(b, request.length);
      await write(a, request);
      assert.deepEqual(await atB, request);
      const answer = randomBytes(25);
      const atA = receive(a, answer.length);
      await write(b, answer);
      assert.deepEqual(await atA, answer);
    } finally {
      await Promise.all([new Promise((r) => a.close(r)), new Promise((r) => b.close(r))]);
    }
  });

  it('finishes a write larger than the pty can hold, in order, once the other end reads', async () => {
    const a = await open(pair.a);
    const b = await open(pair.b);
    try {
      // Far more than a pty's buffer: the write meets EAGAIN and waits for the poller.
      const big = randomBytes(1 << 20);
      b.pause();
      const done = write(a, big);
      let finished = false;
      void done.then(() => {
        finished = true;
      });
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(finished, false, 'the write waits while nobody reads');
      const atB = receive(b, big.length);
      b.resume();
      await done;
      assert.deepEqual(await atB, big);
    } finally {
      await Promise.all([new Promise((r) => a.close(r)), new Promise((r) => b.close(r))]);
    }
  });

  it('closes with a read pending without an error, and reports a vanished device as a close', async () => {
    const a = await open(pair.a);
    const errors: Error[] = [];
    a.on('error', (e) => errors.push(e));
    // A read is pending (flowing, nothing to read); closing cancels it quietly.
    a.on('data', () => {});
    await new Promise((r) => setTimeout(r, 50));
    const byUs = closed(a);
    await new Promise((r) => a.close(r));
    assert.equal(await byUs, null);
    assert.equal(errors.length, 0, 'no error on a close of our own');

    // The pty vanishes under an open port (an unplugged USB adapter): a close with the error.
    const c = await open(pair.a);
    c.on('error', (e) => errors.push(e));
    c.on('data', () => {});
    const gone = closed(c);
    await pair.down();
    const reason = (await gone) as { disconnected?: boolean } | null;
    assert.equal(reason?.disconnected, true);
    await pair.up();
  });
});
