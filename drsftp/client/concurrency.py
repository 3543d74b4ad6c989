"""`-c auto`: how many sessions a dataset job runs, sans-IO.

A hill climb on measured goodput (the idea of Falcon, Arifuzzaman et al.,
IEEE TPDS 2023, reduced to one knob): start at ``start``; after each
measurement interval, if the last step up raised goodput by at least
``gain``, step up again; if not, step back and hold for ``hold``
intervals before probing again.  A fall in goodput of more than ``drop``
at the same count (a shared link filling) steps down.  The driver feeds
bytes-per-second figures and applies the count it gets back.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AutoConcurrency:
    start: int = 16  # twice GridFTP's -cc 8: a session costs a login, its files' round trips overlap
    minimum: int = 1
    maximum: int = 32
    gain: float = 0.10
    drop: float = 0.25
    hold: int = 5

    def __post_init__(self) -> None:
        self.n = max(self.minimum, min(self.start, self.maximum))
        self._prev: tuple[int, float] | None = None  # (count, goodput) before the last step
        self._best_here: float = 0.0
        self._holding = 0

    def update(self, goodput: float) -> int:
        """One interval's goodput (bytes/s) at the current count; returns the
        count for the next interval."""
        if self._holding:
            self._holding -= 1
            if goodput < self._best_here * (1 - self.drop) and self.n > self.minimum:
                return self._step(self.n - 1, goodput)
            self._best_here = max(self._best_here, goodput)
            return self.n
        if self._prev is not None:
            prev_n, prev_rate = self._prev
            if self.n > prev_n and goodput < prev_rate * (1 + self.gain):
                self._prev = None
                self.n, self._holding, self._best_here = prev_n, self.hold, prev_rate
                return self.n
            if self.n < prev_n:
                self._prev = None
                self._holding, self._best_here = self.hold, goodput
                return self.n
        if self.n >= self.maximum:
            self._holding, self._best_here = self.hold, goodput
            return self.n
        return self._step(min(self.maximum, max(self.n + 1, self.n * 3 // 2)), goodput)

    def _step(self, n: int, goodput: float) -> int:
        self._prev = (self.n, goodput)
        self.n = max(self.minimum, n)
        self._holding = 0
        return self.n
