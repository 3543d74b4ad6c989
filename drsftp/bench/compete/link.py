"""The emulated link's own account of a competition (`drsftp bench
compete`): what crossed its bottleneck, what its queue dropped, and
whether the emulator kept up with the flows (docs/BENCHMARKS.md, "Sharing
the link"; docs/NETEM.md, "Differences to keep in mind": the tun
forwarder is one Python process that shares the cores with the endpoints
it carries)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...netem.spec import MTU

DIRECTIONS = {"s2c": "server to client", "c2s": "client to server"}


@dataclass
class CpuMark:
    """CPU seconds at one moment: the forwarder's (None where there is
    none: the tc backend forwards in the kernel) and the host's, busy and in all."""

    wall: float
    forwarder: float | None
    host_busy: float
    host_total: float


def cpu_mark(owner_pid: int | None, backend: str, wall: float) -> CpuMark:
    """Now's CPU seconds (psutil, a bench extra)."""
    import psutil

    forwarder = None
    if backend == "tun" and owner_pid is not None:
        try:
            t = psutil.Process(owner_pid).cpu_times()
            forwarder = t.user + t.system
        except psutil.Error:
            pass
    host = psutil.cpu_times()
    total = sum(host)
    idle = host.idle + getattr(host, "iowait", 0.0)
    return CpuMark(wall, forwarder, total - idle, total)


def link_health(counters: dict[str, Any], start: CpuMark, end: CpuMark, cores: int) -> dict[str, Any]:
    """The link's counters per direction (segments offered, dropped at the
    queue and their share, the queue's peak in packets) and the CPU over the
    competition: the forwarder's share of one core (1.0: it had a core to
    itself and no more, so it set the pace, not the link) and the host's
    share of all its cores that was busy."""
    out: dict[str, Any] = {"backend": counters.get("backend")}
    for direction in DIRECTIONS:
        c = counters.get(direction)
        if not isinstance(c, dict):
            continue
        segments = c.get("packets_in") or 0
        drops = c.get("queue_drops")
        peak = c.get("max_backlog_bytes")
        out[direction] = {
            "segments": segments, "queue_drops": drops,
            "drop_share": round(drops / segments, 6) if drops is not None and segments else None,
            "peak_queue_packets": round(peak / MTU, 1) if peak is not None else None,
        }
    wall = end.wall - start.wall
    if wall > 0 and start.forwarder is not None and end.forwarder is not None:
        out["forwarder_core"] = round((end.forwarder - start.forwarder) / wall, 3)
    total = end.host_total - start.host_total
    if total > 0:
        out["host_busy"] = round((end.host_busy - start.host_busy) / total, 3)
    out["cores"] = cores
    return out


def health_line(health: dict[str, Any] | None) -> str | None:
    """One sentence of the link's counters and the CPU, for the report."""
    if not health:
        return None
    parts = []
    for direction, name in DIRECTIONS.items():
        d = health.get(direction)
        if not d or not d["segments"]:
            continue
        drops = ("an unknown number dropped (loss and queue together)" if d["queue_drops"] is None
                 else f"{d['queue_drops']:,} dropped at the queue ({d['drop_share']:.2%})")
        peak = f", queue peak {d['peak_queue_packets']:g} packets" if d.get("peak_queue_packets") is not None else ""
        parts.append(f"{name} {d['segments']:,} segments, {drops}{peak}")
    cpu = []
    if health.get("forwarder_core") is not None:
        cpu.append(f"the forwarder used {health['forwarder_core']:.0%} of a core")
    if health.get("host_busy") is not None:
        cpu.append(f"the host's {health.get('cores', '?')} cores were {health['host_busy']:.0%} busy")
    if not parts and not cpu:
        return None
    return (f"Link ({health.get('backend') or '?'}): " + "; ".join(parts + cpu) + ".")
