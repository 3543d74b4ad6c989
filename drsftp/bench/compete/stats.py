"""The figures of a competition (`drsftp bench compete`), from the flows'
samples (sans-IO): goodput per flow and per second, memory, Jain's index
within each kind, the papers' measure and link use.

The papers' measure (docs/BENCHMARKS.md, "Sharing the link"; the simulation
study, section II): a flow should get bandwidth in proportion to the memory
it allots to its connection.  A flow's memory allotted is its receive
buffer (`ss` skmem rb, the buffer that bounds its window; summed over its
data sockets), averaged over its samples."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from typing import Any

Row = dict[str, Any]
FAIR_WINDOW = 5  # seconds: the goodput Jain's index is taken over while flows overlap
FAIR_TARGET = 0.95  # ... and the index they should reach


def jain(xs: Sequence[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all are equal,
    1/n when one takes everything; None for no values or none above 0."""
    squares = sum(x * x for x in xs)
    if not xs or squares <= 0:
        return None
    return sum(xs) ** 2 / (len(xs) * squares)


def cumulative_at(points: Sequence[tuple[float, float]], t: float) -> float:
    """Bytes moved by time ``t``, linear between the (time, bytes) points;
    the first point's before it, the last one's after it."""
    if not points or t <= points[0][0]:
        return points[0][1] if points else 0.0
    if t >= points[-1][0]:
        return points[-1][1]
    for (t0, b0), (t1, b1) in itertools.pairwise(points):
        if t <= t1:
            return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b1
    return points[-1][1]


def per_second(points: Sequence[tuple[float, float]], end: float) -> list[float]:
    """Mbit/s in each second [k, k+1) from 0 to ``end`` (the last one
    over the part of it before ``end``)."""
    out = []
    for k in range(math.ceil(end)):
        hi = min(k + 1.0, end)
        out.append(round((cumulative_at(points, hi) - cumulative_at(points, k)) * 8 / (hi - k) / 1e6, 3))
    return out


def flow_points(flow: Row) -> list[tuple[float, float]]:
    """(time, bytes) of a flow: 0 at its start, its samples, and its
    total at its end (bytes after its last sample: the client's own count)."""
    pts = [(flow["start_s"], 0.0)] + [(s["t"], float(s["bytes"])) for s in flow["samples"]]
    total = moved(flow)
    if flow.get("end_s") is not None and total > pts[-1][1]:
        pts.append((max(flow["end_s"], pts[-1][0]), float(total)))
    return pts


def moved(flow: Row) -> int:
    """Bytes the flow moved: its sockets' count, or its client's where that
    is more (a socket's last bytes before it closed fall between samples)."""
    sampled = max((s["bytes"] for s in flow["samples"]), default=0)
    return max(sampled, flow.get("client_bytes") or 0)


def _mean_peak(samples: Sequence[Row], key: str) -> tuple[float | None, int | None]:
    vals = [s[key] for s in samples if s.get(key) is not None]
    return (round(statistics.fmean(vals)) if vals else None), (max(vals) if vals else None)


def flow_figures(flow: Row, end: float) -> Row:
    """What a flow's samples say: bytes, its data phase (from the first
    byte its sockets saw to its client's exit), Mbit/s over it, memory
    (mean and peak) and Mbit/s each second of the competition up to ``end``."""
    samples = flow["samples"]
    first = next((s["t"] for s in samples if s["bytes"] > 0), None)
    last = flow.get("end_s") if flow.get("end_s") is not None else (samples[-1]["t"] if samples else None)
    total = moved(flow)
    seconds = max(last - first, 0.0) if first is not None and last is not None else 0.0
    rcv_mean, rcv_peak = _mean_peak(samples, "rcvbuf")
    snd_mean, snd_peak = _mean_peak(samples, "sndbuf")
    # the window the receiver advertised, as its sender saw it, and the bytes in flight
    wnd_mean, wnd_peak = _mean_peak(samples, "snd_wnd")
    flight_mean, flight_peak = _mean_peak(samples, "inflight")
    return {
        "bytes": total, "first_byte_s": first, "seconds": round(seconds, 3),
        "mbps": round(total * 8 / seconds / 1e6, 3) if seconds > 0 else 0.0,
        "rcvbuf_mean": rcv_mean, "rcvbuf_peak": rcv_peak, "sndbuf_mean": snd_mean, "sndbuf_peak": snd_peak,
        "wnd_mean": wnd_mean, "wnd_peak": wnd_peak, "inflight_mean": flight_mean, "inflight_peak": flight_peak,
        "retransmits": max((s.get("retrans") or 0 for s in samples), default=0),
        "per_second": per_second(flow_points(flow), end),
    }


def summary(flows: Sequence[Row], ceiling_mbps: float) -> Row:
    """The competition's figures from its flows' (:func:`flow_figures`):
    per kind, link use, the papers' measure per flow and overall."""
    total_mbps = sum(f["mbps"] for f in flows)
    memory = [f for f in flows if f.get("rcvbuf_mean")]
    total_mem = sum(f["rcvbuf_mean"] for f in memory)
    per_flow = []
    for f in flows:
        mem = f.get("rcvbuf_mean")
        per_byte = f["mbps"] * 1e6 / mem if mem else None
        # the papers' fair share: the link's goodput in proportion to memory allotted
        fair = (f["mbps"] / total_mbps) / (mem / total_mem) if mem and total_mbps > 0 else None
        per_flow.append({"label": f["label"], "bps_per_byte": _round(per_byte), "fair_ratio": _round(fair)})
    return {
        "kinds": [kind_summary(kind, [f for f in flows if f["kind"] == kind], total_mbps)
                  for kind in dict.fromkeys(f["kind"] for f in flows)],
        "flows": per_flow,
        "link_use": _round(link_use(flows, ceiling_mbps)),
        "link_use_per_second": [round(sum(xs) / ceiling_mbps, 4)
                                for xs in itertools.zip_longest(*(f["per_second"] for f in flows), fillvalue=0.0)],
        "jain_all": _round(jain([f["mbps"] for f in flows])),
        # 1: every flow got bandwidth in proportion to its memory (the papers' fairness)
        "jain_per_memory": _round(jain([f["mbps"] / f["rcvbuf_mean"] for f in memory])),
        "overlap": overlap_fairness(flows, ceiling_mbps),
    }


def overlap_fairness(flows: Sequence[Row], ceiling_mbps: float | None = None, window: int = FAIR_WINDOW,
                     target: float = FAIR_TARGET) -> Row | None:
    """The flows while all run at once (None for fewer than two, or no
    whole second shared), from the last one's first byte to the first one's
    end: each flow's Mbit/s and the link use over that time (a flow beside
    a long-lived one is judged there, not over its time alone), Jain's index
    over their goodput, and how many seconds after the last start the index
    over ``window`` seconds first reached ``target`` (two transfers started
    apart: how soon they share equally)."""
    if len(flows) < 2 or any(f.get("first_byte_s") is None or f.get("end_s") is None for f in flows):
        return None
    start, end = max(f["first_byte_s"] for f in flows), min(f["end_s"] for f in flows)
    lo, hi = math.ceil(start), math.floor(end)
    if hi - lo < 1:
        return None
    seconds = [[f["per_second"][k] for f in flows] for k in range(lo, hi)]
    rates = [(cumulative_at(flow_points(f), end) - cumulative_at(flow_points(f), start)) for f in flows]
    mbps = [r * 8 / (end - start) / 1e6 for r in rates]
    reached = next((k + window - lo for k in range(lo, hi - window + 1)
                    if (j := jain([sum(col) for col in zip(*seconds[k - lo:k - lo + window], strict=True)]))
                    is not None and j >= target), None)
    return {"from_s": round(start, 3), "to_s": round(end, 3), "jain": _round(jain(rates)),
            "mbps": {f["label"]: round(m, 3) for f, m in zip(flows, mbps, strict=True)},
            "link_use": _round(sum(mbps) / ceiling_mbps) if ceiling_mbps else None,
            "jain_per_second": [_round(jain(xs)) for xs in seconds],
            "window_s": window, "target": target, "reached_s": reached}


def kind_summary(kind: str, flows: Sequence[Row], total_mbps: float) -> Row:
    rates = [f["mbps"] for f in flows]
    mems = [f["rcvbuf_mean"] for f in flows if f.get("rcvbuf_mean")]
    mean_mem = statistics.fmean(mems) if mems else None
    mean_rate = statistics.fmean(rates)
    return {
        "kind": kind, "flows": len(flows), "mbps_mean": round(mean_rate, 3), "mbps_min": min(rates),
        "mbps_max": max(rates), "mbps_total": round(sum(rates), 3), "jain": _round(jain(rates)),
        "share": _round(sum(rates) / total_mbps if total_mbps > 0 else None),
        "rcvbuf_mean": round(mean_mem) if mean_mem else None,
        "bps_per_byte": _round(mean_rate * 1e6 / mean_mem if mean_mem else None),
    }


def link_use(flows: Sequence[Row], ceiling_mbps: float) -> float | None:
    """The flows' bytes over what the link carries (its goodput ceiling)
    from the first byte any flow saw to the last flow's end."""
    firsts = [f["first_byte_s"] for f in flows if f.get("first_byte_s") is not None]
    ends = [f["end_s"] for f in flows if f.get("end_s") is not None]
    if not firsts or not ends or max(ends) <= min(firsts):
        return None
    return sum(f["bytes"] for f in flows) * 8 / (ceiling_mbps * 1e6 * (max(ends) - min(firsts)))


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(x, digits)
