"""A pull's ranged GETs with end-of-transfer stealing, sans-IO
(docs/decisions/0043-tpc-pull-asks-shares-and-steals-tails.md).

A ranged GET costs its connection a round trip of silence before its
first byte (a client without pipelining sends the next request only once
the last response ended), so a pull asks for few and large ranges: a free
stream asks for its share of what is still to come (:meth:`Plan.next`:
what no response has delivered yet over the streams, at most ``chunk``,
from what nobody asked).  Once everything is asked, a free stream takes
the tail of the running span with the most bytes still to come
(:meth:`Plan.steal`): that span's end moves down to the cut, its reader
stops there and closes its connection (RFC 9112 sec. 9.3: the rest of
its message cannot be skipped), and the thief asks for the tail on its
own kept-alive connection.  Where the cut goes is :func:`even_end`, the
one rule the client's downloads cut by too (client/streams/rangeplan.py).

A span's end only moves down; its reader writes a byte only below it.
"""

from __future__ import annotations

from .spans import ALIGN  # shares and cuts in whole 64 KiB, as the client's requests

SLIVER = 1 << 20  # bytes left after a share that go with it (no request of their own)
MIN_TAIL = 1 << 20  # a stolen tail holds at least this


class Span:
    """[start, end) asked by one request; ``at``: the next byte to come."""

    __slots__ = ("at", "end", "start")

    def __init__(self, start: int, end: int) -> None:
        self.start, self.at, self.end = start, start, end

    @property
    def left(self) -> int:
        return self.end - self.at

    def __repr__(self) -> str:
        return f"Span({self.start}, at={self.at}, end={self.end})"


def even_end(unread: int, lead: int, victim_speed: float | None = None, thief_speed: float | None = None) -> int:
    """Bytes of ``unread`` its reader keeps when a thief takes the rest,
    so that both end together: the thief's bytes start a request's round
    trip late, ``lead`` being what it would read meanwhile, and each reads
    at its speed (bytes/s; equal where one is unknown).  Keeping k at
    speed v and leaving the rest to a thief at speed t ends both together
    where k / v = lead / t + (unread - k) / t."""
    if victim_speed and thief_speed:
        return int((unread + lead) * victim_speed / (victim_speed + thief_speed))
    return (unread + lead + 1) // 2


def _align_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


class Plan:
    """[start, total) of a file: what nobody asked (``free``, in file
    order) and the spans being read (``running``)."""

    def __init__(self, start: int, total: int, chunk: int) -> None:
        self.total, self.chunk = total, chunk
        self.free: list[tuple[int, int]] = [(start, total)] if start < total else []
        self.running: list[Span] = []

    @property
    def unasked(self) -> int:
        return sum(e - s for s, e in self.free)

    @property
    def missing(self) -> int:
        """Bytes not yet delivered: unasked and still to come on running spans."""
        return self.unasked + sum(s.left for s in self.running)

    def open(self, start: int, end: int) -> Span:
        """A span asked outside the plan (the first request, before the size was known)."""
        span = Span(start, end)
        self.running.append(span)
        return span

    def next(self, streams: int) -> Span | None:
        """A free stream's share of the first unasked range, None when all is asked."""
        if not self.free:
            return None
        start, end = self.free[0]
        n = min(self.chunk, end - start, _align_up(-(-self.missing // max(streams, 1))))
        if end - start - n < SLIVER:
            n = end - start
        if start + n == end:
            self.free.pop(0)
        else:
            self.free[0] = (start + n, end)
        return self.open(start, start + n)

    def steal(self, lead: int, min_tail: int = MIN_TAIL) -> Span | None:
        """The tail of the running span with the most to come, None when no
        tail of ``min_tail`` is left to take (the victim keeping ``lead`` more
        than the thief: what it gets while the thief's request travels)."""
        if not self.running:
            return None
        victim = max(self.running, key=lambda s: s.left)
        keep = min(victim.left, _align_up(even_end(victim.left, lead)))
        tail = victim.left - keep
        if tail < max(min_tail, 1):
            return None
        cut = victim.at + keep
        span = Span(cut, victim.end)
        victim.end = cut
        self.running.append(span)
        return span

    def cut(self, span: Span, keep: int) -> None:
        """``span`` stops ``keep`` bytes on (its stream ends): the rest is free again."""
        if span.left <= keep:
            return
        at = span.at + max(keep, 0)
        self._give(at, span.end)
        span.end = at

    def done(self, span: Span) -> None:
        """``span``'s reader stopped: what it did not get (a failure's) is free again."""
        if span in self.running:
            self.running.remove(span)
        if span.at < span.end:
            self._give(span.at, span.end)
            span.end = span.at

    def _give(self, start: int, end: int) -> None:
        """[start, end) unasked again, merged with its neighbours."""
        merged: list[tuple[int, int]] = []
        for s, e in sorted([*self.free, (start, end)]):
            if merged and s <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], e))
            else:
                merged.append((s, e))
        self.free = merged
