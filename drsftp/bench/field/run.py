"""drsftp beside the field's tools on one emulated link: parallel streams
and datasets (docs/BENCHMARKS.md, "Against the field" and "HTTPS").

Every entry is a real program: drsftp's client against `drsftp serve`,
GridFTP's `globus-url-copy` against `globus-gridftp-server`, lftp against
`drsftp serve`, davix-get against `drsftp serve --http-port` and XRootD.
Entries run interleaved (all entries' first repetition, then the
second...) on the same link, so the ratios are measured side by side.
Throughput is the workload's bytes over the client's wall time, start-up
and log-in included, the same clock for every program; every file is
compared with its source byte for byte after the clock stops.  Both ends
are sampled with `ss` for the memory all data sockets hold.
"""

from __future__ import annotations

import contextlib
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path as FsPath

from ...netem.link import Link, stop_process, wait_for_port
from ..common.datasets import MiB, Workload, make_tree, workload
from ..common.peers import DRS_PORT, DRSFTP, GRIDFTP_PORT, PASSWORD, USER, finish_client, hosts_wrap, server_argv
from ..common.sampler import Sampler
from ..common.tunings import Path
from ..common.xrootd import TLSFiles
from .certs import make_certs
from .web import davix_get, https_get, https_tree


@dataclass(frozen=True)
class FieldEntry:
    """One column: who serves, and the client's command for a workload."""

    name: str
    server: str  # of common.peers.SERVERS: "drsftp" | "drsftp-https" | "gridftp" | "xrootd"
    client: Callable[[Ctx], list[str]]
    trees: bool = True  # can move a directory
    files: bool = True  # can move one file
    description: str = ""


@dataclass
class Ctx:
    host: str
    src: str  # absolute path of the workload on the server side (file or directory)
    dest: str  # absolute local path (file or directory)
    workload: Workload
    path: Path
    json_out: str
    tls: TLSFiles | None = None  # the run's CA and certificate (HTTPS columns)

    @property
    def quarter_2bdp(self) -> int:
        return max(64 << 10, 2 * self.path.bdp // 4)


def _drs_url(ctx: Ctx, tail: str = "") -> str:
    rel = os.path.basename(ctx.src.rstrip("/"))
    return f"ftp://{USER}:{PASSWORD}@{ctx.host}:{DRS_PORT}/{rel}{tail}"


def _gsi_url(ctx: Ctx) -> str:
    return f"ftp://{ctx.host}:{GRIDFTP_PORT}{ctx.src}" + ("/" if ctx.workload.tree else "")


def _drsftp_get(streams: str, *flags: str) -> Callable[[Ctx], list[str]]:
    def cmd(ctx: Ctx) -> list[str]:
        base = [*DRSFTP, "get", "-q", "--progress", "never", "--json", ctx.json_out, *flags]
        if streams != "1":
            base += ["-P", streams]
        return [*base, _drs_url(ctx), ctx.dest]
    return cmd


def _drsftp_tree(sessions: str, *flags: str) -> Callable[[Ctx], list[str]]:
    def cmd(ctx: Ctx) -> list[str]:
        return [*DRSFTP, "get", "-q", "--progress", "never", "--json", ctx.json_out, "-r", "-c", sessions,
                *flags, _drs_url(ctx, "/"), ctx.dest + "/"]
    return cmd


def _guc(*flags: str, tcp_bs: Callable[[Ctx], str] | None = None) -> Callable[[Ctx], list[str]]:
    def cmd(ctx: Ctx) -> list[str]:
        extra = ["-tcp-bs", tcp_bs(ctx)] if tcp_bs else []
        tree = ["-r", "-cd"] if ctx.workload.tree else []
        dest = "file://" + ctx.dest + ("/" if ctx.workload.tree else "")
        return ["globus-url-copy", *tree, *flags, *extra, _gsi_url(ctx), dest]
    return cmd


def _lftp(script: Callable[[Ctx], str]) -> Callable[[Ctx], list[str]]:
    def cmd(ctx: Ctx) -> list[str]:
        setup = "set cmd:fail-exit yes; set net:max-retries 2; set xfer:clobber on"
        return ["lftp", "-c", f"{setup}; open -u {USER},{PASSWORD} ftp://{ctx.host}:{DRS_PORT}; {script(ctx)}"]
    return cmd


def _rclone(*flags: str) -> Callable[[Ctx], list[str]]:
    """rclone's FTP backend against drsftp serve, an on-the-fly remote (no
    config file).  One file goes over one connection: rclone 1.60's
    multi-thread download ends every range but the last with the server's
    426 (the data connection closed early), which it takes as a failure
    from vsftpd and drsftp serve alike."""
    def cmd(ctx: Ctx) -> list[str]:
        secret = subprocess.run(["rclone", "obscure", PASSWORD], capture_output=True, text=True, timeout=30,
                                check=True).stdout.strip()
        rel = os.path.basename(ctx.src.rstrip("/"))
        remote = f":ftp,host={ctx.host},port={DRS_PORT},user={USER},pass={secret}:{rel}"
        verb = "copy" if ctx.workload.tree else "copyto"
        return ["rclone", "--config", "", "--retries", "1", verb, *flags, remote, ctx.dest]
    return cmd


ENTRIES: dict[str, FieldEntry] = {e.name: e for e in [
    FieldEntry("drsftp", "drsftp", _drsftp_get("1"), trees=False, description="drsftp get, one DRS stream"),
    *[FieldEntry(f"drsftp-P{n}", "drsftp", _drsftp_get(str(n)), trees=False,
            description=f"drsftp get -P {n}: {n} DRS streams") for n in (2, 4, 8)],
    FieldEntry("drsftp-kernel", "drsftp", _drsftp_get("1", "--tuning", "kernel"), trees=False,
          description="drsftp get --tuning kernel: one stream, kernel autotuning at the client"),
    FieldEntry("drsftp-Pauto", "drsftp", _drsftp_get("auto"), trees=False,
          description="drsftp get -P auto: streams chosen while the transfer runs"),
    FieldEntry("drsftp-r", "drsftp", _drsftp_tree("auto"), files=False,
          description="drsftp get -r -c auto: sessions chosen while the job runs, pipelined commands"),
    *[FieldEntry(f"drsftp-r-c{n}", "drsftp", _drsftp_tree(str(n)), files=False, description=f"drsftp get -r -c {n}")
      for n in (8, 16, 32)],
    *[FieldEntry(f"drsftp-r-c{n}-P{m}", "drsftp", _drsftp_tree(str(n), "-P", str(m)), files=False,
            description=f"drsftp get -r -c {n} -P {m}: {m} cached streams per session") for n in (4, 8, 16)
      for m in (2, 4)],
    FieldEntry("drsftp-r-stream", "drsftp", _drsftp_tree("auto", "--stream-mode"), files=False,
          description="drsftp get -r --stream-mode: a data connection per file"),
    FieldEntry("gridftp", "gridftp", _guc(), description="globus-url-copy, defaults (one stream, autotuning)"),
    FieldEntry("gridftp-p4", "gridftp", _guc("-p", "4", tcp_bs=lambda c: str(c.quarter_2bdp)),
          description="globus-url-copy -p 4 -tcp-bs 2xBDP/4"),
    FieldEntry("gridftp-p4-16M", "gridftp", _guc("-p", "4", tcp_bs=lambda c: "16M"),
          description="globus-url-copy -p 4 -tcp-bs 16M (hand-tuned)"),
    FieldEntry("gridftp-fast", "gridftp", _guc("-fast", "-pp", "-cc", "8", tcp_bs=lambda c: "16M"), files=False,
          description="globus-url-copy -r -fast -pp -cc 8 -tcp-bs 16M"),
    FieldEntry("lftp-pget4", "drsftp", _lftp(lambda c: f"pget -n 4 {os.path.basename(c.src)} -o {c.dest}"),
          trees=False, description="lftp pget -n 4 against drsftp serve"),
    FieldEntry("lftp-mirror8", "drsftp", _lftp(lambda c: f"mirror --parallel=8 {os.path.basename(c.src)} {c.dest}"),
          files=False, description="lftp mirror --parallel=8 against drsftp serve"),
    FieldEntry("rclone", "drsftp", _rclone("--multi-thread-streams", "0"), trees=False,
          description="rclone copyto against drsftp serve (one connection)"),
    FieldEntry("rclone-t8", "drsftp", _rclone("--transfers", "8", "--checkers", "8"), files=False,
          description="rclone copy --transfers 8 against drsftp serve"),
    FieldEntry("https-Pauto", "drsftp-https", https_get("auto"), trees=False,
          description="drsftp get -P auto https:// from drsftp serve --http-port: connections chosen as it runs"),
    FieldEntry("https-P4", "drsftp-https", https_get("4"), trees=False,
          description="drsftp get -P 4 https://: ranged GETs on 4 connections"),
    FieldEntry("https-r", "drsftp-https", https_tree("auto"), files=False,
          description="drsftp get -r -c auto https://: a tree over PROPFIND"),
    *[FieldEntry(f"https-r-c{n}", "drsftp-https", https_tree(str(n)), files=False,
            description=f"drsftp get -r -c {n} https://") for n in (8, 16)],
    FieldEntry("davix", "drsftp-https", davix_get("drsftp-https"), trees=False,
          description="davix-get (gfal2's and FTS3's HTTP client) from drsftp serve's HTTPS"),
    FieldEntry("davix-xrootd", "xrootd", davix_get("xrootd"), trees=False,
          description="davix-get from XRootD's HTTP interface (XrdHttp over TLS), the same root"),
]}


TLS_SERVERS = ("drsftp-https", "xrootd")  # serve the run's certificate (certs.py)
HANDSHAKE = 16 << 10  # more than a TLS handshake and a HEAD's answer bring in
# what a drsftp client's --json tells of its connections, kept with each run
CLIENT_KEYS = ("streams", "streams_max", "sessions", "connections", "requests")
TAIL = 0.05  # the share of the bytes whose time tail_s is
CLIENT_PROGRAMS = {"lftp": "lftp", "rclone": "rclone", "davix": "davix-get"}  # an entry's name prefix -> its client


def entry_names(spec: str) -> list[str]:
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in ENTRIES]
    if unknown:
        raise ValueError(f"unknown entries {', '.join(unknown)}; known: {', '.join(ENTRIES)}")
    return names


@dataclass
class FieldConfig:
    path: Path
    entries: list[str]
    workloads: list[str] = field(default_factory=lambda: ["big"])
    reps: int = 1
    scale: float = 1.0
    cc: str | None = None  # congestion control for the namespaces (TCP_CONGESTION)
    max_time: float = 120.0
    workdir: str = "/var/tmp/drsftp-field"
    log: Callable[[str], None] = print


def missing_programs(entries: list[str]) -> list[str]:
    need = set()
    for name in entries:
        e = ENTRIES[name]
        if e.server == "gridftp":
            need |= {"globus-url-copy", "globus-gridftp-server"}
        tool = CLIENT_PROGRAMS.get(name.split("-")[0])
        if tool:
            need.add(tool)
        if e.server == "xrootd":
            need.add("xrootd")
    return sorted(p for p in need if not (shutil.which(p) or os.path.exists(f"/usr/sbin/{p}")))


def _sum_peak(sampler: Sampler, key: str) -> int:
    """The most all data sockets held at once (summed per sample)."""
    return max((sum(s.get(key) or 0 for s in socks) for _, socks in sampler.samples), default=0)


def _check(src: str, dest: str, wl: Workload) -> str | None:
    """None if every file arrived whole and byte-identical to the source
    (compared after the clock stopped)."""
    for rel, size in wl.files:
        p = os.path.join(dest, rel) if wl.tree else dest
        try:
            got = os.path.getsize(p)
        except OSError:
            return f"{rel} missing"
        if got != size:
            return f"{rel}: {got} of {size} bytes"
        if not filecmp.cmp(os.path.join(src, rel) if wl.tree else src, p, shallow=False):
            return f"{rel} differs from the source"
    return None


def _tail_seconds(report: dict) -> float | None:
    """How long a drsftp client's last TAIL of the bytes took, from its
    --json timeline (the end of a transfer: stragglers, stolen ranges)."""
    line, total, seconds = report.get("timeline"), report.get("bytes"), report.get("seconds")
    if not isinstance(line, list) or not total or seconds is None:
        return None
    at = next((p["t"] for p in line if isinstance(p, dict) and (p.get("bytes") or 0) >= (1 - TAIL) * total), None)
    return None if at is None else round(max(0.0, seconds - at), 3)


def run_one(cfg: FieldConfig, link: Link, entry: FieldEntry, wl: Workload, src: str, rep: int,
            tls: TLSFiles | None = None) -> dict:
    root = os.path.dirname(src.rstrip("/")) if not wl.tree else os.path.dirname(src)
    dest = os.path.join(cfg.workdir, "dest", f"{entry.name}-{wl.name}")
    shutil.rmtree(dest, ignore_errors=True)
    if os.path.exists(dest):
        os.unlink(dest)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if wl.tree:
        os.makedirs(dest, exist_ok=True)
    json_out = os.path.join(cfg.workdir, f"{entry.name}-{wl.name}-{rep}.json")
    ctx = Ctx(link.server_addr, src, dest, wl, cfg.path, json_out, tls)
    result = {"entry": entry.name, "workload": wl.name, "rep": rep, "bytes": wl.bytes, "files": len(wl.files),
              "rate_bps": cfg.path.rate, "rtt_s": cfg.path.rtt, "loss": cfg.path.loss, "cc": cfg.cc,
              "ceiling_mbps": cfg.path.ceiling_mbps, "bdp": cfg.path.bdp, "mbps": 0.0, "complete": False}
    s_argv, port = server_argv(entry.server, link, root, cfg.workdir, tls)
    # the server's log goes to a file: drsftp serve writes a line per
    # transfer, and a pipe nobody reads would fill and stall it
    server_log = open(os.path.join(cfg.workdir, f"server-{entry.server}.log"), "wb")  # noqa: SIM115
    server = link.popen("server", s_argv, stdout=subprocess.DEVNULL, stderr=server_log)
    try:
        wait_for_port(link, "server", port, timeout=15)
        argv = entry.client(ctx)
        if entry.server == "gridftp" or argv[0] == "globus-url-copy":
            argv = hosts_wrap(link, "client", argv, cfg.workdir)
        # FTP's data sockets are all but the control port's; HTTP's requests
        # and data share the server's port: every socket is sampled
        skip = 0 if entry.server in TLS_SERVERS else port
        with Sampler(link.command("server", []), skip) as s_srv, Sampler(link.command("client", []), skip) as s_cli:
            t0 = time.monotonic()
            started = t0 - s_cli.t0  # the client's start on the sampler's clock
            client = link.popen("client", argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out, err = finish_client(client, cfg.max_time, result)
            seconds = time.monotonic() - t0
        problem = _check(src, dest, wl)
        if client.returncode != 0 and "error" not in result:
            tail = (err or out).decode(errors="replace").strip().splitlines()[-1:] or [""]
            result["error"] = f"exit {client.returncode}: {tail[0][:200]}"
        elif problem and "error" not in result:
            result["error"] = problem
        # the data phase: from the first payload byte the client's sockets
        # saw (sampled every 0.1 s) to the client's exit, the same clock for
        # every program (no interpreter start, log-in or command round trips;
        # over HTTPS, past the few KiB of the handshake and the HEAD's answer)
        floor = HANDSHAKE if entry.server in TLS_SERVERS else 0
        first = next((t for t, socks in s_cli.samples if sum(x.get("bytes_received") or 0 for x in socks) > floor),
                     None)
        data_s = seconds - max(0.0, first - started - s_cli.interval / 2) if first is not None else None
        ok = "error" not in result
        result.update(seconds=round(seconds, 3), complete=ok,
                      mbps=round(wl.bytes * 8 / seconds / 1e6, 1) if ok else 0.0,
                      data_seconds=round(data_s, 3) if data_s else None,
                      data_mbps=round(wl.bytes * 8 / data_s / 1e6, 1) if ok and data_s else None,
                      peak_snd_used=_sum_peak(s_srv, "sk_w"), peak_rcv_used=_sum_peak(s_cli, "sk_r"),
                      peak_snd_buf=_sum_peak(s_srv, "sk_tb"), peak_rcv_buf=_sum_peak(s_cli, "sk_rb"),
                      streams_max=max((len(socks) for _, socks in s_cli.samples), default=0),
                      retransmits=max((sum(s.get("retrans") or 0 for s in socks) for _, socks in s_srv.samples),
                                      default=0))
        try:
            with open(json_out) as f:
                rep_json = json.load(f)
            told: dict = {k: rep_json.get(k) for k in CLIENT_KEYS if k in rep_json}
            last = _tail_seconds(rep_json)
            result["client_report"] = told if last is None else {**told, "tail_s": last}
        except (OSError, ValueError):
            pass
    finally:
        stop_process(server, 10)
        server_log.close()
        shutil.rmtree(dest, ignore_errors=True)
        if os.path.isfile(dest):
            os.unlink(dest)
    return result


def run_field(cfg: FieldConfig) -> list[dict]:
    os.makedirs(cfg.workdir, exist_ok=True)
    os.chmod(cfg.workdir, 0o755)
    root = os.path.join(cfg.workdir, "root")
    os.makedirs(root, exist_ok=True)
    missing = missing_programs(cfg.entries)
    if missing:
        raise RuntimeError(f"not installed: {', '.join(missing)} (./run setup installs them as root)")
    sysctls = {"net.ipv4.tcp_congestion_control": cfg.cc} if cfg.cc else {}
    results: list[dict] = []
    wls = [workload(w, cfg.scale) for w in cfg.workloads]
    srcs = {wl.name: make_tree(root, wl) for wl in wls}
    certs = FsPath(cfg.workdir, "certs")
    with contextlib.ExitStack() as cleanup, \
            Link(rtt=cfg.path.rtt, rate=cfg.path.rate, loss=cfg.path.loss, sysctls=sysctls) as link:
        cfg.log(f"field: {cfg.path.label()}{', ' + cfg.cc if cfg.cc else ''}, link {link.backend}")
        tls = None
        if any(ENTRIES[n].server in TLS_SERVERS for n in cfg.entries):
            cleanup.callback(shutil.rmtree, certs, ignore_errors=True)
            cleanup.callback(shutil.rmtree, os.path.join(cfg.workdir, "xrootd"), ignore_errors=True)
            tls = make_certs(certs, link.server_addr)
        for rep in range(cfg.reps):
            for wl in wls:
                for name in cfg.entries:
                    e = ENTRIES[name]
                    if (wl.tree and not e.trees) or (not wl.tree and not e.files):
                        continue
                    r = run_one(cfg, link, e, wl, srcs[wl.name], rep, tls)
                    results.append(r)
                    cfg.log(f"  {wl.name:6} {name:15} #{rep + 1}: {r['mbps']:7.1f} Mbit/s"
                            f" (data phase {r.get('data_mbps') or 0:.0f})"
                            + (f"  ERROR {r['error']}" if r.get("error") else "")
                            + f"  mem snd {r.get('peak_snd_used', 0) / cfg.path.bdp:.1f} "
                              f"rcv {r.get('peak_rcv_used', 0) / cfg.path.bdp:.1f} BDP")
    return results


def table(results: list[dict], reference: str = "gridftp-p4-16M", titles: bool = True) -> str:
    """Markdown: per workload and entry, the median Mbit/s [min-max] on the
    wall clock, its ratio to the reference entry's median, the data phase's
    median Mbit/s and its share of the goodput ceiling, and the peak memory
    all data sockets held (sender, receiver; in BDP)."""
    lines = []
    for wl in dict.fromkeys(r["workload"] for r in results):
        rows = [r for r in results if r["workload"] == wl]
        present = {r["entry"] for r in rows}
        # the dataset tables divide by GridFTP's fastest flags for trees
        reference = next((e for e in (reference, "gridftp-fast") if e in present), reference)
        ref = [r["mbps"] for r in rows if r["entry"] == reference and r["complete"]]
        ref_m = statistics.median(ref) if ref else None
        ceiling = rows[0]["ceiling_mbps"]
        bdp = rows[0]["bdp"]
        if titles:
            lines += [f"**{wl}** ({rows[0]['files']} files, {rows[0]['bytes'] / MiB:.0f} MiB)", ""]
        lines += [f"| entry | Mbit/s | x {reference} | data phase, Mbit/s | % ceiling | sender mem, BDP "
                  "| receiver mem, BDP | runs |",
                  "|---|---|---|---|---|---|---|---|"]
        for name in dict.fromkeys(r["entry"] for r in rows):
            rs = [r for r in rows if r["entry"] == name]
            done = [r for r in rs if r["complete"]]
            if not done:
                lines.append(f"| {name} | failed: {rs[0].get('error', '?')} | | | | | | 0/{len(rs)} |")
                continue
            ok = [r["mbps"] for r in done]
            m = statistics.median(ok)
            phase = [r["data_mbps"] for r in done if r.get("data_mbps")]
            pm = statistics.median(phase) if phase else None
            snd = statistics.median(r["peak_snd_used"] / bdp for r in done)
            rcv = statistics.median(r["peak_rcv_used"] / bdp for r in done)
            ratio = f"{m / ref_m:.2f}" if ref_m else "-"
            share = f"{100 * pm / ceiling:.0f}%" if pm else "-"
            lines.append(f"| {name} | {m:.0f} [{min(ok):.0f}-{max(ok):.0f}] | {ratio} | "
                         f"{f'{pm:.0f}' if pm else '-'} | {share} | {snd:.1f} | {rcv:.1f} | {len(ok)}/{len(rs)} |")
        if titles:
            lines.append("")
    return "\n".join(lines)
