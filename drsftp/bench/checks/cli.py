"""`drsftp datapath` and `drsftp netemcheck`: is Python the bottleneck, and how
faithful is the emulated link (docs/BENCHMARKS.md, docs/NETEM.md)."""

from __future__ import annotations

from ...netem.errors import NetemUsageError
from ...netem.spec import parse_duration, parse_loss, parse_rate
from ..common.options import check_link_value, need_bench_extras, option_choices, option_values, or_default, size_option

NETEMCHECK_RTTS, NETEMCHECK_LOSSES = "0.5ms,25ms,100ms", "0.1%,1%"
NETEMCHECK_PATHS = "100mbit/100ms,1gbit/100ms,100mbit/20ms,0/100ms"


def add_parsers(sub) -> None:
    d = sub.add_parser("datapath", help="data path: drsftp serve and vsftpd with drsftp and curl clients,"
                                        " 1 GiB each way, CPU at both ends and their sum")
    d.add_argument("--size", default="1GiB", help="file size (default 1GiB)")
    d.add_argument("--reps", type=int, default=1, help="runs of each pair and direction (default 1)")
    d.add_argument("--rate", help="on an emulated link (drsftp netem, root) of this rate, e.g. 1gbit;"
                                  " default: loopback")
    d.add_argument("--rtt", help="the emulated link's round-trip time (with --rate; default 0.5ms)")
    d.add_argument("--out", default="bench-results", help="directory for datapath-WHERE.json")
    d.set_defaults(func=cmd_datapath)

    n = sub.add_parser("netemcheck", help="emulated link fidelity: RTT, goodput, queue, loss; exit 1 if one is off")
    n.add_argument("--quick", action="store_true",
                   help="shorter runs: iperf3 8 s instead of 15 s, 2000 pings through loss instead of 4000")
    n.add_argument("--backend", choices=("auto", "tc", "tun"), default="auto",
                   help="the links' backend (as drsftp netem up --backend; default auto)")
    n.add_argument("--rtts", default=NETEMCHECK_RTTS, help=f"idle RTTs to ping (default {NETEMCHECK_RTTS})")
    n.add_argument("--paths", default=NETEMCHECK_PATHS,
                   help=f"RATE/RTT links for goodput and the queue, rate 0 for the emulator's own ceiling "
                        f"(default {NETEMCHECK_PATHS})")
    n.add_argument("--losses", default=NETEMCHECK_LOSSES,
                   help=f"loss rates to ping through (default {NETEMCHECK_LOSSES.replace('%', '%%')})")
    n.add_argument("--ccs", default="bbr,reno", help="congestion controls to measure goodput with (default "
                                                     "bbr,reno; a path without a rate takes the first)")
    n.add_argument("--out", default="bench-results", help="directory for the check's JSON")
    n.set_defaults(func=cmd_netemcheck)


def cmd_datapath(args) -> int:
    size = size_option(args.size)
    if args.reps < 1:
        raise NetemUsageError("--reps must be at least 1")
    link = None
    if args.rate is not None:
        link = (parse_rate(args.rate), parse_duration(or_default(args.rtt, "0.5ms")))
        check_link_value("--rate/--rtt", rate=link[0], rtt=link[1])
    elif args.rtt is not None:
        raise NetemUsageError("--rtt goes with --rate (loopback has no RTT to set)")
    need_bench_extras()
    from .datapath import run_datapath

    return run_datapath(size, args.reps, args.out, link)


def cmd_netemcheck(args) -> int:
    from .netemcheck import CheckPlan, parse_path, run_netem_check

    rtts = option_values("--rtts", args.rtts, parse_duration) if args.rtts.strip() else []
    paths = option_values("--paths", args.paths, lambda p: parse_path(p, parse_rate, parse_duration)) \
        if args.paths.strip() else []
    losses = option_values("--losses", args.losses, parse_loss) if args.losses.strip() else []
    for rtt in rtts:
        check_link_value("--rtts", rtt=rtt)
    for loss in losses:
        check_link_value("--losses", loss=loss)
    if not (rtts or paths or losses):
        raise NetemUsageError("nothing to check: --rtts, --paths and --losses are all empty")
    ccs = option_choices("--ccs", args.ccs, ("bbr", "cubic", "reno"), "congestion control")
    plan = CheckPlan(rtts=rtts, paths=paths, losses=losses, backend=args.backend, ccs=tuple(ccs),
                seconds=8 if args.quick else 15, loss_pings=2000 if args.quick else 4000)
    return run_netem_check(args.out, plan)
