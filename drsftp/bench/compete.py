"""`drsftp bench --compete` and `drsftp benchreport` of its results: run a
competition, write its JSON (and plot), print its tables."""

from __future__ import annotations

import json
import os
import sys

from .competereport import legend, markdown, plot_goodput, plot_vs_cap, sharing_table, slug, stem
from .competerun import CompeteConfig, run_compete
from .report import markdown_table


def file_name(cfg: CompeteConfig) -> str:
    """compete-SPEC-RATE-RTT-qQUEUE.json: one file per spec and link, so a sweep's runs sit side by side."""
    rate = f"{cfg.path.rate / 1e9:g}gbit" if cfg.path.rate >= 1e9 else f"{cfg.path.rate / 1e6:g}mbit"
    loss = f"-loss{cfg.path.loss * 100:g}" if cfg.path.loss else ""
    return f"compete-{slug(cfg.spec)}-{rate}-{cfg.path.rtt * 1000:g}ms-q{cfg.queue_packets()}{loss}.json"


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
    """benchreport of compete results: each file's tables (``table``
    "sharing": one table, a row a file and the medians); with ``plots_dir``
    each one's goodput over time and, where the files vary a drs:CAP, goodput
    against that cap."""
    if table == "sharing":
        print("\n".join(markdown_table(*sharing_table(datas))))
    else:
        print("\n\n".join(markdown(data) for _, data in datas))
    if plots_dir:
        os.makedirs(plots_dir, exist_ok=True)
        made = [plot_goodput(data, os.path.join(plots_dir, stem(path) + "-goodput.png")) for path, data in datas]
        made.append(plot_vs_cap([d for _, d in datas], os.path.join(plots_dir, "compete-vs-cap.png")))
        for p in made:
            if p:
                print(f"plot: {p}", file=sys.stderr)
    return 0
