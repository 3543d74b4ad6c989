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
* a queue or new retransmits while a probe is judged also give it back;
* sharing (docs/decisions/0021-streams-that-share.md): a queue that stays
  while the senders are not limited by their buffers (``PathSample``'s
  limited time, tuning/count/sharing.py) gives the last stream back: the streams
  are held by congestion, and one more only takes from other flows.  (Not
  limited is no bar to a probe: a sender held by its own send buffer reads
  as not limited, tuning/count/sharing.py.)

Under DRS, where a stream's window can be capped, ``-P auto`` runs
:class:`~.streamwindow.WindowedStreams` instead (an aggregate window).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..climb import Base, Climb, Verdict, queued, rose
from .sharing import LimitMeter, PathSample


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
    # sharing (docs/decisions/0021-streams-that-share.md)
    limited_share: float = 0.1  # buffer-limited: a cap held the senders a tenth of their busy time or more
    # -P auto's window (streamwindow.py; DRS only)
    window_cap: int | None = None  # bytes: one stream's window at most (the host's cap); None: streams only
    headroom: float = 0.15  # a cut: x 0.85 (BBR's BBRHeadroom)
    step_share: float = 0.25  # a probe adds this share of one stream's cap (doubled while kept in a row)
    share_queue_factor: float = 1.1  # a queue: RTT above this x the base (+ queue_slack): a step over the knee
    trim_factor: float = 1.02  # a standing queue under that mark: median RTT above this x the base (+ queue_slack)
    probe_judge: int = 4  # a probe is judged by the median of this many intervals, settle - 1 after it
    gain_kept: float = 0.5  # ... kept when it carried this share of what its step carries on an idle path
    gain_none: float = 0.2  # ... given back when it carried less than this share (it only queued)

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
        self.climb = Climb(settle=c.settle, judge=c.judge, max_backoff=c.max_backoff)
        self._retrans: int | None = None
        self._path_retrans: int | None = None
        self._path_base = Base()  # the least sender RTT seen
        self._meter = LimitMeter()

    @property
    def stream_window(self) -> int | None:
        """Each stream's window cap: none here (the streams count alone)."""
        return None

    @staticmethod
    def interval(rtt: float | None) -> float:
        """Seconds between updates: a few RTTs, at least a quarter second."""
        return max(0.25, 4 * (rtt or 0.0))

    def queue(self, samples: list[StreamSample]) -> bool:
        return queue_in(samples, self.config.queue_factor, self.config.queue_slack)

    def path_congestion(self, path: PathSample | None) -> tuple[bool, bool]:
        """(queue, new retransmits) as the senders see the path (False,
        False where they report nothing)."""
        if path is None or not path.rtt:
            return False, False
        c = self.config
        queue = self._path_base.queued(path.rtt, c.queue_factor, c.queue_slack)
        loss = rose(path.retransmits, self._path_retrans)
        self._path_retrans = path.retransmits
        return queue, loss

    def update(self, goodput: float, samples: list[StreamSample], intervals_left: float | None = None,
               path: PathSample | None = None) -> Action:
        """One interval's figures in, one decision out (already counted in
        ``streams``).  ``intervals_left``: how many more intervals the
        transfer runs at this goodput; a probe is made only while it
        outlasts the probe's settling and judgment (a stream added later
        would slow-start into the transfer's end and be judged after it).
        ``path``: the senders' figures (tuning/count/sharing.py), where known."""
        c, climb = self.config, self.climb
        total = sum(s.retransmits for s in samples)
        new_loss = rose(total, self._retrans)
        self._retrans = total
        path_queue, path_loss = self.path_congestion(path)
        queue = self.queue(samples) or path_queue
        congested = queue or new_loss or path_loss
        limited = self._meter.update(path)
        climb.note(goodput, queue)
        if climb.baseline is not None:  # judging a probe
            verdict = climb.verdict(congested, c.settle, c.gain_needed(self.streams - 1))
            if verdict is Verdict.BACK:
                return self._give_back()
            if verdict is Verdict.WAIT:
                return Action.HOLD
            climb.kept()  # the stream stays
            return Action.HOLD
        if climb.sharing(limited, c.limited_share) and self.streams > c.min_streams:
            # a queue that stays while no buffer cap holds the senders: the
            # streams are held by congestion; the last one only takes from
            # other flows (docs/decisions/0021-streams-that-share.md)
            climb.failed()
            self.streams -= 1
            return self._changed(Action.REMOVE)
        if climb.waiting or congested or self.streams >= c.max_streams:
            return Action.HOLD
        if intervals_left is not None and intervals_left < c.settle + c.judge:
            return Action.HOLD
        climb.probed()
        self.streams += 1
        return Action.ADD

    def refused(self, action: Action, running: int | None = None) -> None:
        """The driver could not apply ``action`` (no range left to share, a
        server that cannot change its streams): undo it (to ``running``
        streams where given), probe no sooner than after the longest backoff."""
        self.streams = undone(self.streams, action, running)
        self.climb.baseline = None
        self.climb.backoff = self.config.max_backoff
        self._changed(Action.HOLD)

    def _give_back(self) -> Action:
        c = self.config
        self.climb.failed()
        if self.streams <= c.min_streams:
            return self._changed(Action.HOLD)
        self.streams -= 1
        return self._changed(Action.REMOVE)

    def _changed(self, action: Action) -> Action:
        self.climb.changed()
        return action


def queue_in(samples: Iterable[StreamSample], factor: float, slack: float) -> bool:
    """Some stream's RTT shows a queue over its own minimum (``factor`` x
    it + ``slack``: climb.queued)."""
    return any(queued(s.rtt, s.rtt_min, factor, slack) for s in samples)


def undone(streams: int, action: Action, running: int | None = None) -> int:
    """The stream count once the driver could not apply ``action``:
    ``running`` where it says how many run, else the change taken back."""
    if running is not None:
        return running
    return streams - 1 if action is Action.ADD else streams + 1 if action is Action.REMOVE else streams
