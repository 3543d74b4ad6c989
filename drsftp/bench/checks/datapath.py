"""`drsftp datapath`: is Python the bottleneck, and what does a drsftp client
cost its peer?  Every server (drsftp serve, vsftpd) with every client
(drsftp, curl), both directions, interleaved, on loopback or on an emulated
link (`--rate`/`--rtt`, `drsftp netem`): MB/s, user and system CPU seconds
per GB at each end (vsftpd's session processes included), the kernel's
softirq threads, their sum, and each end's peak memory (RSS).

The sum matters as much as the peer's own figure: on one host the kernel
runs a packet's receive work in whichever process is on the CPU when it
arrives, so a receiver that sleeps between large reads leaves it to the
sender's process (docs/BENCHMARKS.md, "The peer's CPU")."""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

import psutil
from rich.console import Console
from rich.table import Table

from ...netem.link import stop_process
from ..common import tunings as T


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


def _run_client(argv: list[str], timeout: float) -> dict:
    """Run one client to its end (killed after ``timeout``): exit code, wall
    time, user and system CPU seconds (wait4: exact, not clock ticks), peak
    RSS, and its output's tail."""
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
    return {"exit": proc.returncode, "seconds": wall, "user": ru.ru_utime, "sys": ru.ru_stime,
            "rss": max(watch.stop(), ru.ru_maxrss * 1024), "output": out + err}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, host: str = "127.0.0.1", timeout: float = 15.0) -> bool:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return True
        time.sleep(0.05)
    return False


def _server_cpu(proc: psutil.Process) -> tuple[float, float]:
    """User and system CPU seconds of the server and its reaped children:
    vsftpd runs each session in a child process, counted here once the
    listener reaps it."""
    t = proc.cpu_times()
    return t.user + t.children_user, t.system + t.children_system


def _softirq_threads() -> list[psutil.Process]:
    """The kernel's softirq threads (ksoftirqd/N): receive work the kernel
    deferred from whatever process it interrupted."""
    found = []
    for p in psutil.process_iter(["name"]):
        if (p.info["name"] or "").startswith("ksoftirqd/"):
            found.append(p)
    return found


def _softirq_cpu(threads: Sequence[psutil.Process]) -> float:
    total = 0.0
    for p in threads:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def _host_softirq() -> float:
    """Seconds all CPUs spent in softirq since boot (/proc/stat): includes
    the work no process paid for (an emulated link's timers fire in idle
    time) and other programs' traffic, so it is recorded, not summed."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[7]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


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


def _client_argv(server: str, client: str, direction: str, host: str, port: int, src: str, dest: str,
                 root: str) -> list[str]:
    """drsftp serve wants the bench user; the bench's vsftpd is anonymous,
    takes uploads in pub/ and, run as the launching user, does not chroot:
    drsftp's URL paths are absolute (curl's are relative to the login
    directory, anon_root)."""
    auth = f"{T.USER}:{T.PASSWORD}@" if server == "drsftp" else ""
    up = "up.bin" if server == "drsftp" else "pub/up.bin"
    base = "" if server == "drsftp" or client == "curl" else root.rstrip("/") + "/"
    url = f"ftp://{auth}{host}:{port}/" + base.lstrip("/")
    if client == "drsftp":
        return ([*T.DRSFTP, "get", url + "src.bin", dest] if direction == "get"
                else [*T.DRSFTP, "put", src, url + up]) + ["--progress", "never"]
    return (["curl", "-sS", "-o", dest, url + "src.bin"] if direction == "get"
            else ["curl", "-sS", "-T", src, url + up])


def place_label(link: tuple[float, float] | None) -> str:
    """'loopback', or the emulated link as '1gbit-0.5ms' (file names, titles)."""
    if link is None:
        return "loopback"
    rate, rtt = link
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if rate >= scale:
            return f"{rate / scale:g}{unit}-{rtt * 1e3:g}ms"
    return f"{rate:g}bit-{rtt * 1e3:g}ms"


class _Place:
    """Where the ends run: both on this host's loopback, or the server and
    the clients on the two sides of an emulated link (drsftp netem)."""

    def __init__(self, link: tuple[float, float] | None) -> None:
        self.link = None
        if link is not None:
            from ...netem.link import Link

            self.link = Link(rate=link[0], rtt=link[1]).up()
        self.host = self.link.server_addr if self.link else "127.0.0.1"

    def port(self, server: str) -> int:
        if self.link is None:
            return _free_port()
        return {"drsftp": T.PORT, "vsftpd": T.PORT + 1}[server]  # a namespace of its own

    def server(self, argv: list[str], port: int) -> subprocess.Popen:
        if self.link is not None:
            from ...netem.link import wait_for_port

            proc = self.link.popen("server", argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for_port(self.link, "server", port, 15)
            return proc
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not _wait_listening(port):
            proc.kill()
            proc.wait()
            raise RuntimeError(f"server {argv[0]} did not listen on {port}")
        return proc

    def client(self, argv: list[str]) -> list[str]:
        # `ip netns exec` execs the command: the PID, its CPU and RSS are the client's
        return self.link.command("client", argv) if self.link else argv

    def close(self) -> None:
        if self.link is not None:
            self.link.close()


def run_datapath(size: int, reps: int, outdir: str, link: tuple[float, float] | None = None,
                 run_client: Callable[[list[str], float], dict] = _run_client) -> int:
    """Every server (drsftp serve, vsftpd) with every client (drsftp, curl),
    both directions, ``reps`` rounds, the clients interleaved: each end's CPU
    per GB and their sum, so what a drsftp client costs its peer sits beside
    what curl costs the same peer.  ``link``: (bits per second, RTT seconds)
    of an emulated link, None for loopback."""
    work = tempfile.mkdtemp(prefix="drs-datapath-")
    console = Console(width=190)
    rows: list[dict] = []
    startup: dict[tuple[str, str], float] = {}
    where = place_label(link)
    place = None
    try:
        root = os.path.join(work, "root")
        os.makedirs(root)
        src = os.path.join(work, "src.bin")
        block = os.urandom(1 << 20)
        with open(src, "wb") as f:
            f.writelines(block for _ in range(max(1, size >> 20)))
        size = os.path.getsize(src)
        os.link(src, os.path.join(root, "src.bin"))
        with open(os.path.join(root, "one.bin"), "wb") as f:
            f.write(b"1")
        have_vsftpd = not T.available("kernel-vsftpd")
        place = _Place(link)
        servers = ["drsftp"] + (["vsftpd"] if have_vsftpd else [])
        clients = ["drsftp"] + (["curl"] if have_vsftpd else [])
        softirqd = _softirq_threads()
        running: dict[str, tuple[subprocess.Popen, psutil.Process, int]] = {}
        try:
            for server in servers:
                port = place.port(server)
                if server == "drsftp":
                    argv = T.drsftp_server(root, place.host, port=port)
                else:
                    conf = T.vsftpd_config(root, place.host, work)
                    with open(conf) as cf:
                        text = cf.read().replace(f"listen_port={T.PORT}", f"listen_port={port}")
                    with open(conf, "w") as cf:
                        cf.write(text)
                    argv = ["vsftpd", conf]
                proc = place.server(argv, port)
                running[server] = (proc, psutil.Process(proc.pid), port)
            startup = {(server, client): _startup_cpu(place, server, client, port, root, work, run_client)
                       for server, (_, _, port) in running.items() for client in clients}
            for rep in range(reps):
                for server, (proc, sps, port) in running.items():
                    for direction in ("get", "put"):
                        for client in clients:
                            dest = os.path.join(work, "dest.bin")
                            argv = _client_argv(server, client, direction, place.host, port, src, dest, root)
                            watch = _RSSWatch(proc.pid)
                            s0, k0, h0 = _server_cpu(sps), _softirq_cpu(softirqd), _host_softirq()
                            run = run_client(place.client(argv), 600)
                            _sessions_gone(sps)
                            s1, k1, h1 = _server_cpu(sps), _softirq_cpu(softirqd), _host_softirq()
                            rows.append(_row(server, client, direction, rep, size, run, (s1[0] - s0[0], s1[1] - s0[1]),
                                             k1 - k0, h1 - h0, watch.stop()))
                            for path in (dest, os.path.join(root, "up.bin"), os.path.join(root, "pub", "up.bin")):
                                if os.path.exists(path):
                                    os.unlink(path)
        finally:
            for proc, _, _ in running.values():
                stop_process(proc, 10)
    finally:
        if place is not None:
            place.close()
        shutil.rmtree(work, ignore_errors=True)
    summary = summarize(rows, startup, size)
    console.print(table(summary, size, where))
    if len(clients) == 1:
        console.print("vsftpd or curl missing: no stock pair to compare with (./run setup installs them)")
    for r in rows:
        if r["error"]:
            console.print(f"FAILED {r['server']}/{r['client']} {r['direction']}: {r['error']}")
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, f"datapath-{where}.json")
    with open(path, "w") as out:
        json.dump({"where": where, "link": {"rate_bps": link[0], "rtt_s": link[1]} if link else None,
                   "size": size, "reps": reps, "host": _host(), "runs": rows,
                   "client_startup_cpu_s": [{"server": k[0], "client": k[1], "cpu_s": v} for k, v in startup.items()],
                   "summary": summary}, out, indent=1)
    print(f"results: {path}")
    return 1 if any(r["error"] for r in rows) else 0


def _startup_cpu(place: _Place, server: str, client: str, port: int, root: str, work: str,
                 run_client: Callable[[list[str], float], dict], times: int = 3) -> float:
    """A client's CPU seconds for a 1-byte download (median of ``times``):
    its start-up, log-in and exit, paid once per file whatever its size."""
    dest = os.path.join(work, "one.out")
    argv = _client_argv(server, client, "get", place.host, port, "", dest, root)
    argv = [a.replace("src.bin", "one.bin") for a in argv]
    runs = [run_client(place.client(argv), 60) for _ in range(times)]
    if os.path.exists(dest):
        os.unlink(dest)
    return statistics.median(r["user"] + r["sys"] for r in runs if not r["exit"]) if any(
        not r["exit"] for r in runs) else 0.0


def _row(server: str, client: str, direction: str, rep: int, size: int, run: dict,
         server_cpu: tuple[float, float], softirqd: float, host_softirq: float, server_rss: int) -> dict:
    """One run's figures, CPU in seconds per GB of the file."""
    gb = size / 1e9
    ok = not run["exit"]
    row = {"server": server, "client": client, "direction": direction, "rep": rep, "exit": run["exit"],
           "seconds": run["seconds"], "MBps": size / run["seconds"] / 1e6 if ok else 0.0,
           "client_user_s_per_GB": run["user"] / gb, "client_sys_s_per_GB": run["sys"] / gb,
           "server_user_s_per_GB": server_cpu[0] / gb, "server_sys_s_per_GB": server_cpu[1] / gb,
           "softirqd_s_per_GB": softirqd / gb, "host_softirq_s_per_GB": host_softirq / gb,
           "client_peak_rss_MB": run["rss"] / 1e6, "server_peak_rss_MB": server_rss / 1e6,
           "error": run["output"].strip()[-200:] if not ok else None}
    row["client_cpu_s_per_GB"] = row["client_user_s_per_GB"] + row["client_sys_s_per_GB"]
    row["server_cpu_s_per_GB"] = row["server_user_s_per_GB"] + row["server_sys_s_per_GB"]
    row["sum_cpu_s_per_GB"] = row["client_cpu_s_per_GB"] + row["server_cpu_s_per_GB"] + row["softirqd_s_per_GB"]
    return row


def _host() -> dict:
    return {"kernel": platform.release(), "cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg()}


_MEDIANS = ("MBps", "client_user_s_per_GB", "client_sys_s_per_GB", "client_cpu_s_per_GB", "server_user_s_per_GB",
            "server_sys_s_per_GB", "server_cpu_s_per_GB", "softirqd_s_per_GB", "sum_cpu_s_per_GB",
            "client_peak_rss_MB", "server_peak_rss_MB")


def summarize(rows: Sequence[dict], startup: dict[tuple[str, str], float] | None = None,
              size: int = 0) -> list[dict]:
    """Medians per (server, direction, client) over the successful runs,
    with the peer's (server's) CPU and the sum of both ends over the same
    server's with curl as the client in the same direction.  ``startup``:
    each client's CPU seconds for a 1-byte file, also given per GB of
    ``size`` and taken off the sum in "sum_after_startup" (the data path's
    own cost, for a file large enough to hide the start)."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        if not r["exit"]:
            groups.setdefault((r["server"], r["direction"], r["client"]), []).append(r)
    out = []
    for (server, direction, client), rs in groups.items():
        s: dict = {"server": server, "direction": direction, "client": client, "runs": len(rs)}
        for k in _MEDIANS:
            s[k] = statistics.median(r[k] for r in rs)
        s["MBps_min"], s["MBps_max"] = min(r["MBps"] for r in rs), max(r["MBps"] for r in rs)
        start = (startup or {}).get((server, client), 0.0)
        s["client_startup_cpu_s"] = start
        s["client_startup_s_per_GB"] = start / (size / 1e9) if size else 0.0
        s["sum_after_startup_s_per_GB"] = s["sum_cpu_s_per_GB"] - s["client_startup_s_per_GB"]
        out.append(s)
    ref = {(s["server"], s["direction"]): s for s in out if s["client"] == "curl"}
    for s in out:
        base = ref.get((s["server"], s["direction"]))
        s["peer_cpu_vs_curl"] = _ratio(s, base, "server_cpu_s_per_GB")
        s["sum_cpu_vs_curl"] = _ratio(s, base, "sum_cpu_s_per_GB")
        s["sum_after_startup_vs_curl"] = _ratio(s, base, "sum_after_startup_s_per_GB")
    return out


def _ratio(s: dict, base: dict | None, key: str) -> float | None:
    if base is None or base is s or base[key] <= 0:
        return None
    return s[key] / base[key]


def table(summary: Sequence[dict], size: int, where: str) -> Table:
    t = Table(title=f"Data path, {where}, {size >> 20} MiB each way (wall time includes process start); "
                    "CPU s/GB as total (user+sys), medians over the reps; client start: a 1-byte file's CPU")
    for col in ("server", "dir", "client", "MB/s", "client CPU", "client start", "server CPU (peer)", "softirqd",
                "sum", "sum - start", "peer vs curl", "sum vs curl", "sum - start vs curl", "client RSS MB",
                "server RSS MB"):
        t.add_column(col, justify="right")

    def cpu(s: dict, end: str) -> str:
        return (f"{s[f'{end}_cpu_s_per_GB']:.2f} ({s[f'{end}_user_s_per_GB']:.2f}+"
                f"{s[f'{end}_sys_s_per_GB']:.2f})")

    def x(v: float | None) -> str:
        return f"{v:.2f}x" if v is not None else "-"

    for s in sorted(summary, key=lambda s: (s["server"], s["direction"], s["client"] != "drsftp")):
        t.add_row(s["server"], s["direction"], s["client"], f"{s['MBps']:.0f}", cpu(s, "client"),
                  f"{s['client_startup_s_per_GB']:.2f}", cpu(s, "server"), f"{s['softirqd_s_per_GB']:.2f}",
                  f"{s['sum_cpu_s_per_GB']:.2f}", f"{s['sum_after_startup_s_per_GB']:.2f}", x(s["peer_cpu_vs_curl"]),
                  x(s["sum_cpu_vs_curl"]), x(s["sum_after_startup_vs_curl"]), f"{s['client_peak_rss_MB']:.0f}",
                  f"{s['server_peak_rss_MB']:.0f}")
    return t

if __name__ == "__main__":  # pragma: no cover
    sys.exit(run_datapath(1 << 30, 1, "bench-results"))
