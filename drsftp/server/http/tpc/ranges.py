"""A pull's ranges (docs/HTTP.md, "Third-party copy"): the first GET asks
FIRST bytes (CHUNK with one stream), before the size is known; its
``Content-Range`` gives the size, and the rest is handed out a range at
a time to whichever stream is free.  With several streams a range is at
most what is left over TAPER x the streams (guided self-scheduling, as
the MODE E block plan: drsftp/ftp/blockplan.py), at least MIN_RANGE (a
range costs its stream a round trip between two responses; a last one
under SLIVER goes with the one before), so the
streams end together: a running response is never cut (aiohttp closes a
connection whose body was not read to its end: a warm connection lost).
"""

from __future__ import annotations

from ....http.copyreq import CHUNK

FIRST = 16 << 20  # bytes of the first range with several streams (the others start once it answers)
MIN_RANGE = 4 << 20
TAPER = 2
ALIGN = 64 << 10  # range sizes in whole 64 KiB
SLIVER = 1 << 20  # bytes left after a range that go with it


def first_range(streams: int, auto: bool) -> int:
    return CHUNK if streams <= 1 and not auto else FIRST


class RangePlan:
    """[start, total) handed out in file order."""

    def __init__(self, start: int, total: int) -> None:
        self.at, self.total = start, total

    @property
    def left(self) -> int:
        return self.total - self.at

    def next(self, streams: int) -> tuple[int, int] | None:
        """The next (start, end) for ``streams`` running, None when all are out."""
        left = self.left
        if left <= 0:
            return None
        n = CHUNK if streams <= 1 else min(CHUNK, max(MIN_RANGE, -(-left // (TAPER * streams * ALIGN)) * ALIGN))
        if left - n < SLIVER:
            n = left  # (no sliver left for a request of its own)
        start = self.at
        self.at += n
        return start, self.at

    def streams_for(self, wanted: int) -> int:
        """Streams worth running for what is left: a range each at least."""
        return max(1, min(wanted, -(-self.left // MIN_RANGE)))
