import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { constants as os, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  type EdgeNativeAddon,
  loadEdgeNative,
  type Rs485Settings,
} from '../src/native/edge-native.js';
import { SocatPair } from './helpers/modbus.js';

/**
 * The gateway's own addon (native/edge_native.c) as `npm run build` compiled it into dist/
 * (npm test builds first; CI installs gcc). The ioctls are made on a real pty of a socat pair and
 * on a bad descriptor. No RS-485 hardware here: the success path is checked by the bytes the
 * addon hands the kernel, against linux/serial.h read through the C compiler.
 */
describe('edge_native addon', () => {
  let addon: EdgeNativeAddon;
  let pair: SocatPair;
  let fd: number;

  before(async () => {
    const native = loadEdgeNative();
    assert.ok(native.available, native.available ? '' : native.reason);
    addon = native.addon;
    pair = await SocatPair.create();
    fd = openSync(pair.a, constants.O_RDWR | constants.O_NOCTTY | constants.O_NONBLOCK);
  });
  after(async () => {
    closeSync(fd);
    await pair.close();
  });

  /** Calls `fn`, which must throw; returns the error. */
  function thrown(fn: () => unknown): NodeJS.ErrnoException {
    try {
      fn();
    } catch (err) {
      return err as NodeJS.ErrnoException;
    }
    assert.fail('did not throw');
  }

  it('says ENOTTY for RS-485 and low-latency mode on a pty, EBADF on a bad descriptor', () => {
    const get = thrown(() => addon.rs485Get(fd));
    assert.ok(get instanceof Error);
    assert.equal(get.code, 'ENOTTY');
    assert.equal(get.errno, os.errno.ENOTTY);
    assert.match(get.message, /^ENOTTY: .*, ioctl TIOCGRS485$/);
    const set = thrown(() => addon.rs485Set(fd, { enabled: true, rtsOnSend: true }));
    assert.equal(set.code, 'ENOTTY');
    assert.match(set.message, /ioctl TIOCSRS485$/);
    assert.equal(thrown(() => addon.lowLatencySet(fd, true)).code, 'ENOTTY');

    assert.equal(thrown(() => addon.rs485Get(-1)).code, 'EBADF');
    assert.equal(thrown(() => addon.rs485Set(-1, { enabled: true })).code, 'EBADF');
    assert.equal(thrown(() => addon.lowLatencySet(-1, true)).code, 'EBADF');
  });

  it('refuses arguments of the wrong type with a TypeError', () => {
    assert.ok(thrown(() => addon.rs485Get('3' as unknown as number)) instanceof TypeError);
    const bad = { enabled: 'yes' } as unknown as Rs485Settings;
    assert.ok(thrown(() => addon.rs485Set(fd, bad)) instanceof TypeError);
    assert.ok(
      thrown(() => addon.rs485Encode(null as unknown as Rs485Settings)) instanceof TypeError,
    );
  });

  it('mallocTrim() calls malloc_trim(0) and answers 0 or 1', () => {
    const r = addon.mallocTrim();
    assert.ok(r === 0 || r === 1, String(r));
  });

  it('hands the kernel struct serial_rs485 as linux/serial.h lays it out', async () => {
    // The header's values, read through the compiler: flags, field offsets, size.
    const dir = await mkdtemp(join(tmpdir(), 'edge-gw-rs485-'));
    try {
      await writeFile(
        join(dir, 'layout.c'),
        `#include <linux/serial.h>
#include <stddef.h>
#include <stdio.h>
int main(void) {
  printf("%d %d %d %d %zu %zu %zu %zu\\n", SER_RS485_ENABLED, SER_RS485_RTS_ON_SEND,
    SER_RS485_RTS_AFTER_SEND, SER_RS485_RX_DURING_TX, offsetof(struct serial_rs485, flags),
    offsetof(struct serial_rs485, delay_rts_before_send),
    offsetof(struct serial_rs485, delay_rts_after_send), sizeof(struct serial_rs485));
  return 0;
}
`,
      );
      execFileSync('cc', ['-o', join(dir, 'layout'), join(dir, 'layout.c')]);
      const [enabled, onSend, afterSend, rxDuringTx, flagsAt, beforeAt, afterAt, size] =
        execFileSync(join(dir, 'layout'), { encoding: 'utf8' }).trim().split(' ').map(Number);
      // The kernel's ABI: 32 bytes, flags then the two delays (u32, this machine's byte order).
      assert.deepEqual([flagsAt, beforeAt, afterAt, size], [0, 4, 8, 32]);
      const expected = (flags: number, before: number, after: number) => {
        const b = Buffer.alloc(size);
        b.writeUInt32LE(flags, flagsAt);
        b.writeUInt32LE(before, beforeAt);
        b.writeUInt32LE(after, afterAt);
        return b;
      };
      const cases: Array<[Partial<Rs485Settings>, Buffer]> = [
        [{}, expected(0, 0, 0)],
        [{ enabled: true }, expected(enabled, 0, 0)],
        [
          { enabled: true, rtsOnSend: true, delayRtsAfterSend: 7 },
          expected(enabled | onSend, 0, 7),
        ],
        [
          {
            enabled: true,
            rtsOnSend: false,
            rtsAfterSend: true,
            rxDuringTx: true,
            delayRtsBeforeSend: 100,
            delayRtsAfterSend: 3,
          },
          expected(enabled | afterSend | rxDuringTx, 100, 3),
        ],
        [{ enabled: false, rtsOnSend: true }, expected(onSend, 0, 0)],
      ];
      for (const [settings, bytes] of cases) {
        assert.deepEqual(addon.rs485Encode(settings), bytes, JSON.stringify(settings));
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('is "not available" with the reason when its file is missing', () => {
    const native = loadEdgeNative('/nonexistent/edge_native.node');
    assert.equal(native.available, false);
    assert.match(native.available ? '' : native.reason, /edge_native\.node was not built/);
  });
});
