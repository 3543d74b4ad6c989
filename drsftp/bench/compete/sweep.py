"""`drsftp benchreport --table sweep`: many competitions in one table, a
row each, as the simulation study reports its sweeps (figures 5-7: each
kind's mean goodput against the DRS flows' maxwnd, per queue), beside the
study's fairness measure: a DRS flow should get bandwidth in proportion to
the window it allots, so its goodput over a static flow's is set beside
its window over theirs (docs/BENCHMARKS.md, "Sharing the link")."""

from __future__ import annotations

import statistics
from typing import Any

from .report import SEGMENT, completed, figures, mbps_text, rate_text
from .sets import congestion_control
from .spec import cap_template, window_cap

Data = dict[str, Any]

HEADER = ["link", "queue", "cc", "flows", "DRS cap, segments", "Mbit/s each [min-max]", "x the first",
          "window each, KiB", "x the first, window", "retransmits each", "Jain", "link use"]


def kinds_of(data: Data) -> list[tuple[str, list[dict]]]:
    """(kind, its completed flows) in the order the spec names them."""
    flows = completed(data)
    return [(k, [f for f in flows if f["kind"] == k]) for k in dict.fromkeys(f["kind"] for f in flows)]


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.fmean(vals) if vals else None


def _ratio(x: float | None, base: float | None) -> str:
    return "-" if x is None or not base else f"{x / base:.1f}"


def _cap(data: Data) -> str:
    caps = sorted({c for f in data["flows"] if (c := window_cap(f["kind"])) is not None})
    if not caps:
        return "none" if any(f["kind"].partition(":")[0] in ("drs", "drs-closed") for f in data["flows"]) else "-"
    return " / ".join(f"{c / SEGMENT:.0f}" for c in caps)


def _mbps(flows: list[dict]) -> str:
    rates = [f["mbps"] for f in flows]
    mean = mbps_text(statistics.fmean(rates))
    return mean if len(rates) == 1 else f"{mean} [{mbps_text(min(rates))}-{mbps_text(max(rates))}]"


def _flows(data: Data) -> str:
    """The spec without its caps: a sweep's cells, capped or not, share it."""
    return cap_template(data["spec"]).replace(":CAP", "")


def sort_key(data: Data) -> tuple:
    """A sweep's order: link, spec, congestion control, queue, then the cap (uncapped last)."""
    link = data["link"]
    caps = [c for f in data["flows"] if (c := window_cap(f["kind"])) is not None]
    return (link["rate_bps"], link["rtt_s"], _flows(data), congestion_control(data) or "",
            link["queue_packets"], min(caps) if caps else float("inf"))


def sweep_row(data: Data) -> list[str]:
    link = data["link"]
    kinds = kinds_of(data)
    mbps = [statistics.fmean(f["mbps"] for f in flows) for _, flows in kinds]
    windows = [_mean([f.get("wnd_mean") for f in flows]) for _, flows in kinds]
    use = figures(data)["link_use"]
    jains = [k["jain"] for k in figures(data)["kinds"]]
    return [
        f"{rate_text(link['rate_bps'])}, {link['rtt_s'] * 1000:g} ms", str(link["queue_packets"]),
        congestion_control(data) or "?", _flows(data), _cap(data),
        " / ".join(_mbps(flows) for _, flows in kinds) or "-",
        " / ".join(_ratio(m, mbps[0]) for m in mbps[1:]) or "-",
        " / ".join("-" if w is None else f"{w / 1024:.0f}" for w in windows) or "-",
        " / ".join(_ratio(w, windows[0]) for w in windows[1:]) or "-",
        " / ".join(f"{statistics.fmean(f.get('retransmits') or 0 for f in flows):.0f}" for _, flows in kinds) or "-",
        " / ".join("-" if j is None else f"{j:.2f}" for j in jains) or "-",
        "-" if use is None else f"{use:.0%}",
    ]


def sweep_table(datas: list[Data]) -> tuple[list[str], list[list[str]]]:
    """One row per competition, in the sweep's order; each cell lists the
    kinds in the spec's order, separated by " / "."""
    return HEADER, [sweep_row(d) for d in sorted(datas, key=sort_key) if completed(d)]
