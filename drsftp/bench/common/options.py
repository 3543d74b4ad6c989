"""The bench commands' option values, each checked before anything is made
(a typo in the last value fails before the first run)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...netem.errors import NetemError, NetemUsageError
from ...netem.spec import LinkSpec
from ...tuning import parse_size

RUN_FILTERS = ("profile", "direction", "loss", "rate", "rtt")  # benchreport's filters of bench runs


def csv_items(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def option_values(option: str, text: str, parse: Callable[[str], Any] | None = None) -> list:
    """Every value of a comma-separated option, parsed now (a typo in the last
    value fails before the first run), without repeats."""
    items = csv_items(text)
    if not items:
        raise NetemUsageError(f"{option} needs at least one value")
    try:
        return list(dict.fromkeys(parse(x) for x in items) if parse else dict.fromkeys(items))
    except (NetemError, ValueError) as exc:
        raise NetemUsageError(f"{option}: {exc}") from None


def option_choices(option: str, text: str, known, noun: str) -> list[str]:
    items = option_values(option, text)
    unknown = [x for x in items if x not in known]
    if unknown:
        raise NetemUsageError(f"unknown {noun} {unknown[0]!r}; choose from {', '.join(known)}")
    return items


def check_link_value(option: str, **value) -> None:
    """The emulator's limits (LinkSpec.validate), checked before any link or file is made."""
    try:
        LinkSpec(**value).validate()
    except NetemError as exc:
        raise NetemUsageError(f"{option}: {exc}") from None


def size_option(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise NetemUsageError(f"--size: {exc}") from None


def need_bench_extras() -> None:
    """psutil (and matplotlib, for plots) come with the bench extras only."""
    try:
        import psutil  # noqa: F401
    except ImportError as exc:
        raise NetemError("the bench needs psutil: pip install 'drsftp[bench]'") from exc


def or_default(value: str | None, default: str) -> str:
    """An option's text, or its default where the command line left it out ("" is given, and empty)."""
    return default if value is None else value


def given_options(args, names: tuple[str, ...]) -> list[str]:
    """The options among ``names`` (dests) the command line set."""
    unset = {"quick": False, "force_buffers": False, "resume": False}
    return ["--" + n.replace("_", "-") for n in names if getattr(args, n) != unset.get(n)]


def add_command(sub, name: str, about: str, arg: str, **kw):
    """The command ``name`` of the subparsers ``sub`` (``about``: its help)
    with its positional argument ``arg`` (``kw``: add_argument's): `bench
    compete SPEC`, `benchreport RESULTS...`."""
    p = sub.add_parser(name, help=about)
    p.add_argument(arg, **kw)
    return p


def add_link_options(p, rtts: str, rates: str, losses: str, what: str = "", queue: bool = True) -> None:
    """--rtts, --rates, --losses (and --queue): the emulated link(s) of a mode, with its defaults."""
    p.add_argument("--rtts", help=f"round-trip times to emulate, comma-separated{what} (default {rtts})")
    p.add_argument("--rates", help=f"bottleneck rates to emulate, comma-separated{what} (default {rates})")
    p.add_argument("--losses", help=f"random loss rates to emulate, comma-separated{what} "
                                    f"(default {losses.replace('%', '%%')})")  # (argparse formats help with %)
    if queue:
        p.add_argument("--queue", type=int, help="queue in packets (default 1 BDP, at least 64)")


def add_run_options(p, out: str, reps: bool = True) -> None:
    """What every mode takes: repetitions, the time cap, the congestion control, where results go."""
    if reps:
        p.add_argument("--reps", type=int, help="runs of each entry (default 3)")
    p.add_argument("--max-time", type=float, default=60.0, help="seconds one run may take (default 60)")
    p.add_argument("--cc", choices=("bbr", "reno", "cubic"), help="congestion control in the namespaces")
    p.add_argument("--out", default="bench-results", help=f"directory for {out}")


def check_run_options(args) -> None:
    """--reps, --max-time and --queue, checked before anything is made."""
    import math

    if getattr(args, "reps", None) is not None and args.reps < 1:
        raise NetemUsageError("--reps must be at least 1")
    if not (math.isfinite(args.max_time) and args.max_time > 0):
        raise NetemUsageError(f"--max-time must be a number of seconds above 0, not {args.max_time:g}")
    if getattr(args, "queue", None) is not None:
        check_link_value("--queue", queue=args.queue)


def link_paths(args, rtts: str, rates: str, losses: str) -> list:
    """Every emulated path of --rates x --rtts x --losses (defaults given), each
    value parsed and within the emulator's limits before the first run."""
    from ...netem.spec import parse_duration, parse_loss, parse_rate
    from .tunings import Path

    rate_values = option_values("--rates", or_default(args.rates, rates), parse_rate)
    rtt_values = option_values("--rtts", or_default(args.rtts, rtts), parse_duration)
    loss_values = option_values("--losses", or_default(args.losses, losses), parse_loss)
    for rate in rate_values:
        check_link_value("--rates", rate=rate)
        if rate <= 0:
            raise NetemUsageError("--rates: a bench rate must be above 0 (0 is a link without a ceiling)")
    for rtt in rtt_values:
        check_link_value("--rtts", rtt=rtt)
    return [Path(rate=r, rtt=t, loss=loss, queue=args.queue) for r in rate_values for t in rtt_values
            for loss in loss_values]
