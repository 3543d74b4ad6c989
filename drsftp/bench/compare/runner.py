"""Runs the comparison: for each host profile and path, an emulated link;
for each repetition, direction and tuning (interleaved, :func:`run_order`),
a server and a client in their namespaces, sampled at both ends."""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from ...netem.link import Link, wait_for_port
from ..common import tunings as T
from ..common.figures import client_figures
from ..common.host import PROFILES, commit, environment
from ..common.record import BenchRun
from ..common.sampler import Sampler, counter_delta, parse_counters


@dataclass
class BenchConfig:
    paths: list[T.Path]
    tunings: list[str]
    directions: list[str] = field(default_factory=lambda: ["get"])
    profiles: list[str] = field(default_factory=lambda: ["default"])
    reps: int = 1
    size: int | None = None  # bytes; None: >= 10 s at line rate, at least 128 MiB
    max_time: float = 60.0
    force: bool = False
    workdir: str = "bench-results"
    cc: str | None = None
    interval: float = 0.1
    log: Callable[[str], object] = print
    done: set[tuple[object, ...]] = field(default_factory=set)  # run keys already measured (--resume)
    checkpoint: Callable[[dict[str, Any], list[dict[str, Any]]], object] | None = None  # after each run

    def file_size(self, path: T.Path) -> int:
        if self.size:
            return self.size
        return max(128 << 20, int(path.rate / 8 * 12))


def run_key(r: dict) -> tuple:
    return (r["profile"], r["rate_bps"], r["rtt_s"], r["loss"], r["tuning"], r["direction"], r["rep"])


def make_file(path: str, size: int) -> None:
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            f.write(block[: min(left, len(block))])
            left -= len(block)


def run_bench(cfg: BenchConfig) -> tuple[dict, list[dict]]:
    env = environment(cfg.force, cfg.cc)
    results: list[dict] = []
    os.makedirs(cfg.workdir, exist_ok=True)
    for tuning in cfg.tunings:
        why = T.available(tuning)
        if why:
            cfg.log(f"bench: {tuning} cannot run here: {why}")
    runnable = [t for t in cfg.tunings if not T.available(t)]
    for profile in cfg.profiles:
        sysctls = dict(PROFILES[profile])
        if cfg.cc:
            sysctls["net.ipv4.tcp_congestion_control"] = cfg.cc
        for path in cfg.paths:
            _run_path(cfg, profile, sysctls, path, runnable, results,
                      lambda: cfg.checkpoint and cfg.checkpoint(env, results))
    return env, results


def run_order(tunings: list[str], directions: list[str], reps: int) -> list[tuple[str, str, int]]:
    """(tuning, direction, rep), interleaved: every tuning's first run, then
    every tuning's second...  A shared machine's speed drifts over minutes;
    run tuning after tuning (all of kernel's reps, then all of drs's) and
    the drift lands in the ratios between tunings, interleaved it lands in
    each tuning's min-max spread."""
    return [(t, d, rep) for rep in range(reps) for d in directions for t in tunings]


def _run_path(cfg: BenchConfig, profile: str, sysctls: dict, path: T.Path, tunings: list[str],
              out: list[dict], saved=lambda: None) -> list[dict]:
    """Measure the missing runs of one path into ``out``, calling ``saved``
    after each (a stopped session keeps what it measured)."""
    todo = [run for run in run_order(tunings, cfg.directions, cfg.reps)
            if (profile, path.rate, path.rtt, path.loss, *run) not in cfg.done]
    if not todo:
        cfg.log(f"bench: {profile} profile, {path.label()}: measured already (--resume)")
        return out
    root = os.path.abspath(os.path.join(cfg.workdir, "root"))
    local_dir = os.path.abspath(os.path.join(cfg.workdir, "client"))
    os.makedirs(root, exist_ok=True)
    os.makedirs(local_dir, exist_ok=True)
    size = cfg.file_size(path)
    src = os.path.join(root, "big.bin")
    make_file(src, size)
    cfg.log(f"bench: {profile} profile, {path.label()}, file {size >> 20} MiB")
    with Link(rtt=path.rtt, rate=path.rate, loss=path.loss, queue=path.queue, sysctls=sysctls) as link:
        link_info = {"backend": link.backend, "queue_packets": link.info["spec"]["queue_packets"],
                     "sysctls": link.info["sides"]["server"]["sysctls"]}
        probe = probe_size(cfg, link, path, root, local_dir) if "probe-static" in tunings else None
        for tuning, direction, rep in todo:
            cfg.log(f"  {tuning:14} {direction} #{rep + 1}: running (at most {cfg.max_time:g} s)")
            r = _run_one(cfg, link, tuning, direction, path, rep, root, local_dir, src, probe)
            r.update(profile=profile, link=link_info, probe_size=probe, file_size=size, commit=commit())
            out.append(r)
            saved()
            state = "" if r.get("complete") else " (stopped at --max-time)"
            cfg.log(f"  {tuning:14} {direction} #{rep + 1}: {r['mbps']:8.1f} Mbit/s{state}"
                    + (f"  ERROR {r['error']}" if r.get("error") else ""))
    return out


def probe_size(cfg: BenchConfig, link: Link, path: T.Path, root: str, local_dir: str) -> int:
    """NLANR-style: RTT from ping, bandwidth from a short autotuned transfer's
    best rate; static size = 2 x rate x RTT."""
    r = link.run("client", ["ping", "-q", "-c", "3", "-i", "0.2", link.server_addr], timeout=30)
    try:
        rtt = float(r.stdout.rsplit("=", 1)[1].split("/")[1]) / 1000
    except (IndexError, ValueError):
        rtt = path.rtt
    res = _run_one(cfg, link, "drs", "get", path, 0, root, local_dir, os.path.join(root, "big.bin"), None,
                   tuning_override="kernel", max_time=3.0, quiet=True)
    rates = [s["rate_bps"] for s in res.get("client_timeline", []) if s.get("rate_bps")]
    rate = max(rates[len(rates) // 2:] or [res["mbps"] * 1e6])
    size = max(65536, int(2 * rate / 8 * rtt))
    cfg.log(f"  probe: rtt {rtt * 1000:.1f} ms, rate {rate / 1e6:.1f} Mbit/s -> static {size} bytes")
    return size


def _wait(proc: subprocess.Popen, deadline: float, every: float = 5.0,
          on_tick: Callable[[float], object] | None = None):
    """Reap ``proc`` by ``deadline`` (killed then), calling ``on_tick`` with
    the seconds gone every ``every`` seconds meanwhile."""
    start = next_tick = time.monotonic()
    next_tick += every
    while True:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return rusage
        if on_tick and time.monotonic() >= next_tick:
            on_tick(next_tick - start)
            next_tick += every
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, rusage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            return rusage
        time.sleep(0.02)


def _run_one(cfg, link, tuning, direction, path, rep, root, local_dir, src, probe,
             tuning_override=None, max_time=None, quiet=False) -> dict:
    """One run as a BenchRun record's dictionary."""
    max_time = max_time or cfg.max_time
    out_json = os.path.join(local_dir, f"{tuning}-{direction}-{rep}.json")
    local = os.path.join(local_dir, "download.bin") if direction == "get" else src
    remote = "big.bin" if direction == "get" else f"up-{tuning}-{rep}.bin"
    vconf = T.vsftpd_config(root, link.server_addr, cfg.workdir) if tuning == "kernel-vsftpd" else None
    if tuning_override:  # the probe's own transfer
        url = f"ftp://{T.USER}:{T.PASSWORD}@{link.server_addr}:{T.PORT}/{remote}"
        plan = T.RunPlan(T.drsftp_server(root, link.server_addr, tuning_override, False),
                      T.drsftp_client("get", url, local, out_json, tuning_override, False, max_time), "drsftp")
    else:
        plan = T.plan(tuning, direction=direction, root=root, host=link.server_addr, local=local,
                      remote=remote, out_json=out_json, path=path, force=cfg.force, max_time=max_time,
                      probe_size=probe, vsftpd_conf=vconf)
    for stale in (out_json,):
        if os.path.exists(stale):
            os.unlink(stale)
    result = BenchRun(tuning=tuning, direction=direction, path=remote, rep=rep, rate_bps=path.rate,
                      rtt_s=path.rtt, loss=path.loss, ceiling_mbps=path.ceiling_mbps, bytes=0, seconds=0.0,
                      complete=False)
    server = link.popen("server", plan.server, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(link, "server", T.PORT, timeout=15)
        srv_ps = psutil.Process(server.pid)
        cpu0 = srv_ps.cpu_times()
        ns = lambda side: link.command(side, [])  # noqa: E731
        counters0 = {side: _counters(link, side) for side in ("server", "client")}
        with Sampler(ns("server"), T.PORT, cfg.interval) as s_srv, Sampler(ns("client"), T.PORT, cfg.interval) as s_cli:
            client = link.popen("client", plan.client, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            sending = s_srv if direction == "get" else s_cli

            def tick(elapsed: float) -> None:
                moved = sending.moved()
                cfg.log(f"  {tuning:14} {direction} #{rep + 1}: {elapsed:3.0f} s, {moved / 2**20:.0f} MiB"
                        f" ({moved * 8 / elapsed / 1e6:.1f} Mbit/s so far)")

            rusage = _wait(client, time.monotonic() + max_time + 90, on_tick=None if quiet else tick)
            stdout, stderr = client.stdout.read(), client.stderr.read()
            client.stdout.close()
            client.stderr.close()
        cpu1 = srv_ps.cpu_times()
        result.tcp_counters = {side: counter_delta(counters0[side], _counters(link, side))
                               for side in ("server", "client")}
        # vsftpd serves each session from a forked process this one does not
        # follow: its CPU is not measured (a 0 would read as free)
        result.server_cpu_s = (None if tuning == "kernel-vsftpd" else
                               round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 3))
        result.client_cpu_s = round(rusage.ru_utime + rusage.ru_stime, 3)
        result.update(client_figures(plan.kind, client.returncode, stdout, stderr, out_json, direction))
        sender, receiver = (s_srv, s_cli) if direction == "get" else (s_cli, s_srv)
        rtts = [s["rtt_ms"] for _, socks in sender.samples for s in socks if s.get("rtt_ms")]
        result.update(
            peak_rcvbuf=receiver.peak("sk_rb"), peak_sndbuf=sender.peak("sk_tb"),
            peak_rcv_used=receiver.peak("sk_r"), peak_snd_used=sender.peak("sk_w"),
            retransmits=sender.peak("retrans") or 0,
            rtt_min_ms=min(rtts) if rtts else None, rtt_max_ms=max(rtts) if rtts else None,
            rtt_avg_ms=round(statistics.fmean(rtts), 3) if rtts else None,
            timeline=sender.timeline(), receiver_timeline=receiver.timeline(),
        )
    except Exception as exc:  # one failed run must not lose the others
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        err = server.stderr.read().decode(errors="replace").strip() if server.stderr else ""
        if server.stderr:
            server.stderr.close()
        if result.error and err:
            result.error += f" (server: {err.splitlines()[-1]})"
        if direction == "get" and os.path.exists(local):
            os.unlink(local)
        elif direction == "put":
            up = os.path.join(root, "pub" if tuning == "kernel-vsftpd" else "", remote)
            if os.path.exists(up):
                os.unlink(up)
    return result.to_dict()


def _counters(link: Link, side: str) -> dict[str, int]:
    r = link.run(side, ["cat", "/proc/net/netstat", "/proc/net/snmp"], timeout=10)
    return parse_counters(r.stdout)


