"""What every mode's tables share: the median of what was measured, and a Markdown table."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def median(xs: Iterable[float | None]) -> float | None:
    """The median of the known values (None left out); None if there are none."""
    known = [x for x in xs if x is not None]
    return statistics.median(known) if known else None


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(row) + " |" for row in rows]
