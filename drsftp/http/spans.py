"""The byte spans of drsftp's ranged requests, sans-IO (RFC 9110 sec. 14).

The client cuts a file into requests of at most :data:`MAX_REQUEST` bytes
(docs/HTTP.md, "DRS": DRS reports flow on each connection at least that
often) and checks that a ``206``'s ``Content-Range`` is the span it asked
for before it writes a byte of it.

A download's requests shrink toward its end (:func:`request_end`): at
most what is left over :data:`TAPER` x the connections, at least
:data:`MIN_REQUEST` (guided self-scheduling, as MODE E's blocks:
drsftp/ftp/blockplan.py), so the connections end together and a
connection that finishes early takes a range no running response holds.
Each request is read to its end: a client that cuts a response short must
close its connection (RFC 9112 sec. 9.3: the next message starts where
this one ends), and the next request would open one in slow start.
"""

from __future__ import annotations

MAX_REQUEST = 64 << 20  # bytes one ranged GET or partial PUT carries at most
MIN_REQUEST = 2 << 20  # a tapered GET asks for at least this (a request costs a round trip)
TAPER = 2  # near the end a GET asks for at most what is left / (TAPER x connections)
ALIGN = 1 << 16  # tapered spans in whole 64 KiB


def request_end(pos: int, end: int, missing: int, connections: int) -> int:
    """Where the next ranged GET of [pos, end) stops, with ``missing``
    bytes of the file still to come over ``connections``: tapered (module
    docstring), and never leaving less than MIN_REQUEST behind it."""
    n = min(MAX_REQUEST, end - pos, max(MIN_REQUEST, missing // (TAPER * max(connections, 1))))
    n = max(n - n % ALIGN, min(ALIGN, end - pos))
    if end - pos - n < MIN_REQUEST:
        n = min(MAX_REQUEST, end - pos)
    return pos + n


def range_header(start: int, end: int) -> str:
    """``Range`` for [start, end) (the header's last byte is inclusive)."""
    return f"bytes={start}-{end - 1}"


def content_range(start: int, end: int, total: int) -> str:
    """A partial PUT's ``Content-Range`` for [start, end) of ``total`` bytes."""
    return f"bytes {start}-{end - 1}/{total}"


def parse_content_range(value: str | None) -> tuple[int, int, int | None] | None:
    """``bytes A-B/TOTAL`` as (A, B + 1, TOTAL or None for ``*``); None for
    anything else (``bytes */TOTAL`` included)."""
    if not value or len(value) > 200:
        return None
    unit, _, rest = value.strip().partition(" ")
    span, slash, total = rest.strip().partition("/")
    first, dash, last = span.partition("-")
    if unit.lower() != "bytes" or not slash or not dash or not _num(first) or not _num(last):
        return None
    if total != "*" and not _num(total):
        return None
    a, b = int(first), int(last) + 1
    size = None if total == "*" else int(total)
    if b <= a or (size is not None and b > size):
        return None
    return a, b, size


def unsatisfied_size(value: str | None) -> int | None:
    """The size a 416's ``Content-Range: bytes */SIZE`` gives."""
    if not value:
        return None
    unit, _, rest = value.strip().partition(" ")
    star, slash, total = rest.partition("/")
    return int(total) if unit.lower() == "bytes" and star == "*" and slash and _num(total) else None


def spans(gaps: list[tuple[int, int]], limit: int = MAX_REQUEST) -> list[tuple[int, int]]:
    """``gaps`` ([start, end) each) cut into pieces of at most ``limit``."""
    out = []
    for a, b in gaps:
        while a < b:
            out.append((a, min(b, a + limit)))
            a = out[-1][1]
    return out


def _num(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 19
