"""A stock FTP client for the bench: Python's ftplib, buffers never touched.

    python -m drsftp.bench.stockclient get|put URL LOCAL --json OUT [--max-time S]

Prints nothing; writes bytes and seconds (first data byte to the end) to OUT.
"""

from __future__ import annotations

import argparse
import ftplib
import json
import os
import sys
import time

from ..ftp.session import parse_url

BLOCK = 1 << 20


class _Stop(Exception):
    pass


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
    state = {"bytes": 0, "t0": None, "complete": True}
    deadline = None

    def count(n: int) -> None:
        nonlocal deadline
        now = time.monotonic()
        if state["t0"] is None:
            state["t0"] = now
            deadline = now + args.max_time if args.max_time else None
        state["bytes"] += n
        if deadline and now >= deadline:
            state["complete"] = False
            raise _Stop

    try:
        if args.direction == "get":
            with open(args.local, "wb") as f:
                def write(chunk: bytes) -> None:
                    f.write(chunk)
                    count(len(chunk))
                ftp.retrbinary(f"RETR {loc.path}", write, blocksize=BLOCK)
        else:
            with open(args.local, "rb") as f:
                ftp.storbinary(f"STOR {loc.path}", f, blocksize=BLOCK,
                               callback=lambda chunk: count(len(chunk)))
        end = time.monotonic()
    except _Stop:
        end = time.monotonic()
    seconds = end - (state["t0"] or end)
    with open(args.json, "w") as f:
        json.dump({"bytes": state["bytes"], "seconds": seconds, "complete": state["complete"],
                   "mbps": state["bytes"] * 8 / seconds / 1e6 if seconds else 0}, f)
    try:
        ftp.close()
    except OSError:
        pass
    if os.path.exists(args.local) and args.direction == "get" and not state["complete"]:
        os.unlink(args.local)
    return 0


if __name__ == "__main__":
    sys.exit(main())
