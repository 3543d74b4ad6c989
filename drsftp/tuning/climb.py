"""The rules the tuning controllers share, sans-IO: one definition each.

* :func:`queued`: the queue test, an RTT above a factor x its base plus a
  slack (DRS's queue guard, docs/DESIGN.md#drs-queue-guard; `-P auto` and
  `-c auto`'s queue and trim marks, docs/PARALLEL.md "-P auto");
* :class:`Base`: the least RTT seen, the base of that test;
* :func:`rose`: a cumulative retransmit count that went up since the last
  interval (a probe that meets new losses is given back, docs/PARALLEL.md
  "-P auto");
* :class:`Climb`: the hill climb's scaffolding (docs/PARALLEL.md "-P auto";
  docs/decisions/0014-one-controller-for-sessions-and-streams.md): probe
  up, let the probe settle, judge it by the mean goodput of the last
  ``judge`` intervals against the mean before it, keep it or give it back,
  and wait twice as long after each one given back.  The controllers
  (streams.py, fleet.py) choose what a probe adds and what goes back;
  streamwindow.py keeps its history, wait and queue count here and judges
  by medians of its own (docs/decisions/0026-trim-on-the-median-rtt.md).
"""

from __future__ import annotations

import enum


def queued(rtt: float | None, base: float | None, factor: float, slack: float) -> bool:
    """A queue fills on the path: ``rtt`` above ``factor`` x ``base`` (the
    least RTT seen) plus ``slack`` seconds of scheduling noise; no queue
    where either RTT is unknown (docs/DESIGN.md#drs-queue-guard,
    #kf-queue-runaway)."""
    return rtt is not None and base is not None and rtt > base * factor + slack


class Base:
    """The least RTT seen on a path (its base), and the queue test against it."""

    def __init__(self) -> None:
        self.rtt: float | None = None

    def note(self, rtt: float) -> float:
        """Takes ``rtt`` into the base; the base."""
        self.rtt = rtt if self.rtt is None else min(self.rtt, rtt)
        return self.rtt

    def queued(self, rtt: float, factor: float, slack: float) -> bool:
        """Takes ``rtt`` into the base; a queue by :func:`queued`."""
        return queued(rtt, self.note(rtt), factor, slack)


def rose(count: int | None, last: int | None) -> bool:
    """A cumulative count (retransmits) that went up since ``last``; no
    news where either is unknown."""
    return count is not None and last is not None and count > last


class Verdict(enum.Enum):
    WAIT = "wait"  # still settling
    KEEP = "keep"  # it raised the goodput enough
    BACK = "back"  # give it back


class Climb:
    """One controller's climb: the goodput since the last change, the
    intervals since it, the wait before the next probe and how long a queue
    has stayed.  ``baseline`` is the mean goodput before the probe being
    judged (None: no probe)."""

    def __init__(self, *, settle: int, judge: int, max_backoff: int, wait: int | None = None) -> None:
        self.settle, self.judge, self.max_backoff = settle, judge, max_backoff
        self.history: list[float] = []  # goodput per interval since the last change
        self.since = 0  # intervals since the last change
        self.backoff = settle if wait is None else wait  # intervals to wait before the next probe
        self.baseline: float | None = None
        self.queued_for = 0  # consecutive intervals with a queue

    def note(self, goodput: float, queue: bool) -> None:
        """One interval's goodput, and whether it showed a queue."""
        self.history.append(goodput)
        self.since += 1
        self.queued_for = self.queued_for + 1 if queue else 0

    @property
    def waiting(self) -> bool:
        """Too soon for the next probe: ``backoff`` intervals since the last change."""
        return self.since < self.backoff

    def mean(self) -> float:
        """The mean goodput of the last ``judge`` intervals since the change."""
        xs = self.history[-self.judge:]
        return sum(xs) / len(xs) if xs else 0.0

    def verdict(self, congested: bool, settle: int, needed: float) -> Verdict:
        """The probe being judged: given back at a queue or new losses once
        it had an interval to show them, else judged after ``settle``
        intervals: kept where the goodput rose by ``needed`` (a share)."""
        if congested and self.since >= 2:
            return Verdict.BACK
        if self.since < settle:
            return Verdict.WAIT
        assert self.baseline is not None  # (judging a probe)
        if self.mean() < self.baseline * (1 + needed):
            return Verdict.BACK
        return Verdict.KEEP

    def sharing(self, limited: float | None, limited_share: float) -> bool:
        """A queue stayed ``judge`` intervals while no buffer cap held the
        senders: the connections are held by congestion, the last one only
        takes from other flows (docs/decisions/0021-streams-that-share.md)."""
        return (limited is not None and limited < limited_share and self.queued_for >= self.judge
                and self.since >= self.settle)

    def probed(self) -> None:
        """A probe made: judged against the mean before it."""
        self.baseline = self.mean()
        self.changed()

    def kept(self) -> None:
        self.baseline = None
        self.backoff = self.settle
        self.changed()

    def failed(self) -> None:
        """A probe given back (or a connection given to other flows): the
        next one waits twice as long, up to ``max_backoff`` intervals."""
        self.baseline = None
        self.backoff = min(self.backoff * 2, self.max_backoff)

    def changed(self) -> None:
        self.since = 0
        self.history.clear()
