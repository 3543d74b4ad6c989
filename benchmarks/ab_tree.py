"""Two checkouts' clients side by side on a tree of many small files: `get -r`
and `put -r` of the same tree against one `drsftp serve` on 127.0.0.1 (this
checkout's), the clients alternating A B A B, each tree that arrives
compared byte for byte with its source.

    PYTHONPATH=$PWD python benchmarks/ab_tree.py A_ROOT B_ROOT [--files 20000] [--reps 3]
        [--direction get put] [--workdir /dev/shm] [--a-options '-c 8'] [--b-options ...] [-- CLIENT-OPTIONS]

A_ROOT and B_ROOT are source trees of drsftp (e.g. `git archive main | tar -x -C DIR`
for the code before, `.` for this one; the same root twice with
--a-options/--b-options compares options).  Prints each run's wall seconds and
the client's CPU seconds (user + sys, from wait4), then per direction the
median of the pair-by-pair ratios B/A: on a shared, noisy machine only ratios
of runs taken side by side compare.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drsftp.bench.common.tunings import PASSWORD, USER
from drsftp.bench.smallfiles.run import make_tree, same_tree, start_server
from drsftp.netem.link import stop_process


def run(root: str, argv: list[str], dest: str, source: str, put: bool) -> tuple[float, float]:
    """One client run from ROOT's code: (wall, cpu) seconds; raises if the tree differs."""
    shutil.rmtree(dest, ignore_errors=True)
    if put:
        os.makedirs(dest)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "drsftp", *argv], env=env, cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{root}: exit {proc.returncode}: {err.strip()[-400:]}")
    diff = same_tree(source, dest)
    if diff is not None:
        raise SystemExit(f"{root}: the tree differs: {diff}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--direction", nargs="+", choices=("get", "put"), default=["get", "put"])
    ap.add_argument("--workdir", default="/dev/shm")
    ap.add_argument("--a-options", default="", help="client options for A only (one string)")
    ap.add_argument("--b-options", default="", help="client options for B only")
    ap.add_argument("client", nargs="*", help="more client options (after --), e.g. -c 8")
    args = ap.parse_args()

    base = os.path.join(args.workdir, "drs-ab-tree")
    os.makedirs(base, exist_ok=True)
    source = os.path.join(base, f"tree-{args.files}")
    make_tree(source, args.files, args.size, per_dir=1000)
    dest = os.path.join(base, f"dest-{os.getpid()}")
    server, port = start_server("drsftp", base, os.path.join(base, "server.log"))
    ratios: dict[str, dict[str, list[float]]] = {d: {"wall": [], "cpu": []} for d in args.direction}
    try:
        for rep in range(args.reps):
            for direction in args.direction:
                url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/"
                order = [("A", args.a), ("B", args.b)] if rep % 2 == 0 else [("B", args.b), ("A", args.a)]
                got = {}
                for side, root in order:
                    opts = [*args.client, *shlex.split(args.a_options if side == "A" else args.b_options)]
                    if direction == "get":
                        argv = ["get", "-r", "-q", *opts, url + os.path.basename(source) + "/", dest + "/"]
                    else:
                        argv = ["put", "-r", "-q", *opts, source + "/", url + os.path.basename(dest) + "/"]
                    got[side] = run(root, argv, dest, source, direction == "put")
                    print(f"rep {rep} {direction} {side}: wall {got[side][0]:.2f} s, client cpu {got[side][1]:.2f} s",
                          flush=True)
                ratios[direction]["wall"].append(got["B"][0] / got["A"][0])
                ratios[direction]["cpu"].append(got["B"][1] / got["A"][1])
    finally:
        stop_process(server, 10)
        shutil.rmtree(dest, ignore_errors=True)
    for direction, r in ratios.items():
        for what, xs in r.items():
            print(f"{direction} B/A {what}: median {statistics.median(xs):.3f} "
                  f"[{min(xs):.3f}-{max(xs):.3f}] over {len(xs)} pairs")


if __name__ == "__main__":
    main()
