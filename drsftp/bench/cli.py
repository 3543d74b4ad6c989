"""`drsftp bench`: DRS against stock FTP and the other tunings on the emulated WAN."""

from __future__ import annotations

import os
import sys

from ..netem.errors import NetemError
from ..netem.spec import parse_duration, parse_loss, parse_rate
from ..tuning import parse_size
from . import tunings as T

QUICK_TUNINGS = ["stock-64k", "kernel", "drs"]
DEFAULT_RTTS, DEFAULT_RATES, DEFAULT_LOSSES = "0.5ms,25ms,50ms,100ms", "100mbit,1gbit", "0,0.1%"


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="compare DRS with stock FTP and other tunings on an emulated WAN")
    p.add_argument("--quick", action="store_true",
                   help="100 Mbit/s, 100 ms: stock-64k, kernel, drs, once each (a few minutes at most)")
    p.add_argument("--rtts", default=DEFAULT_RTTS, help="round-trip times to emulate, comma-separated")
    p.add_argument("--rates", default=DEFAULT_RATES, help="bottleneck rates to emulate, comma-separated")
    p.add_argument("--losses", default=DEFAULT_LOSSES, help="random loss rates to emulate, comma-separated")
    p.add_argument("--queue", type=int, help="queue in packets (default 1 BDP, at least 64)")
    p.add_argument("--tunings", default=",".join(T.TUNINGS), help=f"any of {', '.join(T.TUNINGS)}")
    p.add_argument("--directions", default="get,put", help="get (download), put (upload) or both")
    p.add_argument("--profiles", default="default,tuned", help="default (host as is), tuned (ESnet-style)")
    p.add_argument("--reps", type=int, default=3, help="runs of each tuning on each path (default 3)")
    p.add_argument("--size", help="file size (default: 12 s at line rate, at least 128 MiB)")
    p.add_argument("--max-time", type=float, default=60.0, help="cap on one run (slow tunings)")
    p.add_argument("--force-buffers", action="store_true",
                   help="let drs/manual/probe-static use SO_*BUFFORCE past rmem_max (root)")
    p.add_argument("--cc", choices=("bbr", "reno", "cubic"), help="congestion control in the namespaces")
    p.add_argument("--out", default="bench-results", help="directory for results.json/.csv and plots")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--streams", metavar="LIST",
                   help="against the field: drsftp get -P N for each N of LIST (1,2,4,8,auto) beside --peers, "
                        "on one file (docs/BENCHMARKS.md, 'Against the field'); default rate/RTT 1gbit/100ms")
    p.add_argument("--peers", metavar="LIST",
                   help="against the field: the other tools' columns, of " + ", ".join(_peer_entries()))
    p.add_argument("--datasets", metavar="LIST",
                   help="against the field: big (one 512 MiB file), small (200 x 1 MiB), mixed (one 256 MiB file "
                        "and 1,000 x 64 KiB), deep (small's files in 40 directories); trees run drsftp get -r -c auto")
    p.add_argument("--scale", type=float, default=1.0,
                   help="against the field: shrink the datasets' sizes and counts (0.25: a quarter)")
    p.add_argument("--resume", action="store_true",
                   help="keep the runs already in OUT/results.json and measure only the missing ones "
                        "(a full matrix takes hours: run it over several sessions)")
    p.set_defaults(func=cmd_bench)

    d = sub.add_parser("datapath", help="data path: drsftp serve and vsftpd with drsftp and curl clients,"
                                        " 1 GiB each way, CPU at both ends and their sum")
    d.add_argument("--size", default="1GiB", help="file size (default 1GiB)")
    d.add_argument("--reps", type=int, default=1, help="runs of each pair and direction")
    d.add_argument("--rate", help="on an emulated link (drsftp netem, root) of this rate, e.g. 1gbit;"
                                  " default: loopback")
    d.add_argument("--rtt", default="0.5ms", help="the emulated link's round-trip time (default 0.5ms)")
    d.add_argument("--out", default="bench-results", help="directory for datapath-WHERE.json")
    d.set_defaults(func=cmd_datapath)

    r = sub.add_parser("benchreport", help="Markdown tables (and plots) from saved bench results")
    r.add_argument("results", nargs="+",
                   help="results.json or results.csv files of `drsftp bench` runs (docs/bench-data); "
                        "where a later file holds a path, its runs of that path replace the earlier files'")
    r.add_argument("--table", choices=report_tables(),
                   help="print this table alone: " + ", ".join(report_tables()) + " (versus: the base "
                        "tuning's rate, the others' ratios to it, retransmits, sender memory)")
    r.add_argument("--tunings", help="only these tunings, in this order (comma-separated)")
    r.add_argument("--base", default="kernel",
                   help="the tuning --table versus divides by (field results: the entry the ratios divide by, "
                        "default gridftp-p4-16M)")
    r.add_argument("--profile", help="only runs on this host profile (default, tuned)")
    r.add_argument("--plots", metavar="DIR", help="also draw the plots of the merged runs into DIR")
    r.add_argument("--direction", choices=("get", "put"), help="only runs in this direction")
    r.add_argument("--loss", help="only runs with this loss (e.g. 0, 0.1%%)")
    r.add_argument("--rate", help="only runs on this link rate (e.g. 100mbit)")
    r.add_argument("--rtt", help="only runs with this RTT (e.g. 100ms)")
    r.add_argument("--dataset", help="field results: only this dataset's table (big, small, mixed, deep), untitled")
    r.set_defaults(func=cmd_benchreport)

    n = sub.add_parser("netemcheck", help="emulated link fidelity: RTT, goodput, loss, queue drops")
    n.add_argument("--quick", action="store_true", help="fewer and shorter checks")
    n.add_argument("--out", default="bench-results", help="directory for the check's JSON")
    n.set_defaults(func=cmd_netemcheck)


def _bench_extras() -> None:
    """psutil (and matplotlib, for plots) come with the bench extras only."""
    try:
        import psutil  # noqa: F401
    except ImportError as exc:
        raise NetemError("the bench needs psutil: pip install 'drsftp[bench]'") from exc


def _peer_entries() -> list[str]:
    from .field import ENTRIES

    return [n for n in ENTRIES if not n.startswith("drsftp")]


def cmd_field(args) -> int:
    """drsftp beside GridFTP and lftp on one link per path (bench/field.py)."""
    import json

    from .field import FieldConfig, entry_names, run_field, table, workload

    datasets = _csv(args.datasets or "big")
    for d in datasets:
        workload(d)  # checks the name
    entries = [("drsftp" if n == "1" else f"drsftp-P{n}") for n in _csv(args.streams or "1")]
    if any(d != "big" for d in datasets):
        entries.append("drsftp-r")
    entries += _csv(args.peers or "")
    try:
        entries = entry_names(",".join(dict.fromkeys(entries)))
    except ValueError as exc:
        raise NetemError(str(exc)) from None
    rtts = _csv(args.rtts) if args.rtts != DEFAULT_RTTS else ["100ms"]
    rates = _csv(args.rates) if args.rates != DEFAULT_RATES else ["1gbit"]
    losses = _csv(args.losses) if args.losses != DEFAULT_LOSSES else ["0"]
    if args.reps < 1:
        raise NetemError("--reps must be at least 1")
    os.makedirs(args.out, exist_ok=True)
    results: list[dict] = []
    for r in rates:
        for t in rtts:
            for loss in losses:
                path = T.Path(rate=parse_rate(r), rtt=parse_duration(t), loss=parse_loss(loss))
                cfg = FieldConfig(path=path, entries=entries, workloads=datasets, reps=args.reps,
                                  scale=args.scale, cc=args.cc, max_time=2 * args.max_time,
                                  log=lambda msg: print(msg, file=sys.stderr, flush=True))
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
    import json

    _bench_extras()
    if args.streams or args.peers or args.datasets:
        return cmd_field(args)
    from .report import plot, print_table, verdict, write_files
    from .runner import PROFILES, BenchConfig, run_bench, run_key

    if args.quick:
        paths = [T.Path(rate=100e6, rtt=0.1, queue=args.queue)]
        tunings, directions, profiles, reps = QUICK_TUNINGS, ["get"], ["default"], 1
        size: int | None = parse_size(args.size) if args.size else 64 << 20
        max_time = min(args.max_time, 25.0)
    else:
        paths = [T.Path(rate=parse_rate(r), rtt=parse_duration(t), loss=parse_loss(loss), queue=args.queue)
                 for r in _csv(args.rates) for t in _csv(args.rtts) for loss in _csv(args.losses)]
        tunings, directions, profiles, reps = _csv(args.tunings), _csv(args.directions), _csv(args.profiles), args.reps
        size = parse_size(args.size) if args.size else None
        max_time = args.max_time
    for t in tunings:
        if t not in T.TUNINGS:
            raise NetemError(f"unknown tuning {t!r}; choose from {', '.join(T.TUNINGS)}")
    for pr in profiles:
        if pr not in PROFILES:
            raise NetemError(f"unknown profile {pr!r}; choose from {', '.join(PROFILES)}")
    for d in directions:
        if d not in ("get", "put"):
            raise NetemError(f"direction must be get or put, not {d!r}")
    if reps < 1:
        raise NetemError("--reps must be at least 1")
    for p in paths:
        if p.rate <= 0:
            raise NetemError("bench rates must be > 0")
    prior = []
    saved = os.path.join(args.out, "results.json")
    if args.resume and os.path.exists(saved):
        try:
            with open(saved) as f:
                prior = [r for r in json.load(f)["runs"] if not r.get("error")]
        except (OSError, ValueError, KeyError) as exc:
            raise NetemError(f"--resume: cannot read {saved}: {exc}") from exc
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


def _cleanup_data(outdir: str) -> None:
    """Keep results and plots; drop the large transfer files."""
    for sub in ("root", "client"):
        d = os.path.join(outdir, sub)
        if os.path.isdir(d):
            import shutil

            shutil.rmtree(d, ignore_errors=True)


def cmd_datapath(args) -> int:
    _bench_extras()
    from .datapath import run_datapath

    link = (parse_rate(args.rate), parse_duration(args.rtt)) if args.rate else None
    return run_datapath(parse_size(args.size), args.reps, args.out, link)


def cmd_netemcheck(args) -> int:
    from .netemcheck import run_netem_check

    return run_netem_check(args.out, args.quick)


def report_tables() -> list[str]:
    from .report import TABLES

    return list(TABLES) + ["versus"]


def _run_filter(args):
    """A predicate for --profile/--direction/--loss/--rate/--rtt (values as the bench takes them)."""
    want = []
    if getattr(args, "profile", None):
        want.append(lambda r: r["profile"] == args.profile)
    if args.direction:
        want.append(lambda r: r["direction"] == args.direction)
    if args.loss is not None:
        loss = parse_loss(args.loss)
        want.append(lambda r: abs(r["loss"] - loss) < 1e-12)
    if args.rate:
        rate = parse_rate(args.rate)
        want.append(lambda r: abs(r["rate_bps"] - rate) < 1)
    if args.rtt:
        rtt = parse_duration(args.rtt)
        want.append(lambda r: abs(r["rtt_s"] - rtt) < 1e-9)
    return lambda r: all(w(r) for w in want)


def cmd_benchreport(args) -> int:
    import json

    from .report import markdown, merge_latest, plot, read_csv

    sources: list[list[dict]] = []
    field_runs: list[dict] = []
    env: dict | None = None
    for path in args.results:
        try:
            if path.endswith(".csv"):
                sources.append(read_csv(path))
                continue
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError, KeyError) as exc:
            raise NetemError(f"cannot read {path}: {exc}") from exc
        if isinstance(data, dict) and data.get("field"):  # `drsftp bench --streams/--peers/--datasets`
            field_runs += data["results"]
            continue
        if not isinstance(data, dict) or "environment" not in data:
            raise NetemError(f"{path} is not the output of drsftp bench")
        env = env or data["environment"]
        sources.append(data["runs"])
    if field_runs:
        from .field import table

        if sources:
            raise NetemError("field results (drsftp bench --streams/--peers/--datasets) print alone")
        if args.dataset:
            field_runs = [r for r in field_runs if r["workload"] == args.dataset]
            if not field_runs:
                raise NetemError(f"no runs of the {args.dataset!r} dataset in these results")
        ref = args.base if args.base != "kernel" else "gridftp-p4-16M"
        print(table(field_runs, reference=ref, titles=not args.dataset))
        return 0
    keep = _run_filter(args)
    runs = [r for r in merge_latest(sources) if keep(r)]
    if not runs:
        raise NetemError("no runs match the filters")
    tunings = _csv(args.tunings) if getattr(args, "tunings", None) else list(T.TUNINGS)
    for t in tunings:
        if t not in T.TUNINGS:
            raise NetemError(f"unknown tuning {t!r}; choose from {', '.join(T.TUNINGS)}")
    print(markdown(env, runs, tunings, getattr(args, "table", None), getattr(args, "base", "kernel")))
    if args.plots:
        os.makedirs(args.plots, exist_ok=True)
        for p in plot(runs, args.plots):
            print(f"plot: {p}", file=sys.stderr)
    return 0
