"""A stock FTP client for the bench: Python's ftplib, buffers never touched.

    python -m drsftp.bench.common.stockclient get|put URL LOCAL --json OUT [--max-time S]

Prints nothing; writes bytes and seconds to OUT.  The clock runs from the
first data byte (get: the first one received; put: the first one handed to
the socket) to the end, as drsftp's client and curl time theirs.
"""

from __future__ import annotations

import argparse
import ftplib
import json
import os
import sys
import time

from ...client.result import TransferResult
from ...ftp.url import parse_url

BLOCK = 1 << 20


class _Stopped(Exception):
    pass


class Meter:
    """Bytes moved since the first one, with an optional cap on the time."""

    def __init__(self, max_time: float | None = None, clock=time.monotonic) -> None:
        self.max_time, self.clock = max_time, clock
        self.t0: float | None = None
        self.first_block: float | None = None  # when the first block had gone (put) or come (get)
        self.bytes = 0
        self.complete = True

    def start(self) -> None:
        if self.t0 is None:
            self.t0 = self.clock()

    def add(self, n: int) -> None:
        self.start()
        now = self.clock()
        if self.first_block is None:
            self.first_block = now
        self.bytes += n
        if self.max_time and now - self.t0 >= self.max_time:
            self.complete = False
            raise _Stopped

    def figures(self, end: float) -> dict:
        seconds = end - (self.t0 if self.t0 is not None else end)
        return {"bytes": self.bytes, "seconds": seconds, "complete": self.complete,
                "mbps": self.bytes * 8 / seconds / 1e6 if seconds else 0,
                # what the clock would have missed had it started once the
                # first block was through, as ftplib's callback did
                # (docs/decisions/0003-upload-clock.md)
                "first_block_s": (self.first_block - self.t0)
                if self.first_block is not None and self.t0 is not None else None}


class StartOnRead:
    """A file whose first read starts the meter.  ftplib's storbinary reads a
    block, sends it whole, then calls back: timed from the callback, a put
    missed the first block's sendall, which on a long path waits out most of
    slow start (a 1 MiB block took ~0.5 s at 100 ms RTT)."""

    def __init__(self, f, meter: Meter) -> None:
        self.f, self.meter = f, meter

    def read(self, n: int = -1) -> bytes:
        self.meter.start()
        return self.f.read(n)


def store(ftp: ftplib.FTP, path: str, f, meter: Meter) -> None:
    ftp.storbinary(f"STOR {path}", StartOnRead(f, meter), blocksize=BLOCK,
                   callback=lambda chunk: meter.add(len(chunk)))


def retrieve(ftp: ftplib.FTP, path: str, f, meter: Meter) -> None:
    def write(chunk: bytes) -> None:
        f.write(chunk)
        meter.add(len(chunk))
    ftp.retrbinary(f"RETR {path}", write, blocksize=BLOCK)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("direction", choices=("get", "put"))
    ap.add_argument("url")
    ap.add_argument("local")
    ap.add_argument("--json", required=True)
    ap.add_argument("--max-time", type=float)
    args = ap.parse_args(argv)
    loc = parse_url(args.url)
    ftp = ftplib.FTP()
    ftp.connect(loc.host, loc.port, timeout=60)
    ftp.login(loc.user, loc.password)
    ftp.voidcmd("TYPE I")
    meter = Meter(args.max_time)
    try:
        with open(args.local, "wb" if args.direction == "get" else "rb") as f:
            (retrieve if args.direction == "get" else store)(ftp, loc.path, f, meter)
    except _Stopped:
        pass
    fig = meter.figures(time.monotonic())
    record = TransferResult(direction=args.direction, path=loc.path, bytes=fig["bytes"], seconds=fig["seconds"],
                            complete=fig["complete"], tuning="kernel")
    record.update(first_block_s=fig["first_block_s"])
    with open(args.json, "w") as f:
        json.dump(record.to_dict(), f)
    try:
        ftp.close()
    except OSError:
        pass
    if os.path.exists(args.local) and args.direction == "get" and not meter.complete:
        os.unlink(args.local)
    return 0


if __name__ == "__main__":
    sys.exit(main())
