"""Which client knob changes the CPU a drsftp client costs its peer?

    python benchmarks/peer_cpu.py --servers vsftpd --dirs get \
        --variants "curl,drs,chunk64:chunk=64,lowatoff:lowat=off,qa:quickack=1,kernel::--tuning kernel"
    python benchmarks/peer_cpu.py --link 1e9,0.0005 --servers vsftpd,drsftp --dirs get,put \
        --variants "curl,drs,sendfile:send=sendfile,copy256:sendsize=256"

Root (network namespaces, cpuacct cgroups).  Loopback runs in a network
namespace of its own (the host's tcp_rmem/tcp_wmem copied), so its TCP
counters count these transfers alone; ``--link RATE,RTT`` puts the server
and the clients on the two sides of a `drsftp netem` link instead.  Each
end runs in a cpuacct cgroup of its own (exact CPU time, vsftpd's session
processes included); the kernel's softirq threads and the host's softirq
time are read beside.  Variants run interleaved, each ``reps`` times; the
summary is medians.  A variant is ``curl``, or ``NAME:KNOBS[:drsftp
args]`` where KNOBS (benchmarks/peer_cpu_variant.py, joined by ``+``)
are ``chunk=KiB`` (get: read size), ``lowat=off|KiB`` (get: SO_RCVLOWAT
batch), ``quickack=1`` (get: TCP_QUICKACK after every read),
``drain=KiB`` (get: read on after a wakeup until the socket is empty or
that much went), ``send=sendfile|copy``
(put: that path whatever the peer's host), ``sendsize=KiB`` (put: copies
of that size), ``sfsize=KiB`` (put: sendfile calls capped).  Evidence for
docs/decisions/0015-peer-cpu-on-loopback.md and
0016-copying-sends-on-one-host.md.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from drsftp.bench.checks.datapath import _free_port, _sessions_gone
from drsftp.bench.common import tunings as T
from drsftp.netem.link import Link, stop_process, wait_for_port

VARIANT = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer_cpu_variant.py")]
CGROUPS = "/sys/fs/cgroup/cpuacct"
COUNTERS = ("Tcp:OutSegs", "Tcp:InSegs", "TcpExt:DelayedACKs", "TcpExt:TCPPureAcks", "TcpExt:TCPHPAcks",
            "TcpExt:TCPHPHits", "TcpExt:TCPBacklogCoalesce", "TcpExt:TCPRcvCoalesce", "TcpExt:TCPOFOQueue",
            "TcpExt:TCPWantZeroWindowAdv", "TcpExt:TCPToZeroWindowAdv", "TcpExt:TCPFromZeroWindowAdv",
            "TcpExt:TCPOrigDataSent", "TcpExt:TCPLossProbes")


class CpuGroup:
    """A cpuacct cgroup (v1): exact CPU time of everything started in it."""

    def __init__(self, name: str) -> None:
        self.path = os.path.join(CGROUPS, name)
        os.makedirs(self.path, exist_ok=True)

    def read(self) -> tuple[float, float, float]:
        """(user, system, total) seconds; user/system split at clock ticks, the total exact."""
        def ns(name: str) -> float:
            with open(os.path.join(self.path, name)) as f:
                return int(f.read()) / 1e9
        return ns("cpuacct.usage_user"), ns("cpuacct.usage_sys"), ns("cpuacct.usage")

    def join(self):
        def enter() -> None:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        return enter

    def remove(self) -> None:
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


SOFTIRQD = [p for p in psutil.process_iter(["name"]) if (p.info["name"] or "").startswith("ksoftirqd/")]


def softirqd_cpu() -> float:
    return sum(sum(p.cpu_times()[:2]) for p in SOFTIRQD)


def host_softirq() -> float:
    with open("/proc/stat") as f:
        return int(f.readline().split()[7]) / os.sysconf("SC_CLK_TCK")


def counters(ns: str) -> dict[str, int]:
    """The namespace's TCP counters (/proc/net/snmp, /proc/net/netstat)."""
    text = subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", "cat /proc/net/snmp /proc/net/netstat"],
                          capture_output=True, text=True, timeout=10).stdout.splitlines()
    out = {}
    for head, values in zip(text[::2], text[1::2]):
        names, nums = head.split(), values.split()
        for name, num in zip(names[1:], nums[1:]):
            if names[0] + name in COUNTERS:
                out[names[0] + name] = int(num)
    return out


def run_client(argv: list[str], group: CpuGroup) -> tuple[int, float, str]:
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, preexec_fn=group.join())
    return proc.returncode, time.monotonic() - t0, proc.stdout + proc.stderr


def client_argv(variant: str, server: str, direction: str, host: str, port: int, src: str, dest: str,
                root: str) -> list[str]:
    auth = f"{T.USER}:{T.PASSWORD}@" if server == "drsftp" else ""
    up = "up.bin" if server == "drsftp" else "pub/up.bin"
    if variant == "curl":
        url = f"ftp://{auth}{host}:{port}/"
        return (["curl", "-sS", "-o", dest, url + "src.bin"] if direction == "get"
                else ["curl", "-sS", "-T", src, url + up])
    _, _, rest = variant.partition(":")
    knobs, _, extra = rest.partition(":")
    url = f"ftp://{auth}{host}:{port}/" + ("" if server == "drsftp" else root.strip("/") + "/")
    cmd = ["get", url + "src.bin", dest] if direction == "get" else ["put", src, url + up]
    return [*VARIANT, knobs or "-", "--", *cmd, "--progress", "never", *extra.split()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=512, help="MiB")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--link", default="", help="RATE,RTT of an emulated link (bit/s, s), e.g. 1e9,0.0005")
    ap.add_argument("--servers", default="vsftpd")
    ap.add_argument("--dirs", default="get")
    ap.add_argument("--variants", default="curl,drs")
    ap.add_argument("--out", default="peer-cpu.json")
    a = ap.parse_args()
    size, gb = a.size << 20, (a.size << 20) / 1e9
    tag = os.urandom(3).hex()
    work = tempfile.mkdtemp(prefix="drs-peercpu-")
    root = os.path.join(work, "root")
    os.makedirs(root)
    src = os.path.join(work, "src.bin")
    block = os.urandom(1 << 20)
    with open(src, "wb") as f:
        f.writelines(block for _ in range(a.size))
    os.link(src, os.path.join(root, "src.bin"))
    link, lo_ns = None, f"drspc{tag}"
    servers: dict[str, tuple[subprocess.Popen, psutil.Process, int]] = {}
    groups = {"server": CpuGroup(f"drspc{tag}s"), "client": CpuGroup(f"drspc{tag}c")}
    rows = []
    try:
        if a.link:
            rate, rtt = (float(x) for x in a.link.split(","))
            link = Link(rtt=rtt, rate=rate).up()
            host, spaces = link.server_addr, [link.namespace("client"), link.namespace("server")]

            def wrap(side: str, argv: list[str]) -> list[str]:
                return link.command(side, argv)
        else:
            subprocess.run(["ip", "netns", "add", lo_ns], check=True)
            subprocess.run(["ip", "netns", "exec", lo_ns, "ip", "link", "set", "lo", "up"], check=True)
            for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
                with open("/proc/sys/" + key.replace(".", "/")) as f:
                    value = " ".join(f.read().split())
                subprocess.run(["ip", "netns", "exec", lo_ns, "sysctl", "-q", "-w", f"{key}={value}"], check=True)
            host, spaces = "127.0.0.1", [lo_ns]

            def wrap(side: str, argv: list[str]) -> list[str]:
                return ["ip", "netns", "exec", lo_ns, *argv]
        for server in a.servers.split(","):
            port = T.PORT + (server == "vsftpd") if link else _free_port()
            if server == "drsftp":
                argv = T.drsftp_server(root, host, port=port)
            else:
                conf = T.vsftpd_config(root, host, work)
                with open(conf) as f:
                    text = f.read().replace(f"listen_port={T.PORT}", f"listen_port={port}")
                with open(conf, "w") as f:
                    f.write(text)
                argv = ["vsftpd", conf]
            proc = subprocess.Popen(wrap("server", argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    preexec_fn=groups["server"].join())
            servers[server] = (proc, psutil.Process(proc.pid), port)
            if link:
                wait_for_port(link, "server", port, 15)
            else:
                time.sleep(1.0)  # (inside the namespace: not reachable from here)
        for rep in range(a.reps):
            for server, (_, sproc, port) in servers.items():
                for direction in a.dirs.split(","):
                    for variant in a.variants.split(","):
                        dest = os.path.join(work, "dest.bin")
                        argv = client_argv(variant, server, direction, host, port, src, dest, root)
                        n0 = [counters(ns) for ns in spaces]
                        k0, h0 = softirqd_cpu(), host_softirq()
                        s0, c0 = groups["server"].read(), groups["client"].read()
                        code, wall, msg = run_client(wrap("client", argv), groups["client"])
                        _sessions_gone(sproc)
                        time.sleep(0.05)
                        s1, c1 = groups["server"].read(), groups["client"].read()
                        k1, h1 = softirqd_cpu(), host_softirq()
                        n1 = [counters(ns) for ns in spaces]
                        r = {"server": server, "dir": direction, "variant": variant, "rep": rep, "exit": code,
                             "MBps": size / wall / 1e6, "cu": (c1[0] - c0[0]) / gb, "cs": (c1[1] - c0[1]) / gb,
                             "su": (s1[0] - s0[0]) / gb, "ss": (s1[1] - s0[1]) / gb, "ksoft": (k1 - k0) / gb,
                             "sys_softirq": (h1 - h0) / gb, "client": (c1[2] - c0[2]) / gb,
                             "peer": (s1[2] - s0[2]) / gb}
                        r["sum"] = r["client"] + r["peer"] + r["ksoft"]
                        for i, (x0, x1) in enumerate(zip(n0, n1)):
                            for key in x1:
                                r[f"n{i}:{key}"] = x1[key] - x0.get(key, 0)
                        if code:
                            r["err"] = msg[-300:]
                        rows.append(r)
                        print(json.dumps({k: round(x, 3) if isinstance(x, float) else x for k, x in r.items()}),
                              flush=True)
                        for path in (dest, os.path.join(root, "up.bin"), os.path.join(root, "pub", "up.bin")):
                            if os.path.exists(path):
                                os.unlink(path)
    finally:
        for proc, _, _ in servers.values():
            stop_process(proc, 10)
        if link:
            link.close()
        else:
            subprocess.run(["ip", "netns", "del", lo_ns], check=False)
        for group in groups.values():
            group.remove()
        shutil.rmtree(work, ignore_errors=True)
    with open(a.out, "w") as f:
        json.dump(rows, f)
    summarize(rows)


def summarize(rows: list[dict]) -> None:
    """Medians per (server, direction, variant): CPU s/GB, c = client, p =
    peer (server); ``peer/curl`` the peer's median over its median with curl,
    ``MBps range`` the slowest and fastest run."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if not r["exit"]:
            groups.setdefault((r["server"], r["dir"], r["variant"]), []).append(r)

    def med(k: str, rs: list[dict]) -> float:
        return statistics.median(x.get(k, 0) for x in rs)

    cols = ("MBps", "cu", "cs", "su", "ss", "ksoft", "client", "peer", "sum", "sys_softirq")
    print(f"{'server':7} {'dir':4} {'variant':36}", " ".join(f"{c:>7}" for c in cols), " peer/curl  MBps range")
    for (server, direction, variant), rs in groups.items():
        curl = groups.get((server, direction, "curl"))
        ratio = f"{med('peer', rs) / med('peer', curl):9.2f}x" if curl else " " * 10
        span = f"{min(x['MBps'] for x in rs):5.0f}-{max(x['MBps'] for x in rs):.0f}"
        print(f"{server:7} {direction:4} {variant:36}", " ".join(f"{med(c, rs):7.3f}" for c in cols), ratio, span)
        keys = sorted({k for x in rs for k in x if k.startswith("n")})
        print("       ", " ".join(f"{k}={med(k, rs):.0f}" for k in keys if med(k, rs)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summarize"]:
        with open(sys.argv[2]) as f:
            summarize(json.load(f))
    else:
        main()
