"""`drsftp benchreport --table window`: each flow's advertised window and
retransmits, as the kernel DRS paper shows its low-bandwidth case (section
V.B, figures 5-7: the window the receiver advertised over time, for DRS and
for default static windows, and the retransmits of each).  The advertised
window is the sender's view of it (`ss` snd_wnd at the server end),
sampled every 0.25 s; retransmits are the sender's count
(docs/BENCHMARKS.md, "Sharing the link")."""

from __future__ import annotations

from typing import Any

from ..common.plots import pyplot, save_figure
from ..common.tables import median
from .report import completed, rate_text
from .sets import congestion_control

Data = dict[str, Any]

HEADER = ["link", "queue", "cc", "flow", "goodput", "advertised window: largest, KiB", "median, KiB",
          "in flight: mean, KiB", "largest, KiB", "RTT median, ms", "retransmits", "per MB moved"]


def _kib(x: float | None) -> str:
    return "-" if x is None else f"{x / 1024:.1f}"


def _peak(samples: list[dict], key: str) -> float | None:
    vals = [s[key] for s in samples if s.get(key) is not None]
    return max(vals) if vals else None


def _goodput(flow: dict) -> str:
    """Mbit/s, or kbit/s below 1 Mbit/s, from the flow's bytes and data phase where it has them."""
    secs = flow.get("seconds")
    mbps = flow["bytes"] * 8 / secs / 1e6 if secs and flow.get("bytes") else flow["mbps"]
    return f"{mbps:.1f} Mbit/s" if mbps >= 1 else f"{mbps * 1000:.1f} kbit/s"


def window_row(data: Data, flow: dict) -> list[str]:
    link = data["link"]
    samples = flow.get("samples") or []
    moved = flow.get("bytes") or 0
    retrans = flow.get("retransmits") or 0
    rtt = median(s.get("rtt_ms") for s in samples)
    return [
        f"{rate_text(link['rate_bps'])}, {link['rtt_s'] * 1000:g} ms", str(link["queue_packets"]),
        congestion_control(data) or "?", flow["label"],
        _goodput(flow),
        _kib(flow.get("wnd_peak", _peak(samples, "snd_wnd"))), _kib(median(s.get("snd_wnd") for s in samples)),
        _kib(flow.get("inflight_mean")), _kib(flow.get("inflight_peak", _peak(samples, "inflight"))),
        "-" if rtt is None else f"{rtt:.0f}", str(retrans),
        f"{retrans / (moved / 1e6):.1f}" if moved else "-",
    ]


def window_table(datas: list[Data]) -> tuple[list[str], list[list[str]]]:
    """A row per completed flow, in the order of the results given."""
    return HEADER, [window_row(d, f) for d in datas for f in completed(d)]


def plot_window(datas: list[Data], path: str) -> str | None:
    """Each flow's advertised window (solid) and bytes in flight (dotted)
    over time above, its retransmits so far below (the kernel paper's
    figures 5-7 in one figure); a column per congestion control."""
    flows = [(d, f) for d in datas for f in completed(d)
             if any(s.get("snd_wnd") is not None for s in f.get("samples") or [])]
    plt = pyplot() if flows else None
    if plt is None:
        return None
    ccs = list(dict.fromkeys(congestion_control(d) or "?" for d, _ in flows))
    fig, axes = plt.subplots(2, len(ccs), figsize=(6 * len(ccs), 8), sharex=True, squeeze=False)
    for col, cc in enumerate(ccs):
        top, bottom = axes[0][col], axes[1][col]
        mine = [(d, f) for d, f in flows if (congestion_control(d) or "?") == cc]
        for i, (_, f) in enumerate(mine):
            colour, samples = f"C{i % 10}", f["samples"]
            ts = [s["t"] - f["start_s"] for s in samples]
            top.plot(ts, [(s.get("snd_wnd") or 0) / 1024 for s in samples], color=colour, lw=1.2,
                     label=f"{f['label']}: advertised window")
            top.plot(ts, [(s.get("inflight") or 0) / 1024 for s in samples], color=colour, lw=0.8, ls=":",
                     label=f"{f['label']}: in flight")
            bottom.step(ts, [s.get("retrans") or 0 for s in samples], where="post", color=colour, label=f["label"])
        link = mine[0][0]["link"]
        top.set_title(f"{cc}: {rate_text(link['rate_bps'])}, {link['rtt_s'] * 1000:g} ms, queue "
                      f"{link['queue_packets']} packets", fontsize=9)
        top.set_yscale("log")
        top.set_ylabel("advertised window and in flight, KiB (log)")
        bottom.set_ylabel("retransmitted segments so far")
        bottom.set_xlabel("time since the flow started (s)")
    return save_figure(plt, fig, [ax for row in axes for ax in row], path)
