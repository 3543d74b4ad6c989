"""Where `drsftp serve` spends its CPU on a tree of many small files:
cProfile of the server while globus-url-copy (the issue's GridFTP command,
`-r -cd -fast -cc 8`) or drsftp's own client (`get -r` / `put -r`) gets the
tree from it, or puts it to it.

    python benchmarks/profile_serve.py                      # get, 2,000 files of 0-1 KiB
    python benchmarks/profile_serve.py --files 10000 --direction put --top 40
    python benchmarks/profile_serve.py --out /tmp/serve.prof # keep the profile (snakeviz, pstats)
    python benchmarks/profile_serve.py --no-profile          # only the time and the server's CPU seconds
    python benchmarks/profile_serve.py --stream-mode         # without -fast: a data connection per file
    python benchmarks/profile_serve.py --client drsftp --files 20000 --direction put  # drsftp put -r -q

The server runs as `python -m cProfile -o PROF -m drsftp serve ...` on
127.0.0.1 with its root on tmpfs (the tree is the bench's: drsftp bench
smallfiles makes and reuses it under /dev/shm/drs-smallfiles); after the
client ends it gets SIGTERM, finishes and writes the profile, and the top
functions by own time and by cumulative time are printed.
"""

from __future__ import annotations

import argparse
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drsftp.bench.common.tunings import PASSWORD, USER
from drsftp.bench.smallfiles.run import GUC_FLAGS, make_tree
from drsftp.netem.link import stop_process


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--size", type=int, default=1024, help="each file is 0..SIZE bytes")
    ap.add_argument("--direction", choices=("get", "put"), default="get")
    ap.add_argument("--stream-mode", action="store_true",
                    help="globus-url-copy without -fast: stream mode, a data connection per file")
    ap.add_argument("--client", choices=("guc", "drsftp"), default="guc",
                    help="guc: globus-url-copy (default); drsftp: this checkout's get -r / put -r")
    ap.add_argument("--workdir", default="/dev/shm")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--out", help="keep the profile here")
    ap.add_argument("--max-time", type=float, default=600.0)
    ap.add_argument("--no-profile", action="store_true",
                    help="no cProfile: only the time and the server's CPU seconds (user+system)")
    args = ap.parse_args()

    base = os.path.join(args.workdir, "drs-smallfiles")
    os.makedirs(base, exist_ok=True)
    source = os.path.join(base, f"tree-{args.files}")
    make_tree(source, args.files, args.size, 1000)
    dest = os.path.join(base, f"dest-profile-{os.getpid()}")
    prof = args.out or os.path.join(tempfile.gettempdir(), f"drs-serve-{os.getpid()}.prof")
    if args.direction == "put":
        os.makedirs(dest, mode=0o777)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), os.environ.get("PYTHONPATH")])))
    server = subprocess.Popen(
        [sys.executable, *([] if args.no_profile else ["-m", "cProfile", "-o", prof]), "-m", "drsftp", "serve",
         "--root", base, "--port", "0", "--user", USER, "--password", PASSWORD, "--max-connections-per-ip", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        line = server.stdout.readline() if server.stdout else ""
        m = re.search(r"listening on [^ ]*:(\d+)", line)
        if not m:
            print(f"the server did not start: {line.strip() or 'no output'}", file=sys.stderr)
            return 1
        url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{m.group(1)}/"
        ends = ([url + os.path.relpath(source, base) + "/", f"file://{dest}/"] if args.direction == "get"
                else [f"file://{source}/", url + os.path.relpath(dest, base) + "/"])
        t0 = time.monotonic()
        if args.client == "drsftp":
            if args.direction == "get":
                ends[1] = dest + "/"
            else:
                ends[0] = source + "/"
            argv = [sys.executable, "-m", "drsftp", args.direction, "-r", "-q", *ends]
        else:
            flags = [f for f in GUC_FLAGS if f != "-fast"] if args.stream_mode else GUC_FLAGS
            argv = ["globus-url-copy", *flags, *ends]
        done = subprocess.run(argv, timeout=args.max_time, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        secs = time.monotonic() - t0
        cpu = psutil.Process(server.pid).cpu_times()
        print(f"{args.client} {args.direction} {args.files} files: {secs:.2f} s (exit {done.returncode});"
              f" server CPU {cpu.user + cpu.system:.2f} s (user {cpu.user:.2f}, system {cpu.system:.2f})"
              f"{': ' + done.stderr.strip()[-300:] if done.returncode else ''}")
    finally:
        stop_process(server, 30)  # (SIGTERM: the server writes its profile on the way out)
        shutil.rmtree(dest, ignore_errors=True)
    if args.no_profile:
        return 0
    if not os.path.exists(prof):
        print("no profile written", file=sys.stderr)
        return 1
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)
    if not args.out:
        os.unlink(prof)
    return 0


if __name__ == "__main__":
    sys.exit(main())
