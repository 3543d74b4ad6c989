"""`drsftp bench smallfiles`: trees of many small files on loopback beside
GridFTP and lftp, time and peak memory of client and server at each count
(docs/BENCHMARKS.md, "Small files"), and benchreport's table of its results."""

from __future__ import annotations

import json
import math
import os
import sys

from ...netem.errors import NetemError, NetemUsageError
from ...tuning import parse_size
from ..common.options import need_bench_extras, option_choices, option_values, or_default

RESULT_FILE = "smallfiles.json"
DEFAULT_COUNTS = "10000,100000,1000000"


def add_parser(modes) -> None:
    from .run import DEFAULT_ENTRIES

    p = modes.add_parser("smallfiles", help="trees of many small files on loopback: time and memory of both ends")
    p.add_argument("--counts", help=f"files in the tree, comma-separated (default {DEFAULT_COUNTS})")
    p.add_argument("--entries", help=f"of {', '.join(DEFAULT_ENTRIES)} (default all)")
    p.add_argument("--size", default="1KiB", help="each file is 0 to SIZE bytes (default 1KiB)")
    p.add_argument("--per-dir", type=int, default=1000, help="files in one directory (default 1000)")
    p.add_argument("--listing", type=int, metavar="N",
                   help="also the server's memory while listing one directory of N entries (MLSD, LIST, NLST)")
    p.add_argument("--reps", type=int, default=3, help="runs of each entry at each count, alternating (default 3)")
    p.add_argument("--workdir", default="/dev/shm", help="where the trees are made: tmpfs (default /dev/shm)")
    p.add_argument("--max-time", type=float, default=1800.0, help="seconds one run may take (default 1800)")
    p.add_argument("--out", default="bench-results", help=f"directory for {RESULT_FILE} and its plot")
    p.add_argument("--no-plots", action="store_true", help="skip the plot of time and memory against the count")
    p.set_defaults(func=cmd_smallfiles)


def _config(args):
    from .run import DEFAULT_ENTRIES, SmallConfig

    counts = option_values("--counts", or_default(args.counts, DEFAULT_COUNTS), int)
    if any(c < 1 or c > 10_000_000 for c in counts):
        raise NetemUsageError("--counts: each count must be 1 to 10,000,000 files")
    entries = option_choices("--entries", or_default(args.entries, ",".join(DEFAULT_ENTRIES)), DEFAULT_ENTRIES,
                             "entry")
    try:
        size = parse_size(args.size)
    except ValueError as exc:
        raise NetemUsageError(f"--size: {exc}") from None
    if args.per_dir < 1:
        raise NetemUsageError("--per-dir must be at least 1")
    if args.reps < 1:
        raise NetemUsageError("--reps must be at least 1")
    if args.listing is not None and not 1 <= args.listing <= 10_000_000:
        raise NetemUsageError("--listing must be 1 to 10,000,000 entries")
    if not (math.isfinite(args.max_time) and args.max_time > 0):
        raise NetemUsageError(f"--max-time must be a number of seconds above 0, not {args.max_time:g}")
    if not os.path.isdir(args.workdir):
        raise NetemUsageError(f"--workdir {args.workdir} is not a directory")
    return SmallConfig(counts=counts, entries=entries, reps=args.reps, size=size, per_dir=args.per_dir,
                       workdir=args.workdir, max_time=args.max_time, listing=args.listing,
                       log=lambda msg: print(msg, file=sys.stderr, flush=True))


def cmd_smallfiles(args) -> int:
    from .run import missing_programs, plot, run_smallfiles, table

    cfg = _config(args)
    need_bench_extras()
    missing = missing_programs(cfg.entries)
    if missing:
        raise NetemError(f"not installed: {', '.join(missing)} (./run setup installs them as root)")
    os.makedirs(args.out, exist_ok=True)
    try:
        data = run_smallfiles(cfg)
    except RuntimeError as exc:
        raise NetemError(str(exc)) from None
    out = os.path.join(args.out, RESULT_FILE)
    with open(out, "w") as f:
        json.dump(data, f, indent=1)
    print(table(data))
    shown = [out]
    if not args.no_plots and (png := plot(data, os.path.join(args.out, "smallfiles.png"))):
        shown.append(png)
    print(f"results: {', '.join(shown)}")
    return 1 if data["runs"] and all(not r["ok"] for r in data["runs"]) else 0
