"""The bench commands' option values, each checked before anything is made
(a typo in the last value fails before the first run)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..netem.errors import NetemError, NetemUsageError
from ..netem.spec import LinkSpec
from ..tuning import parse_size

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
