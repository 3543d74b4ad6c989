"""`-P auto` for a transfer the client does not carry (a third-party copy),
sans-IO (docs/DESIGN.md, "Third-party transfers"; docs/decisions/
0020-drs-on-the-data-path.md).

Nothing about the data path may come from the client's own connections:
its control connections' RTT is to each server, not between them.  So:

* the transfer starts at ``StreamsConfig.start`` streams (GridFTP's usual
  ``-p 4``);
* the first report that carries the data path's RTT (the servers' own DRS
  replies, relayed: drsftp/ftp/relay.py) moves it at once to
  :func:`~.streams.first_streams` for that RTT;
* from then on :class:`~.streams.StreamController` decides every
  ``interval(data RTT)`` on the goodput the servers report (B's byte
  count) and the sender's RTT and retransmits.

``update`` returns the stream count to ask of the sender (``DRS
streams=N``), or None.
"""

from __future__ import annotations

from dataclasses import replace

from ..climb import Base
from .streams import Action, StreamController, StreamSample, StreamsConfig, first_streams


class PathStreams:
    def __init__(self, config: StreamsConfig | None = None, window_cap: int | None = None) -> None:
        self.config = config or StreamsConfig()
        self.window_cap = window_cap
        self.streams = self.config.start
        self.first_rtt: float | None = None  # the data-path RTT the first decision took
        self.controller: StreamController | None = None
        self._last: tuple[float, int] | None = None  # (time, bytes) at the controller's last update
        self._rtt_min = Base()

    def update(self, now: float, rtt: float | None, moved: int, retransmits: int,
               left: int | None = None) -> int | None:
        """One look at the servers' latest figures: ``rtt`` the data path's
        (seconds; None: not reported yet), ``moved`` bytes B has, ``left``
        bytes still to go.  The new stream count, or None."""
        if rtt is None or rtt <= 0:
            return None
        rtt_min = self._rtt_min.note(rtt)
        if self.controller is None:
            self.first_rtt = rtt
            n = first_streams(rtt, self.window_cap, self.config)
            self.controller = StreamController(replace(self.config, start=n))
            self._last = (now, moved)
            return self._set(self.controller.streams)
        assert self._last is not None  # (set with the controller)
        then, before = self._last
        interval = StreamController.interval(rtt)
        if now - then < interval:
            return None
        goodput = (moved - before) / (now - then)
        self._last = (now, moved)
        sample = StreamSample(rtt, rtt_min, retransmits)
        intervals_left = left / goodput / interval if left is not None and goodput > 0 else None
        action = self.controller.update(goodput, [sample], intervals_left)
        if action is Action.HOLD:
            return None
        return self._set(self.controller.streams)

    def refused(self, running: int) -> None:
        """The sender could not change (a server without DRS streams=N):
        ``running`` streams go on, and the controller stops probing."""
        self.streams = running
        if self.controller is not None and self.controller.streams != running:
            action = Action.ADD if self.controller.streams > self.streams else Action.REMOVE
            self.controller.refused(action)

    def _set(self, n: int) -> int | None:
        if n == self.streams:
            return None
        self.streams = n
        return n
