"""`-P auto` under DRS: one window for all the streams, sans-IO
(docs/PARALLEL.md, "-P auto"; docs/decisions/0021-streams-that-share.md).

The host caps each stream's window (``window_cap``: what setsockopt can
set), so a long fat path needs several streams.  The controller keeps one
aggregate window for the transfer, runs at least ``ceil(window /
window_cap)`` streams and caps each at ``window / streams`` (the driver
applies it: a receiver's window clamp, a sender's buffer): the transfer
then takes what one flow with that window would, however many sockets
carry it.  Every interval (4 RTTs, at least 0.25 s) it takes the goodput
of all the streams and the path as their senders see it
(:class:`~.sharing.PathSample`; each stream's own figures where the peer
reports nothing):

* **start**: ``first_streams`` streams at their cap, no window yet.  Once
  the goodput stops growing by a quarter over two intervals (BBR's
  full-pipe test, draft-ietf-ccwg-bbr sec. 4.3.1.2) a probe adds a whole
  stream, and a queue ends the start: the window becomes the best recent
  goodput x base RTT, what the path delivers without the queue (BBR's
  Drain, sec. 4.3.2);
* **queue** (the senders' RTT above ``share_queue_factor`` x the base + 2
  ms for two intervals running; a probe's step over the knee shows that
  far): the window is cut by the ``headroom`` (x 0.85).  Every transfer
  on the path sees the same queue and cuts in proportion to its window,
  and grows by the same steps: two of them converge to equal windows
  (AIMD; Chiu and Jain, 1989);
* **trim** (the median of the senders' RTT over the last ``probe_judge``
  intervals since the last change above ``trim_factor`` x the base + 2
  ms, under the queue mark): a standing queue that no probe is judged
  for, of our own making where the flows beside us are held by their own
  windows; the window becomes window x base / RTT,
  what would leave the queue empty (the window that carries the same
  goodput at the base RTT; TCP Vegas's expected-against-actual, Brakmo
  and Peterson, 1995), at most a headroom's cut.  A flow held by its own
  window loses rate to every millisecond of queue we keep;
* **probe**: after ``backoff`` intervals with no queue and no new
  retransmits, while our windows hold the senders (their rwnd-limited
  time at least ``limited_share`` of their busy time; at the start, at
  the host's caps, and where the senders report nothing, the probe is
  made), the window grows by ``step_share`` of a stream's cap, doubled
  after each probe kept in a row (a stream more where the streams are all
  at their cap);
* **judge**: ``settle`` + ``probe_judge`` - 1 intervals after the probe,
  by the median goodput of the last ``probe_judge`` against the median
  before it, over what the step carries where nobody uses the capacity
  (``step / base RTT``, or in proportion to the running window where that
  is less).  ``gain_kept`` or more: kept, and trimmed at once where the
  judged intervals show a standing queue (the step passed the room nobody
  uses: never below the window before it, the next step not doubled).
  Under ``gain_none``: the step only filled a queue of our own and is
  given back.  Between: flows beside
  it lost what it gained (a flow held by its own window: the RTT barely
  moves), and the window becomes (1 - ``headroom``) x the best goodput it
  saw x base RTT, sized by what the window has carried per base RTT and
  never above the window before it: the room such a flow had, less BBR's
  headroom (BBRHeadroom).  A failed probe doubles the wait for the next
  (up to ``max_backoff``); a kept one resets it.

Never below one stream at its cap: beside a flow that keeps the queue full
(a loss-based one) the transfer still holds what one ordinary flow would.
The streams stay when the window shrinks, each with a smaller share:
giving one back mid-transfer costs its siblings several BBR bandwidth
cycles (x1.25 per 8 round trips) to take its share over.
"""

from __future__ import annotations

import math
import statistics
from collections import deque

from ..climb import Climb, queued, rose
from .sharing import LimitMeter, PathSample
from .streams import Action, StreamController, StreamSample, StreamsConfig, queue_in, undone


class WindowedStreams:
    def __init__(self, config: StreamsConfig) -> None:
        if not config.window_cap:
            raise ValueError("WindowedStreams needs the per-stream window cap")
        self.config = c = config
        self.cap: int = config.window_cap
        self.streams = max(c.min_streams, min(c.start, c.max_streams))
        self.window: int | None = None  # bytes for all the streams; None: each at its cap (the start)
        self.fixed = False  # the driver cannot change the streams: only their windows
        self.climb = Climb(settle=c.settle, judge=c.judge, max_backoff=c.max_backoff)
        self._probe: int | None = None  # bytes the probe being judged added
        self._before: tuple[int, int | None] = (self.streams, None)  # streams, window before it
        self._baseline = 0.0
        self._expected = 0.0  # bytes/s the probe should carry
        self._base: float | None = None  # the least RTT seen, seconds
        self._retrans: int | None = None
        self._path_retrans: int | None = None
        self._rtt_now: float | None = None  # the senders' least RTT this interval
        self._rtts: deque[float] = deque(maxlen=c.probe_judge)  # ... of the intervals since the last change
        self._last_rtt: float | None = None
        self._meter = LimitMeter()
        self._yield: float | None = None  # goodput x base RTT / window, where the window holds the streams
        self._recent: deque[float] = deque(maxlen=8)  # goodput per interval, across changes
        self._streak = 0  # probes kept in a row: each doubles the next step

    interval = staticmethod(StreamController.interval)

    @property
    def stream_window(self) -> int | None:
        """Each stream's window cap; None: the host's cap (no aggregate
        window yet, or one that fills every stream's cap)."""
        if self.window is None or self.window >= self.streams * self.cap:
            return None
        return max(1, self.window // self.streams)

    def _running(self) -> int:
        """The aggregate window now, in bytes."""
        return self.window if self.window is not None else self.streams * self.cap

    def update(self, goodput: float, samples: list[StreamSample], intervals_left: float | None = None,
               path: PathSample | None = None) -> Action:
        """One interval's figures in, one decision out (``streams`` and
        ``stream_window`` already changed)."""
        c, climb = self.config, self.climb
        queue, loss = self._congestion(samples, path)
        climb.note(goodput, queue)
        queued = climb.queued_for >= c.judge  # a queue that stays (one interval's RTT may be a burst)
        if self._rtt_now is not None:
            self._rtts.append(self._rtt_now)
        limited = self._meter.update(path)
        self._recent.append(goodput)
        # medians: an interval where the client's process stalled reads as a dip
        now = _median(climb.history[-c.probe_judge:])
        if self._probe is not None:
            if not (queued or (loss and climb.since >= 2)) and climb.since < c.settle + c.probe_judge - 1:
                return Action.HOLD
            gained = (now - self._baseline) / self._expected if self._expected > 0 else 0.0
            if gained >= c.gain_kept and not queued:
                self._probe = None  # kept: capacity nobody used
                climb.kept()
                if (rtt := self._standing_rtt()) is not None:  # ... and a standing queue: trimmed at once
                    return self._trim(rtt, least=self._before[1])
                self._streak += 1
                return self._changed(Action.HOLD)
            climb.failed()
            return self._cut(now, queue=False, taken=gained >= c.gain_none)
        if climb.since < c.settle:
            return Action.HOLD
        if queued and not (self.window is None and self._ramping()):
            # (the start drains once its goodput stops growing: a queue seen
            # while it still grows is also, or only, another flow's)
            return self._cut(now, queue=True)
        if self.window is not None and (rtt := self._standing_rtt()) is not None:
            return self._trim(rtt)
        self._note_yield(now, limited)
        # (held by congestion, not by our windows: more window carries
        # nothing.  Only where the window is ours: at the host's caps a
        # sender held by its own buffer also reads as not limited)
        not_ours = self.window is not None and limited is not None and limited < c.limited_share
        if not (loss or climb.waiting or not_ours
                or (intervals_left is not None and intervals_left < c.settle + c.probe_judge)
                or (self.window is None and self._ramping())):
            grew = self._grow()
            if grew is not None:
                return grew
        return Action.HOLD

    def _ramping(self) -> bool:
        """The start's goodput still grows by a quarter over two intervals
        (8 RTTs): slow start is filling the pipe, a probe would judge it
        (BBR's full-pipe test, draft-ietf-ccwg-bbr sec. 4.3.1.2)."""
        r = self._recent
        return len(r) < 3 or r[-1] > 1.25 * r[-3]

    def _congestion(self, samples: list[StreamSample], path: PathSample | None) -> tuple[bool, bool]:
        """(queue, new retransmits): from the senders' figures where the
        path gives them, else from each stream's own."""
        c = self.config
        if path is not None and path.rtt:
            # the base: the least RTT two intervals running have shown (one
            # sample below the path's own delay, a scheduling artefact, would
            # make every later RTT read as a queue)
            low = max(path.rtt, self._last_rtt or path.rtt)
            self._last_rtt = self._rtt_now = path.rtt
            self._base = low if self._base is None else min(self._base, low)
            queue = queued(path.rtt, self._base, c.share_queue_factor, c.queue_slack)
            loss = rose(path.retransmits, self._path_retrans)
            self._path_retrans = path.retransmits
            return queue, loss
        rtts = [s.rtt for s in samples if s.rtt]
        self._rtt_now = min(rtts) if rtts else None
        mins = [s.rtt_min for s in samples if s.rtt_min]
        if mins:
            self._base = min(mins) if self._base is None else min(self._base, *mins)
        queue = queue_in(samples, c.share_queue_factor, c.queue_slack)
        total = sum(s.retransmits for s in samples)
        loss = rose(total, self._retrans)
        self._retrans = total
        return queue, loss

    def _grow(self) -> Action | None:
        """A probe: a whole stream at the start, else ``step_share`` of a stream's cap
        (None: no room left)."""
        c = self.config
        running = self._running()
        if self.window is None:  # the start
            if self.fixed or self.streams >= c.max_streams:
                return None
            step, streams, window = self.cap, self.streams + 1, None
        else:
            top = (self.streams if self.fixed else c.max_streams) * self.cap
            # doubled after each probe kept in a row: a window cut far below
            # the path's grows back in a few (BBR's probe-up, sec. 4.3.3.5)
            step = min(int(c.step_share * self.cap) << min(self._streak, 3), top - running)
            if step <= 0:
                return None
            window = running + step
            streams = self.streams if self.fixed else max(self.streams, self._streams_for(window))
        self._before = (self.streams, self.window)
        self._baseline = _median(self.climb.history[-c.settle:])
        # what the step carries where nobody uses the capacity: step / base
        # RTT, or in proportion to the running window where that is less
        # (a window that is not what holds the streams: a short path)
        per_byte = self._baseline / running
        if self._base:
            per_byte = min(per_byte, 1 / self._base)
        self._expected = step * per_byte
        self._probe = step
        action = Action.ADD if streams > self.streams else Action.HOLD
        self.streams, self.window = streams, window
        return self._changed(action)

    def _cut(self, now: float, *, queue: bool, taken: bool = True) -> Action:
        """The window after a queue (the start's: drained to what the path
        delivers; later: x (1 - headroom)) or after a probe that fell short
        (``taken``: it gained part of its step, which flows beside it lost:
        the goodput it saw, less the headroom; else its step went into a
        queue of our own: the window before it); never below one stream at
        its cap.  A probe's stream is given back with its step."""
        c = self.config
        probing, self._probe = self._probe is not None, None
        self._streak = 0
        running = self._running()
        before = self._before[1] if probing and self._before[1] is not None else running
        # what the path delivers: the best recent interval, as BBR's
        # bandwidth filter keeps the maximum (draft-ietf-ccwg-bbr sec. 4.5.2)
        best = max(list(self._recent)[-c.probe_judge:], default=now)
        delivered = best * self._base / (self._yield or 1.0) if self._base else float(before)
        if self.window is None or (probing and self._before[1] is None):
            target = delivered  # the start's queue: drain to what the path carries
        elif queue:
            target = (1 - c.headroom) * running
            self.climb.backoff = c.settle  # grow back at the steps' pace (AIMD)
        elif taken:
            target = min(before, (1 - c.headroom) * delivered)
        else:
            target = before
        self.window = max(self.cap, min(running, int(target)))
        if probing and not self.fixed and self.streams > self._before[0]:
            self.streams = self._before[0]  # the probe's stream (its window shared out)
            return self._changed(Action.REMOVE)
        return self._changed(Action.HOLD)

    def _standing_rtt(self) -> float | None:
        """The median RTT of the last ``probe_judge`` intervals since the last
        change where it shows a standing queue under the queue mark (above
        ``trim_factor`` x the base + ``queue_slack``; a median: a probe's or
        a neighbour's burst of an interval or two is none), else None."""
        c = self.config
        if self._base is None or len(self._rtts) < c.probe_judge:
            return None
        rtt = _median(list(self._rtts))
        return rtt if queued(rtt, self._base, c.trim_factor, c.queue_slack) else None

    def _trim(self, rtt: float, least: int | None = None) -> Action:
        """A standing queue of median ``rtt`` under the queue mark: the window
        x base / ``rtt``, what carries the same goodput without the queue, at
        most a headroom's cut, never below ``least`` (a kept probe's window
        before it) nor one stream at its cap."""
        c = self.config
        running = self._running()
        assert self._base is not None  # (_standing_rtt checked it)
        target = max(running * self._base / rtt, (1 - c.headroom) * running, least or 0)
        self._streak = 0
        self.window = max(self.cap, min(running, int(target)))
        return self._changed(Action.HOLD)

    def _note_yield(self, now: float, limited: float | None) -> None:
        """What the window carries per base RTT where it is what holds the
        streams (no queue, settled): the kernel's window under the clamp
        and the senders' pacing keep it below 1 (0.85-0.95 measured at
        1 Gbit/s, 100 ms).  A cut after a short probe sizes the window
        for its goodput by it."""
        if self.window is None or not self._base or (limited is not None and limited < self.config.limited_share):
            return
        sample = min(1.0, max(0.5, now * self._base / self.window))
        self._yield = sample if self._yield is None else 0.75 * self._yield + 0.25 * sample

    def _streams_for(self, window: int) -> int:
        c = self.config
        return max(c.min_streams, min(c.max_streams, math.ceil(window / self.cap)))

    def refused(self, action: Action, running: int | None = None) -> None:
        """The driver could not change the streams (a server that cannot,
        no range left to share): they stay as they are (``running`` where
        given), and only their windows change from now on."""
        self.streams = undone(self.streams, action, running)
        self.fixed = True
        if self.window is not None:
            self.window = min(self.window, self.streams * self.cap)
        self._probe = None
        self.climb.backoff = self.config.max_backoff
        self._changed(Action.HOLD)

    def _changed(self, action: Action) -> Action:
        self.climb.changed()
        self._rtts.clear()
        return action


def streams_controller(config: StreamsConfig) -> StreamController | WindowedStreams:
    """-P auto's controller: an aggregate window where a stream's window
    can be capped (``window_cap``), else the streams count alone."""
    return WindowedStreams(config) if config.window_cap else StreamController(config)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0
