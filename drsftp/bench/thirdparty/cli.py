"""`drsftp bench third-party [ENTRIES]` and `drsftp benchreport
third-party.json`: the options of the third-party bench (run.py;
docs/BENCHMARKS.md, "Third-party")."""

from __future__ import annotations

import json
import math
import os
import sys

from ...netem.errors import NetemError, NetemUsageError
from ...netem.spec import parse_duration, parse_loss, parse_rate
from ..common.options import (
    RUN_FILTERS,
    add_link_options,
    add_run_options,
    check_link_value,
    check_run_options,
    need_bench_extras,
    option_values,
    or_default,
)

THIRD_RATE, THIRD_RTT, THIRD_LOSS = "1gbit", "100ms", "0"
RESULT_FILE = "third-party.json"


def add_parser(modes) -> None:
    p = modes.add_parser("third-party",
                         help="third-party copies on a three-node topology beside GridFTP's and XRootD's")
    p.add_argument("third_party", nargs="?", default="default", metavar="ENTRIES",
                   help="default, all, or entry names, comma-separated: drsftp copy between two drsftp serves "
                        "(ftp:// and https://) beside GridFTP's third-party transfers, a direct get on B and "
                        "gfal-copy pulls between two drsftp serves and two XRootDs (client 5 ms from A and "
                        "from B, A-B of one --rates/--rtts)")
    add_link_options(p, THIRD_RTT, THIRD_RATE, THIRD_LOSS, what=" (one value, the A-B link)")
    p.add_argument("--scale", type=float,
                   help="shrink the datasets' sizes and counts, above 0 to 1 (0.25: a quarter)")
    add_run_options(p, RESULT_FILE)
    p.set_defaults(func=cmd_third)


def _one(option: str, text: str, parse):
    values = option_values(option, text, parse)
    if len(values) > 1:
        raise NetemUsageError(f"the third-party bench runs on one A-B link: give one {option} value")
    return values[0]


def third_config(args):
    """The bench's entries and A-B link, every value checked before anything is made."""
    from ..common.tunings import Path
    from .run import ThirdConfig, entry_names

    try:
        entries = entry_names(args.third_party)
    except ValueError as exc:
        raise NetemUsageError(str(exc)) from None
    rate = _one("--rates", or_default(args.rates, THIRD_RATE), parse_rate)
    rtt = _one("--rtts", or_default(args.rtts, THIRD_RTT), parse_duration)
    loss = _one("--losses", or_default(args.losses, THIRD_LOSS), parse_loss)
    check_link_value("--rates", rate=rate)
    check_link_value("--rtts", rtt=rtt)
    check_link_value("--losses", loss=loss)
    if rate <= 0:
        raise NetemUsageError("--rates: a bench rate must be above 0 (0 is a link without a ceiling)")
    path = Path(rate=rate, rtt=rtt, loss=loss, queue=args.queue)
    if path.bdp < 1:
        raise NetemUsageError(f"the BDP (rate x RTT) must be a byte or more (memory is given in BDPs), not 0 "
                              f"at {path.label()}")
    scale = 1.0 if args.scale is None else args.scale
    if not (math.isfinite(scale) and 0 < scale <= 1):
        raise NetemUsageError(f"--scale must be above 0 and at most 1, not {scale:g}")
    return ThirdConfig(path=path, entries=entries, reps=args.reps or 3, scale=scale, cc=args.cc,
                       max_time=2 * args.max_time, log=lambda msg: print(msg, file=sys.stderr, flush=True))


def cmd_third(args) -> int:
    from ..common.host import environment
    from .report import report
    from .run import run_third

    check_run_options(args)
    cfg = third_config(args)
    need_bench_extras()
    os.makedirs(args.out, exist_ok=True)
    try:
        data = run_third(cfg)
    except RuntimeError as exc:
        raise NetemError(str(exc)) from None
    data["environment"] = environment(cc=cfg.cc)
    out = os.path.join(args.out, RESULT_FILE)
    with open(out, "w") as f:
        json.dump(data, f, indent=1)
    print(report(data))
    print(f"results: {out}")
    runs = data["runs"]
    failed = (runs and all(r.get("error") for r in runs)) or not (data.get("bounce") or {}).get("refused", True)
    return 1 if failed else 0



def third_report(args, datas: list[dict]) -> int:
    """Third-party results: their tables; --dataset big|small prints that table alone, --base its reference."""
    from .report import drs_table, report
    from .run import ENTRIES

    stray = [f"--{name}" for name in ("tunings", *RUN_FILTERS, "plots") if getattr(args, name) is not None]
    if args.table not in (None, "drs"):
        stray.insert(0, f"--table {args.table}")
    if stray:
        raise NetemUsageError(f"{stray[0]} applies to bench results, not third-party results (those take "
                              "--dataset, --base and --table drs)")
    if args.table == "drs" and (args.dataset is not None or args.base is not None):
        raise NetemUsageError("--table drs prints the DRS table alone: without --dataset or --base")
    if args.base is not None and args.base not in ENTRIES:
        raise NetemUsageError(f"unknown --base {args.base!r}; choose from {', '.join(ENTRIES)}")
    refs = (args.base,) if args.base else None
    for data in datas:
        if args.table == "drs":
            print(drs_table(data["runs"]) or "no copy between two drsftp serves completed in these results")
            continue
        if args.dataset is not None:
            have = list(dict.fromkeys(r["workload"] for r in data["runs"]))
            if args.dataset not in have:
                raise NetemError(f"no runs of the {args.dataset!r} dataset in these results (they hold "
                                 f"{', '.join(have) or 'none'})")
        print(report(data, args.dataset, refs))
    return 0
