"""`drsftp bench --compete SPEC` and `drsftp benchreport compete-*.json`:
the options of a competition over one bottleneck (docs/BENCHMARKS.md,
"Sharing the link")."""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Callable
from typing import Any

from ..netem.errors import NetemError, NetemUsageError
from ..netem.spec import parse_duration, parse_loss, parse_rate
from . import tunings as T
from .options import (
    RUN_FILTERS,
    check_link_value,
    given_options,
    need_bench_extras,
    option_values,
    or_default,
    size_option,
)

COMPETE_RATE, COMPETE_RTT, COMPETE_LOSS, COMPETE_DURATION = "100mbit", "100ms", "0", 30.0
MAX_DURATION = 3600.0
# benchreport's tables of compete results: a row per competition, a row per flow's window (bench/compete.py)
COMPETE_TABLES = ("sweep", "window", "sharing")


def one_value(option: str, text: str, parse: Callable[[str], Any]) -> Any:
    values = option_values(option, text, parse)
    if len(values) > 1:
        raise NetemUsageError(f"--compete runs on one link: give one {option} value")
    return values[0]


def compete_config(args):
    """--compete's flows, link and length, every value checked before anything is made."""
    from .competerun import CompeteConfig
    from .competespec import parse_compete
    from .runner import PROFILES

    stray = given_options(args, ("quick", "tunings", "directions", "reps", "resume", "streams", "peers", "datasets",
                          "scale", "third_party"))
    if stray:
        raise NetemUsageError(f"{stray[0]} does not apply to --compete (one link, the flows of SPEC)")
    try:
        flows = parse_compete(args.compete)
    except ValueError as exc:
        raise NetemUsageError(f"--compete: {exc}") from None
    rate = one_value("--rates", or_default(args.rates, COMPETE_RATE), parse_rate)
    rtt = one_value("--rtts", or_default(args.rtts, COMPETE_RTT), parse_duration)
    loss = one_value("--losses", or_default(args.losses, COMPETE_LOSS), parse_loss)
    check_link_value("--rates", rate=rate)
    check_link_value("--rtts", rtt=rtt)
    if rate <= 0:
        raise NetemUsageError("--rates: a bench rate must be above 0 (0 is a link without a ceiling)")
    profile = one_value("--profiles", or_default(args.profiles, "default"), str)
    if profile not in PROFILES:
        raise NetemUsageError(f"unknown profile {profile!r}; choose from {', '.join(PROFILES)}")
    if args.size is not None and args.duration is not None:
        raise NetemUsageError("--duration and --size exclude each other (a time or a file for each flow)")
    duration = None if args.size is not None else (COMPETE_DURATION if args.duration is None else args.duration)
    if duration is not None and not (math.isfinite(duration) and 0 < duration <= MAX_DURATION):
        raise NetemUsageError(f"--duration must be seconds above 0, at most {MAX_DURATION:g}, not {duration:g}")
    for flow in {f.kind: f for f in flows}.values():
        why = T.available(flow.kind) or (None if flow.family != "iperf3" or shutil.which("iperf3") else
                                         "iperf3 not installed (./run setup installs it as root)")
        if why:
            raise NetemError(f"{flow.kind} cannot run here: {why}")
    return CompeteConfig(spec=args.compete, flows=flows, path=T.Path(rate=rate, rtt=rtt, loss=loss, queue=args.queue),
                         duration=duration, size=size_option(args.size) if args.size else None, max_time=args.max_time,
                         profile=profile, force=args.force_buffers, cc=args.cc, workdir=args.out,
                         log=lambda msg: print(msg, file=sys.stderr, flush=True))


def cmd_compete(args) -> int:
    cfg = compete_config(args)
    need_bench_extras()
    from .compete import run_and_report

    return run_and_report(cfg, args.out, plots=not args.no_plots)


def compete_report(args, datas: list[tuple[str, dict]]) -> int:
    """Compete results: each file's tables, or one table over them all (--table sweep, window or sharing), and
    their plots (bench/compete.py)."""
    from .compete import report

    stray = [f"--{name}" for name in ("tunings", "base", *RUN_FILTERS, "dataset") if getattr(args, name) is not None]
    if args.table is not None and args.table not in COMPETE_TABLES:
        stray.insert(0, f"--table {args.table}")
    if stray:
        raise NetemUsageError(f"{stray[0]} applies to bench results, not compete results (those take --plots "
                              f"and --table {' or '.join(COMPETE_TABLES)})")
    return report(datas, args.plots, args.table)
