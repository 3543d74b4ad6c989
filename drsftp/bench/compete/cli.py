"""`drsftp bench compete SPEC` and `drsftp benchreport compete-*.json`:
the options of a competition over one bottleneck (docs/BENCHMARKS.md,
"Sharing the link")."""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Callable
from typing import Any

from ...netem.errors import NetemError, NetemUsageError
from ...netem.spec import parse_duration, parse_loss, parse_rate
from ..common import tunings as T
from ..common.options import (
    RUN_FILTERS,
    add_command,
    add_link_options,
    add_run_options,
    check_link_value,
    check_run_options,
    need_bench_extras,
    option_values,
    or_default,
    size_option,
)

COMPETE_RATE, COMPETE_RTT, COMPETE_LOSS, COMPETE_DURATION = "100mbit", "100ms", "0", 30.0
MAX_DURATION = 3600.0
# benchreport's tables of compete results: a row per competition, a row per flow's window (outputs.py)
COMPETE_TABLES = ("sweep", "window", "sharing", "medians")


def add_parser(modes) -> None:
    p = add_command(modes, "compete", "several flows over one link: goodput over time, memory, fairness", "compete",
                    metavar="SPEC",
                    help="the flows: [N*]KIND[@DELAY] joined by +, KIND a tuning of `bench compare`, fixed:SIZE, "
                         "drs:CAP (DRS capped at CAP), drs-P-N, drs-P-auto, gridftp-pN, iperf3 or iperf3:SIZE "
                         "(iperf3 -w SIZE), e.g. 10*stock-64k+1*drs or drs-P-auto+2*drs@10s")
    add_link_options(p, COMPETE_RTT, COMPETE_RATE, COMPETE_LOSS, what=" (one value)")
    p.add_argument("--profiles", help="the host profile, default or tuned (one value; default: default)")
    p.add_argument("--duration", type=float,
                   help=f"seconds each flow runs (default {COMPETE_DURATION:g}; --size instead: each flow moves "
                        "a file of SIZE, capped by --max-time)")
    p.add_argument("--size", help="each flow moves a file of this size instead of running --duration seconds")
    p.add_argument("--force-buffers", action="store_true",
                   help="let drs/manual/probe-static use SO_*BUFFORCE past rmem_max (root)")
    add_run_options(p, "compete-*.json and its plot", reps=False)
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.set_defaults(func=cmd_compete)


def one_value(option: str, text: str, parse: Callable[[str], Any]) -> Any:
    values = option_values(option, text, parse)
    if len(values) > 1:
        raise NetemUsageError(f"a competition runs on one link: give one {option} value")
    return values[0]


def compete_config(args):
    """The competition's flows, link and length, every value checked before anything is made."""
    from ..common.host import PROFILES
    from .run import CompeteConfig
    from .spec import parse_compete

    try:
        flows = parse_compete(args.compete)
    except ValueError as exc:
        raise NetemUsageError(f"SPEC: {exc}") from None
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
    check_run_options(args)
    cfg = compete_config(args)
    need_bench_extras()
    from .outputs import run_and_report

    return run_and_report(cfg, args.out, plots=not args.no_plots)


def compete_report(args, datas: list[tuple[str, dict]]) -> int:
    """Compete results: each file's tables, or one table over them all (--table sweep, window or sharing), and
    their plots (outputs.py)."""
    from .outputs import report

    stray = [f"--{name}" for name in ("tunings", "base", *RUN_FILTERS, "dataset") if getattr(args, name) is not None]
    if args.table is not None and args.table not in COMPETE_TABLES:
        stray.insert(0, f"--table {args.table}")
    if stray:
        raise NetemUsageError(f"{stray[0]} applies to bench results, not compete results (those take --plots "
                              f"and --table {' or '.join(COMPETE_TABLES)})")
    return report(datas, args.plots, args.table)
