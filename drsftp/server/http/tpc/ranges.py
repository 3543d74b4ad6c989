"""A pull's first range and stream count (docs/HTTP.md, "Third-party
copy"; the ranges after the first: http/steal.py).  The first GET asks
FIRST bytes (CHUNK with one stream), before the size is known; its
``Content-Range`` gives the size, and the other streams start at once,
each asking for its share (decision 0043: a ranged GET costs its
connection a round trip, so few and large ones), then stealing tails.
"""

from __future__ import annotations

from ....http.copyreq import CHUNK

FIRST = 16 << 20  # bytes of the first range with several streams (the others start once it answers)
MIN_RANGE = 4 << 20  # a stream is worth starting for this much at least
COLD_TAIL = 16 << 20  # a stream without a warm connection (a new one, or cut) steals this much at least
DEFAULT_RTT = 0.1  # s, before a connection measured one


def first_range(streams: int, auto: bool) -> int:
    return CHUNK if streams <= 1 and not auto else FIRST


def streams_for(missing: int, wanted: int) -> int:
    """Streams worth running for ``missing`` bytes: MIN_RANGE each at least."""
    return max(1, min(wanted, -(-missing // MIN_RANGE)))
