"""What TLS costs on loopback: throughput and CPU per GB, clear text
against FTPS, for drsftp's client, curl and lftp, each against one
`drsftp serve` (certificate given, TLS not required).

    python benchmarks/tls_cost.py              # 256 MiB, get and put, 1 round (~1 min)
    python benchmarks/tls_cost.py 512 3        # MiB per transfer, rounds (median)

Each figure is one whole client run: process start, login, TLS handshakes
and the transfer (a Python client's start costs ~0.3 s of CPU: use 1 GiB
or more so it weighs little).  CPU is the client process's (getrusage of
children) plus the server's (psutil), in CPU seconds per GB moved.
Loopback, no root; the machine's other load shows in the figures: compare
rows of one run only.
"""

from __future__ import annotations

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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from conftest import make_file  # the tests' deterministic file maker
from tlscerts import make_certs

PY = sys.executable
USER, PASSWORD = "bench", "bench-pass"


def _client_cmd(tool: str, tls: bool, direction: str, port: int, ca: Path, local: Path, remote: str) -> list[str]:
    url = f"ftp://{USER}:{PASSWORD}@127.0.0.1:{port}/{remote}"
    if tool == "drsftp":
        flags = ["--tls", "--ca-file", str(ca)] if tls else []
        return ([PY, "-m", "drsftp", "get", *flags, "--progress", "never", url, str(local)] if direction == "get"
                else [PY, "-m", "drsftp", "put", *flags, "--progress", "never", str(local), url])
    if tool == "curl":
        flags = ["--ssl-reqd", "--cacert", str(ca)] if tls else []
        return (["curl", "-sS", *flags, "-o", str(local), url] if direction == "get"
                else ["curl", "-sS", *flags, "-T", str(local), url])
    ssl = ["set xfer:clobber true", f"set ftp:ssl-force {'true' if tls else 'false'}",
           f"set ftp:ssl-allow {'true' if tls else 'false'}", "set ftp:ssl-protect-data true", f"set ssl:ca-file {ca}"]
    op = f"get {remote} -o {local}" if direction == "get" else f"put {local} -o {remote}"
    return ["lftp", "-c", "; ".join([*ssl, f"open -u {USER},{PASSWORD} -p {port} 127.0.0.1", op, "bye"])]


def _measure(cmd: list[str], server: psutil.Process, nbytes: int) -> tuple[float, float]:
    """(Mbit/s, CPU s per GB of client + server)."""
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
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
           + s1.user - s0.user + s1.system - s0.system)
    return nbytes * 8 / wall / 1e6, cpu / (nbytes / 1e9)


def main(argv: list[str]) -> int:
    mib = int(argv[1]) if len(argv) > 1 else 256
    rounds = int(argv[2]) if len(argv) > 2 else 1
    missing = [p for p in ("curl", "lftp") if not shutil.which(p)]
    if missing:
        raise SystemExit(f"tls_cost: needs {', '.join(missing)}")
    with tempfile.TemporaryDirectory(prefix="drs-tlscost-") as tmp:
        work = Path(tmp)
        certs = make_certs(work / "certs")
        root = work / "root"
        root.mkdir()
        src = make_file(root / "src.bin", mib << 20, seed=1)
        proc = subprocess.Popen([PY, "-m", "drsftp", "serve", "--root", str(root), "--port", "0", "--user", USER,
                                 "--password", PASSWORD, "--tls-cert", str(certs.good)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            m = re.search(r":(\d+) ", proc.stdout.readline())
            if not m:
                raise SystemExit("tls_cost: the server did not start")
            port, server = int(m.group(1)), psutil.Process(proc.pid)
            rows = []
            for direction in ("get", "put"):
                for tool in ("drsftp", "curl", "lftp"):
                    for tls in (False, True):
                        runs = []
                        for _ in range(rounds):
                            local = work / "local.bin" if direction == "get" else Path(src)
                            cmd = _client_cmd(tool, tls, direction, port, certs.ca, local,
                                              "src.bin" if direction == "get" else "up.bin")
                            runs.append(_measure(cmd, server, mib << 20))
                        rows.append((direction, tool, "TLS" if tls else "clear",
                                     statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)))
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"loopback, {mib} MiB per transfer, median of {rounds}; server: drsftp serve (DRS);"
          " whole client runs (start, login, handshakes, transfer)")
    print(f"{'dir':4} {'client':7} {'mode':6} {'Mbit/s':>8} {'CPU s/GB':>9}")
    for d, tool, mode, rate, cpu in rows:
        print(f"{d:4} {tool:7} {mode:6} {rate:8.0f} {cpu:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
