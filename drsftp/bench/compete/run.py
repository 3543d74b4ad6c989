"""`drsftp bench compete SPEC`: several flows over one emulated bottleneck.

One link (drsftp netem); one server for each kind of server the flows
need (flows of one tuning share it, each iperf3 flow has its own); the
clients start at their delays, each capped in time; `ss -tmip` in both
namespaces, every ``interval`` seconds, gives each flow's bytes and socket
memory (a flow's sockets: those of its client's process, its data
connections only).  Everything started is ended by PID, and the link's
context manager removes the namespaces, on failure and Ctrl-C too."""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from ...netem.errors import NetemError
from ...netem.link import Link, stop_process, wait_for_port
from ...netem.spec import LinkSpec
from ..common import tunings as T
from ..common.figures import client_figures
from ..common.host import PROFILES, environment
from ..common.peers import GRIDFTP_PORT, hosts_wrap, server_argv
from ..common.sampler import parse_ss
from ..compare.runner import BenchConfig, probe_size
from .link import cpu_mark, link_health
from .spec import Flow, iperf3_window
from .stats import flow_figures, summary

IPERF3_PORT = 5201  # the first iperf3 server's; one port per iperf3 flow
IPERF3_CPORT = 20000  # its data connection's client port (below the ephemeral range): how its socket is told
GRACE = 30.0  # seconds a client may run past its own --max-time (ABOR, the final reply) before it is killed
SOURCE = "big.bin"


@dataclass
class CompeteConfig:
    spec: str
    flows: list[Flow]
    path: T.Path
    duration: float | None = 30.0  # seconds each flow runs; None: each moves ``size`` bytes
    size: int | None = None
    max_time: float = 60.0  # a flow's cap where it moves ``size`` bytes
    profile: str = "default"
    force: bool = False
    cc: str | None = None
    workdir: str = "bench-results"
    interval: float = 0.25
    log: Callable[[str], object] = print

    @property
    def cap(self) -> float:
        """Seconds each flow may run (the client's own --max-time)."""
        return self.duration if self.duration is not None else self.max_time

    def file_size(self) -> int:
        """The file every FTP flow reads: ``size``, or more than the link
        can carry in a flow's time (no flow ends before its time is up)."""
        if self.size:
            return self.size
        return int(self.path.rate / 8 * (self.cap + 5)) + (16 << 20)

    def sysctls(self) -> dict[str, str]:
        out = dict(PROFILES[self.profile])
        if self.cc:
            out["net.ipv4.tcp_congestion_control"] = self.cc
        return out

    def queue_packets(self) -> int:
        return LinkSpec(rtt=self.path.rtt, rate=self.path.rate, queue=self.path.queue).queue_packets


@dataclass
class Watch:
    """One flow while it runs: its process, which of its sockets carry
    data, and its samples (bytes so far summed over every data socket it
    has had, memory of those open)."""

    flow: Flow
    client: list[str]
    kind: str  # client_figures' kind: "drsftp" | "stock" | "curl" | "iperf3"
    is_data: Callable[[dict], bool]
    out_json: str
    proc: subprocess.Popen | None = None
    start_s: float | None = None
    end_s: float | None = None
    killed: bool = False
    samples: list[dict] = field(default_factory=list)
    _bytes: dict[tuple[str, str], int] = field(default_factory=dict)
    _retrans: dict[tuple[str, str], int] = field(default_factory=dict)
    files: list[IO[bytes]] = field(default_factory=list)  # its stdout and stderr

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def deadline(self, cfg: CompeteConfig) -> float:
        """When it is killed: at its cap, plus GRACE where the client stops itself there."""
        assert self.start_s is not None
        # iperf3 -n and globus-url-copy have no cap of their own
        stops_itself = self.kind != "gridftp" and (cfg.duration is not None or self.kind != "iperf3")
        return self.start_s + cfg.cap + (GRACE if stops_itself else 0.0)

    def add(self, t: float, mine: list[dict], peers: list[dict | None]) -> None:
        for s in mine:
            self._bytes[(s["local"], s["peer"])] = s.get("bytes_received") or 0
        senders = [p for p in peers if p]
        for s in senders:
            self._retrans[(s["local"], s["peer"])] = s.get("retrans") or 0
        rtts = [s["rtt_ms"] for s in senders if s.get("rtt_ms")]

        def sent(key: str, per_segment: bool = False) -> int | None:
            """A sender-side figure summed over the flow's sockets (cwnd and
            unacked are in segments: times each socket's MSS)."""
            if not senders:
                return None
            return sum((s.get(key) or 0) * ((s.get("mss") or 0) if per_segment else 1) for s in senders)

        self.samples.append({
            "t": round(t, 3), "bytes": sum(self._bytes.values()), "sockets": len(mine),
            "rcvbuf": sum(s.get("sk_rb") or 0 for s in mine), "rcv_used": sum(s.get("sk_r") or 0 for s in mine),
            "sndbuf": sent("sk_tb"), "snd_used": sent("sk_w"),
            "rtt_ms": round(statistics.fmean(rtts), 3) if rtts else None,
            "retrans": sum(self._retrans.values()),
            # the receiver's advertised window as its sender last saw it (tcpi_snd_wnd)
            "snd_wnd": sent("snd_wnd") if any("snd_wnd" in s for s in senders) else None,
            "cwnd": sent("cwnd", per_segment=True),
            "inflight": sent("unacked", per_segment=True),
        })


def _port_of(address: str) -> str:
    return address.rsplit(":", 1)[-1]


class CompeteSampler:
    """`ss -tmip` in the client's namespace and `ss -tmi` in the server's
    every ``interval`` seconds (a thread, bounded in samples): each flow's
    sockets by its client's PID, their server ends by the address pair."""

    def __init__(self, link: Link, watches: list[Watch], t0: float, interval: float,
                 max_samples: int = 100_000) -> None:
        self.client_cmd = link.command("client", ["ss", "-tmiHnp", "state", "established"])
        self.server_cmd = link.command("server", ["ss", "-tmiHn", "state", "established"])
        self.watches, self.t0, self.interval, self.max_samples = watches, t0, interval, max_samples
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CompeteSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)

    def _ss(self, cmd: list[str]) -> list[dict]:
        try:
            return parse_ss(subprocess.run(cmd, capture_output=True, text=True, timeout=5).stdout)
        except (subprocess.TimeoutExpired, OSError):
            return []

    def _run(self) -> None:
        while not self._stop.is_set() and self.count < self.max_samples:
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        t = time.monotonic() - self.t0
        client = self._ss(self.client_cmd)
        server = {(s["local"], s["peer"]): s for s in self._ss(self.server_cmd)}
        for w in self.watches:
            pid = w.pid
            mine = [s for s in client if pid is not None and pid in s.get("pids", ()) and w.is_data(s)]
            if mine and w.end_s is None:
                w.add(t, mine, [server.get((s["peer"], s["local"])) for s in mine])
        self.count += 1


def run_compete(cfg: CompeteConfig) -> dict[str, Any]:
    """The competition's results (the compete JSON's content)."""
    work = os.path.abspath(os.path.join(cfg.workdir, "compete-work"))
    shutil.rmtree(work, ignore_errors=True)
    root, dest = os.path.join(work, "root"), os.path.join(work, "client")
    os.makedirs(root)
    os.makedirs(dest)
    try:
        _check_disk(cfg, dest)
        with open(os.path.join(root, SOURCE), "wb") as f:
            f.truncate(cfg.file_size())  # sparse: the flows read it, nothing checks its bytes
        env = environment(cfg.force, cfg.cc)
        with Link(rtt=cfg.path.rtt, rate=cfg.path.rate, loss=cfg.path.loss, queue=cfg.path.queue,
                  sysctls=cfg.sysctls()) as link:
            link_info = {"rate_bps": cfg.path.rate, "rtt_s": cfg.path.rtt, "loss": cfg.path.loss,
                         "queue_packets": link.info["spec"]["queue_packets"], "backend": link.backend,
                         "ceiling_mbps": cfg.path.ceiling_mbps, "bdp": cfg.path.bdp, "profile": cfg.profile,
                         "sysctls": link.info["sides"]["server"]["sysctls"]}
            probe = _probe_size(cfg, link, root, dest)
            start = cpu_mark(link.owner_pid, link.backend, time.monotonic())
            watches = _compete(cfg, link, root, dest, work, probe)
            end = cpu_mark(link.owner_pid, link.backend, time.monotonic())
        # the counters as the owner left them when the link came down (every segment counted)
        link_info["health"] = link_health(link.final_stats or {}, start, end, os.cpu_count() or 1)
        return results(cfg, env, link_info, watches, probe)  # (reads the clients' own reports in WORK)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_disk(cfg: CompeteConfig, dest: str) -> None:
    """The clients write what they receive: at most the link's ceiling for
    the competition's length."""
    longest = max(f.delay for f in cfg.flows) + cfg.cap
    need = cfg.path.ceiling_mbps * 1e6 / 8 * longest
    free = shutil.disk_usage(dest).free
    if free < need * 1.1:
        raise NetemError(f"the clients may write {need / 2**30:.1f} GiB into {cfg.workdir} and only "
                         f"{free / 2**30:.1f} GiB are free there; use a shorter --duration or another --out")


def _probe_size(cfg: CompeteConfig, link: Link, root: str, dest: str) -> int | None:
    """probe-static's size, probed on the idle link before the flows start."""
    if not any(f.kind == "probe-static" for f in cfg.flows):
        return None
    bench = BenchConfig(paths=[cfg.path], tunings=[], force=cfg.force, workdir=os.path.dirname(root), log=cfg.log)
    return probe_size(bench, link, cfg.path, root, dest)


def _compete(cfg: CompeteConfig, link: Link, root: str, dest: str, work: str, probe: int | None) -> list[Watch]:
    servers: dict[tuple[str, ...], int] = {}  # a server's command (its port left out) -> its port
    plans: list[tuple[list[str], int, Watch]] = []
    for flow in cfg.flows:
        server, watch, port = _launch(cfg, link, flow, root, dest, work, probe, servers)
        plans.append((server, port, watch))
    procs = []
    logs: list[IO[bytes]] = []
    try:
        for port, server in {port: server for server, port, _ in plans}.items():
            log = open(os.path.join(work, f"server-{port}.log"), "wb")  # noqa: SIM115 (closed below)
            logs.append(log)
            procs.append(link.popen("server", server, stdout=subprocess.DEVNULL, stderr=log))
            wait_for_port(link, "server", port, timeout=20)
        watches = [w for _, _, w in plans]
        t0 = time.monotonic()
        with CompeteSampler(link, watches, t0, cfg.interval):
            _schedule(cfg, link, watches, t0, work)
    finally:
        for _, _, watch in plans:
            _end_client(watch)
        for proc in procs:
            stop_process(proc)
        for server_log in logs:
            server_log.close()
    return watches


def _launch(cfg: CompeteConfig, link: Link, flow: Flow, root: str, dest: str, work: str, probe: int | None,
            servers: dict[tuple[str, ...], int]) -> tuple[list[str], Watch, int]:
    """The server command a flow needs (on its port) and its Watch."""
    out_json = os.path.join(work, f"flow-{flow.index}.json")
    host = link.server_addr
    if flow.family == "gridftp":  # (one server for every such flow, as field.py runs it)
        n = int(flow.streams or 1)
        guc = ["globus-url-copy", "-p", str(n), "-tcp-bs", str(max(64 << 10, 2 * cfg.path.bdp // n)),
               f"ftp://{host}:{GRIDFTP_PORT}{os.path.join(root, SOURCE)}",
               "file://" + os.path.join(dest, f"flow-{flow.index}.bin")]
        watch = Watch(flow, hosts_wrap(link, "client", guc, work), "gridftp",
                      lambda s: _port_of(s["peer"]) != str(GRIDFTP_PORT), out_json)
        server, port = server_argv("gridftp", link, root, work)
        return server, watch, port
    if flow.family == "iperf3":
        port = IPERF3_PORT + flow.index
        cport = IPERF3_CPORT + flow.index
        length = ["-t", str(max(1, math.ceil(cfg.duration)))] if cfg.duration else ["-n", str(cfg.file_size())]
        size = iperf3_window(flow.kind)
        window = ["-w", str(size)] if size else []  # the server's socket takes it too (-R)
        client = ["iperf3", "-c", host, "-p", str(port), "-R", "--cport", str(cport), "-J", *window, *length]
        watch = Watch(flow, client, "iperf3", lambda s: _port_of(s["local"]) == str(cport), out_json)
        return ["iperf3", "-s", "-1", "-B", host, "-p", str(port)], watch, port

    def plan(port: int) -> T.RunPlan:
        return _ftp_plan(cfg, flow, root, host, os.path.join(dest, f"flow-{flow.index}.bin"), out_json, probe,
                         port, work)

    key = tuple(plan(0).server)
    port = servers.setdefault(key, T.PORT + len(servers))
    p = plan(port)
    watch = Watch(flow, p.client, p.kind, lambda s: _port_of(s["peer"]) != str(port), out_json)
    return p.server, watch, port


def _ftp_plan(cfg: CompeteConfig, flow: Flow, root: str, host: str, local: str, out_json: str,
              probe: int | None, port: int, work: str) -> T.RunPlan:
    """A flow's FTP server and client: the bench's tuning columns
    (tunings.plan), a drsftp tuning with its argument, or drsftp get -P."""
    p = _ftp_columns(cfg, flow, root, host, local, out_json, probe, port, work)
    if p.kind == "drsftp":  # one server for many flows: no per-address limit of sessions
        p.server += ["--max-connections-per-ip", "0"]
    return p


def _ftp_columns(cfg: CompeteConfig, flow: Flow, root: str, host: str, local: str, out_json: str,
                 probe: int | None, port: int, work: str) -> T.RunPlan:
    if flow.family == "parallel" or flow.arg is not None:
        tuning = "drs" if flow.family == "parallel" else flow.kind
        url = f"ftp://{T.USER}:{T.PASSWORD}@{host}:{port}/{SOURCE}"
        client = T.drsftp_client("get", url, local, out_json, tuning, cfg.force, cfg.cap)
        if flow.streams:
            client += ["-P", flow.streams]
        return T.RunPlan(T.drsftp_server(root, host, tuning, cfg.force, port), client, "drsftp")
    conf = None
    if flow.kind == "kernel-vsftpd":  # (port 0: the server's key, no file yet)
        conf = T.vsftpd_config(root, host, work, port) if port else "vsftpd.conf"
    return T.plan(flow.kind, direction="get", root=root, host=host, local=local, remote=SOURCE, out_json=out_json,
                  path=cfg.path, force=cfg.force, max_time=cfg.cap, probe_size=probe, vsftpd_conf=conf, port=port)


def _schedule(cfg: CompeteConfig, link: Link, watches: list[Watch], t0: float, work: str) -> None:
    """Start each flow at its delay; end it at its cap (plus GRACE where the
    client stops itself); return once every flow has ended."""
    pending = sorted(watches, key=lambda w: w.flow.delay)
    running: list[Watch] = []
    while pending or running:
        now = time.monotonic() - t0
        while pending and pending[0].flow.delay <= now:
            w = pending.pop(0)
            out = open(os.path.join(work, f"flow-{w.flow.index}.out"), "wb")  # noqa: SIM115 (closed by _end_client)
            err = open(os.path.join(work, f"flow-{w.flow.index}.err"), "wb")  # noqa: SIM115
            w.files = [out, err]
            w.proc = link.popen("client", w.client, stdout=out, stderr=err)
            w.start_s = round(now, 3)
            cfg.log(f"  {w.flow.label:18} started at {now:5.1f} s")
            running.append(w)
        for w in list(running):
            assert w.proc is not None and w.start_s is not None
            if w.proc.poll() is not None:
                w.end_s = round(time.monotonic() - t0, 3)
                running.remove(w)
                cfg.log(f"  {w.flow.label:18} ended at {w.end_s:5.1f} s")
            elif now > w.deadline(cfg):
                w.proc.kill()
                w.proc.wait()
                w.end_s, w.killed = round(time.monotonic() - t0, 3), True
                running.remove(w)
        time.sleep(0.02)


def _end_client(w: Watch) -> None:
    """Kill a client still running (an error or Ctrl-C stopped the schedule) and close its files."""
    if w.proc is not None and w.proc.poll() is None:
        w.proc.kill()
        w.proc.wait()
    for f in w.files:
        f.close()


def _figures(w: Watch) -> dict[str, Any]:
    """What the flow's client reported itself."""
    def read(suffix: str) -> bytes:
        try:
            with open(w.out_json[: -len(".json")] + suffix, "rb") as f:
                return f.read()
        except OSError:
            return b""

    code = w.proc.returncode if w.proc else None
    if w.kind == "gridftp":
        return {}  # no report of its own: its sockets' bytes
    if w.kind == "iperf3":
        try:
            end = json.loads(read(".out") or b"{}")["end"]["sum_received"]
            return {"bytes": int(end["bytes"]), "seconds": float(end["seconds"]),
                    "mbps": float(end["bits_per_second"]) / 1e6}
        except (ValueError, KeyError, TypeError):
            return {"error": f"iperf3 exit {code}: {read('.err').decode(errors='replace').strip()[-200:]}"}
    return client_figures(w.kind, code, read(".out"), read(".err"), w.out_json, "get")


def results(cfg: CompeteConfig, env: dict, link_info: dict, watches: list[Watch], probe: int | None) -> dict:
    end = max((w.end_s for w in watches if w.end_s is not None), default=0.0)
    flows = []
    for w in watches:
        own = _figures(w)
        # globus-url-copy has no time limit of its own: with --duration, its
        # cap is its end (a failure before it: no bytes at all)
        cap_ends = w.kind == "gridftp" and cfg.duration is not None
        failed = "killed at its cap" if w.killed and not cap_ends else None
        if w.kind == "gridftp" and not w.killed and w.proc is not None and w.proc.returncode:
            failed = f"globus-url-copy exit {w.proc.returncode}"
        rec: dict[str, Any] = {
            "index": w.flow.index, "kind": w.flow.kind, "label": w.flow.label, "delay_s": w.flow.delay,
            "start_s": w.start_s, "end_s": w.end_s, "exit": w.proc.returncode if w.proc else None,
            "killed": w.killed, "error": own.get("error") or failed,
            "client_bytes": own.get("bytes"), "client_mbps": own.get("mbps"), "samples": w.samples,
        }
        if own.get("stream_changes") is not None:  # -P auto (docs/PARALLEL.md, "JSON")
            rec.update(streams_start=own.get("streams_start"), stream_changes=own["stream_changes"])
        rec.update(flow_figures(rec, end))
        flows.append(rec)
    ok = [f for f in flows if not f["error"]]
    return {"compete": 1, "spec": cfg.spec, "environment": env, "link": link_info,
            "duration_s": cfg.duration, "file_size": cfg.file_size(), "max_time_s": cfg.cap,
            "interval_s": cfg.interval, "probe_size": probe, "flows": flows,
            "summary": summary(ok, cfg.path.ceiling_mbps)}
