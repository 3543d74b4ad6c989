"""What command pipelining saves on many small files in stream mode (a
quick check, not a benchmark matrix; cached data channels are measured by
`drsftp bench field --datasets`).

    python benchmarks/dataset_pipeline.py [--files 200] [--size 65536] [--rtt 0.1] [--rate 100e6] [-c 1 4]

Makes a `drsftp netem` link (root), serves FILES x SIZE with `drsftp serve`
in the server namespace, and times `drsftp get -r` in the client namespace
with and without --no-pipeline at each -c.  Prints seconds, files/s and
the time per file in RTTs.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from conftest import PASSWORD, USER, make_file, running_server

from drsftp.netem.link import Link


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--rtt", type=float, default=0.1)
    ap.add_argument("--rate", type=float, default=100e6)
    ap.add_argument("-c", type=int, nargs="+", default=[1, 4])
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="drs-pipe-")
    try:
        root = os.path.join(tmp, "srv", "data")
        os.makedirs(root)
        for i in range(args.files):
            make_file(os.path.join(root, f"f{i:04}.bin"), args.size, seed=i)
        with Link(rtt=args.rtt, rate=args.rate) as link, running_server(
                os.path.join(tmp, "srv"), "--host", link.server_addr, ns_prefix=link.command("server", [])) as srv:
            url = f"ftp://{USER}:{PASSWORD}@{link.server_addr}:{srv.port}/data/"
            for n in args.c:
                for flags in ([], ["--no-pipeline"]):
                    out = os.path.join(tmp, "out")
                    shutil.rmtree(out, ignore_errors=True)
                    j = os.path.join(tmp, "job.json")
                    cmd = link.command("client", [sys.executable, "-m", "drsftp", "get", "-r", "-c", str(n),
                                                  "--progress", "never", "--json", j, "--stream-mode", *flags,
                                                  url, out])
                    t0 = time.monotonic()
                    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
                    wall = time.monotonic() - t0
                    if r.returncode != 0:
                        print(f"-c {n} {flags}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
                        continue
                    with open(j) as f:
                        job = json.load(f)["seconds"]
                    per = job / args.files * n / args.rtt
                    print(f"-c {n} {'no pipeline' if flags else 'pipelined  '}: job {job:.2f} s (wall {wall:.2f} s),"
                          f" {args.files / job:.1f} files/s, {per:.2f} RTT per file per session")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
