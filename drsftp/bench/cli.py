"""`drsftp bench`: DRS against stock FTP and the other tunings on the emulated WAN."""

from __future__ import annotations

import math
import os
import shutil
import sys

from ..netem.errors import NetemError, NetemUsageError
from ..netem.spec import parse_duration, parse_loss, parse_rate
from . import tunings as T
from .competecli import (
    COMPETE_DURATION,
    COMPETE_LOSS,
    COMPETE_RATE,
    COMPETE_RTT,
    COMPETE_TABLES,
    cmd_compete,
    compete_report,
)
from .options import (
    RUN_FILTERS,
    check_link_value,
    given_options,
    need_bench_extras,
    option_choices,
    option_values,
    or_default,
    size_option,
)

QUICK_TUNINGS = ["stock-64k", "kernel", "drs"]
DEFAULT_RTTS, DEFAULT_RATES, DEFAULT_LOSSES = "0.5ms,25ms,50ms,100ms", "100mbit,1gbit", "0,0.1%"
FIELD_RTT, FIELD_RATE, FIELD_LOSS = "100ms", "1gbit", "0"
FIELD_OPTIONS = "--streams, --peers, --datasets"
NETEMCHECK_RTTS, NETEMCHECK_LOSSES = "0.5ms,25ms,100ms", "0.1%,1%"
NETEMCHECK_PATHS = "100mbit/100ms,1gbit/100ms,100mbit/20ms,0/100ms"


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="compare DRS with stock FTP and other tunings on an emulated WAN")
    p.add_argument("--quick", action="store_true",
                   help="100 Mbit/s, 100 ms: stock-64k, kernel, drs, once each (a few minutes at most)")
    p.add_argument("--rtts", help=f"round-trip times to emulate, comma-separated (default {DEFAULT_RTTS}; "
                                  f"against the field {FIELD_RTT})")
    p.add_argument("--rates", help=f"bottleneck rates to emulate, comma-separated (default {DEFAULT_RATES}; "
                                   f"against the field {FIELD_RATE})")
    losses = DEFAULT_LOSSES.replace("%", "%%")  # (argparse formats help with %)
    p.add_argument("--losses", help=f"random loss rates to emulate, comma-separated (default {losses}; "
                                    f"against the field {FIELD_LOSS})")
    p.add_argument("--queue", type=int, help="queue in packets (default 1 BDP, at least 64)")
    p.add_argument("--tunings", help=f"any of {', '.join(T.TUNINGS)} (default all)")
    p.add_argument("--directions", help="get (download), put (upload) or both (default get,put)")
    p.add_argument("--profiles", help="default (host as is), tuned (ESnet-style); default both")
    p.add_argument("--reps", type=int, help="runs of each tuning on each path (default 3)")
    p.add_argument("--size", help="file size (default: 12 s at line rate, at least 128 MiB)")
    p.add_argument("--max-time", type=float, default=60.0, help="seconds one run may take (slow tunings; default 60)")
    p.add_argument("--force-buffers", action="store_true",
                   help="let drs/manual/probe-static use SO_*BUFFORCE past rmem_max (root)")
    p.add_argument("--cc", choices=("bbr", "reno", "cubic"), help="congestion control in the namespaces")
    p.add_argument("--out", default="bench-results",
                   help="directory for results.json/.csv and plots (--compete: compete-*.json and its plot)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--streams", metavar="LIST",
                   help="against the field: drsftp get -P N for each N of LIST (1,2,4,8,auto) beside --peers, "
                        "on one file (docs/BENCHMARKS.md, 'Against the field'); default rate/RTT 1gbit/100ms")
    p.add_argument("--peers", metavar="LIST",
                   help="against the field: the other tools' columns, of " + ", ".join(_peer_entries()))
    p.add_argument("--datasets", metavar="LIST",
                   help="against the field: big (one 512 MiB file), small (200 x 1 MiB), mixed (one 256 MiB file "
                        "and 1,000 x 64 KiB), deep (small's files in 40 directories); trees run drsftp get -r -c auto")
    p.add_argument("--scale", type=float,
                   help="against the field: shrink the datasets' sizes and counts, above 0 to 1 (0.25: a quarter)")
    p.add_argument("--compete", metavar="SPEC",
                   help="several flows over one link: [N*]KIND[@DELAY] joined by +, KIND one of --tunings, "
                        "fixed:SIZE, drs:CAP (DRS capped at CAP), drs-P-N, drs-P-auto, gridftp-pN, iperf3 or "
                        "iperf3:SIZE (iperf3 -w SIZE), e.g. "
                        "10*stock-64k+1*drs or drs-P-auto+2*drs@10s; one value of --rates, --rtts, --losses "
                        f"(default {COMPETE_RATE}, {COMPETE_RTT}, {COMPETE_LOSS}); per-flow goodput over time, "
                        "memory, Jain's index per kind, link use (docs/BENCHMARKS.md, 'Sharing the link')")
    p.add_argument("--duration", type=float,
                   help=f"with --compete: seconds each flow runs (default {COMPETE_DURATION:g}; --size instead: "
                        "each flow moves a file of SIZE, capped by --max-time)")
    p.add_argument("--third-party", nargs="?", const="default", metavar="ENTRIES",
                   help="third-party transfers on a topology (client 5 ms from A and from B, A-B of one "
                        "--rates/--rtts, default 1gbit/100ms): drsftp copy between two drsftp serves beside "
                        "GridFTP's third-party transfers and a direct get on B; ENTRIES: default, all, or names "
                        "(docs/BENCHMARKS.md, 'Third-party')")
    p.add_argument("--resume", action="store_true",
                   help="keep the runs already in OUT/results.json and measure only the missing ones "
                        "(a full matrix takes hours: run it over several sessions)")
    p.set_defaults(func=cmd_bench)

    d = sub.add_parser("datapath", help="data path: drsftp serve and vsftpd with drsftp and curl clients,"
                                        " 1 GiB each way, CPU at both ends and their sum")
    d.add_argument("--size", default="1GiB", help="file size (default 1GiB)")
    d.add_argument("--reps", type=int, default=1, help="runs of each pair and direction (default 1)")
    d.add_argument("--rate", help="on an emulated link (drsftp netem, root) of this rate, e.g. 1gbit;"
                                  " default: loopback")
    d.add_argument("--rtt", help="the emulated link's round-trip time (with --rate; default 0.5ms)")
    d.add_argument("--out", default="bench-results", help="directory for datapath-WHERE.json")
    d.set_defaults(func=cmd_datapath)

    r = sub.add_parser("benchreport", help="Markdown tables (and plots) from saved bench results")
    r.add_argument("results", nargs="+",
                   help="results.json or results.csv files of `drsftp bench` runs (docs/bench-data); "
                        "where a later file holds a path, its runs of that path replace the earlier files'; "
                        "or compete-*.json files of `drsftp bench --compete` (their tables, each file's)")
    r.add_argument("--table", choices=[*report_tables(), *COMPETE_TABLES, "drs"],
                   help="print this table alone: " + ", ".join(report_tables()) + " (versus: the base "
                        "tuning's rate, the others' ratios to it, retransmits, sender memory); of compete "
                        "results: sweep (a row per competition: each kind's goodput and window, the ratios to "
                        "the first kind's, link use) or window (a row per flow: its advertised window, bytes in "
                        "flight and retransmits; with --plots, them over time) or sharing (a row per file: each "
                        "flow's share of the ceiling, link use, Jain while all ran; the medians of runs named "
                        "alike but for a trailing -N); of third-party results: drs "
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


def _peer_entries() -> list[str]:
    from .field import ENTRIES

    return [n for n in ENTRIES if not n.startswith("drsftp")]


def _check_common(args) -> None:
    """What both modes take, checked before anything is made."""
    if args.reps is not None and args.reps < 1:
        raise NetemUsageError("--reps must be at least 1")
    if not (math.isfinite(args.max_time) and args.max_time > 0):
        raise NetemUsageError(f"--max-time must be a number of seconds above 0, not {args.max_time:g}")
    if args.queue is not None:
        check_link_value("--queue", queue=args.queue)


def _paths(args, field: bool) -> list[T.Path]:
    """Every emulated path of the options, each value parsed and within the
    emulator's limits before the first run."""
    rates = option_values("--rates", or_default(args.rates, FIELD_RATE if field else DEFAULT_RATES), parse_rate)
    rtts = option_values("--rtts", or_default(args.rtts, FIELD_RTT if field else DEFAULT_RTTS), parse_duration)
    losses = option_values("--losses", or_default(args.losses, FIELD_LOSS if field else DEFAULT_LOSSES), parse_loss)
    for rate in rates:
        check_link_value("--rates", rate=rate)
        if rate <= 0:
            raise NetemUsageError("--rates: a bench rate must be above 0 (0 is a link without a ceiling)")
    for rtt in rtts:
        check_link_value("--rtts", rtt=rtt)
    paths = [T.Path(rate=r, rtt=t, loss=loss, queue=args.queue) for r in rates for t in rtts for loss in losses]
    for p in paths:
        if field and p.bdp < 1:  # field.table and its log give memory in BDPs
            raise NetemUsageError(f"against the field the BDP (rate x RTT) must be a byte or more (memory is "
                                  f"given in BDPs), not 0 at {p.label()}")
    return paths


def cmd_field(args) -> int:
    """drsftp beside GridFTP and lftp on one link per path (bench/field.py)."""
    import json

    from .field import FieldConfig, entry_names, run_field, table, workload

    stray = given_options(args, ("quick", "tunings", "directions", "profiles", "queue", "size", "force_buffers",
                                 "resume"))
    if stray:
        raise NetemUsageError(f"{stray[0]} does not apply against the field ({FIELD_OPTIONS})")
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
    paths = _paths(args, field=True)
    reps = args.reps or 3
    need_bench_extras()
    os.makedirs(args.out, exist_ok=True)
    results: list[dict] = []
    for path in paths:
        cfg = FieldConfig(path=path, entries=entries, workloads=datasets, reps=reps, scale=scale, cc=args.cc,
                          max_time=2 * args.max_time, log=lambda msg: print(msg, file=sys.stderr, flush=True))
        try:
            results += run_field(cfg)
        except RuntimeError as exc:
            raise NetemError(str(exc)) from None
        out = os.path.join(args.out, "field.json")
        with open(out, "w") as f:
            json.dump({"field": 1, "results": results}, f, indent=1)
    print(table(results))
    print(f"results: {os.path.join(args.out, 'field.json')}")
    return 1 if results and all(r.get("error") for r in results) else 0


def cmd_bench(args) -> int:
    _check_common(args)
    if args.compete is not None:
        return cmd_compete(args)
    if args.third_party is not None:
        from .thirdcli import cmd_third

        return cmd_third(args)
    if args.duration is not None:
        raise NetemUsageError("--duration goes with --compete")
    if any(x is not None for x in (args.streams, args.peers, args.datasets)):
        return cmd_field(args)
    if args.scale is not None:
        raise NetemUsageError(f"--scale applies against the field only ({FIELD_OPTIONS})")
    need_bench_extras()
    from .runner import PROFILES, BenchConfig, run_bench, run_key

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
        paths = _paths(args, field=False)
        tunings = option_choices("--tunings", or_default(args.tunings, ",".join(T.TUNINGS)), T.TUNINGS, "tuning")
        directions = option_choices("--directions", or_default(args.directions, "get,put"), ("get", "put"),
                                    "direction")
        profiles = option_choices("--profiles", or_default(args.profiles, ",".join(PROFILES)), tuple(PROFILES),
                                  "profile")
        reps = args.reps or 3
        size = size_option(args.size) if args.size else None
        max_time = args.max_time
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
    from .saved import read_results

    saved = os.path.join(outdir, "results.json")
    if not os.path.exists(saved):
        return []
    try:
        got = read_results(saved)
    except NetemError as exc:
        raise NetemError(f"--resume: {exc}") from None
    if got.kind != "bench":
        raise NetemError(f"--resume: {saved} holds field results, not the bench's")
    return [r for r in got.runs if not r.get("error")]


def _cleanup_data(outdir: str) -> None:
    """Keep results and plots; drop the large transfer files."""
    for sub in ("root", "client"):
        d = os.path.join(outdir, sub)
        if os.path.isdir(d):
            shutil.rmtree(d, ignore_errors=True)


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


def report_tables() -> list[str]:
    from .report import TABLES

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
    from .report import markdown, merge_latest, plot
    from .saved import read_results

    keep = _run_filter(args)
    tunings = (option_choices("--tunings", args.tunings, T.TUNINGS, "tuning") if args.tunings is not None
               else list(T.TUNINGS))
    saved = [read_results(path) for path in args.results]
    if any(s.kind == "compete" for s in saved):
        if any(s.kind != "compete" for s in saved):
            raise NetemError("compete results (drsftp bench --compete) print alone")
        return compete_report(args, [(path, d) for path, s in zip(args.results, saved) for d in s.results or []])
    if any(s.kind == "third-party" for s in saved):
        if any(s.kind != "third-party" for s in saved):
            raise NetemError("third-party results (drsftp bench --third-party) print alone")
        from .thirdcli import third_report

        return third_report(args, [s.data or {} for s in saved])
    if any(s.kind == "field" for s in saved):
        if any(s.kind != "field" for s in saved):
            raise NetemError("field results (drsftp bench --streams/--peers/--datasets) print alone")
        return _field_report(args, [r for s in saved for r in s.runs])
    if args.dataset is not None:
        raise NetemUsageError(f"--dataset applies to field results only (drsftp bench {FIELD_OPTIONS})")
    if args.table == "drs":
        raise NetemUsageError("--table drs applies to third-party results (drsftp bench --third-party)")
    if args.table in COMPETE_TABLES:
        raise NetemUsageError(f"--table {args.table} applies to compete results (drsftp bench --compete)")
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


def _field_report(args, runs: list[dict]) -> int:
    """Field results: the table of each dataset (bench/field.py)."""
    from .field import ENTRIES, table

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
