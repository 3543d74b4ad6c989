"""Two checkouts' servers side by side on a tree of many small files: one
`drsftp serve` from each on 127.0.0.1, the same client (`drsftp get -r` /
`put -r` from this checkout, or globus-url-copy -r -cd -fast -cc 8) against
them in turn, A B A B ..., each tree that arrives compared byte for byte
with its source.

    PYTHONPATH=$PWD python benchmarks/ab_serve.py A_ROOT B_ROOT [--files 20000] [--reps 3]
        [--direction get put] [--client drsftp|guc] [--workdir /dev/shm]

A_ROOT and B_ROOT are source trees of drsftp (e.g. `git archive main | tar
-x -C DIR` for the code before, `.` for this one).  Prints each run's wall
seconds, the server's CPU seconds (user + system, its process's counters
before and after the run), per file, and the client's (the waited child's),
then per direction the median of the pair-by-pair ratios B/A: on a shared, noisy machine only ratios of runs taken
side by side compare, and CPU seconds more steadily than wall time.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drsftp.bench.common.tunings import PASSWORD, USER
from drsftp.bench.smallfiles.run import GUC_FLAGS, make_tree, same_tree
from drsftp.netem.link import stop_process

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start(root: str, served: str, log: str) -> tuple[subprocess.Popen, int]:
    """`drsftp serve` from ROOT's code, serving SERVED: the process and its port."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
    proc = subprocess.Popen([sys.executable, "-m", "drsftp", "serve", "--root", served, "--port", "0",
                             "--user", USER, "--password", PASSWORD, "--max-connections-per-ip", "0"],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=open(log, "ab"), text=True)  # noqa: SIM115
    line = proc.stdout.readline() if proc.stdout else ""
    m = re.search(r"listening on [^ ]*:(\d+)", line)
    if not m:
        stop_process(proc, 5)
        raise SystemExit(f"{root}: the server did not start: {line.strip() or 'no output'} (log: {log})")
    return proc, int(m.group(1))


def cpu(proc: subprocess.Popen) -> float:
    t = psutil.Process(proc.pid).cpu_times()
    return t.user + t.system


def children_cpu() -> float:
    """CPU seconds of the children waited for so far (the client runs)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one_run(argv: list[str], server: subprocess.Popen, dest: str, source: str, put: bool,
            max_time: float) -> tuple[float, float, float]:
    """(wall, server CPU, client CPU) seconds of one client run; raises if the tree differs."""
    shutil.rmtree(dest, ignore_errors=True)
    if put:
        os.makedirs(dest)
    env = dict(os.environ, PYTHONPATH=HERE)
    before, client_before = cpu(server), children_cpu()
    t0 = time.monotonic()
    done = subprocess.run(argv, env=env, cwd=HERE, timeout=max_time, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    used, client = cpu(server) - before, children_cpu() - client_before
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
    diff = same_tree(source, dest)
    if diff is not None:
        raise SystemExit(f"the tree differs: {diff}")
    return wall, used, client


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--direction", nargs="+", choices=("get", "put"), default=["get", "put"])
    ap.add_argument("--client", choices=("drsftp", "guc"), default="drsftp",
                    help="drsftp: this checkout's get -r / put -r; guc: globus-url-copy " + " ".join(GUC_FLAGS))
    ap.add_argument("--workdir", default="/dev/shm")
    ap.add_argument("--max-time", type=float, default=900.0)
    args = ap.parse_args()

    base = os.path.join(args.workdir, "drs-ab-serve")
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o777)
    source = os.path.join(base, f"tree-{args.files}")
    make_tree(source, args.files, args.size, per_dir=1000)
    dest = os.path.join(base, f"dest-{os.getpid()}")
    servers: dict[str, tuple[subprocess.Popen, int]] = {}
    ratios: dict[str, dict[str, list[float]]] = {d: {"wall": [], "cpu": [], "client cpu": []} for d in args.direction}
    try:
        for side, root in (("A", args.a), ("B", args.b)):
            servers[side] = start(root, base, os.path.join(base, f"server-{side}.log"))
        for rep in range(args.reps):
            for direction in args.direction:
                order = ["A", "B"] if rep % 2 == 0 else ["B", "A"]
                got = {}
                for side in order:
                    url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{servers[side][1]}/"
                    remote = url + os.path.basename(source if direction == "get" else dest) + "/"
                    if args.client == "guc":
                        ends = [remote, f"file://{dest}/"] if direction == "get" else [f"file://{source}/", remote]
                        argv = ["globus-url-copy", *GUC_FLAGS, *ends]
                    else:
                        ends = [remote, dest + "/"] if direction == "get" else [source + "/", remote]
                        argv = [sys.executable, "-m", "drsftp", direction, "-r", "-q", *ends]
                    got[side] = one_run(argv, servers[side][0], dest, source, direction == "put", args.max_time)
                    wall, used, client = got[side]
                    print(f"rep {rep} {direction} {side}: wall {wall:.2f} s, server cpu {used:.2f} s"
                          f" ({used / args.files * 1e6:.0f} us a file), client cpu {client:.2f} s", flush=True)
                ratios[direction]["wall"].append(got["B"][0] / got["A"][0])
                ratios[direction]["cpu"].append(got["B"][1] / got["A"][1])
                ratios[direction]["client cpu"].append(got["B"][2] / max(got["A"][2], 1e-9))
    finally:
        for proc, _ in servers.values():
            stop_process(proc, 10)
        shutil.rmtree(dest, ignore_errors=True)
    for direction, r in ratios.items():
        for what, xs in r.items():
            label = what if what == "client cpu" else "server " + what
            print(f"{direction} B/A {label}: median {statistics.median(xs):.3f} "
                  f"[{min(xs):.3f}-{max(xs):.3f}] over {len(xs)} pairs")


if __name__ == "__main__":
    main()
