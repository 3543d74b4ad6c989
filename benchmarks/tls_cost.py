"""What TLS costs: throughput and CPU per GB, clear text against FTPS, for
drsftp's client (one stream, and a get and a put on 4 streams), curl and
lftp, on loopback or on an emulated link.

    python benchmarks/tls_cost.py              # loopback, 256 MiB, get and put, 1 round (~1 min)
    python benchmarks/tls_cost.py 512 3        # MiB per transfer, rounds (median)
    python benchmarks/tls_cost.py --link 1gbit,100ms --reps 2 \\
        --json docs/bench-data/tls-cost-1g-100ms.json   # root: drsftp netem's link (~5 min)
    python benchmarks/tls_cost.py --parallel-only --reps 2 \
        --json docs/bench-data/tls-cost-modee-loopback.json   # drsftp -P 4 only

Clear-text rows run against `drsftp serve`, TLS rows against `drsftp serve
--tls-cert --require-tls` (curl --ssl-reqd, lftp ftp:ssl-force, drsftp
--tls).  `drsftp get/put -P 4`: extended block mode (the server lists
PARALLEL), over TLS with every stream its own TLS connection
(docs/EBLOCK.md, "TLS on the streams").  Rounds
run interleaved (every row once, then again), so the rows of one round
share the machine's state.

Each figure is one whole client run: process start, login, TLS handshakes
and the transfer (a Python client's start costs ~0.3 s of CPU; on a
100 ms link each round trip of the login is 0.1 s).  CPU is the client
process's (getrusage of children) plus the server's (psutil), in CPU
seconds per GB moved; the emulated link's own CPU is not counted.  The
machine's other load shows in the figures: compare rows of one run only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from conftest import make_file  # the tests' deterministic file maker
from tlscerts import make_certs

from drsftp.netem.link import Link, stop_process
from drsftp.netem.spec import parse_duration, parse_rate

PY = sys.executable
USER, PASSWORD = "bench", "bench-pass"
# (direction, client, streams); each runs in clear text and over TLS
ROWS = [("get", "drsftp", 1), ("get", "drsftp", 4), ("get", "curl", 1), ("get", "lftp", 1),
        ("put", "drsftp", 1), ("put", "drsftp", 4), ("put", "curl", 1), ("put", "lftp", 1)]
PARALLEL_ROWS = [r for r in ROWS if r[1] == "drsftp" and r[2] > 1]  # --parallel-only: MODE E


def _client_cmd(tool: str, tls: bool, streams: int, direction: str, host: str, port: int, ca: Path,
                local: Path, remote: str) -> list[str]:
    url = f"ftp://{USER}:{PASSWORD}@{host}:{port}/{remote}"
    if tool == "drsftp":
        flags = ["--tls", "--ca-file", str(ca)] if tls else []
        flags += ["-P", str(streams)] if streams != 1 else []
        return ([PY, "-m", "drsftp", "get", *flags, "-q", "--progress", "never", url, str(local)]
                if direction == "get" else
                [PY, "-m", "drsftp", "put", *flags, "-q", "--progress", "never", str(local), url])
    if tool == "curl":
        flags = ["--ssl-reqd", "--cacert", str(ca)] if tls else []
        return (["curl", "-sS", *flags, "-o", str(local), url] if direction == "get"
                else ["curl", "-sS", *flags, "-T", str(local), url])
    ssl = ["set xfer:clobber true", f"set ftp:ssl-force {'true' if tls else 'false'}",
           f"set ftp:ssl-allow {'true' if tls else 'false'}", "set ftp:ssl-protect-data true", f"set ssl:ca-file {ca}"]
    op = f"get {remote} -o {local}" if direction == "get" else f"put {local} -o {remote}"
    return ["lftp", "-c", "; ".join([*ssl, f"open -u {USER},{PASSWORD} -p {port} {host}", op, "bye"])]


def _measure(cmd: list[str], server: psutil.Process, nbytes: int) -> dict:
    """Mbit/s and CPU s per GB (client, server, both) of one client run."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    s0 = server.cpu_times()
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False,
                       env=dict(os.environ, HOME=tempfile.gettempdir()))
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {r.stderr.strip()[:300]}")
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    s1 = server.cpu_times()
    client = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    srv = s1.user - s0.user + s1.system - s0.system
    gb = nbytes / 1e9
    return {"seconds": round(wall, 3), "mbps": round(nbytes * 8 / wall / 1e6, 1),
            "cpu_client_s_per_gb": round(client / gb, 3), "cpu_server_s_per_gb": round(srv / gb, 3),
            "cpu_s_per_gb": round((client + srv) / gb, 3)}


class _Loopback:
    """Servers and clients on this host's loopback."""

    host = "127.0.0.1"
    label = "loopback"

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def popen_server(self, argv: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.procs.append(proc)
        return proc

    def client(self, argv: list[str]) -> list[str]:
        return argv

    def close(self) -> None:
        for proc in self.procs:
            stop_process(proc, 10)


class _Emulated:
    """Server and client in the two namespaces of a `drsftp netem` link
    (removed on exit, on error and on Ctrl-C: Link's context)."""

    def __init__(self, link: Link, label: str) -> None:
        self.link, self.label, self.host = link, label, link.server_addr

    def popen_server(self, argv: list[str]) -> subprocess.Popen:
        return self.link.popen("server", argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def client(self, argv: list[str]) -> list[str]:
        return self.link.command("client", argv)

    def close(self) -> None:
        pass  # the link ends its processes (by PID)


def _serve(where, root: Path, *extra: str) -> tuple[int, psutil.Process]:
    proc = where.popen_server([PY, "-m", "drsftp", "serve", "--root", str(root), "--host", where.host,
                               "--port", "0", "--user", USER, "--password", PASSWORD, *extra])
    m = re.search(r":(\d+) ", proc.stdout.readline())
    if not m:
        raise SystemExit("tls_cost: the server did not start")
    return int(m.group(1)), psutil.Process(proc.pid)


def run(where, work: Path, certs, mib: int, rounds: int, log=print, rows=ROWS) -> list[dict]:
    root = work / "root"
    root.mkdir()
    src = make_file(root / "src.bin", mib << 20, seed=1)
    servers = {False: _serve(where, root), True: _serve(where, root, "--tls-cert", str(certs.good), "--require-tls")}
    runs = []
    for rnd in range(rounds):
        for direction, tool, streams in rows:
            for tls in (False, True):
                port, server = servers[tls]
                local = work / "local.bin" if direction == "get" else Path(src)
                cmd = _client_cmd(tool, tls, streams, direction, where.host, port, certs.ca, local,
                                  "src.bin" if direction == "get" else "up.bin")
                row = {"direction": direction, "client": tool, "streams": streams, "tls": tls, "round": rnd,
                       **_measure(where.client(cmd), server, mib << 20)}
                runs.append(row)
                log(f"  #{rnd + 1} {direction} {_name(row):12} {'TLS' if tls else 'clear':5}"
                    f" {row['mbps']:7.0f} Mbit/s {row['cpu_s_per_gb']:6.2f} CPU s/GB")
                if direction == "get":
                    local.unlink()
    return runs


def _name(row: dict) -> str:
    return row["client"] + (f" -P {row['streams']}" if row["streams"] != 1 else "")


def table(runs: list[dict]) -> str:
    """Markdown: per row the median Mbit/s and CPU s/GB (client + server)
    in clear text and over TLS, and what TLS changes."""
    lines = ["| dir | client | clear Mbit/s | TLS Mbit/s | TLS/clear | clear CPU s/GB | TLS CPU s/GB"
             " | TLS client + server CPU s/GB |",
             "|---|---|---|---|---|---|---|---|"]
    keys = dict.fromkeys((r["direction"], _name(r)) for r in runs)
    for direction, name in keys:
        def med(tls: bool, field: str, d=direction, n=name) -> float:
            return statistics.median(r[field] for r in runs if (r["direction"], _name(r), r["tls"]) == (d, n, tls))
        clear, tls = med(False, "mbps"), med(True, "mbps")
        lines.append(f"| {direction} | {name} | {clear:.0f} | {tls:.0f} | {tls / clear:.2f} |"
                     f" {med(False, 'cpu_s_per_gb'):.2f} | {med(True, 'cpu_s_per_gb'):.2f} |"
                     f" {med(True, 'cpu_client_s_per_gb'):.2f} + {med(True, 'cpu_server_s_per_gb'):.2f} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="tls_cost.py", description="clear text against FTPS: Mbit/s and CPU s/GB")
    p.add_argument("mib", nargs="?", type=int, default=256, help="MiB per transfer (default 256)")
    p.add_argument("rounds", nargs="?", type=int, default=None, help="rounds (default 1)")
    p.add_argument("--reps", type=int, help="rounds (the same as the second argument)")
    p.add_argument("--link", metavar="RATE,RTT",
                   help="run on an emulated link (drsftp netem, root), e.g. 1gbit,100ms; default loopback")
    p.add_argument("--json", metavar="FILE", help="write every run and the table's inputs here")
    p.add_argument("--parallel-only", action="store_true",
                   help="only drsftp get/put -P 4 (MODE E; over TLS, TLS on every stream)")
    args = p.parse_args(argv[1:])
    rounds = args.reps or args.rounds or 1
    rows = PARALLEL_ROWS if args.parallel_only else ROWS
    missing = [x for x in ("curl", "lftp") if not shutil.which(x) and not args.parallel_only]
    if missing:
        raise SystemExit(f"tls_cost: needs {', '.join(missing)}")
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="drs-tlscost-", dir="/var/tmp")))
        os.chmod(work, 0o755)
        if args.link:
            rate_s, rtt_s = args.link.split(",")
            rate, rtt = parse_rate(rate_s), parse_duration(rtt_s)
            link = stack.enter_context(Link(rtt=rtt, rate=rate))
            label = f"{rate / 1e9:g} Gbit/s, {rtt * 1000:g} ms (drsftp netem, {link.backend})"
            where = _Emulated(link, label)
        else:
            where = _Loopback()
        stack.callback(where.close)
        certs = make_certs(work / "certs", ips=(where.host,))
        print(f"tls_cost: {where.label}, {args.mib} MiB per transfer, {rounds} round(s) interleaved")
        runs = run(where, work, certs, args.mib, rounds, rows=rows)
    head = (f"{where.label}, {args.mib} MiB per transfer, median of {rounds}; servers: drsftp serve (DRS),"
            " clear and --require-tls; whole client runs (start, login, handshakes, transfer)")
    print(head)
    print(table(runs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"what": "TLS cost: clear text against FTPS", "where": where.label, "mib": args.mib,
                       "rounds": rounds, "command": "python benchmarks/tls_cost.py " + " ".join(argv[1:]),
                       "cpus": os.cpu_count(), "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
