"""`drsftp bench field`: drsftp beside GridFTP, lftp, rclone, davix and
XRootD on one link per path (docs/BENCHMARKS.md, "Against the field" and
"HTTPS"), and benchreport's table of its results."""

from __future__ import annotations

import json
import math
import os
import sys

from ...netem.errors import NetemError, NetemUsageError
from ..common.options import (
    RUN_FILTERS,
    add_link_options,
    add_run_options,
    check_run_options,
    link_paths,
    need_bench_extras,
    option_values,
    or_default,
)

FIELD_RTT, FIELD_RATE, FIELD_LOSS = "100ms", "1gbit", "0"
RESULT_FILE = "field.json"


def add_parser(modes) -> None:
    from .run import ENTRIES

    peers = [n for n in ENTRIES if not n.startswith("drsftp")]
    p = modes.add_parser("field", help="drsftp beside GridFTP, lftp, rclone, davix and XRootD on one link per path")
    p.add_argument("--streams", metavar="LIST",
                   help="drsftp get -P N for each N of LIST (1,2,4,8,auto) beside --peers (default 1)")
    p.add_argument("--peers", metavar="LIST", help="the other tools' columns, of " + ", ".join(peers))
    p.add_argument("--datasets", metavar="LIST",
                   help="big (one 512 MiB file; the default), small (200 x 1 MiB), mixed (one 256 MiB file and "
                        "1,000 x 64 KiB), deep (small's files in 40 directories); trees run drsftp get -r -c auto")
    p.add_argument("--scale", type=float,
                   help="shrink the datasets' sizes and counts, above 0 to 1 (0.25: a quarter)")
    add_link_options(p, FIELD_RTT, FIELD_RATE, FIELD_LOSS, queue=False)
    add_run_options(p, RESULT_FILE)
    p.set_defaults(func=cmd_field)


def cmd_field(args) -> int:
    from .run import FieldConfig, entry_names, run_field, table, workload

    check_run_options(args)
    scale = 1.0 if args.scale is None else args.scale
    if not (math.isfinite(scale) and 0 < scale <= 1):
        raise NetemUsageError(f"--scale must be above 0 and at most 1, not {scale:g}")
    datasets = option_values("--datasets", or_default(args.datasets, "big"), lambda d: workload(d).name)
    entries = [("drsftp" if n == "1" else f"drsftp-P{n}")
               for n in option_values("--streams", or_default(args.streams, "1"))]
    if any(d != "big" for d in datasets):
        entries.append("drsftp-r")
    if args.peers is not None:
        entries += option_values("--peers", args.peers)
    try:
        entries = entry_names(",".join(dict.fromkeys(entries)))
    except ValueError as exc:
        raise NetemUsageError(str(exc)) from None
    args.queue = None
    paths = link_paths(args, FIELD_RTT, FIELD_RATE, FIELD_LOSS)
    for path in paths:
        if path.bdp < 1:  # the table and its log give memory in BDPs
            raise NetemUsageError(f"against the field the BDP (rate x RTT) must be a byte or more (memory is "
                                  f"given in BDPs), not 0 at {path.label()}")
    reps = args.reps or 3
    need_bench_extras()
    os.makedirs(args.out, exist_ok=True)
    results: list[dict] = []
    out = os.path.join(args.out, RESULT_FILE)
    for path in paths:
        cfg = FieldConfig(path=path, entries=entries, workloads=datasets, reps=reps, scale=scale, cc=args.cc,
                          max_time=2 * args.max_time, log=lambda msg: print(msg, file=sys.stderr, flush=True))
        try:
            results += run_field(cfg)
        except RuntimeError as exc:
            raise NetemError(str(exc)) from None
        with open(out, "w") as f:
            json.dump({"field": 1, "results": results}, f, indent=1)
    print(table(results))
    print(f"results: {out}")
    return 1 if results and all(r.get("error") for r in results) else 0


def field_report(args, runs: list[dict]) -> int:
    """Field results: the table of each dataset (--dataset: that one, untitled; --base: the reference)."""
    from .run import ENTRIES, table

    stray = [f"--{name}" for name in ("table", "tunings", *RUN_FILTERS, "plots") if getattr(args, name) is not None]
    if stray:
        raise NetemUsageError(f"{stray[0]} applies to bench results, not field results (those take --dataset "
                              "and --base)")
    base = or_default(args.base, "gridftp-p4-16M")
    if base not in ENTRIES:
        raise NetemUsageError(f"unknown --base {base!r}; choose from {', '.join(ENTRIES)}")
    if args.dataset is not None:
        have = list(dict.fromkeys(r["workload"] for r in runs))
        runs = [r for r in runs if r["workload"] == args.dataset]
        if not runs:
            raise NetemError(f"no runs of the {args.dataset!r} dataset in these results (they hold "
                             f"{', '.join(have) or 'none'})")
    if not runs:
        raise NetemError("these results hold no runs")
    if args.base is not None and not any(r["entry"] == base and r["complete"] for r in runs):
        have = list(dict.fromkeys(r["entry"] for r in runs if r["complete"]))
        raise NetemError(f"no {base} run completed to divide by; --base one of {', '.join(have)}" if have
                         else "no run completed")
    print(table(runs, reference=base, titles=args.dataset is None))
    return 0
