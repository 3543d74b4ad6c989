"""`drsftp get -P auto` (or `-r -c auto`) at 1 Gbit/s, 100 ms, DRS beside
autotuning at the client: the receive side's memory, what it holds, and
the losses and CPU behind it.

    python benchmarks/receive_memory.py 5          # 5 pairs of 512 MiB gets, DRS and autotuning (root)
    python benchmarks/receive_memory.py 3 --deep   # get -r -c auto: 200 x 1 MiB in 40 directories

The field table ([BENCHMARKS.md](../docs/BENCHMARKS.md#field)) has the
client's streams holding about one BDP of socket memory at their peak.  This
samples, every 10 ms and without starting a process per sample, the unread
bytes of the client's data sockets (``rx_queue`` of /proc/PID/net/tcp in
the client's namespace) and, from /proc/PID/task/*/schedstat, the CPU time
and the time spent waiting for a CPU (run-queue delay) of the client, the
server and the link emulator (the userspace forwarder).  It prints, for
the intervals where the unread bytes grew most, what each of the three did
then, beside the run's medians, and the host's two cores' share in use;
every 50 ms also `ss`'s skmem r at the client (the sockets' memory, the
out-of-order queue included) and the bytes the server retransmitted.  The
client's tunings (`--tunings`, default drs,kernel) run interleaved from one
server.  Ends with a table a run a row (docs/BENCHMARKS.md cites it).
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drsftp.bench.common.tunings import PORT, drsftp_url, serving
from drsftp.netem.link import Link

STEP = 0.01  # seconds between samples
SIZE = 512 << 20
BDP = 1e9 * 0.1 / 8  # bytes


def unread_bytes(pid: int, control_port: int) -> int:
    """Sum of rx_queue over the established TCP sockets of ``pid``'s namespace,
    the control connection left out."""
    total = 0
    try:
        with open(f"/proc/{pid}/net/tcp") as f:
            next(f)
            for line in f:
                fields = line.split()
                local, remote, state = fields[1], fields[2], fields[3]
                if state != "01" or int(local.split(":")[1], 16) == control_port \
                        or int(remote.split(":")[1], 16) == control_port:
                    continue
                total += int(fields[4].split(":")[1], 16)
    except (OSError, StopIteration):
        return 0
    return total


def cpu_and_wait(pid: int) -> tuple[int, int]:
    """(ns on a CPU, ns waiting for one) summed over ``pid``'s threads."""
    on = wait = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0, 0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                a, b, _ = f.read().split()
        except (OSError, ValueError):
            continue
        on += int(a)
        wait += int(b)
    return on, wait


def _ss_sum(link: Link, where: str, pattern: str) -> int:
    out = link.run(where, ["ss", "-tmiHn", "state", "established", "(", "sport", "!=", f":{PORT}", "and",
                           "dport", "!=", f":{PORT}", ")"], timeout=5).stdout
    return sum(int(m) for m in re.findall(pattern, out))


def run_once(link: Link, root: str, server_pid: int, owner_pid: int, tree: bool, extra: list[str]) -> dict:
    what = ["-r", "-c", "auto", drsftp_url(link.server_addr, "deep/"), f"{root}/out"] if tree \
        else ["-P", "auto", drsftp_url(link.server_addr, "z.bin"), f"{root}/out"]
    client = link.popen("client", [sys.executable, "-m", "drsftp", "get", "-q", *what, "--max-time", "90", *extra],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids = {"client": client.pid, "server": server_pid, "link": owner_pid}
    rows = []  # (t, unread bytes, {who: (cpu ns, wait ns)})
    mem = []  # (t, skmem r summed at the client, bytes retransmitted by the server so far): every 5th sample
    t0 = time.monotonic()
    while client.poll() is None and time.monotonic() - t0 < 100:
        rows.append((time.monotonic() - t0, unread_bytes(client.pid, PORT),
                     {who: cpu_and_wait(pid) for who, pid in pids.items()}))
        if len(rows) % 5 == 0:
            mem.append((time.monotonic() - t0, _ss_sum(link, "client", r"skmem:\(r(\d+),"),
                        _ss_sum(link, "server", r"bytes_retrans:(\d+)")))
        time.sleep(STEP)
    client.wait(30)
    return {"wall": time.monotonic() - t0, "rows": rows, "mem": mem, "exit": client.returncode}


def summary(run: dict) -> None:
    rows = [r for r in run["rows"] if r[2]["client"][0]]
    steps = []
    for a, b in itertools.pairwise(rows):
        dt = (b[0] - a[0]) * 1e9
        use = {w: ((b[2][w][0] - a[2][w][0]) / dt, (b[2][w][1] - a[2][w][1]) / dt) for w in b[2]}
        steps.append((b[0], b[1], b[1] - a[1], use))
    busy = [s for s in steps if s[1] > 0 or s[2] != 0]
    if not busy:
        print(f"  no data seen (exit {run['exit']})")
        return
    peak = max(s[1] for s in busy)
    print(f"  wall {run['wall']:.1f} s, exit {run['exit']}, unread peak {peak / 1e6:.1f} MB"
          f" ({peak / BDP:.2f} BDP), median {statistics.median(s[1] for s in busy) / 1e6:.2f} MB")

    mem = [m for m in run["mem"] if m[1]]
    if mem:
        top = max(mem, key=lambda m: m[1])
        print(f"  skmem r (socket memory, out-of-order data included) peak {top[1] / 1e6:.1f} MB"
              f" ({top[1] / BDP:.2f} BDP) at {top[0]:.2f} s; the server had retransmitted"
              f" {top[2] / 1e6:.2f} MB by then, {max(m[2] for m in mem) / 1e6:.2f} MB in all")
        for t, r, rt in mem[:60:3]:
            print(f"    t {t:5.2f} s  skmem r {r / 1e6:6.2f} MB  retransmitted {rt / 1e6:6.2f} MB")

    def line(label: str, sel: list) -> None:
        parts = []
        for who in ("client", "server", "link"):
            cpu = statistics.median(s[3][who][0] for s in sel)
            wait = statistics.median(s[3][who][1] for s in sel)
            parts.append(f"{who} cpu {cpu:4.0%} wait {wait:4.0%}")
        total = statistics.median(sum(s[3][w][0] for w in s[3]) for s in sel) / 2
        print(f"  {label:28s} {' | '.join(parts)} | 2 cores {total:4.0%}")

    line("all intervals (median)", busy)
    growth = sorted(busy, key=lambda s: s[2], reverse=True)[:max(5, len(busy) // 50)]
    line(f"top {len(growth)} growth intervals", growth)
    high = [s for s in busy if s[1] > peak / 2]
    line(f"queue > half its peak ({len(high)})", high)


def table_row(i: int, tuning: str, run: dict) -> str:
    unread = max((r[1] for r in run["rows"]), default=0)
    mem = max(run["mem"], key=lambda m: m[1], default=(0, 0, 0))
    retrans = max((m[2] for m in run["mem"]), default=0)
    return (f"| {i} | {tuning} | {run['wall']:.1f} | {mem[1] / BDP:.2f} | {unread / BDP:.2f} | {mem[2] / 1e6:.2f} |"
            f" {retrans / 1e6:.2f} |")


def main(runs: int, tree: bool, tunings: list[str], extra: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="drs-recvmem-") as root:
        block = os.urandom(1 << 20)
        if tree:  # the field bench's deep dataset: 200 x 1 MiB in 40 directories
            for i in range(200):
                os.makedirs(f"{root}/deep/d{i % 40:02d}", exist_ok=True)
                with open(f"{root}/deep/d{i % 40:02d}/f{i:04d}.bin", "wb") as f:
                    f.write(block)
        else:
            with open(f"{root}/z.bin", "wb") as f:
                f.write(block * (SIZE >> 20))
        with Link(rtt=0.1, rate=1e9) as link, serving(link, root) as server:
            rows = []
            for i in range(runs):
                for tuning in tunings if i % 2 == 0 else tunings[::-1]:  # interleaved, the order alternating
                    print(f"run {i + 1}, client --tuning {tuning}", flush=True)
                    run = run_once(link, root, server.pid, link.owner_pid, tree, ["--tuning", tuning, *extra])
                    summary(run)
                    rows.append(table_row(i + 1, tuning, run))
                    (shutil.rmtree if tree else os.unlink)(f"{root}/out")
            print("\n| run | client tuning | wall, s | socket memory at its peak, x BDP | unread in-order data at"
                  " its peak, x BDP | MB retransmitted by the peak | MB retransmitted in all |")
            print("|---|---|---|---|---|---|---|")
            print("\n".join(sorted(rows, key=lambda r: r.split("|")[2])))


if __name__ == "__main__":
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []  # after --: more drsftp get options
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", type=int, nargs="?", default=3)
    ap.add_argument("--deep", action="store_true", help="get -r -c auto of 200 x 1 MiB in 40 directories")
    ap.add_argument("--tunings", default="drs,kernel", help="the client's --tuning values, interleaved")
    a = ap.parse_args(argv[:len(argv) - len(extra) - (1 if "--" in argv else 0)])
    main(a.runs, a.deep, a.tunings.split(","), extra)
