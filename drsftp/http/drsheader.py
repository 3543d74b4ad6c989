"""DRS over HTTP, sans-IO: the report pairs in a header (docs/HTTP.md, "DRS").

A drsftp client sends its latest measurements of the connection a request
travels on in a ``DRS`` request header, and the server answers each request
that carried one with its own in a ``DRS`` response header: the same
``key=value`` pairs as the FTP ``DRS`` command (drsftp/ftp/drscmd.py,
docs/PROTOCOL.md "Keys"), so one grammar and one set of bounds serve both
fronts.  A client that sends no ``DRS`` header gets none; the server still
right-sizes its sockets from its own TCP_INFO.

Resumable parallel uploads (RFC 9110 sec. 14.5, partial PUT) ask which
byte ranges of a part file the server holds with ``DRS-Part: ranges`` on a
HEAD; the answer's ``DRS-Part-Ranges`` lists them as ``first-last`` pairs.
"""

from __future__ import annotations

from ..ftp.drscmd import DRSArgumentError, format_pairs, parse_args

HEADER = "DRS"  # request and response: the report pairs
PART_QUERY = "DRS-Part"  # request (HEAD): ``ranges`` asks what the part file holds
PART_RANGES = "DRS-Part-Ranges"  # response: ``first-last,first-last`` (inclusive), possibly empty
MAX_LIST = 4096  # characters of a range list parsed at most
MAX_RANGES = 256  # held ranges listed at most (a part file written by -P N holds at most a few)

__all__ = ["HEADER", "PART_QUERY", "PART_RANGES", "DRSArgumentError", "format_ranges", "parse_ranges",
           "parse_report", "report_value"]


def parse_report(value: str | None) -> dict[str, int] | None:
    """The pairs of a ``DRS`` header; None when there is no header, {} when
    it is empty (a client that speaks DRS with nothing measured yet).
    Malformed pairs raise :class:`DRSArgumentError` (the server's 400)."""
    if value is None:
        return None
    return parse_args(value.strip())


def report_value(pairs: dict[str, int]) -> str:
    """A ``DRS`` header's value: the known pairs, integers only."""
    return format_pairs(dict(pairs))


def format_ranges(ranges: list[tuple[int, int]]) -> str:
    """``first-last`` pairs (inclusive), comma-separated, in the order given."""
    return ",".join(f"{first}-{last}" for first, last in ranges[:MAX_RANGES])


def parse_ranges(value: str | None) -> list[tuple[int, int]]:
    """The ranges of a ``DRS-Part-Ranges`` value, sorted; a malformed or
    oversized list raises ValueError (trust none of it: resend the file)."""
    if not value or not value.strip():
        return []
    if len(value) > MAX_LIST:
        raise ValueError(f"{PART_RANGES} longer than {MAX_LIST} characters")
    out: list[tuple[int, int]] = []
    for item in value.split(","):
        first, sep, last = item.strip().partition("-")
        if not sep or not first.isdigit() or not last.isdigit() or len(first) > 19 or len(last) > 19:
            raise ValueError(f"bad range {item.strip()[:40]!r} in {PART_RANGES}")
        a, b = int(first), int(last)
        if b < a:
            raise ValueError(f"range {a}-{b} ends before it starts")
        out.append((a, b))
    if len(out) > MAX_RANGES:
        raise ValueError(f"more than {MAX_RANGES} ranges in {PART_RANGES}")
    return sorted(out)
