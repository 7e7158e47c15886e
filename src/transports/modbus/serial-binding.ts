import { readSync, writeSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import {
  autoDetect,
  type BindingInterface,
  type BindingPortInterface,
  BindingsError,
  LinuxBinding,
  type LinuxOpenOptions,
  type LinuxPortBinding,
} from '@serialport/bindings-cpp';

/**
 * serialport's Linux binding with its reads and writes done on the event loop.
 *
 * The stock binding opens the port non-blocking and waits for it with a uv_poll handle, but
 * each read and write is then an `fs.read`/`fs.write` in libuv's thread pool: one more hop to a
 * worker thread and back before a request leaves and again before an answer is seen (tens of
 * microseconds on a quiet machine, and behind any other file I/O of the process: SQLite, logs).
 * On a Modbus RTU bus that hop is dead time of the bus (the next frame waits t3.5 after the
 * answer is *seen*). The descriptor is non-blocking, so the same system calls are made here
 * directly: a request goes out in one `write(2)` when modbus-serial writes it, and an answer is
 * read in the poll callback that says it is there. A read or write that would block waits for
 * the same poller, so nothing ever blocks the loop.
 *
 * Each read that returns bytes is reported to `onRead` with its time (performance.now()): the
 * bytes were on the wire no later than that, so the Modbus line can count the t3.5 silence after
 * an answer from there (line.ts) instead of from the end of its decoding.
 *
 * Opening, closing, settings, flush and drain are the stock binding's (delegated).
 */
class EventLoopPort implements BindingPortInterface {
  #writing: Promise<void> | undefined;

  constructor(
    private readonly inner: LinuxPortBinding,
    private readonly onRead: ((at: number) => void) | undefined,
  ) {}

  get openOptions() {
    return this.inner.openOptions;
  }

  get isOpen(): boolean {
    return this.inner.isOpen;
  }

  /** The open descriptor (port-modes.ts makes its ioctls on it), null once closed. */
  get fd(): number | null {
    return this.inner.fd;
  }

  async read(
    buffer: Buffer,
    offset: number,
    length: number,
  ): Promise<{ buffer: Buffer; bytesRead: number }> {
    for (;;) {
      const fd = this.#fd();
      let bytesRead: number;
      try {
        bytesRead = readSync(fd, buffer, offset, length, null);
      } catch (err) {
        if (!wouldBlock(err)) throw err;
        bytesRead = 0;
      }
      if (bytesRead > 0) {
        this.onRead?.(performance.now());
        return { buffer, bytesRead };
      }
      // Nothing there yet (or end of file after a hang-up): wait on the poller, never spin.
      await this.#when('readable');
    }
  }

  write(buffer: Buffer): Promise<void> {
    const run = async () => {
      let offset = 0;
      while (offset < buffer.length) {
        const fd = this.#fd();
        try {
          offset += writeSync(fd, buffer, offset, buffer.length - offset);
        } catch (err) {
          if (!wouldBlock(err)) throw err;
          await this.#when('writable');
        }
      }
    };
    const writing = run().finally(() => {
      if (this.#writing === writing) this.#writing = undefined;
    });
    this.#writing = writing;
    return writing;
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  update(options: Parameters<LinuxPortBinding['update']>[0]): Promise<void> {
    return this.inner.update(options);
  }

  set(options: Parameters<LinuxPortBinding['set']>[0]): Promise<void> {
    return this.inner.set(options);
  }

  get() {
    return this.inner.get();
  }

  getBaudRate() {
    return this.inner.getBaudRate();
  }

  flush(): Promise<void> {
    return this.inner.flush();
  }

  async drain(): Promise<void> {
    await this.#writing;
    return this.inner.drain();
  }

  /** The open descriptor; a read or write on a closed port fails as "canceled", as the stock one. */
  #fd(): number {
    const fd = this.inner.fd;
    if (fd === null || !this.inner.isOpen) {
      throw new BindingsError('Port is not open', { canceled: true });
    }
    return fd;
  }

  #when(event: 'readable' | 'writable'): Promise<void> {
    return new Promise((resolve, reject) => {
      this.inner.poller.once(event, (err?: Error | null) => (err ? reject(err) : resolve()));
    });
  }
}

export type { BindingInterface };

function wouldBlock(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'EAGAIN' || code === 'EWOULDBLOCK' || code === 'EINTR';
}

/**
 * serialport's port layer for a serial Modbus line: on Linux the event-loop binding, reporting
 * each read to `onRead`; elsewhere serialport's own (no read times).
 */
export function serialBinding(onRead?: (at: number) => void): BindingInterface {
  if (process.platform !== 'linux') return autoDetect();
  return {
    list: () => LinuxBinding.list(),
    async open(options: LinuxOpenOptions) {
      const inner = await LinuxBinding.open(options);
      return new EventLoopPort(inner, onRead);
    },
  };
}
