"""`drsftp bench datapath`: is Python the bottleneck?  Loopback, 1 GiB each
way, drsftp (server + client) beside vsftpd + curl measured in the same run:
MB/s, CPU seconds per GB at each end, peak memory (RSS) at each end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import psutil
from rich.console import Console
from rich.table import Table

from . import tunings as T

PORT_DRS, PORT_VS = 2151, 2152


class _RSSWatch:
    """Peak RSS of one process, sampled every 20 ms (bounded by its life)."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return
            self._stop.wait(0.02)

    def stop(self) -> int:
        self._stop.set()
        self._t.join(5)
        return self.peak


def _run_client(argv: list[str], timeout: float) -> tuple[int, float, float, int, str]:
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    watch = _RSSWatch(proc.pid)
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, ru = os.wait4(proc.pid, 0)
            break
        time.sleep(0.005)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.stdout is not None and proc.stderr is not None  # (PIPE)
    out = proc.stdout.read().decode(errors="replace")
    err = proc.stderr.read().decode(errors="replace")
    proc.stdout.close()
    proc.stderr.close()
    return proc.returncode, wall, ru.ru_utime + ru.ru_stime, max(watch.stop(), ru.ru_maxrss * 1024), out + err


def _server(argv: list[str], port: int) -> subprocess.Popen:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    import socket

    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"server {argv[0]} did not listen on {port}")


def run_datapath(size: int, reps: int, outdir: str) -> int:
    work = tempfile.mkdtemp(prefix="drs-datapath-")
    console = Console()
    rows = []
    try:
        root = os.path.join(work, "root")
        os.makedirs(root)
        src = os.path.join(work, "src.bin")
        block = os.urandom(1 << 20)
        with open(src, "wb") as f:
            for _ in range(size >> 20):
                f.write(block)
        os.link(src, os.path.join(root, "src.bin"))
        have_vsftpd = not T.available("kernel-vsftpd")
        pairs = ["drsftp"] + (["vsftpd+curl"] if have_vsftpd else [])
        servers = {
            "drsftp": [*T.DRSFTP, "serve", "--root", root, "--port", str(PORT_DRS), "--user", T.USER,
                       "--password", T.PASSWORD],
        }
        if have_vsftpd:
            conf = T.vsftpd_config(root, "127.0.0.1", work)
            with open(conf) as cf:
                text = cf.read().replace(f"listen_port={T.PORT}", f"listen_port={PORT_VS}")
            with open(conf, "w") as cf:
                cf.write(text)
            servers["vsftpd+curl"] = ["vsftpd", conf]
        for pair in pairs:
            port = PORT_DRS if pair == "drsftp" else PORT_VS
            srv = _server(servers[pair], port)
            sps = psutil.Process(srv.pid)
            try:
                for rep in range(reps):
                    for direction in ("get", "put"):
                        dest = os.path.join(work, "dest.bin")
                        if pair == "drsftp":
                            url = f"ftp://{T.USER}:{T.PASSWORD}@127.0.0.1:{port}/"
                            argv = ([*T.DRSFTP, "get", url + "src.bin", dest] if direction == "get"
                                    else [*T.DRSFTP, "put", src, url + "up.bin"]) + ["--progress", "never"]
                        else:
                            url = f"ftp://127.0.0.1:{port}/"
                            argv = (["curl", "-sS", "-o", dest, url + "src.bin"] if direction == "get"
                                    else ["curl", "-sS", "-T", src, url + "pub/up.bin"])
                        watch = _RSSWatch(srv.pid)
                        c0 = sps.cpu_times()
                        code, wall, ccpu, crss, msg = _run_client(argv, 600)
                        c1 = sps.cpu_times()
                        srss = watch.stop()
                        scpu = c1.user + c1.system - c0.user - c0.system
                        gb = size / 1e9
                        rows.append({"pair": pair, "direction": direction, "rep": rep, "exit": code,
                                     "seconds": wall, "MBps": size / wall / 1e6 if not code else 0.0,
                                     "client_cpu_s_per_GB": ccpu / gb, "server_cpu_s_per_GB": scpu / gb,
                                     "client_peak_rss_MB": crss / 1e6, "server_peak_rss_MB": srss / 1e6,
                                     "error": msg.strip()[-200:] if code else None})
                        for p in (dest, os.path.join(root, "up.bin"), os.path.join(root, "pub", "up.bin")):
                            if os.path.exists(p):
                                os.unlink(p)
            finally:
                srv.terminate()
                try:
                    srv.wait(10)
                except subprocess.TimeoutExpired:
                    srv.kill()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = Table(title=f"Loopback data path, {size >> 20} MiB each way (wall time includes process start)")
    for col in ("pair", "dir", "MB/s", "client CPU s/GB", "server CPU s/GB", "client RSS MB",
                "server RSS MB", "vs vsftpd+curl"):
        table.add_column(col, justify="right")
    best: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        key = (r["pair"], r["direction"])
        best.setdefault(key, []).append(r)
    def med(rs: list[dict], k: str) -> float:
        return sorted(x[k] for x in rs)[len(rs) // 2]

    for (pair, d), rs in best.items():
        mbps = med(rs, "MBps")
        ref = best.get(("vsftpd+curl", d))
        ratio = f"{mbps / med(ref, 'MBps'):.0%}" if ref else "-"
        table.add_row(pair, d, f"{mbps:.0f}", f"{med(rs, 'client_cpu_s_per_GB'):.2f}",
                      f"{med(rs, 'server_cpu_s_per_GB'):.2f}", f"{med(rs, 'client_peak_rss_MB'):.0f}",
                      f"{med(rs, 'server_peak_rss_MB'):.0f}", ratio)
    console.print(table)
    if not any(r["pair"] == "vsftpd+curl" for r in rows):
        console.print("vsftpd or curl missing: no stock pair to compare with (./run setup installs them)")
    for r in rows:
        if r["error"]:
            console.print(f"FAILED {r['pair']} {r['direction']}: {r['error']}")
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "datapath.json")
    with open(path, "w") as out:
        json.dump({"size": size, "runs": rows}, out, indent=1)
    print(f"results: {path}")
    return 1 if any(r["error"] for r in rows) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run_datapath(1 << 30, 1, "bench-results"))
