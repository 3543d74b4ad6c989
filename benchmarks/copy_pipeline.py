"""A third-party tree copy on a three-node topology: `drsftp copy -r`
between two `drsftp serve`s beside `globus-url-copy -r -fast -pp` between
two globus-gridftp-servers (a quick check of the copy's pipelining, not
the bench matrix).

    python benchmarks/copy_pipeline.py [--files 200] [--size 1048576] [--reps 3]
        [--client LABEL=DIR ...] [--copy-args "-c auto"] [--gridftp "-cc 8 -tcp-bs 16M"]

Root: makes `client-a:rtt=5ms`, `client-b:rtt=5ms`, `a-b:rtt=100ms,rate=1gbit`
(drsftp.netem.topology), serves FILES x SIZE from a and writes to b, and
times each entry, interleaved over REPS rounds.  ``--client LABEL=DIR``
runs that copy of the drsftp package as the client (e.g. an older commit
unpacked with `git archive`); the servers are always this tree's.  Prints
each run's Mbit/s (the tree's bytes over the client's wall time) and each
entry's median.
"""

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from conftest import make_file  # noqa: E402

from drsftp.bench.common.peers import DRS_PORT, PASSWORD, USER, hosts_wrapped  # noqa: E402
from drsftp.bench.common.peers import GRIDFTP_PORT as GRID_PORT  # noqa: E402
from drsftp.bench.common.tunings import drsftp_server  # noqa: E402
from drsftp.bench.thirdparty.run import GRIDFTP  # noqa: E402
from drsftp.netem.link import stop_process, wait_for_port  # noqa: E402
from drsftp.netem.topology import Topology  # noqa: E402


def hosts_wrap(workdir, name, addr, argv):
    """field.hosts_wrapped, the hosts file in WORKDIR named after NAME."""
    return hosts_wrapped(addr, argv, os.path.join(workdir, f"hosts-{name}"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--client", action="append", default=[], help="LABEL=DIR: a drsftp package dir to run")
    ap.add_argument("--copy-args", default="", help="extra drsftp copy arguments")
    ap.add_argument("--gridftp", default="-cc 8 -tcp-bs 16M", help="globus-url-copy arguments ('' : none)")
    ap.add_argument("--no-gridftp", action="store_true")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    clients = [tuple(c.split("=", 1)) for c in args.client] or [("drsftp", os.path.join(HERE, ".."))]
    work = tempfile.mkdtemp(prefix="drs-cpipe-", dir="/tmp")
    os.chmod(work, 0o755)
    total = args.files * args.size
    links = ["client-a:rtt=5ms,rate=0", "client-b:rtt=5ms,rate=0", "a-b:rtt=100ms,rate=1gbit"]
    procs = []
    try:
        src = os.path.join(work, "a", "tree")
        os.makedirs(src)
        for i in range(args.files):
            make_file(os.path.join(src, f"f{i:04}.bin"), args.size, seed=i)
        subprocess.run(["chmod", "-R", "a+rX", os.path.join(work, "a")], check=True)
        dst = os.path.join(work, "b")
        os.makedirs(dst)
        os.chmod(dst, 0o777)
        with Topology(links) as topo:
            a, b = topo.node_addr("a"), topo.node_addr("b")
            for node, root, addr, peer in (("a", os.path.join(work, "a"), a, b), ("b", dst, b, a)):
                argv = drsftp_server(root, addr, port=DRS_PORT, extra=("--third-party-peers", peer))
                log = open(os.path.join(work, f"serve-{node}.log"), "wb")  # noqa: SIM115
                procs.append(topo.popen(node, argv, stdout=subprocess.DEVNULL, stderr=log, cwd=work))
                wait_for_port(topo, node, DRS_PORT, timeout=15.0)
                if not args.no_gridftp:
                    g = [GRIDFTP, "-aa", "-anonymous-user", "nobody", "-p", str(GRID_PORT), "-control-interface",
                         addr, "-data-interface", addr, "-fork", "-no-chdir", "-d", "error"]
                    procs.append(topo.popen(node, hosts_wrap(work, node, addr, g), stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
                    wait_for_port(topo, node, GRID_PORT, timeout=15.0)
            entries = [(label, "drsftp", d) for label, d in clients]
            if not args.no_gridftp:
                entries.append(("globus-url-copy", "gridftp", None))
            figures: dict[str, list[float]] = {e[0]: [] for e in entries}
            for rep in range(args.reps):
                for label, kind, pkg in entries:
                    out = os.path.join(dst, "tree")
                    shutil.rmtree(out, ignore_errors=True)
                    if kind == "drsftp":
                        argv = [sys.executable, "-m", "drsftp", "copy", "-r", "-q", "--progress", "never",
                                *shlex.split(args.copy_args),
                                f"ftp://{USER}:{PASSWORD}@{a}:{DRS_PORT}/tree/",
                                f"ftp://{USER}:{PASSWORD}@{b}:{DRS_PORT}/tree/"]
                        env = dict(os.environ, PYTHONPATH=os.path.abspath(pkg))
                        cwd = work
                    else:
                        argv = hosts_wrap(work, "client", topo.node_addr("client"), [
                            "globus-url-copy", "-r", "-cd", "-fast", "-pp", *shlex.split(args.gridftp),
                            f"ftp://{a}:{GRID_PORT}{src}/", f"ftp://{b}:{GRID_PORT}{out}/"])
                        env, cwd = None, work
                    t0 = time.monotonic()
                    r = topo.run("client", argv, timeout=args.timeout, env=env, cwd=cwd)
                    seconds = time.monotonic() - t0
                    got = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out)) \
                        if os.path.isdir(out) else 0
                    ok = r.returncode == 0 and got == total
                    mbps = total * 8 / seconds / 1e6
                    if ok:
                        figures[label].append(mbps)
                    tail = "" if ok else f"  FAILED exit {r.returncode} {got}/{total} B {r.stderr.strip()[-300:]}"
                    print(f"round {rep + 1} {label:>16}: {seconds:7.2f} s {mbps:7.1f} Mbit/s{tail}", flush=True)
            print(f"{args.files} x {args.size} B, {' '.join(links)}")
            for label, runs in figures.items():
                med = statistics.median(runs) if runs else float("nan")
                print(f"{label:>16}: median {med:7.1f} Mbit/s over {len(runs)} runs {[round(x) for x in runs]}")
    finally:
        for p in procs:
            stop_process(p, 10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
