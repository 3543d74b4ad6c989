"""A DRS receive-window floor that follows a slow path, sans-IO
(docs/DESIGN.md#drs-clamp; docs/BENCHMARKS.md#low-rate).

The fixed floor (256 KiB) is hundreds of times the BDP of a 56 kbit/s
path, so there nothing but the sender's cwnd bounds the flight; the kernel
DRS paper (sec. V.B) kept its window near what such a path needs.  Once the
pipe has been seen full (the queue guard's inflated RTT) the floor follows
``gain`` x the delivery rate held over the hold x the base RTT: at most the
fixed floor, at least ``least`` (a few segments).  Where that product is
above the fixed floor (from 21 Mbit/s on any path) nothing changes.

Spiral guard: a floor in proportion to the flow's own rate has no bottom
beside a standing queue that another flow keeps (the queue guard pulls the
window toward the base-RTT BDP, the rate falls with the window, the floor
with the rate).  So the floor may fall only while the flow's own rate holds:
while the floor sizes the window and the flight fills it, a held rate below
``keep`` x the best held rate since the pipe was seen full says the window,
not the path, set the rate, and the floor returns to the fixed one for the
rest of the connection (the behaviour without this rule).  At the flight
it steps down one shrink step a hold, so each step is judged before the
next and a step that cost rate is a small one to take back (a window the
kernel has cut grows back at its per-segment pace).  Nor does it fall
while the rate is below that mark (an idle sender says nothing about the
path).  A repaired hole stalls the in-order bytes, then releases them at
once: over a hold with a hole neither the floor nor its best moves, but the
judgement stands (beside other flows' drops few holds pass without one),
on a rate short of the mark for a whole hold: a stall is over by then.
"""

from __future__ import annotations

from collections.abc import Iterable


class SlowFloor:
    """The receive-window floor of one DRS receiver."""

    def __init__(self, fixed: int, *, gain: float, least: int, keep: float, delay: float, step: float,
                 threshold: float, filled: float) -> None:
        self.fixed = fixed
        self.gain = gain  # the floor: this x held rate x base RTT ...
        self.least = min(least, fixed)  # ... and at least this
        self.keep = keep  # a held rate below this x the best: the floor costs rate
        self.delay = delay  # base RTTs below this count as this (a reader's stalls)
        self.step = step  # below the flight: one step of this, then a hold to judge it
        self.threshold = threshold  # a window within this fraction of the floor is at it
        self.filled = filled  # a flight this much of the floor fills it (not a sender's cwnd below it)
        self.value = float(fixed)
        self.best = 0.0  # the best held rate since the pipe was seen full
        self.locked = False  # the floor cost rate once: fixed from then on
        self._stepped = float("-inf")  # when the floor last stepped below the flight
        self._short_since: float | None = None  # since when the bound floor's rate is short of the mark

    def update(self, measurements: Iterable[tuple[float, float, float]], window: int, base_rtt: float,
               shrink: float, *, holes: bool, now: float, hold: float) -> int:
        """The floor for this tick, from the receiver's measurements over the
        hold ((time, bytes per RTT, bytes/s), pipe seen full; ``hold``
        seconds long), its last window, the base RTT and this tick's shrink
        step (the window's: at most 0.75x per RTT).
        ``holes``: a hole was repaired over the hold (it stalls the in-order
        bytes, then releases them at once: a burst that is not the path's
        rate).  Bound: the floor sized the window and the flight filled it,
        so a rate that fell is the floor's doing if it stays short for a
        whole hold (a repaired hole's stall is over by then)."""
        kept = list(measurements)
        if self.locked or not kept:
            return int(self.value)
        rates = [r for _, _, r in kept]
        bound = window <= self.value * (1 + self.threshold) and max(m for _, m, _ in kept) >= self.filled * self.value
        held = sum(rates) / len(rates)  # the bytes delivered over the hold: few packets a tick at 56 kbit/s
        if held <= 0 or held < self.keep * self.best:  # the rate does not hold: the floor does not fall ...
            if not (bound and self.value < self.fixed):
                self._short_since = None
            elif self._short_since is None:
                self._short_since = now
            elif now - self._short_since >= hold:  # ... and if it sized the window a whole hold, it goes
                self.locked, self.value = True, float(self.fixed)
            return int(self.value)
        self._short_since = None
        if holes or min(rates) <= 0:  # neither the best nor the floor moves on a stall or a burst
            return int(self.value)
        self.best = max(self.best, held)
        want = min(max(self.gain * held * max(base_rtt, self.delay), self.least), self.fixed)
        if want >= self.value:
            self.value = want
        elif not bound:  # above the flight: no rate at stake, one shrink step per RTT
            self.value = max(want, self.value * shrink)
        elif now - self._stepped >= hold:  # at the flight: one step, then a whole hold to judge it
            self.value, self._stepped = max(want, self.value * self.step), now
        return int(self.value)
