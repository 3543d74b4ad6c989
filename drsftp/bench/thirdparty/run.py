"""Third-party transfers on a three-node topology (docs/BENCHMARKS.md,
"Third-party"): `drsftp copy` between two `drsftp serve` beside GridFTP's
third-party transfers between two `globus-gridftp-server` and beside a
direct get over the same A-B link; HTTP third-party copies (COPY pulls by
B) between two `drsftp serve --http-port` and between two XRootD servers
(entries.py, servers.py).

    client --5 ms-- A --100 ms, 1 Gbit/s-- B
       \\------------5 ms------------------/

Each server listens on its node address (docs/NETEM.md, "Topologies"), so
B's PASV names an address A reaches over the A-B link; each drsftp serve
lists the other's address in ``--third-party-peers``.  The copies run on
the client node, the direct get on B.  Entries run interleaved (every
entry's first repetition, then the second...); each run's servers start
fresh.  Throughput is the workload over the client's wall time; every
run's bytes are compared with the source's SHA-256; both servers' data
sockets are sampled with `ss` (memory, the kernel's RTT).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...netem.link import stop_process, wait_for_port
from ...netem.topology import Topology
from ..common.datasets import Workload, make_tree, workload
from ..common.peers import DRS_PORT, PASSWORD, PY, USER, finish_client, hosts_wrapped
from ..common.sampler import Sampler
from ..common.tunings import Path
from ..common.xrootd import TLSFiles
from .entries import DEFAULT_ENTRIES, ENTRIES, Ctx, ThirdEntry, entry_names
from .servers import CONTROL, PROGRAMS, READY, run_certs, server_argv
from .summary import copy_summary, server_lines, sockets_summary

CONTROL_RTT = 0.005  # client-A and client-B (the topology)
NODES = ("client", "a", "b")
SAMPLE_EVERY = 0.25  # seconds between `ss` samples at A and at B (each a process in a namespace)
__all__ = ["DEFAULT_ENTRIES", "ENTRIES", "Ctx", "ThirdConfig", "ThirdEntry", "entry_names", "run_third",
           "tree_digest"]


@dataclass
class ThirdConfig:
    path: Path  # the A-B link
    entries: list[str]
    reps: int = 3
    scale: float = 1.0
    cc: str | None = None
    max_time: float = 120.0
    bounce_check: bool = True
    workdir: str = "/var/tmp/drsftp-third"
    log: Callable[[str], None] = print
    links: list[str] = field(default_factory=list)  # filled in: the topology's --link specs

    def topology(self) -> list[str]:
        rate = f"{self.path.rate:.0f}"
        loss = f",loss={self.path.loss * 100:g}%" if self.path.loss else ""
        queue = f",queue={self.path.queue}" if self.path.queue else ""
        return [f"client-a:rtt={CONTROL_RTT}s,rate={rate}", f"client-b:rtt={CONTROL_RTT}s,rate={rate}",
                f"a-b:rtt={self.path.rtt}s,rate={rate}{loss}{queue}"]


def missing_programs(entries: list[str]) -> list[str]:
    need = {p for n in entries for p in PROGRAMS.get(ENTRIES[n].servers, ())}
    return sorted(p for p in need if not (shutil.which(p) or os.path.exists(p)))


def tree_digest(top: str, wl: Workload) -> str | None:
    """SHA-256 over every file's relative path and SHA-256 (None: a file is missing)."""
    h = hashlib.sha256()
    for rel, _ in sorted(wl.files):
        p = os.path.join(top, rel) if wl.tree else top
        try:
            with open(p, "rb") as f:
                h.update(rel.encode() + b"\0" + hashlib.file_digest(f, "sha256").digest())
        except OSError:
            return None
    return h.hexdigest()


class _Load:
    """The machine around one run: the 1-minute load at its start, the CPU
    busy over it (all cores), the netem forwarder's share of a core."""

    def __init__(self, forwarder: int | None) -> None:
        import psutil

        self.load1 = os.getloadavg()[0]
        self.t0, self.cpu0 = time.monotonic(), psutil.cpu_times()
        try:
            self.fwd = psutil.Process(forwarder) if forwarder else None
            self.fwd0 = sum(self.fwd.cpu_times()[:2]) if self.fwd else 0.0
        except psutil.Error:
            self.fwd = None

    def taken(self) -> dict:
        import psutil

        wall = max(time.monotonic() - self.t0, 1e-6)
        c0, c1 = self.cpu0, psutil.cpu_times()
        total = sum(c1) - sum(c0)
        idle = (c1.idle + getattr(c1, "iowait", 0)) - (c0.idle + getattr(c0, "iowait", 0))
        out = {"load1": round(self.load1, 2), "cores": os.cpu_count(),
               "cpu_busy_pct": round(100 * (total - idle) / total, 1) if total > 0 else None}
        try:
            if self.fwd is not None:
                out["forwarder_cpu_pct"] = round(100 * (sum(self.fwd.cpu_times()[:2]) - self.fwd0) / wall, 1)
        except psutil.Error:
            pass
        return out


def _server_cpu(servers: list[subprocess.Popen]) -> dict:
    """CPU seconds each server has spent (its reaped children too: GridFTP forks a process per session)."""
    import psutil

    out = {}
    for node, srv in zip(("a", "b"), servers):
        try:
            t = psutil.Process(srv.pid).cpu_times()
            out[f"cpu_{node}_s"] = round(t.user + t.system + t.children_user + t.children_system, 2)
        except psutil.Error:
            pass
    return out


def _server(topo: Topology, kind: str, node: str, peer: str, root: str, workdir: str, log,
            tls: TLSFiles | None = None, serve: tuple[str, ...] = ()) -> subprocess.Popen:
    argv = server_argv(topo, kind, node, peer, root, workdir, tls, serve)
    return topo.popen(node, argv, stdout=subprocess.DEVNULL, stderr=log)


def _client_addrs(topo: Topology) -> set[str]:
    """The client's addresses: its sockets at A and B (control, COPY requests, macaroons) are not the data path."""
    return {topo.node_addr("client"), topo.addr("client", "a"), topo.addr("client", "b")}


def _fresh(root_b: str) -> None:
    shutil.rmtree(root_b, ignore_errors=True)
    os.makedirs(root_b)
    os.chmod(root_b, 0o777)  # GridFTP writes as nobody


def run_one(cfg: ThirdConfig, topo: Topology, entry: ThirdEntry, wl: Workload, roots: tuple[str, str],
            digest: str, rep: int, tls: TLSFiles | None = None) -> dict:
    root_a, root_b = roots
    _fresh(root_b)
    json_out = os.path.join(cfg.workdir, "reports", f"{entry.name}-{rep}.json")
    os.makedirs(os.path.dirname(json_out), exist_ok=True)
    if os.path.exists(json_out):
        os.unlink(json_out)
    ctx = Ctx(topo.node_addr("a"), topo.node_addr("b"), root_a, root_b, wl, json_out, tls)
    p = cfg.path
    result = {"entry": entry.name, "workload": wl.name, "rep": rep, "bytes": wl.bytes, "files": len(wl.files),
              "third_party": entry.third_party, "servers": entry.servers, "rate_bps": p.rate, "rtt_s": p.rtt,
              "control_rtt_s": CONTROL_RTT, "loss": p.loss, "cc": cfg.cc, "ceiling_mbps": p.ceiling_mbps,
              "bdp": p.bdp, "mbps": 0.0, "complete": False, "bytes_identical": False}
    port = READY[entry.servers]
    logs, servers, marks = [], [], []
    cpu0: dict = {}
    try:
        for node, peer, root in (("a", "b", root_a), ("b", "a", root_b)):
            if node == "b" and not entry.third_party and entry.servers == "drsftp":
                continue  # (the direct get needs A's server only)
            log = open(os.path.join(cfg.workdir, f"server-{entry.servers}-{node}.log"), "ab")  # noqa: SIM115
            logs.append(log)
            marks.append(log.tell())
            servers.append(_server(topo, entry.servers, node, peer, root, cfg.workdir, log, tls, entry.serve))
        for node in ("a", "b")[:len(servers)]:
            wait_for_port(topo, node, port, timeout=15)
        argv = entry.argv(ctx)
        if argv[0] == "globus-url-copy":
            argv = hosts_wrapped(topo.node_addr(entry.node), argv, os.path.join(cfg.workdir, f"hosts-c{entry.node}"))
        cpu0 = _server_cpu(servers)
        load = _Load(topo.owner_pid)
        control = CONTROL[entry.servers]
        with Sampler(topo.command("a", []), control, SAMPLE_EVERY) as s_a, \
                Sampler(topo.command("b", []), control, SAMPLE_EVERY) as s_b:
            t0 = time.monotonic()
            started = t0 - s_b.t0
            client = topo.popen(entry.node, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out, err = finish_client(client, cfg.max_time, result)
            seconds = time.monotonic() - t0
        result.update(load.taken())
        got = tree_digest(os.path.join(root_b, wl.name) if wl.tree else os.path.join(root_b, wl.files[0][0]), wl)
        result["bytes_identical"] = got == digest
        if client.returncode != 0 and "error" not in result:
            tail = (err or out).decode(errors="replace").strip().splitlines()[-1:] or [""]
            result["error"] = f"exit {client.returncode}: {tail[0][:200]}"
        elif got != digest and "error" not in result:
            result["error"] = "missing files" if got is None else "bytes differ from the source's"
        ok = "error" not in result
        result.update(seconds=round(seconds, 3), complete=ok,
                      mbps=round(wl.bytes * 8 / seconds / 1e6, 1) if ok else 0.0,
                      **sockets_summary(s_a, s_b, started, seconds, wl.bytes, SAMPLE_EVERY, _client_addrs(topo)))
        try:  # drsftp's --json (gfal-copy and globus-url-copy write none)
            with open(json_out) as f:
                result["client_report"] = copy_summary(json.load(f))
        except (OSError, ValueError):
            pass
    finally:
        if cpu0:  # the servers' CPU over the run (their start-up left out)
            cpu1 = _server_cpu(servers)
            result.update({k: round(cpu1[k] - cpu0[k], 2) for k in cpu0 if k in cpu1})
        for srv in servers:
            stop_process(srv, 10)
        for log in logs:
            log.close()
        if entry.servers == "drsftp-https" and len(logs) == 2:  # B's transfer log lines: its pulls
            result["server_b"] = server_lines(logs[1].name, marks[1])
        shutil.rmtree(root_b, ignore_errors=True)
    return result


BOUNCE_SCRIPT = r"""
import ftplib, sys
host, port, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
f = ftplib.FTP()
f.connect(host, port, timeout=20)
f.login(sys.argv[4], sys.argv[5])
try:
    print(f.sendcmd("PORT " + target.replace(".", ",") + ",19,137"))
except ftplib.error_perm as exc:
    print(exc)
f.quit()
"""


def bounce_check(topo: Topology, cfg: ThirdConfig, root_a: str) -> dict:
    """A PORT to an address A's --third-party-peers does not list (B's end
    of the client-B link) sent to A's drsftp serve: it must be refused
    with the 501 naming the option (docs/PROTOCOL.md, "The bounce rule")."""
    unlisted = topo.addr("b", "client")
    log = open(os.path.join(cfg.workdir, "server-drsftp-a.log"), "ab")  # noqa: SIM115
    srv = _server(topo, "drsftp", "a", "b", root_a, cfg.workdir, log)
    try:
        wait_for_port(topo, "a", DRS_PORT, timeout=15)
        r = topo.run("client", [PY, "-c", BOUNCE_SCRIPT, topo.node_addr("a"), str(DRS_PORT), unlisted, USER,
                                PASSWORD], timeout=30)
        reply = (r.stdout.strip().splitlines() or [r.stderr.strip()[-200:]])[-1]
    finally:
        stop_process(srv, 10)
        log.close()
    refused = reply.startswith("501") and "--third-party-peers" in reply
    return {"port_to": f"{unlisted}:5001", "listed": [topo.node_addr("b")], "reply": reply, "refused": refused}


def run_third(cfg: ThirdConfig) -> dict:
    """Every entry's runs, interleaved; the bounce check; the setting."""
    missing = missing_programs(cfg.entries)
    if missing:
        raise RuntimeError(f"not installed: {', '.join(missing)} (./run setup installs them as root)")
    os.makedirs(cfg.workdir, exist_ok=True)
    os.chmod(cfg.workdir, 0o755)
    with open(os.path.join(cfg.workdir, ".lock"), "w") as lock:
        # each run empties B's root and the reports: a second run in the same
        # workdir would delete the files of the first under it
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(f"another third-party bench is running in {cfg.workdir}: wait for it to end") from None
        return _run_locked(cfg)


def _run_locked(cfg: ThirdConfig) -> dict:
    root_a = os.path.join(cfg.workdir, "a")
    os.makedirs(root_a, exist_ok=True)
    wls = {tree: workload("small" if tree else "big", cfg.scale) for tree in {ENTRIES[n].tree for n in cfg.entries}}
    for wl in wls.values():
        make_tree(root_a, wl)
    digests = {tree: tree_digest(os.path.join(root_a, wl.name) if wl.tree else
                                 os.path.join(root_a, wl.name, wl.files[0][0]), wl) for tree, wl in wls.items()}
    sysctls = {"net.ipv4.tcp_congestion_control": cfg.cc} if cfg.cc else {}
    cfg.links = cfg.topology()
    tls: TLSFiles | None = None
    runs: list[dict] = []
    out: dict[str, Any] = {"third_party": 1, "topology": cfg.links, "control_rtt_s": CONTROL_RTT, "runs": runs}
    with Topology(cfg.links, sysctls=sysctls) as topo:
        cfg.log(f"third-party: {' '.join(cfg.links)}, link {topo.backend}")
        if any(ENTRIES[n].http for n in cfg.entries):
            tls = run_certs(topo, cfg.workdir)
        if cfg.bounce_check:
            out["bounce"] = bounce_check(topo, cfg, root_a)
            cfg.log(f"  bounce check: PORT {out['bounce']['port_to']} -> {out['bounce']['reply']}")
        for rep in range(cfg.reps):
            for name in cfg.entries:
                e = ENTRIES[name]
                wl = wls[e.tree]
                # A serves the workload's directory: a file's URL names big/big.bin's file
                roots = (os.path.join(root_a, wl.name) if not wl.tree else root_a, os.path.join(cfg.workdir, "b"))
                r = run_one(cfg, topo, e, wl, roots, digests[e.tree] or "", rep, tls)
                runs.append(r)
                cfg.log(f"  {name:20} #{rep + 1}: {r['mbps']:7.1f} Mbit/s"
                        + (f"  ERROR {r['error']}" if r.get("error") else "")
                        + f"  A rtt {r.get('ss_rtt_ms') or 0:.0f} ms, {r.get('streams_max') or 0} streams"
                        + (f", DRS rtt {(r.get('client_report') or {}).get('source_rtt_ms'):.0f} ms"
                           if (r.get("client_report") or {}).get("source_rtt_ms") else ""))
    return out
