"""The tables and plots of a competition's results (`drsftp bench
compete`, `drsftp benchreport compete-*.json`): per flow, per kind, and
goodput over time; across several results, each kind's goodput against
the DRS flows' window cap (``drs:CAP``), as the simulation study's
figures 5-7 plot it against maxwnd."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from typing import Any

from ..common.plots import pyplot, save_figure
from ..common.tables import markdown_table, median
from .link import health_line
from .sets import congestion_control
from .spec import cap_template, window_cap
from .stats import summary

Data = dict[str, Any]
SEGMENT = 1448  # TCP payload bytes per 1500-byte packet (timestamps on): the study's packet


def completed(data: Data) -> list[dict]:
    """The competition's flows that did not fail."""
    return [f for f in data["flows"] if not f.get("error")]


def figures(data: Data) -> Data:
    """The summary of a results file, recomputed from its flows (the file's
    own copy is for other readers)."""
    return summary(completed(data), data["link"]["ceiling_mbps"])


def _mem(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _per_mib(bps_per_byte: float | None) -> str:
    """The papers' measure as Mbit/s per MiB of memory allotted."""
    return _num(None if bps_per_byte is None else bps_per_byte * 2**20 / 1e6)


def flow_table(data: Data) -> tuple[list[str], list[list[str]]]:
    per = {f["label"]: f for f in figures(data)["flows"]}
    header = ["flow", "start, s", "Mbit/s", "receiver buffer", "sender buffer", "Mbit/s per MiB", "x fair share",
              "retransmits", "of the ceiling"]
    rows = []
    ceiling = data["link"]["ceiling_mbps"]
    for f in data["flows"]:
        p = per.get(f["label"], {})
        note = f" (FAILED: {f['error']})" if f.get("error") else ""
        rows.append([f["label"] + note, _num(f.get("start_s"), "{:.1f}"), mbps_text(f["mbps"]),
                     _mem(f.get("rcvbuf_mean")), _mem(f.get("sndbuf_mean")),
                     _per_mib(p.get("bps_per_byte")), _num(p.get("fair_ratio")), str(f.get("retransmits", 0)),
                     _num(f["mbps"] / ceiling if ceiling else None, "{:.1%}")])
    return header, rows


def kind_table(data: Data) -> tuple[list[str], list[list[str]]]:
    header = ["kind", "flows", "Mbit/s each [min-max]", "Mbit/s together", "share", "Jain",
              "receiver buffer", "Mbit/s per MiB"]
    rows = [[k["kind"], str(k["flows"]),
             f"{mbps_text(k['mbps_mean'])} [{mbps_text(k['mbps_min'])}-{mbps_text(k['mbps_max'])}]",
             mbps_text(k["mbps_total"]), _num(k["share"], "{:.0%}"), _num(k["jain"], "{:.3f}"),
             _mem(k["rcvbuf_mean"]), _per_mib(k["bps_per_byte"])] for k in figures(data)["kinds"]]
    return header, rows


def sharing_table(datas: list[tuple[str, Data]], medians_only: bool = False) -> tuple[list[str], list[list[str]]]:
    """One row a results file (``--table sharing``): each flow's Mbit/s and
    its share of the ceiling, link use, Jain while all ran and how soon
    5-s windows reached 0.95; then the medians of each measurement's runs
    (files named alike but for a trailing -N: old code's beside new).
    ``medians_only`` (``--table medians``): a measurement of several runs
    by its median row alone."""
    header = ["file", "spec", "commit", "Mbit/s per flow (of the ceiling)", "link use",
              "while all ran: Mbit/s per flow (of the ceiling)", "link use while all ran", "Jain while all ran",
              "0.95 after, s"]
    groups: dict[str, list[dict]] = defaultdict(list)
    rows = []
    for path, data in datas:
        s, ceiling = figures(data), data["link"]["ceiling_mbps"]
        o = s.get("overlap") or {}
        got = {"flows": {f["label"]: f["mbps"] for f in completed(data)}, "use": s["link_use"], "jain": o.get("jain"),
               "reached": o.get("reached_s"), "ceiling": ceiling, "beside": o.get("mbps") or {},
               "use_beside": o.get("link_use")}
        groups[re.sub(r"-\d+$", "", stem(path))].append(got)
        commit = str((data.get("environment") or {}).get("commit") or "-")[:7]
        rows.append([stem(path), data["spec"], commit, _flows_cell(got["flows"], ceiling), _num(got["use"], "{:.1%}"),
                     _flows_cell(got["beside"], ceiling) or "-", _num(got["use_beside"], "{:.1%}"),
                     _num(got["jain"], "{:.3f}"), _num(got["reached"], "{:g}")])
    if medians_only:
        rows = [r for r in rows if len(groups[re.sub(r"-\d+$", "", r[0])]) < 2]
    for name, gots in groups.items():
        if len(gots) < 2:
            continue
        flows, beside = (_median_flows([g[key] for g in gots]) for key in ("flows", "beside"))
        med = {key: median([g[key] for g in gots]) for key in ("use", "use_beside", "jain", "reached")}
        ceiling = gots[0]["ceiling"]
        rows.append([f"median of {len(gots)}: {name}", "", "", _flows_cell(flows, ceiling),
                     _num(med["use"], "{:.1%}"), _flows_cell(beside, ceiling) or "-", _num(med["use_beside"], "{:.1%}"),
                     _num(med["jain"], "{:.3f}"), _num(med["reached"], "{:g}")])
    return header, rows


def _median_flows(runs: list[dict[str, float]]) -> dict[str, float | None]:
    labels = list(dict.fromkeys(label for run in runs for label in run))
    return {label: median([run.get(label) for run in runs]) for label in labels}


def _flows_cell(flows: dict[str, float | None], ceiling: float) -> str:
    return "; ".join(f"{label} {f'{m:.0f}' if m >= 10 else mbps_text(m)} ({m / ceiling:.1%})"
                     for label, m in flows.items() if m is not None)


def rate_text(bps: float, space: str = " ", unit: str = "bit/s") -> str:
    """A link rate as the docs write it: 1 Gbit/s, 100 Mbit/s, 56 kbit/s."""
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if bps >= scale:
            return f"{bps / scale:g}{space}{prefix}{unit}"
    return f"{bps:g}{space}{unit}"


def mbps_text(x: float) -> str:
    """Mbit/s with one decimal, three below 1 Mbit/s (a 56 kbit/s link's 0.052)."""
    return f"{x:.1f}" if x >= 1 or x == 0 else f"{x:.3f}"


def title(data: Data) -> str:
    link = data["link"]
    r = rate_text(link["rate_bps"])
    loss = f", loss {link['loss'] * 100:g}%" if link.get("loss") else ""
    length = (f"{data['duration_s']:g} s each" if data.get("duration_s") is not None
              else f"{data['file_size'] / 2**20:g} MiB each")
    return (f"{data['spec']}: {r}, {link['rtt_s'] * 1000:g} ms{loss}, queue {link['queue_packets']} packets, "
            f"{length}")


def closing_line(data: Data) -> str:
    s = figures(data)
    use = s["link_use"]
    failed = len(data["flows"]) - len(completed(data))
    line = (f"Link use {_num(use, '{:.0%}')} of the goodput ceiling ({mbps_text(data['link']['ceiling_mbps'])} Mbit/s);"
            f" Jain over all flows {_num(s['jain_all'], '{:.3f}')}, over Mbit/s per byte of memory "
            f"{_num(s['jain_per_memory'], '{:.3f}')}" + (f"; {failed} flow(s) FAILED" if failed else "") + ".")
    o = s.get("overlap")
    if o:
        reached = (f"{o['target']:g} reached {o['reached_s']} s after the last start (over {o['window_s']} s)"
                   if o["reached_s"] is not None else f"{o['target']:g} not reached (over {o['window_s']} s)")
        beside = _flows_cell(o.get("mbps") or {}, data["link"]["ceiling_mbps"])
        line += (f" While all ran ({o['from_s']:.1f}-{o['to_s']:.1f} s): {beside + '; ' if beside else ''}"
                 f"link use {_num(o.get('link_use'), '{:.0%}')}; Jain {_num(o['jain'], '{:.3f}')}; {reached}.")
    return line


def markdown(data: Data) -> str:
    out = [f"**{title(data)}**", ""]
    for table in (kind_table(data), flow_table(data)):
        out += markdown_table(*table) + [""]
    out.append(closing_line(data))
    health = health_line(data["link"].get("health"))
    return "\n".join(out + ([health] if health else []))


def legend() -> str:
    return ("Mbit/s: a flow's bytes over its data phase (first byte its sockets saw to its client's exit). "
            "Buffers: `ss` skmem rb at the receiver, tb at the sender, summed over the flow's data sockets and "
            "averaged over its samples. Mbit/s per MiB: goodput per MiB of receive buffer, the memory allotted "
            "(the papers' measure); x fair share: the flow's share of the goodput over its share of the memory "
            "(1: bandwidth in proportion to memory). Jain: (sum x)^2 / (n sum x^2) over a kind's flows' Mbit/s.")


def stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def slug(spec: str) -> str:
    """A file-name form of a spec: 10*stock-64k+1*drs:1MiB -> 10xstock-64k+1xdrs_1MiB."""
    s = spec.replace("*", "x").replace(":", "_").replace("@", "_at_")
    s = re.sub(r"[^A-Za-z0-9.+_-]", "", s)
    return s[:100]


def plot_goodput(data: Data, path: str) -> str | None:
    """Goodput of every flow each second (one colour a kind) with the link's
    use, and each flow's receive buffer over time."""
    plt = pyplot()
    if plt is None:
        return None
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    colours = {k: f"C{i % 10}" for i, k in enumerate(dict.fromkeys(f["kind"] for f in data["flows"]))}
    for f in data["flows"]:
        xs = [k + 0.5 for k in range(len(f["per_second"]))]
        first = f is next(g for g in data["flows"] if g["kind"] == f["kind"])
        top.plot(xs, f["per_second"], color=colours[f["kind"]], lw=1, alpha=0.8, label=f["kind"] if first else None)
        bottom.plot([s["t"] for s in f["samples"]], [s["rcvbuf"] / 2**20 for s in f["samples"]],
                    color=colours[f["kind"]], lw=1, alpha=0.8, label=f["kind"] if first else None)
    ceiling = data["link"]["ceiling_mbps"]
    use = figures(data)["link_use_per_second"]
    top.plot([k + 0.5 for k in range(len(use))], [u * ceiling for u in use], color="black", lw=1.5,
             label="all flows")
    top.axhline(ceiling, color="grey", ls=":", label="goodput ceiling")
    top.set_ylabel("goodput (Mbit/s, each second)")
    top.set_title(title(data), fontsize=9)
    bottom.set_ylabel("receive buffer (MiB)")
    bottom.set_xlabel("time (s)")
    return save_figure(plt, fig, (top, bottom), path)


def cap_points(datas: list[Data]) -> dict[tuple[float, str, str, int, str], list[tuple[int, float]]]:
    """{(rate, the spec with its caps as CAP, congestion control, queue, kind without its cap):
    [(the DRS window cap, mean Mbit/s of the kind's flows)]} over results that each hold one
    ``drs:CAP`` cap (the simulation study's figures 5-7)."""
    series: dict[tuple[float, str, str, int, str], list[tuple[int, float]]] = defaultdict(list)
    for data in datas:
        caps = {c for f in data["flows"] if (c := window_cap(f["kind"])) is not None}
        if len(caps) != 1:
            continue
        cap = caps.pop()
        link = data["link"]
        where = (link["rate_bps"], cap_template(data["spec"]), congestion_control(data) or "?", link["queue_packets"])
        for k in figures(data)["kinds"]:
            name = k["kind"].partition(":")[0] if window_cap(k["kind"]) is not None else k["kind"]
            series[(*where, name)].append((cap, k["mbps_mean"]))
    return {key: sorted(pts) for key, pts in series.items()}


def plot_vs_cap(datas: list[Data], path: str) -> str | None:
    """Mean goodput of each kind's flows against the DRS flows' window cap,
    a panel per link rate and spec, a line per kind and queue (and
    congestion control, where a panel has several); the cap in MiB below,
    in 1448-byte segments (the study's packets) above."""
    series = cap_points(datas)
    plt = pyplot() if series else None
    if plt is None:
        return None
    panels = sorted({(rate, spec) for rate, spec, _, _, _ in series})
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.8), squeeze=False)
    for ax, (rate, spec) in zip(axes[0], panels):
        mine = {k: v for k, v in sorted(series.items()) if k[:2] == (rate, spec)}
        several = len({cc for _, _, cc, _, _ in mine}) > 1
        colours = {w: f"C{i % 10}" for i, w in enumerate(dict.fromkeys((cc, q) for _, _, cc, q, _ in mine))}
        for (_, _, cc, queue, kind), pts in mine.items():  # a colour per queue, DRS solid, the others dashed
            label = f"{kind}, Q={queue}" + (f", {cc}" if several else "")
            ax.plot([c / 2**20 for c, _ in pts], [m for _, m in pts], marker="o", color=colours[(cc, queue)],
                    ls="-" if kind.startswith("drs") else "--", label=label)
        ax.set_ylim(bottom=0)
        ax.set_title(f"{spec}, {rate_text(rate)}: mean goodput of each kind's flows", fontsize=9)
        ax.set_xlabel("DRS flows' window cap, drs:CAP (MiB)")
        ax.set_ylabel("goodput (Mbit/s)")
        top = ax.secondary_xaxis("top", functions=(lambda m: m * 2**20 / SEGMENT, lambda p: p * SEGMENT / 2**20))
        top.set_xlabel(f"the cap in {SEGMENT}-byte segments", fontsize=8)
    return save_figure(plt, fig, axes[0], path)


