"""`drsftp bench compare`: DRS against stock FTP and the other tunings, every
path of a matrix (docs/BENCHMARKS.md, "How it compares")."""

from __future__ import annotations

import os
import shutil
import sys

from ...netem.errors import NetemError, NetemUsageError
from ..common import tunings as T
from ..common.options import (
    add_link_options,
    add_run_options,
    check_run_options,
    given_options,
    link_paths,
    need_bench_extras,
    option_choices,
    or_default,
    size_option,
)

QUICK_TUNINGS = ["stock-64k", "kernel", "drs"]
DEFAULT_RTTS, DEFAULT_RATES, DEFAULT_LOSSES = "0.5ms,25ms,50ms,100ms", "100mbit,1gbit", "0,0.1%"


def add_parser(modes) -> None:
    p = modes.add_parser("compare", help="DRS against stock FTP and the other tunings over a matrix of paths")
    p.add_argument("--quick", action="store_true",
                   help="100 Mbit/s, 100 ms: stock-64k, kernel, drs, once each (a few minutes at most)")
    add_link_options(p, DEFAULT_RTTS, DEFAULT_RATES, DEFAULT_LOSSES)
    p.add_argument("--tunings", help=f"any of {', '.join(T.TUNINGS)} (default all)")
    p.add_argument("--directions", help="get (download), put (upload) or both (default get,put)")
    p.add_argument("--profiles", help="default (host as is), tuned (ESnet-style); default both")
    p.add_argument("--size", help="file size (default: 12 s at line rate, at least 128 MiB)")
    p.add_argument("--force-buffers", action="store_true",
                   help="let drs/manual/probe-static use SO_*BUFFORCE past rmem_max (root)")
    add_run_options(p, "results.json/.csv and plots")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--resume", action="store_true",
                   help="keep the runs already in OUT/results.json and measure only the missing ones "
                        "(a full matrix takes hours: run it in several goes)")
    p.set_defaults(func=cmd_compare)


def cmd_compare(args) -> int:
    from ..common.host import PROFILES

    check_run_options(args)
    if args.quick:
        stray = given_options(args, ("rtts", "rates", "losses", "tunings", "directions", "profiles", "reps"))
        if stray:
            raise NetemUsageError(f"{stray[0]} does not apply to --quick (100 Mbit/s, 100 ms, "
                                  f"{', '.join(QUICK_TUNINGS)}, one get each)")
        paths = [T.Path(rate=100e6, rtt=0.1, queue=args.queue)]
        tunings, directions, profiles, reps = QUICK_TUNINGS, ["get"], ["default"], 1
        size: int | None = size_option(args.size) if args.size else 64 << 20
        max_time = min(args.max_time, 25.0)
    else:
        paths = link_paths(args, DEFAULT_RTTS, DEFAULT_RATES, DEFAULT_LOSSES)
        tunings = option_choices("--tunings", or_default(args.tunings, ",".join(T.TUNINGS)), T.TUNINGS, "tuning")
        directions = option_choices("--directions", or_default(args.directions, "get,put"), ("get", "put"),
                                    "direction")
        profiles = option_choices("--profiles", or_default(args.profiles, ",".join(PROFILES)), tuple(PROFILES),
                                  "profile")
        reps = args.reps or 3
        size = size_option(args.size) if args.size else None
        max_time = args.max_time
    need_bench_extras()
    from .runner import BenchConfig, run_bench, run_key

    prior = _resumed(args.out) if args.resume else []
    from .report import plot, print_table, verdict, write_files

    cfg = BenchConfig(paths=paths, tunings=tunings, directions=directions, profiles=profiles, reps=reps,
                      size=size, max_time=max_time, force=args.force_buffers, workdir=args.out, cc=args.cc,
                      log=lambda msg: print(msg, file=sys.stderr, flush=True),
                      done={run_key(r) for r in prior},
                      checkpoint=lambda env, new: write_files(env, prior + new, args.out))
    env, results = run_bench(cfg)
    results = prior + results
    print_table(env, results, tunings, compact=args.quick)
    files = write_files(env, results, args.out)
    shown = list(files.values()) + ([] if args.no_plots else plot(results, args.out))
    print("results: " + ", ".join(shown))
    print(verdict(results, tunings))
    _cleanup_data(args.out)
    return 1 if results and all(r.get("error") for r in results) else 0


def _resumed(outdir: str) -> list[dict]:
    """--resume: the runs of OUT/results.json that completed (none if there is no file)."""
    from ..saved import read_results

    saved = os.path.join(outdir, "results.json")
    if not os.path.exists(saved):
        return []
    try:
        got = read_results(saved)
    except NetemError as exc:
        raise NetemError(f"--resume: {exc}") from None
    if got.kind != "bench":
        raise NetemError(f"--resume: {saved} holds {got.kind} results, not the comparison's")
    return [r for r in got.runs if not r.get("error")]


def _cleanup_data(outdir: str) -> None:
    """Keep results and plots; drop the large transfer files."""
    for sub in ("root", "client"):
        d = os.path.join(outdir, sub)
        if os.path.isdir(d):
            shutil.rmtree(d, ignore_errors=True)
