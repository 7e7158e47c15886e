#!/usr/bin/env python3
"""A Modbus RTU slave on a pty for `npm run bench:modbus` (issue 17): the "pty" fixture.

It opens a pty pair itself and answers on the master side, so the gateway opens the other end
(/dev/pts/N) as its serial port and nothing else sits between them: no socat, no second pty, no
thread pool. The only hop left on the slave's side is one pty transfer each way.

How it models the wire (a pty carries bytes at once, a wire does not):
- A request counts as arrived when the read that completes its 8 bytes returns (time A).
- The answer is written in one piece at A + request bytes + t3.5 + answer bytes, each byte
  `bits` bits at `baud` (11 for 8E1/8N2, 10 for 8N1): the instant its last byte would reach the
  master on a wire if the request's first bit had left the master at A, the slave had waited
  the t3.5 silence that ends the request frame, and then sent the answer back to back.
  The master's write and the pty transfer before A are not subtracted, so the fixture is never
  earlier than the wire, only later.
- It sleeps with a 1 ns timer slack to 0.3 ms before the deadline and spins the rest, then
  writes; how late each answer left (against its deadline) is recorded and reported.

Usage: rtu-slave.py --baud 115200 --bits 10 --gap-ms 1.75
Prints `ready /dev/pts/N` on stdout; on SIGTERM prints one JSON line: {"arrive": [ns...],
"sent": [ns...]} (CLOCK_MONOTONIC, the clock of Node's process.hrtime) and exits.
"""

import argparse
import ctypes
import json
import os
import select
import signal
import sys
import time
import tty


def crc16(data: bytes) -> int:
    crc = 0xFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def answer(req: bytes) -> bytes:
    unit, fc = req[0], req[1]
    count = int.from_bytes(req[4:6], "big")
    body = bytes([unit, fc, 2 * count]) + b"".join(i.to_bytes(2, "big") for i in range(count))
    return body + crc16(body).to_bytes(2, "little")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--baud", type=int, default=115200)
    p.add_argument("--bits", type=int, default=10)
    p.add_argument("--gap-ms", type=float, default=1.75)
    args = p.parse_args()
    char_ns = args.bits * 1_000_000_000 / args.baud
    gap_ns = args.gap_ms * 1_000_000

    try:  # PR_SET_TIMERSLACK: sleeps end within microseconds, not the default 50 us
        ctypes.CDLL(None, use_errno=True).prctl(29, 1, 0, 0, 0)
    except OSError:
        pass

    master, slave = os.openpty()
    tty.setraw(slave)
    arrive: list[int] = []
    sent: list[int] = []

    def stop(_sig, _frame):
        sys.stdout.write(json.dumps({"arrive": arrive, "sent": sent}) + "\n")
        sys.stdout.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    sys.stdout.write(f"ready {os.ttyname(slave)}\n")
    sys.stdout.flush()

    buf = b""
    poller = select.poll()
    poller.register(master, select.POLLIN)
    while True:
        poller.poll()
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO while the gateway has the port closed
            time.sleep(0.01)
            continue
        now = time.monotonic_ns()
        buf += chunk
        while len(buf) >= 8:
            req = buf[:8]
            if req[1] not in (3, 4) or crc16(req[:6]) != int.from_bytes(req[6:8], "little"):
                buf = buf[1:]  # resynchronise on garbage
                continue
            buf = buf[8:]
            resp = answer(req)
            deadline = now + (len(req) + len(resp)) * char_ns + gap_ns
            left = deadline - time.monotonic_ns()
            if left > 300_000:
                time.sleep((left - 300_000) / 1e9)
            while time.monotonic_ns() < deadline:
                pass
            os.write(master, resp)
            arrive.append(now)
            sent.append(time.monotonic_ns())
            now = time.monotonic_ns()


if __name__ == "__main__":
    main()
