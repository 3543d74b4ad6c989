"""The papers' experiments with `drsftp bench compete`: each figure's
cells run one after another, kept in one set file in docs/bench-data, its
table printed and its plot drawn (docs/BENCHMARKS.md, "Sharing the link").

    python benchmarks/papers.py fig5        # 10 static + 1 DRS, 100 Mbit/s, 60 ms (about 14 min)
    python benchmarks/papers.py fig6        # 5 static + 5 DRS, the same link (about 14 min)
    python benchmarks/papers.py fig7        # 5 + 5 and 10 + 1 at 1 Gbit/s, 96 ms (about 3 min)
    python benchmarks/papers.py today       # CUBIC, BBR and autotuned flows beside DRS (about 9 min)
    python benchmarks/papers.py lowrate     # the kernel paper's 56 kbit/s case (about 16 min)
    python benchmarks/papers.py fig5 --report   # the table and plot from the set file, nothing run

Root (network namespaces).  A cell already in the set file is not run again
(--again runs it anew); an interrupted figure resumes where it stopped.
The cubic cells need cubic in the host's net.ipv4.tcp_allowed_congestion_control
(namespaces may only pick from it); without it they fail alone, in one line.
Links and cells, from the papers:

- The simulation study (section III) and its slides: links of 100 Mbit/s
  with 10 ms per hop, three hops, 60 ms RTT, and 1 Gbit/s with 16 ms
  hops, 96 ms RTT; drop-tail queues of 100, 500 and 16,384 packets; static
  flows with a 64 KB window (44 packets, `stock-64k`); DRS flows capped at
  maxwnd (`drs:CAP`), swept over 100-700 packets at 100 Mbit/s and to
  7,000 at 1 Gbit/s; TCP Reno; 200 s.  Here each cell runs 30 s, the caps
  in 1448-byte segments (the payload of the study's 1500-byte packets),
  and every drsftp flow sizes its buffers itself (`--force-buffers`), as
  the study's flows allot exactly their window.
- The kernel paper (section V.B): one transfer over a 56 kbit/s link
  behind a WAN emulator with a 100 ms RTT, DRS beside default static
  windows.  Its queue is not given; 20 packets (30 KB, 4.3 s at 56 kbit/s)
  is below the static window, as the losses it reports need.  Each flow
  runs 100 s alone on the link.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from drsftp.bench.compete.outputs import report
from drsftp.bench.compete.report import SEGMENT  # the payload of a 1500-byte packet: the study's packet
from drsftp.bench.compete.sets import add_to_set, cell_key, read_set
from drsftp.netem.spec import parse_duration, parse_rate

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "docs", "bench-data")
IMG = os.path.join(ROOT, "docs", "img")


@dataclass(frozen=True)
class Cell:
    spec: str
    rate: str
    rtt: str
    queue: int
    cc: str
    duration: float

    def key(self) -> tuple:
        """competeset.cell_key of the result this cell makes."""
        return (self.spec, parse_rate(self.rate), parse_duration(self.rtt), 0.0, self.queue, self.cc,
                self.duration, True)

    def argv(self, out: str) -> list[str]:
        return [sys.executable, "-m", "drsftp", "bench", "compete", self.spec, "--rates", self.rate,
                "--rtts", self.rtt, "--queue", str(self.queue), "--cc", self.cc, "--duration", f"{self.duration:g}",
                "--force-buffers", "--no-plots", "--out", out]


@dataclass(frozen=True)
class Figure:
    cells: list[Cell]
    data: str  # the set file's name in docs/bench-data
    table: str  # benchreport --table: sweep or window
    plot: str | None  # the plot's name in docs/img (none: the table alone)
    sample_every: float | None = None  # seconds between the samples kept (the window table and plot read them)


def capped(template: str, packets: list[int]) -> list[str]:
    """The spec at each cap (in 1448-byte segments), then uncapped (drsftp's default cap, 64 MiB)."""
    return [template.replace("CAP", str(n * SEGMENT)) for n in packets] + [template.replace(":CAP", "")]


def sweep(template: str, rate: str, rtt: str, queues: list[int], packets: list[int], cc: str = "reno",
          duration: float = 30.0) -> list[Cell]:
    return [Cell(spec, rate, rtt, q, cc, duration) for q in queues for spec in capped(template, packets)]


QUEUES = [100, 500, 16384]
CAPS_100M = [100, 200, 300, 400, 500, 600, 700]  # the study's figures 5 and 6, x axis
LOW = ("56kbit", "100ms", 20, 100.0)  # rate, RTT, queue, seconds

FIGURES = {
    "fig5": Figure(sweep("10*stock-64k+1*drs:CAP", "100mbit", "60ms", QUEUES, CAPS_100M),
                   "papers-10-static-1-drs-100mbit-60ms.json", "sweep", "papers-10-static-1-drs-100mbit.png"),
    "fig6": Figure(sweep("5*stock-64k+5*drs:CAP", "100mbit", "60ms", QUEUES, CAPS_100M),
                   "papers-5-static-5-drs-100mbit-60ms.json", "sweep", "papers-5-static-5-drs-100mbit.png"),
    # one bounded try of each at 1 Gbit/s: the study's 99.5% point (2,000 packets), its 93x (7,000) and
    # the small queue's drop past 6,500
    "fig7": Figure([Cell(f"5*stock-64k+5*drs:{n * SEGMENT}", "1gbit", "96ms", q, "reno", 30.0)
                    for n, q in ((2000, 16384), (7000, 16384), (7000, 100))] +
                   [Cell(f"10*stock-64k+1*drs:{7000 * SEGMENT}", "1gbit", "96ms", 16384, "reno", 30.0)],
                   "papers-1gbit-96ms.json", "sweep", "papers-1gbit.png"),
    "today": Figure([Cell(spec, "100mbit", "60ms", q, cc, 30.0) for q in QUEUES
                     for spec, ccs in (("10*stock-64k+1*drs", ("cubic", "bbr")),
                                       ("10*kernel+1*drs", ("reno", "cubic", "bbr")))
                     for cc in ccs],
                    "papers-today-100mbit-60ms.json", "sweep", None),
    "lowrate": Figure([Cell(kind, LOW[0], LOW[1], LOW[2], cc, LOW[3]) for kind, cc in (
        ("stock-64k", "reno"), ("kernel", "reno"), ("drs", "reno"), ("drs-closed", "reno"),
        ("drs:12k", "reno"), ("stock-64k", "cubic"), ("drs", "cubic"), ("stock-64k", "bbr"),
        ("drs", "bbr"))], "papers-56kbit-100ms-q20.json", "window", "papers-56kbit-window.png",
        sample_every=1.0),
}


def run_cell(cell: Cell, set_path: str, sample_every: float | None) -> bool:
    """Run one cell into a scratch directory and add its result to the set; False if it made none."""
    work = tempfile.mkdtemp(prefix="drs-papers-")
    try:
        print(f"papers: {' '.join(cell.argv(work)[3:])}", file=sys.stderr, flush=True)
        proc = subprocess.run(cell.argv(work), stdout=subprocess.DEVNULL, check=False)
        made = glob.glob(os.path.join(work, "compete-*.json"))
        if not made:
            print(f"papers: the cell made no result (exit {proc.returncode})", file=sys.stderr)
            return False
        with open(made[0]) as f:
            add_to_set(set_path, json.load(f), sample_every)
        return True
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("figure", choices=[*FIGURES, "all"])
    ap.add_argument("--report", action="store_true", help="print the table and draw the plot, run nothing")
    ap.add_argument("--again", action="store_true", help="run every cell, also those already in the set")
    ap.add_argument("--data", default=DATA, help="where the set files are (default docs/bench-data)")
    ap.add_argument("--img", default=IMG, help="where the plots go (default docs/img)")
    args = ap.parse_args()
    names = list(FIGURES) if args.figure == "all" else [args.figure]
    for name in names:
        fig = FIGURES[name]
        set_path = os.path.join(args.data, fig.data)
        if not args.report:
            done = {cell_key(r) for r in read_set(set_path)}
            for cell in fig.cells:
                if args.again or cell.key() not in done:
                    run_cell(cell, set_path, fig.sample_every)
        results = read_set(set_path)
        if not results:
            print(f"papers: {set_path} holds no results yet", file=sys.stderr)
            continue
        plots = tempfile.mkdtemp(prefix="drs-papers-plots-")
        try:
            report([(set_path, r) for r in results], plots, fig.table)
            made = os.path.join(plots, "compete-vs-cap.png" if fig.table == "sweep" else "compete-window.png")
            if fig.plot and os.path.exists(made):
                os.makedirs(args.img, exist_ok=True)
                shutil.move(made, os.path.join(args.img, fig.plot))
                print(f"plot: {os.path.join(args.img, fig.plot)}", file=sys.stderr)
        finally:
            shutil.rmtree(plots, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
