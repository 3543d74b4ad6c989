"""`drsftp bench compete` and `drsftp benchreport` of its results: run a
competition, write its JSON (and plot), print its tables."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter

from ..common.tables import markdown_table
from .report import legend, markdown, plot_goodput, plot_vs_cap, rate_text, sharing_table, slug, stem
from .run import CompeteConfig, run_compete
from .sets import congestion_control
from .sweep import sweep_table
from .window import plot_window, window_table


def name_stem(spec: str, rate_bps: float, rtt_s: float, queue: int, loss: float | None) -> str:
    """compete-SPEC-RATE-RTT-qQUEUE[-lossL]: a competition's name, by its spec and link."""
    rate = rate_text(rate_bps, space="", unit="bit").lower()
    return f"compete-{slug(spec)}-{rate}-{rtt_s * 1000:g}ms-q{queue}" + (f"-loss{loss * 100:g}" if loss else "")


def file_name(cfg: CompeteConfig) -> str:
    """compete-SPEC-RATE-RTT-qQUEUE.json: one file per spec and link, so a sweep's runs sit side by side."""
    return name_stem(cfg.spec, cfg.path.rate, cfg.path.rtt, cfg.queue_packets(), cfg.path.loss) + ".json"


def run_and_report(cfg: CompeteConfig, outdir: str, plots: bool) -> int:
    """Run the competition, write OUTDIR/compete-*.json (and its plot), print the tables;
    1 if no flow completed."""
    os.makedirs(outdir, exist_ok=True)
    cfg.log(f"compete: {cfg.spec} ({len(cfg.flows)} flows), {cfg.path.label()}, queue {cfg.queue_packets()} "
            f"packets, " + (f"{cfg.duration:g} s each" if cfg.duration is not None else
                            f"{cfg.file_size() >> 20} MiB each (at most {cfg.cap:g} s)"))
    data = run_compete(cfg)
    out = os.path.join(outdir, file_name(cfg))
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, out)
    print(markdown(data))
    print("\n" + legend())
    shown = [out]
    if plots:
        made = plot_goodput(data, os.path.join(outdir, stem(out) + "-goodput.png"))
        shown += [made] if made else []
    print("results: " + ", ".join(shown))
    return 1 if all(f.get("error") for f in data["flows"]) else 0


def report(datas: list[tuple[str, dict]], plots_dir: str | None, table: str | None = None) -> int:
    """benchreport of compete results: each file's tables, or with ``table``
    one table over them all (``sweep``: a row per competition;
    ``window``: a row per flow, its advertised window and retransmits;
    ``sharing``: a row per file, each flow's share of the ceiling, link
    use, Jain while all ran, and the medians of each measurement's runs).
    With ``plots_dir``: each competition's goodput over time (those with
    samples) and, where they vary a drs:CAP, goodput against that cap; with
    ``window``, each flow's advertised window and retransmits over time."""
    results = [d for _, d in datas]
    if plots_dir:
        os.makedirs(plots_dir, exist_ok=True)
    if table == "sweep":
        print("\n".join(markdown_table(*sweep_table(results))))
        made = [plot_vs_cap(results, os.path.join(plots_dir, "compete-vs-cap.png"))] if plots_dir else []
    elif table == "window":
        print("\n".join(markdown_table(*window_table(results))))
        made = [plot_window(results, os.path.join(plots_dir, "compete-window.png"))] if plots_dir else []
    elif table in ("sharing", "medians"):
        print("\n".join(markdown_table(*sharing_table(datas, medians_only=table == "medians"))))
        made = []
    else:
        print("\n\n".join(markdown(data) for data in results))
        made = []
        if plots_dir:
            in_files = Counter(path for path, _ in datas)
            made = [plot_goodput(data, os.path.join(plots_dir, _plot_stem(path, data, in_files[path] > 1) +
                                                    "-goodput.png"))
                    for path, data in datas if any(f["samples"] for f in data["flows"])]
            made.append(plot_vs_cap(results, os.path.join(plots_dir, "compete-vs-cap.png")))
    for p in made:
        if p:
            print(f"plot: {p}", file=sys.stderr)
    return 0


def _plot_stem(path: str, data: dict, from_set: bool) -> str:
    """A competition's plot name: its file's, or within a set, from its spec, link and congestion control."""
    if not from_set:
        return stem(path)
    link = data["link"]
    return (name_stem(data["spec"], link["rate_bps"], link["rtt_s"], link["queue_packets"], link.get("loss"))
            + f"-{congestion_control(data) or 'cc'}")
