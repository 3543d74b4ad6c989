"""Where `drsftp serve` spends its CPU pulling a file over HTTPS (a WebDAV
COPY with ``Source:``, docs/HTTP.md#third-party-copy): two servers with
TLS on 127.0.0.1, A serving a file from tmpfs, B pulling it under cProfile.

    python benchmarks/profile_pull.py                        # 512 MiB, -P auto (no X-Number-Of-Streams)
    python benchmarks/profile_pull.py --streams 4 --top 40   # X-Number-Of-Streams: 4
    python benchmarks/profile_pull.py --no-profile --reps 3  # B's and A's CPU seconds per pull only
    python benchmarks/profile_pull.py --out /tmp/pull.prof   # keep the profiles (snakeviz, pstats)
    python benchmarks/profile_pull.py --link rtt=100ms,rate=1gbit  # A and B in namespaces over netem (root)
    python benchmarks/profile_pull.py --no-profile --perf /tmp/b.data  # `perf record` of B during the pulls
    python benchmarks/profile_pull.py --no-profile --syscalls  # B's reads, polls, writes... (`perf stat`)
    python benchmarks/profile_pull.py --files 200 --size-mib 1 --parallel 16  # a tree: 16 COPYs at once
    python benchmarks/profile_pull.py --files 200 --size-mib 1 --parallel 48 --a-opts '--max-connections-per-ip 72' \
        --b-opts '--max-connections-per-ip 72' --link rtt=100ms,rate=1gbit --no-profile --log B.log  # 48 at once

With --link, A and B run in two namespaces joined by an emulated link
(drsftp/netem, docs/NETEM.md), each on its node's address, and curl in
B's: the bench third-party's A-B path, without its client links.
B runs as `python -c BOOT PROF -m drsftp serve ...` (A without it):
BOOT is `python -m cProfile` for every thread (the HTTPS side runs in a
thread of its own, its file writes in the loop's executor), each thread's
profile written to PROF.<thread> as it ends, merged here.  Each pull is
`curl -X COPY -H "Source: https://A/f.bin" https://B/...` (or --files
COPYs, --parallel at once); it prints its time and B's and A's CPU
seconds (user+system, psutil, read before and after: start-up left out)
and B's waits (its threads' voluntary context switches: a wakeup each).
After the last pull B gets SIGTERM, writes its profile, and the top
functions by own time and by cumulative time are printed.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import contextlib
import functools
import glob
import os
import pstats
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drsftp.bench.common.certs import make_certs
from drsftp.bench.common.tunings import PASSWORD, USER
from drsftp.netem.link import stop_process
from drsftp.netem.topology import Topology

HOST = "127.0.0.1"
# (of the threads B has when perf attaches: its executor's, which write the file, start later)
SYSCALLS = ("recvfrom", "epoll_wait", "setsockopt", "getsockopt", "sendto", "futex")
BOOT = """
import cProfile, runpy, sys, threading
out = sys.argv.pop(1)
def profiled(run):
    def wrapper(self):
        prof = cProfile.Profile()
        prof.enable()
        try:
            run(self)
        finally:
            prof.disable()
            prof.dump_stats(f"{out}.{self.name}.{threading.get_ident()}")
    return wrapper
threading.Thread.run = profiled(threading.Thread.run)
sys.argv[0] = "drsftp"
main = cProfile.Profile()
main.enable()
try:
    runpy.run_module("drsftp", run_name="__main__", alter_sys=True)
finally:
    main.disable()
    main.dump_stats(out + ".main")
"""
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def _serve(root: Path, tls, prof: str | None, env: dict[str, str], host: str, peer: str,
           topo: Topology | None, node: str, log: str | None = None,
           more: list[str] | None = None) -> tuple[subprocess.Popen, int]:
    root.mkdir(parents=True, exist_ok=True)
    popen = subprocess.Popen if topo is None else functools.partial(topo.popen, node)
    proc = popen(
        [sys.executable, *(["-c", BOOT, prof] if prof else ["-m", "drsftp"]), "serve",
         "--root", str(root), "--host", host, "--port", "0", "--user", USER, "--password", PASSWORD,
         "--http-port", "0", "--tls-cert", str(tls.cert), "--tls-key", str(tls.key), "--tpc-ca-file", str(tls.ca),
         "--third-party-peers", peer, *(["-vv"] if log else []), *(more or [])],
        stdout=subprocess.PIPE, stderr=open(log, "w") if log else subprocess.DEVNULL,  # noqa: SIM115 (B's, to its end)
        text=True, env=env)
    lines = [proc.stdout.readline() if proc.stdout else "" for _ in range(2)]  # (FTP's line, then HTTPS')
    m = re.search(r"HTTPS on [^ ]*:(\d+)", lines[1])
    if not m:
        line = " ".join(x.strip() for x in lines)
        stop_process(proc, 10)
        raise RuntimeError(f"a server did not start: {line.strip() or 'no output'}")
    return proc, int(m.group(1))


def _links(run_a, run_b, port: int, after: float) -> str:
    """Both ends of B's connections to A's HTTPS port ``after`` seconds on: cwnd, RTT, windows (ss -tinm)."""
    time.sleep(after)
    keep = ("cwnd:", "rtt:", "ssthresh:", "rcv_ssthresh:", "app_limited", "busy:", "rwnd_limited", "sndbuf_limited",
            "skmem:", "unacked:", "notsent:", "rcv_space:", "rcv_wnd:", "snd_wnd:", "wscale:")
    out = []
    for side, run, where in (("A", run_a, f"sport = :{port}"), ("B", run_b, f"dport = :{port}")):
        text = run(["ss", "-tinmH", "state", "established", where], capture_output=True, text=True, timeout=10,
                   check=False).stdout
        out.append(f"{side}'s side at {after:g} s:")
        out += ["  " + " ".join(w for w in info.split() if w.startswith(keep)) for info in text.split("\n")[1::2][:6]]
    return "\n".join(out)


def _phases(log: str, per_round: int) -> str:
    """B's debug lines of the last round: a pull's streams and requests (the
    last COPY's), each COPY's first answer, then the rest (the body, the rename)."""
    with open(log) as f:
        logged = f.readlines()
    lines = [x for x in logged if "the first answer in" in x][-per_round:]
    out = [f"  last round: {x.split(': ', 2)[-1].strip()}" for x in logged if "ranged GETs after the first" in x][-1:]
    for kind in ("a new", "a kept"):
        times = [(float(m.group(1)), float(m.group(2))) for x in lines if f"on {kind} connection" in x
                 for m in [re.search(r"answer in ([\d.]+) s, the rest in ([\d.]+) s", x)] if m]
        if times:
            first, rest = sorted(a for a, _ in times), sorted(b for _, b in times)
            mid, p90 = first[len(first) // 2], rest[len(rest) * 9 // 10]
            out.append(f"  last round, {len(times)} COPYs on {kind} connection: the first answer {mid:.3f} s"
                       f" (median), the rest {rest[len(rest) // 2]:.3f} s (median), {p90:.3f} (p90)")
    return "\n".join(out) or "  no COPY figures in the log"


def _cpu(proc: subprocess.Popen) -> tuple[float, float]:
    t = psutil.Process(proc.pid).cpu_times()
    return t.user, t.system


def _wakes(proc: subprocess.Popen) -> int:
    """The voluntary context switches of ``proc``'s threads (each a wait that ended: a poll's, mostly)."""
    total = 0
    for task in glob.glob(f"/proc/{proc.pid}/task/*/status"):
        with contextlib.suppress(OSError), open(task) as f:
            total += sum(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=512)
    ap.add_argument("--streams", type=int, default=0, help="X-Number-Of-Streams (0: none, the server chooses)")
    ap.add_argument("--files", type=int, default=1, help="files of --size-mib each, a COPY each")
    ap.add_argument("--parallel", type=int, default=1, help="COPYs at once (with --files)")
    ap.add_argument("--reps", type=int, default=1, help="pulls, one after another, by the same two servers")
    ap.add_argument("--workdir", default="/dev/shm")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--out", help="keep the profiles here: OUT.<thread> each (pstats.Stats(*files) merges them)")
    ap.add_argument("--max-time", type=float, default=300.0, help="s a pull may take")
    ap.add_argument("--link", help="RTT and rate of an emulated A-B link (as `drsftp netem up --link`)")
    ap.add_argument("--perf", help="`perf record -F 499` of B during the pulls, into this file (`perf report -i`)")
    ap.add_argument("--syscalls", action="store_true", help="B's system calls during the pulls, by kind (perf stat)")
    ap.add_argument("--no-profile", action="store_true", help="no cProfile: only the times and CPU seconds")
    ap.add_argument("--b-opts", default="", help="more options for B's drsftp serve (e.g. '--tuning kernel')")
    ap.add_argument("--a-opts", default="", help="more options for A's (e.g. '--max-connections-per-ip 72' for"
                    " --parallel above 32: B's links are A's connections from one address)")
    ap.add_argument("--log", help="B's debug log (-vv) into this file")
    ap.add_argument("--ss", type=float, metavar="S", help="S seconds into each pull, B's connections to A (ss -tin)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="drs-pull-", dir=args.workdir))
    prof = None if args.no_profile else (args.out or str(work / "b.prof"))  # (PROF.<thread> each)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), os.environ.get("PYTHONPATH")])))
    for old in glob.glob(glob.escape(prof) + ".*") if prof else []:
        os.unlink(old)  # (an earlier run's threads)
    try:
        with contextlib.ExitStack() as stack:
            topo = stack.enter_context(Topology([f"a-b:{args.link}"])) if args.link else None
            return _run(args, work, prof, env, topo)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, work: Path, prof: str | None, env: dict[str, str], topo: Topology | None) -> int:
    ha, hb = (topo.node_addr("a"), topo.node_addr("b")) if topo is not None else (HOST, HOST)
    servers: list[subprocess.Popen] = []
    try:
        tls = make_certs(work / "tls", ha, *([hb] if hb != ha else []))
        (work / "a").mkdir()
        block = os.urandom(1 << 20)
        names = ["f.bin"] if args.files == 1 else [f"f{i}.bin" for i in range(args.files)]
        for name in names:
            with open(work / "a" / name, "wb") as f:
                for _ in range(args.size_mib):
                    f.write(block)
        a, pa = _serve(work / "a", tls, None, env, ha, hb, topo, "a", more=args.a_opts.split())
        servers.append(a)
        b, pb = _serve(work / "b", tls, prof, env, hb, ha, topo, "b", args.log, args.b_opts.split())
        servers.append(b)
        heads = [f"Authorization: {BASIC}", f"TransferHeaderAuthorization: {BASIC}"]
        heads += [f"X-Number-Of-Streams: {args.streams}"] if args.streams else []
        run = subprocess.run if topo is None else functools.partial(topo.run, "b")
        run_a = subprocess.run if topo is None else functools.partial(topo.run, "a")

        took: list[float] = []  # each COPY's seconds, curl's start to its end

        def pull(name: str, rep: int) -> str:
            """One COPY: '' when the file arrived whole, else why not."""
            got = work / "b" / f"{rep}-{name}"
            began = time.monotonic()
            done = run(["curl", "-sS", "--cacert", str(tls.ca), "--max-time", str(int(args.max_time)), "-X", "COPY",
                        *[x for h in [*heads, f"Source: https://{ha}:{pa}/{name}"] for x in ("-H", h)],
                        f"https://{hb}:{pb}/{rep}-{name}"],
                       capture_output=True, text=True, timeout=args.max_time + 10, check=False)
            took.append(time.monotonic() - began)
            last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()
            ok = last.startswith("success") and got.exists() and got.stat().st_size == args.size_mib << 20
            got.unlink(missing_ok=True)
            return "" if ok else last[-300:] or "no answer"

        if args.perf:
            servers.append(subprocess.Popen(["perf", "record", "-q", "-F", "499", "-o", args.perf, "-p", str(b.pid)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            time.sleep(1)  # (perf attached)
        if args.syscalls:
            events = ",".join(f"syscalls:sys_enter_{c}" for c in SYSCALLS)
            servers.append(subprocess.Popen(["perf", "stat", "-x", ",", "-e", events, "-p", str(b.pid)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
            time.sleep(1)  # (perf attached)
        what = f"{args.size_mib} MiB" if args.files == 1 else f"{args.files} x {args.size_mib} MiB"
        for rep in range(args.reps):
            cpu_a, cpu_b, wakes = _cpu(a), _cpu(b), _wakes(b)
            t0 = time.monotonic()
            took.clear()
            with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool, \
                    concurrent.futures.ThreadPoolExecutor(1) as side:
                peek = side.submit(_links, run_a, run, pa, args.ss) if args.ss else None
                failed = [w for w in pool.map(pull, names, [rep] * len(names)) if w]
            secs = time.monotonic() - t0
            if peek is not None:
                print(peek.result(), flush=True)
            (ua, sa), (ub, sb), wakes = _cpu(a), _cpu(b), _wakes(b) - wakes
            used_a, used_b = ua + sa - sum(cpu_a), ub + sb - sum(cpu_b)
            mbit = len(names) * args.size_mib * 8 / 1.048576 / secs
            print(f"pull {rep + 1}: {what} in {secs:.2f} s ({mbit:.0f} Mbit/s); B CPU {used_b:.2f} s (system"
                  f" {sb - cpu_b[1]:.2f}, {wakes} waits), A CPU {used_a:.2f} s;"
                  f" {'FAILED: ' + failed[0] if failed else 'ok'}", flush=True)
            if len(took) > 1:
                took.sort()
                print(f"  a COPY took {took[len(took) // 2]:.3f} s (median), {took[len(took) * 9 // 10]:.3f} (p90),"
                      f" {took[0]:.3f} at the least", flush=True)
            if failed:
                return 1
        if args.log:
            print(_phases(args.log, len(names)), flush=True)
        if args.syscalls:
            counting = servers.pop()
            counting.send_signal(signal.SIGINT)  # (perf stat prints its counts)
            counts = [line.split(",") for line in counting.communicate(timeout=30)[1].splitlines()]
            print(f"B's system calls over {args.reps} pull(s): " + ", ".join(
                f"{c[2].rsplit('_', 1)[-1]} {c[0]}" for c in counts if len(c) > 2 and c[0].isdigit()))
        for proc in reversed(servers):
            stop_process(proc, 30)  # (SIGTERM: B writes its profile on the way out, perf its file)
        servers.clear()
        if prof is not None:
            files = sorted(glob.glob(glob.escape(prof) + ".*"))
            if not files:
                print("no profile written", file=sys.stderr)
                return 1
            stats = pstats.Stats(*files)
            stats.sort_stats("tottime").print_stats(args.top)
            stats.sort_stats("cumulative").print_stats(args.top)
        return 0
    finally:
        for proc in reversed(servers):
            stop_process(proc, 30)


if __name__ == "__main__":
    sys.exit(main())
