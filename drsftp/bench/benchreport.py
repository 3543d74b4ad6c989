"""`drsftp benchreport`: Markdown tables (and plots) from saved results of any
bench mode; each mode's own tables come from its package."""

from __future__ import annotations

import os
import sys

from ..netem.errors import NetemError, NetemUsageError
from ..netem.spec import parse_duration, parse_loss, parse_rate
from .common import tunings as T
from .common.options import RUN_FILTERS, add_command, option_choices, or_default
from .compete.cli import COMPETE_TABLES, compete_report


def add_parser(sub) -> None:
    r = add_command(sub, "benchreport", "Markdown tables (and plots) from saved bench results", "results", nargs="+",
                    help="results.json or results.csv files of `drsftp bench` runs (docs/bench-data); "
                         "where a later file holds a path, its runs of that path replace the earlier files'; "
                         "or compete-*.json files of `drsftp bench compete` (their tables, each file's)")
    r.add_argument("--table", choices=[*report_tables(), *COMPETE_TABLES, "drs"],
                   help="print this table alone: " + ", ".join(report_tables()) + " (versus: the base "
                        "tuning's rate, the others' ratios to it, retransmits, sender memory); of compete "
                        "results: sweep (a row per competition: each kind's goodput and window, the ratios to "
                        "the first kind's, link use) or window (a row per flow: its advertised window, bytes in "
                        "flight and retransmits; with --plots, them over time) or sharing (a row per file: each "
                        "flow's share of the ceiling, link use, Jain while all ran; the medians of runs named "
                        "alike but for a trailing -N) or medians (the same, a measurement of several runs by its "
                        "median row alone); of third-party results: drs "
                        "(both servers' DRS reports of drsftp's copies)")
    r.add_argument("--tunings", help="only these tunings, in this order (comma-separated)")
    r.add_argument("--base",
                   help="the tuning --table versus divides by, default kernel (field results: the entry the "
                        "ratios divide by, default gridftp-p4-16M)")
    r.add_argument("--profile", help="only runs on this host profile (default, tuned)")
    r.add_argument("--plots", metavar="DIR",
                   help="also draw the plots of the merged runs into DIR (compete results: goodput over time, "
                        "and goodput against the drs:CAP the files vary)")
    r.add_argument("--direction", choices=("get", "put"), help="only runs in this direction")
    r.add_argument("--loss", help="only runs with this loss (e.g. 0, 0.1%%)")
    r.add_argument("--rate", help="only runs on this link rate (e.g. 100mbit)")
    r.add_argument("--rtt", help="only runs with this RTT (e.g. 100ms)")
    r.add_argument("--dataset", help="field results: only this dataset's table (big, small, mixed, deep), untitled")
    r.set_defaults(func=cmd_benchreport)


def report_tables() -> list[str]:
    from .compare.report import TABLES

    return list(TABLES) + ["versus"]


def _run_filter(args):
    """A predicate for --profile/--direction/--loss/--rate/--rtt (values as the bench takes them),
    each value checked now."""
    def value(option: str, text: str, parse):
        try:
            return parse(text)
        except NetemError as exc:
            raise NetemUsageError(f"{option}: {exc}") from None

    want = []
    if getattr(args, "profile", None) is not None:
        want.append(lambda r: r["profile"] == args.profile)
    if args.direction is not None:
        want.append(lambda r: r["direction"] == args.direction)
    if args.loss is not None:
        loss = value("--loss", args.loss, parse_loss)
        want.append(lambda r: abs(r["loss"] - loss) < 1e-12)
    if args.rate is not None:
        rate = value("--rate", args.rate, parse_rate)
        want.append(lambda r: abs(r["rate_bps"] - rate) < 1)
    if args.rtt is not None:
        rtt = value("--rtt", args.rtt, parse_duration)
        want.append(lambda r: abs(r["rtt_s"] - rtt) < 1e-9)
    return lambda r: all(w(r) for w in want)




def cmd_benchreport(args) -> int:
    from .compare.report import markdown, merge_latest, plot
    from .saved import read_results

    keep = _run_filter(args)
    tunings = (option_choices("--tunings", args.tunings, T.TUNINGS, "tuning") if args.tunings is not None
               else list(T.TUNINGS))
    saved = [read_results(path) for path in args.results]
    if any(s.kind == "compete" for s in saved):
        if any(s.kind != "compete" for s in saved):
            raise NetemError("compete results (drsftp bench compete) print alone")
        return compete_report(args, [(path, d) for path, s in zip(args.results, saved) for d in s.results or []])
    if any(s.kind == "third-party" for s in saved):
        if any(s.kind != "third-party" for s in saved):
            raise NetemError("third-party results (drsftp bench third-party) print alone")
        from .thirdparty.cli import third_report

        return third_report(args, [s.data or {} for s in saved])
    if any(s.kind == "smallfiles" for s in saved):
        if len(saved) > 1 or any(getattr(args, name) is not None for name in (
                "table", "tunings", "base", "dataset", *RUN_FILTERS)):
            raise NetemUsageError("small-files results (drsftp bench smallfiles) print alone, with --plots only")
        from .smallfiles.run import plot as small_plot
        from .smallfiles.run import table as small_table

        print(small_table(saved[0].data or {}))
        if args.plots:
            os.makedirs(args.plots, exist_ok=True)
            print(f"plot: {small_plot(saved[0].data or {}, os.path.join(args.plots, 'smallfiles.png'))}",
                  file=sys.stderr)
        return 0
    if any(s.kind == "field" for s in saved):
        if any(s.kind != "field" for s in saved):
            raise NetemError("field results (drsftp bench field) print alone")
        from .field.cli import field_report

        return field_report(args, [r for s in saved for r in s.runs])
    if args.dataset is not None:
        raise NetemUsageError("--dataset applies to field results only (drsftp bench field)")
    if args.table == "drs":
        raise NetemUsageError("--table drs applies to third-party results (drsftp bench third-party)")
    if args.table in COMPETE_TABLES:
        raise NetemUsageError(f"--table {args.table} applies to compete results (drsftp bench compete)")
    base = or_default(args.base, "kernel")
    if base not in T.TUNINGS:
        raise NetemUsageError(f"unknown --base {base!r}; choose from {', '.join(T.TUNINGS)}")
    if args.base is not None and args.table != "versus":
        raise NetemUsageError("--base goes with --table versus (or with field results)")
    runs = [r for r in merge_latest([s.runs for s in saved]) if keep(r)]
    if not runs:
        filtered = any(getattr(args, f, None) is not None for f in RUN_FILTERS)
        raise NetemError("no runs match the filters" if filtered else "these results hold no runs")
    if args.table == "versus" and not any(r["tuning"] == base and not r.get("error") for r in runs):
        have = [t for t in T.TUNINGS if any(r["tuning"] == t and not r.get("error") for r in runs)]
        raise NetemError(f"no {base} run completed to divide by; --base one of {', '.join(have)}" if have
                         else "no run completed")
    env = next((s.env for s in saved if s.env), None)
    print(markdown(env, runs, tunings, args.table, base))
    if args.plots:
        os.makedirs(args.plots, exist_ok=True)
        for p in plot(runs, args.plots):
            print(f"plot: {p}", file=sys.stderr)
    return 0
