"""How many parallel streams (`-P auto`), sans-IO.

The driver calls ``update`` once per interval with the goodput of all
streams together over that interval and each stream's current and minimum
RTT and retransmit count; it gets back ADD, REMOVE or HOLD and applies it
(a ranged session opened or ended, a MODE E stream connected or closed,
``DRS streams=N`` sent).  The rule (docs/PARALLEL.md, "-P auto"):

* add a stream while the sum still grows and the path shows no queue
  (every stream's RTT within ``queue_factor`` x its minimum plus
  ``queue_slack``) and no new retransmits;
* after a change, wait ``settle`` intervals (the new stream's slow start),
  then judge it by the mean goodput of the last ``judge`` intervals against
  the mean before the change: a stream that raised the sum by less than
  ``gain_needed(n)`` is given back, and the next probe waits twice as long
  as the last (up to ``max_backoff`` intervals);
* a queue or new retransmits while a probe is judged also give it back.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class Action(enum.Enum):
    HOLD = "hold"
    ADD = "add"
    REMOVE = "remove"


@dataclass(frozen=True)
class StreamSample:
    rtt: float | None  # seconds, the stream's current smoothed RTT
    rtt_min: float | None  # seconds, the least it has seen
    retransmits: int = 0  # cumulative


@dataclass(frozen=True)
class StreamsConfig:
    start: int = 4  # GridFTP's usual -p 4: probes up or down from there
    min_streams: int = 1
    max_streams: int = 16
    min_gain: float = 0.05  # a stream must add at least 5% ...
    gain_share: float = 0.5  # ... or half of one stream's share of the sum before it
    queue_factor: float = 1.25
    queue_slack: float = 0.002  # seconds: scheduling noise on a short path
    settle: int = 4  # intervals after a change before it is judged
    judge: int = 2  # intervals averaged on each side of a comparison
    max_backoff: int = 32

    def gain_needed(self, before: int) -> float:
        """Relative goodput gain that justifies stream ``before + 1``."""
        return max(self.min_gain, self.gain_share / max(before, 1))


REACH = 1.25e9  # bytes/s (10 Gbit/s): the path the first streams' buffer caps are sized to carry
START_MAX = 8  # -P auto's first streams, at most


def first_streams(rtt: float | None, window_cap: int | None, config: StreamsConfig | None = None) -> int:
    """-P auto's first streams (docs/PARALLEL.md, "-P auto"): as many as the
    per-socket window cap needs to carry REACH at this RTT, 1 to START_MAX:
    streams started together cost no round trip and begin their slow start
    together, one added later waits ``settle`` intervals to be judged.
    ``config.start`` where the RTT or the cap is unknown (FORCE: no cap)."""
    c = config or StreamsConfig()
    if not rtt or not window_cap:
        return c.start
    return max(c.min_streams, min(START_MAX, c.max_streams, math.ceil(REACH * rtt / window_cap)))


class StreamController:
    def __init__(self, config: StreamsConfig | None = None) -> None:
        self.config = config or StreamsConfig()
        c = self.config
        self.streams = max(c.min_streams, min(c.start, c.max_streams))
        self._history: list[float] = []  # goodput per interval since the last change
        self._baseline: float | None = None  # mean goodput before a probe (None: not probing)
        self._since = 0  # intervals since the last change
        self._backoff = c.settle  # intervals to wait before the next probe
        self._retrans: int | None = None

    @staticmethod
    def interval(rtt: float | None) -> float:
        """Seconds between updates: a few RTTs, at least a quarter second."""
        return max(0.25, 4 * (rtt or 0.0))

    def queue(self, samples: list[StreamSample]) -> bool:
        c = self.config
        return any(s.rtt is not None and s.rtt_min is not None
                   and s.rtt > s.rtt_min * c.queue_factor + c.queue_slack for s in samples)

    def update(self, goodput: float, samples: list[StreamSample], intervals_left: float | None = None) -> Action:
        """One interval's figures in, one decision out (already counted in
        ``streams``).  ``intervals_left``: how many more intervals the
        transfer runs at this goodput; a probe is made only while it
        outlasts the probe's settling and judgment (a stream added later
        would slow-start into the transfer's end and be judged after it)."""
        c = self.config
        total = sum(s.retransmits for s in samples)
        new_loss = self._retrans is not None and total > self._retrans
        self._retrans = total
        self._history.append(goodput)
        self._since += 1
        congested = self.queue(samples) or new_loss
        if self._baseline is not None:  # judging a probe
            if congested and self._since >= 2:
                return self._give_back()
            if self._since < c.settle:
                return Action.HOLD
            now = _mean(self._history[-c.judge:])
            if now < self._baseline * (1 + c.gain_needed(self.streams - 1)):
                return self._give_back()
            self._baseline = None  # the stream stays
            self._backoff = c.settle
            return self._changed(Action.HOLD)
        if self._since < self._backoff or congested or self.streams >= c.max_streams:
            return Action.HOLD
        if intervals_left is not None and intervals_left < c.settle + c.judge:
            return Action.HOLD
        self._baseline = _mean(self._history[-c.judge:])
        self.streams += 1
        return self._changed(Action.ADD)

    def refused(self, action: Action) -> None:
        """The driver could not apply ``action`` (no range left to share, a
        server that cannot change its streams): undo it, probe no sooner
        than after the longest backoff."""
        if action is Action.ADD:
            self.streams -= 1
        elif action is Action.REMOVE:
            self.streams += 1
        self._baseline = None
        self._backoff = self.config.max_backoff
        self._changed(Action.HOLD)

    def _give_back(self) -> Action:
        c = self.config
        self._baseline = None
        self._backoff = min(self._backoff * 2, c.max_backoff)
        if self.streams <= c.min_streams:
            return self._changed(Action.HOLD)
        self.streams -= 1
        return self._changed(Action.REMOVE)

    def _changed(self, action: Action) -> Action:
        self._since = 0
        self._history.clear()
        return action


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0
