"""`drsftp datapath`: is Python the bottleneck, and what does a drsftp end
cost its peer?  Loopback, 1 GiB each way, every server (drsftp serve,
vsftpd) with every client (drsftp, curl) in the same run: MB/s, CPU seconds
per GB at each end (vsftpd's session processes included), peak memory (RSS)
at each end."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psutil
from rich.console import Console
from rich.table import Table

from . import tunings as T


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


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def _server_cpu(proc: psutil.Process) -> float:
    """CPU seconds of the server and its reaped children: vsftpd runs each
    session in a child process, counted here once the listener reaps it."""
    t = proc.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def _sessions_gone(proc: psutil.Process, timeout: float = 10.0) -> None:
    """Until the server's session processes have exited and been reaped."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not proc.children(recursive=True):
                return
        except psutil.Error:
            return
        time.sleep(0.02)


def _client_argv(server: str, client: str, direction: str, port: int, src: str, dest: str,
                 root: str) -> list[str]:
    """drsftp serve wants the bench user; the bench's vsftpd is anonymous,
    takes uploads in pub/ and, run as the launching user, does not chroot:
    drsftp's URL paths are absolute (curl's are relative to the login
    directory, anon_root)."""
    auth = f"{T.USER}:{T.PASSWORD}@" if server == "drsftp" else ""
    up = "up.bin" if server == "drsftp" else "pub/up.bin"
    base = "" if server == "drsftp" or client == "curl" else root.rstrip("/") + "/"
    url = f"ftp://{auth}127.0.0.1:{port}/" + base.lstrip("/")
    if client == "drsftp":
        return ([*T.DRSFTP, "get", url + "src.bin", dest] if direction == "get"
                else [*T.DRSFTP, "put", src, url + up]) + ["--progress", "never"]
    return (["curl", "-sS", "-o", dest, url + "src.bin"] if direction == "get"
            else ["curl", "-sS", "-T", src, url + up])


def run_datapath(size: int, reps: int, outdir: str) -> int:
    """Every server (drsftp serve, vsftpd) with every client (drsftp, curl),
    both directions, ``reps`` rounds: each end's CPU per GB, so what a drsftp
    client costs its peer sits beside what curl costs the same peer."""
    work = tempfile.mkdtemp(prefix="drs-datapath-")
    console = Console(width=170)
    rows = []
    try:
        root = os.path.join(work, "root")
        os.makedirs(root)
        src = os.path.join(work, "src.bin")
        block = os.urandom(1 << 20)
        with open(src, "wb") as f:
            f.writelines(block for _ in range(size >> 20))
        os.link(src, os.path.join(root, "src.bin"))
        have_vsftpd = not T.available("kernel-vsftpd")
        servers = {"drsftp": _free_port()}
        if have_vsftpd:
            servers["vsftpd"] = _free_port()
        argv_of = {
            "drsftp": [*T.DRSFTP, "serve", "--root", root, "--port", str(servers["drsftp"]), "--user", T.USER,
                       "--password", T.PASSWORD],
        }
        if have_vsftpd:
            conf = T.vsftpd_config(root, "127.0.0.1", work)
            with open(conf) as cf:
                text = cf.read().replace(f"listen_port={T.PORT}", f"listen_port={servers['vsftpd']}")
            with open(conf, "w") as cf:
                cf.write(text)
            argv_of["vsftpd"] = ["vsftpd", conf]
        clients = ["drsftp"] + (["curl"] if have_vsftpd else [])
        for server, port in servers.items():
            srv = _server(argv_of[server], port)
            sps = psutil.Process(srv.pid)
            try:
                for rep in range(reps):
                    for client in clients:
                        for direction in ("get", "put"):
                            dest = os.path.join(work, "dest.bin")
                            argv = _client_argv(server, client, direction, port, src, dest, root)
                            watch = _RSSWatch(srv.pid)
                            c0 = _server_cpu(sps)
                            code, wall, ccpu, crss, msg = _run_client(argv, 600)
                            _sessions_gone(sps)
                            scpu = _server_cpu(sps) - c0
                            srss = watch.stop()
                            gb = size / 1e9
                            rows.append({"server": server, "client": client, "direction": direction, "rep": rep,
                                         "exit": code, "seconds": wall,
                                         "MBps": size / wall / 1e6 if not code else 0.0,
                                         "client_cpu_s_per_GB": ccpu / gb, "server_cpu_s_per_GB": scpu / gb,
                                         "client_peak_rss_MB": crss / 1e6, "server_peak_rss_MB": srss / 1e6,
                                         "error": msg.strip()[-200:] if code else None})
                            for path in (dest, os.path.join(root, "up.bin"), os.path.join(root, "pub", "up.bin")):
                                if os.path.exists(path):
                                    os.unlink(path)
            finally:
                srv.terminate()
                try:
                    srv.wait(10)
                except subprocess.TimeoutExpired:
                    srv.kill()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    console.print(_table(rows, size))
    if len(clients) == 1:
        console.print("vsftpd or curl missing: no stock pair to compare with (./run setup installs them)")
    for r in rows:
        if r["error"]:
            console.print(f"FAILED {r['server']}/{r['client']} {r['direction']}: {r['error']}")
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "datapath.json")
    with open(path, "w") as out:
        json.dump({"size": size, "runs": rows}, out, indent=1)
    print(f"results: {path}")
    return 1 if any(r["error"] for r in rows) else 0


def _table(rows: list[dict], size: int) -> Table:
    """Medians per (server, client, direction), with ranges over the reps;
    "peer CPU vs curl": the server's CPU per GB with this client over the
    same server's with curl in the same direction."""
    table = Table(title=f"Loopback data path, {size >> 20} MiB each way (wall time includes process start); "
                        "median \\[min-max] over the reps")
    for col in ("server", "client", "dir", "MB/s", "client CPU s/GB", "server CPU s/GB", "peer CPU vs curl",
                "client RSS MB", "server RSS MB"):
        table.add_column(col, justify="right")
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["server"], r["client"], r["direction"]), []).append(r)

    def med(rs, k):
        return statistics.median(x[k] for x in rs)

    def span(rs, k, fmt):
        v = sorted(x[k] for x in rs)
        return f"{med(rs, k):{fmt}}" + (f" [{v[0]:{fmt}}-{v[-1]:{fmt}}]" if len(v) > 1 else "")

    for (server, client, d), rs in groups.items():
        ref = groups.get((server, "curl", d))
        ratio = "-"
        if ref and client != "curl" and med(ref, "server_cpu_s_per_GB") > 0:
            ratio = f"{med(rs, 'server_cpu_s_per_GB') / med(ref, 'server_cpu_s_per_GB'):.2f}x"
        table.add_row(server, client, d, span(rs, "MBps", ".0f"), span(rs, "client_cpu_s_per_GB", ".2f"),
                      span(rs, "server_cpu_s_per_GB", ".2f"), ratio, f"{med(rs, 'client_peak_rss_MB'):.0f}",
                      f"{med(rs, 'server_peak_rss_MB'):.0f}")
    return table


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run_datapath(1 << 30, 1, "bench-results"))
