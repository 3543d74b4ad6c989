"""Where the client's time goes on a tree of many small files: `drsftp get -r`
and `put -r` against a `drsftp serve` on 127.0.0.1, the client run in this
process under cProfile (the server is a separate process, not profiled).

    PYTHONPATH=$PWD python benchmarks/profile_tree.py [--files 5000] [--size 1024]
        [--direction get put] [--top 40] [--sort tottime] [--workdir /dev/shm] [-- CLIENT-OPTIONS]

The tree is made once under WORKDIR/drs-profile-tree (kept between runs,
as `drsftp bench smallfiles` keeps its own); the destinations are removed.
Prints each direction's seconds, peak RSS and the top entries by SORT.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drsftp.bench.common.tunings import PASSWORD, USER
from drsftp.bench.smallfiles.run import make_tree, start_server
from drsftp.netem.link import stop_process


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--size", type=int, default=1024, help="each file is 0 to SIZE bytes")
    ap.add_argument("--direction", nargs="+", choices=("get", "put"), default=["get", "put"])
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--sort", default="tottime", help="pstats key: tottime, cumulative, ncalls")
    ap.add_argument("--workdir", default="/dev/shm")
    ap.add_argument("--out", help="also save each direction's profile as OUT-get.prof / OUT-put.prof")
    ap.add_argument("client", nargs="*", help="more client options (after --), e.g. -c 8")
    args = ap.parse_args()

    from drsftp.cli import main as drsftp_main

    base = os.path.join(args.workdir, "drs-profile-tree")
    os.makedirs(base, exist_ok=True)
    source = os.path.join(base, f"tree-{args.files}")
    make_tree(source, args.files, args.size, per_dir=1000)
    dest = os.path.join(base, f"dest-{os.getpid()}")
    server, port = start_server("drsftp", base, os.path.join(base, "server.log"))
    try:
        for direction in args.direction:
            shutil.rmtree(dest, ignore_errors=True)
            url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/{os.path.basename(dest)}/"
            if direction == "get":
                url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/{os.path.basename(source)}/"
                argv = ["get", "-r", "-q", *args.client, url, dest + "/"]
            else:
                os.makedirs(dest)
                argv = ["put", "-r", "-q", *args.client, source + "/", url]
            prof = cProfile.Profile()
            t0 = time.monotonic()
            code = prof.runcall(drsftp_main, argv)
            seconds = time.monotonic() - t0
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"== {direction} -r of {args.files} files: exit {code}, {seconds:.2f} s under cProfile,"
                  f" peak RSS so far {peak:.0f} MB")
            if args.out:
                prof.dump_stats(f"{args.out}-{direction}.prof")
            pstats.Stats(prof).strip_dirs().sort_stats(args.sort).print_stats(args.top)
    finally:
        stop_process(server, 10)
        shutil.rmtree(dest, ignore_errors=True)


if __name__ == "__main__":
    main()
