"""The byte spans of drsftp's ranged requests, sans-IO (RFC 9110 sec. 14).

The client cuts a file into requests of at most :data:`MAX_REQUEST` bytes
(docs/HTTP.md, "DRS": DRS reports flow on each connection at least that
often) and checks that a ``206``'s ``Content-Range`` is the span it asked
for before it writes a byte of it.

A download's connection asks for its whole share in one request (at most
:data:`MAX_REQUEST`: :func:`request_end`), so no round trip passes
between its requests: HTTP/1.1 clients cannot pipeline (aiohttp does
not), and a request's first byte comes a round trip after it.  The end
is balanced by splitting a request in flight (streams/rangeplan.py
``take(cut=True)``): the victim stops reading at its new end and closes
its connection (RFC 9112 sec. 9.3: the next message would start where
this one ends), the thief asks for the rest on its own kept-alive one.
A steal is worth a round trip only for a few connections' windows
(:data:`STEAL_KEPT`); a connection to open cuts no request (the victim
would lose its warm connection for one in slow start) and takes, past
the requests, only what is worth its handshakes and slow start
(:data:`STEAL_NEW`: docs/decisions/0042-cut-the-request-in-flight.md).
"""

from __future__ import annotations

MAX_REQUEST = 64 << 20  # bytes one ranged GET or partial PUT carries at most
MIN_REQUEST = 2 << 20  # a GET leaves no less than this of its share behind it
ALIGN = 1 << 16  # request ends split in two on 64 KiB boundaries
STEAL_KEPT = 2 << 20  # a connection kept alive steals at least this (and leaves as much)
STEAL_NEW = 16 << 20  # a connection yet to open (or reopen after a cut) steals at least this


def request_end(pos: int, end: int) -> int:
    """Where the next ranged GET of [pos, end) stops: all of it up to
    MAX_REQUEST, never leaving less than MIN_REQUEST behind (the rest
    halved then)."""
    n = min(MAX_REQUEST, end - pos)
    if 0 < end - pos - n < MIN_REQUEST:
        n = (end - pos) // 2
        n = max(n - n % ALIGN, 1)
    return pos + n


def steal_least(kept: bool) -> int:
    """The least a worker steals: ``kept``, its connection is alive (the
    steal costs a round trip), else it opens one (module docstring)."""
    return STEAL_KEPT if kept else STEAL_NEW


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


def content_coding(values: list[str]) -> str | None:
    """An answer's ``Content-Encoding`` (its header values), None when its
    body is the file's own bytes (``identity`` or none, RFC 9110 sec. 8.4):
    a coded body is never stored as the file."""
    codings = ", ".join(values).strip()
    return None if codings.lower() in ("", "identity") else codings[:40]
